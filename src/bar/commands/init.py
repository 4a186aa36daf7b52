"""``bar init``: register the repository; safe to run again."""

from __future__ import annotations

from bar import api
from bar.render import print_json


def init(*, as_json: bool) -> int:
    result = api.init_project()
    project = result.project
    if as_json:
        print_json({"project": project.name, "root": str(project.root), "dir": str(project.dir),
                    "created": [str(p) for p in result.created]})  # fmt: skip
        return 0
    if result.created:
        print(f"Registered {project.root} as project {project.name}")
        for path in result.created:
            print(f"  created {path}")
        print("Next: bar task new NAME")
    else:
        print(f"{project.root} is already registered as project {project.name}")
    return 0
