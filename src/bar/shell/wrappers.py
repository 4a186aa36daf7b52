"""Wrappers: programs that run the command given in their arguments.

``WRAPPERS`` maps a program to a function that, given the words of a command and the
index of that program in them, returns the index of the command it runs (after its
own options and operands), or None when this use of it runs no command from its
arguments (``command -v rm``, ``taskset -p 1 42``, ``screen -ls``). Programs that run
a *script* (a single string a shell parses: ``sh -c``, ``script -c``, ``tmux new``…)
are not wrappers; ``bar.shell.words`` hands their scripts to the parser.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


def skip_options(
    words: list[str], i: int, short: str = "", long: frozenset[str] = frozenset()
) -> int:
    """Index of the first word after the options of the program at ``i``.

    ``short`` lists the short options that take a value, ``long`` the long ones that
    take a separate value (``--user root``; ``--user=root`` is one word anyway).
    """
    j = i + 1
    while j < len(words):
        word = words[j]
        if word == "--":
            return j + 1
        if word.startswith("--"):
            j += 2 if ("=" not in word and word in long) else 1
        elif word.startswith("-") and len(word) > 1:
            for k, ch in enumerate(word[1:], 1):
                if ch in short:
                    if k == len(word) - 1:
                        j += 1  # the value is the next word
                    break
            j += 1
        else:
            break
    return j


def _options(words: list[str], i: int, j: int) -> list[str]:
    """The option words between the program at ``i`` and index ``j``."""
    return [w for w in words[i + 1 : j] if w.startswith("-") and w != "--"]


def has_option(options: list[str], letters: str, long: str = "", values: str = "") -> bool:
    """Whether one of the short options ``letters`` or the long ones ``long`` is among
    ``options``; in a cluster, what follows a short option in ``values`` is its value."""
    names = _names(long)
    for word in options:
        if not word.startswith("-"):
            continue
        if word.startswith("--"):
            if word.split("=", 1)[0] in names:
                return True
            continue
        for ch in word[1:]:
            if ch in letters:
                return True
            if ch in values:
                break
    return False


def _wrap_simple(short: str = "", long: Iterable[str] = ()) -> Callable[[list[str], int], int]:
    frozen = frozenset(long)
    return lambda words, i: skip_options(words, i, short, frozen)


def _wrap_sudo(words: list[str], i: int) -> int | None:
    long = _names("--user --group --prompt --close-from --chdir --host --role --type")
    return skip_options(words, i, "ugpCDrtTUR", long | {"--other-user", "--chroot"})


def _wrap_env(words: list[str], i: int) -> int | None:
    j = i + 1
    while j < len(words):
        word = words[j]
        if word == "--":
            return j + 1
        if word in ("-S", "--split-string") and j + 1 < len(words):
            words[j : j + 2] = words[j + 1].split()  # env splits the string into words
            continue
        if word.startswith(("-S", "--split-string=")):
            value = word[2:] if word.startswith("-S") else word.split("=", 1)[1]
            words[j : j + 1] = value.split()
            continue
        if word in ("-u", "-C", "--unset", "--chdir"):
            j += 2
        elif word.startswith("-"):
            j += 1
        else:
            break
    return j


def _wrap_timeout(words: list[str], i: int) -> int | None:
    j = skip_options(words, i, "sk", frozenset({"--signal", "--kill-after"}))
    return j + 1  # the duration


def _wrap_command(words: list[str], i: int) -> int | None:
    j = skip_options(words, i)
    if has_option(_options(words, i, j), "vV"):
        return None  # `command -v rm` looks rm up; it does not run it
    return j


def _wrap_xargs(words: list[str], i: int) -> int | None:
    long = _names("--arg-file --delimiter --max-args --max-procs --max-chars --process-slot-var")
    return skip_options(words, i, "adEILnPs", long)


def _then_operand(short: str = "", long: str = "") -> Callable[[list[str], int], int]:
    """A wrapper whose options are followed by one operand, then the command:
    ``chroot DIR CMD``, ``flock FILE CMD``, ``chrt PRIO CMD``."""
    frozen = _names(long)
    return lambda words, i: skip_options(words, i, short, frozen) + 1


def _wrap_flock(words: list[str], i: int) -> int | None:
    j = skip_options(words, i, "wE", _names("--timeout --wait --conflict-exit-code"))
    if j + 1 < len(words) and words[j + 1] in ("-c", "--command"):
        return None  # `flock FILE -c CMD`: a script (bar.shell.words)
    return j + 1  # the lock file; `flock FD` alone runs nothing


def _wrap_taskset(words: list[str], i: int) -> int | None:
    j = skip_options(words, i)
    if has_option(_options(words, i, j), "p", "--pid"):
        return None  # `taskset -p MASK PID` changes a running process
    return j + 1  # the mask or CPU list


def _wrap_chrt(words: list[str], i: int) -> int | None:
    j = skip_options(words, i, "T", _names("--sched-runtime --sched-period --sched-deadline"))
    if has_option(_options(words, i, j), "pm", "--pid --max", "T"):
        return None
    return j + 1  # the priority


def _wrap_trace(short: str, long: str) -> Callable[[list[str], int], int | None]:
    """strace / ltrace: with ``-p PID`` they attach to a process and run nothing."""
    frozen = _names(long)

    def wrap(words: list[str], i: int) -> int | None:
        j = skip_options(words, i, short, frozen)
        return None if has_option(_options(words, i, j), "p", "--attach", short) else j

    return wrap


def _wrap_screen(words: list[str], i: int) -> int | None:
    """``screen [-dmS NAME] CMD…`` runs CMD; listing, attaching and ``-X`` (a command
    to a running session) run nothing from the arguments."""
    j = i + 1
    while j < len(words) and words[j].startswith("-"):
        word = words[j]
        if word in ("-ls", "-list", "-wipe", "-r", "-R", "-RR", "-x", "-X", "-Q", "-v"):
            return None
        j += 1
        if len(word) > 1 and word[-1] in "cehpsStTX" and word[1] != "-":
            j += 1  # an option that takes the next word: -S NAME, -c FILE
    return j


def _wrap_systemd_run(words: list[str], i: int) -> int | None:
    long = _names(
        "--unit --property --host --machine --setenv --description --slice --uid --gid "
        "--working-directory --nice --service-type --on-active --on-boot --on-startup "
        "--on-unit-active --on-unit-inactive --on-calendar --timer-property "
        "--path-property --socket-property"
    )
    return skip_options(words, i, "upHME", long)


_SPAWN_FLAGS = _names("-noecho -console -nottycopy -nottyinit -pty -ignore -leaveopen -open")


def _wrap_spawn(words: list[str], i: int) -> int | None:
    """expect's ``spawn [-noecho …] CMD`` (in ``expect -c`` scripts)."""
    j = i + 1
    while j < len(words) and words[j] in _SPAWN_FLAGS:
        j += 1
    return j


def _wrap_sub(
    *subs: str, short: str = "", long: str = ""
) -> Callable[[list[str], int], int | None]:
    """A tool whose subcommand runs the command after it (``bundle exec``, ``poetry run``,
    ``pnpm dlx``); any other use of it runs nothing from its arguments."""
    names = _names(long)

    def wrap(words: list[str], i: int) -> int | None:
        j = skip_options(words, i, short, names)
        if j < len(words) and words[j] in subs:
            return skip_options(words, j, short, names)
        return None

    return wrap


_LOADER = _wrap_simple(
    "",
    (
        "--argv0",
        "--library-path",
        "--preload",
        "--audit",
        "--inhibit-rpath",
        "--glibc-hwcaps-prepend",
        "--glibc-hwcaps-mask",
    ),
)

WRAPPERS: dict[str, Callable[[list[str], int], int | None]] = {
    # the dynamic loader runs the program it is given, in its own process
    "ld.so": _LOADER,
    "ld-linux.so.2": _LOADER,
    "ld-linux-x86-64.so.2": _LOADER,
    "ld-linux-aarch64.so.1": _LOADER,
    "ld-musl-x86_64.so.1": _LOADER,
    "ld-musl-aarch64.so.1": _LOADER,
    # package runners: the package's program runs
    "npx": _wrap_simple("p", ("--package",)),
    "bunx": _wrap_simple("p", ("--package",)),
    "pnpx": _wrap_simple(),
    "pnpm": _wrap_sub("dlx", "exec", short="C", long="--dir --filter"),
    "yarn": _wrap_sub("dlx", "exec", short="p", long="--package --cwd"),
    "bundle": _wrap_sub("exec"),
    "poetry": _wrap_sub("run", short="C", long="--directory"),
    "uv": _wrap_sub("run", short="p", long="--with --python --directory --project --env-file"),
    "pipx": _wrap_sub("run", long="--spec --python"),
    "pdm": _wrap_sub("run"),
    "hatch": _wrap_sub("run"),
    "pipenv": _wrap_sub("run"),
    "sudo": _wrap_sudo,
    "doas": _wrap_simple("uC"),
    "pkexec": _wrap_simple("", ("--user",)),
    "env": _wrap_env,
    "nohup": _wrap_simple(),
    "setsid": _wrap_simple(),
    "timeout": _wrap_timeout,
    "gtimeout": _wrap_timeout,
    "nice": _wrap_simple("n", ("--adjustment",)),
    "ionice": _wrap_simple("cnp", ("--class", "--classdata", "--pid")),
    "chrt": _wrap_chrt,
    "taskset": _wrap_taskset,
    "command": _wrap_command,
    "builtin": _wrap_simple(),
    "exec": _wrap_simple("a"),
    "xargs": _wrap_xargs,
    "time": _wrap_simple("fo", ("--format", "--output")),
    "stdbuf": _wrap_simple("ioe", ("--input", "--output", "--error")),
    "chroot": _then_operand("", "--userspec --groups"),
    "flock": _wrap_flock,
    "unshare": _wrap_simple(
        "SGRw",
        _names("--setuid --setgid --root --wd --propagation --setgroups --map-user --map-group"),
    ),
    "nsenter": _wrap_simple("tSG", _names("--target --setuid --setgid")),
    "strace": _wrap_trace("abeEIoOpPsSuUX", "--trace --output --string-limit --user --env"),
    "ltrace": _wrap_trace("aAeFlnopsuwx", "--output --library --user"),
    "systemd-run": _wrap_systemd_run,
    "screen": _wrap_screen,
    "spawn": _wrap_spawn,
    "busybox": _wrap_simple(),
    "unbuffer": _wrap_simple(),
    "caffeinate": _wrap_simple("tw"),
    "fakeroot": _wrap_simple("lsi", ("--lib", "--faked")),
    "eatmydata": _wrap_simple(),
    "chronic": _wrap_simple("ev"),
    "ifne": _wrap_simple("n"),
    "firejail": _wrap_simple(),
    "catchsegv": _wrap_simple(),
    "cpulimit": _wrap_simple("lp", ("--limit", "--pid")),
    "nocache": _wrap_simple(),
    "torsocks": _wrap_simple("uPaip", ("--user", "--pass", "--address", "--port")),
    "proxychains": _wrap_simple("f"),
    "proxychains4": _wrap_simple("f"),
}
