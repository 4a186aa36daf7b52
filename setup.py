"""The one compiled part of bar: the exec check's listener (bar.sandbox.exec_quick).

Optional: where no C compiler is at hand the install goes on without it, and bar's
listener in Python answers every call instead (slower, the same answers)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "bar.sandbox._exec_quick",
            ["src/bar/sandbox/exec_quick.c"],
            optional=True,
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Werror=implicit-function-declaration"],
        )
    ]
)
