"""The project's policy as the rest of bar uses it: loaded from the developer's checkout.

The policy file is read from the repository root of the main checkout, never from a task
worktree, so an agent cannot loosen its own policy by editing its copy. A missing file
while the policy is enabled is an error (fail closed), not a silent "allow everything".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from bar.errors import PolicyError

if TYPE_CHECKING:
    from bar.policy import Decision, Policy
    from bar.project import Project


def load_project_policy(project: Project) -> Policy:
    from bar.policy import load_policy

    path = project.policy_path()
    if not path.is_file():
        raise PolicyError(
            f"the policy is enabled but {path} does not exist",
            hint="run `bar init` to write the default policy, "
            "or set policy.enabled: false in " + str(project.config_path),
        )
    return load_policy(path, cache_dir=project.cache_dir)


def check_argv(project: Project, argv: Sequence[str]) -> Decision:
    return load_project_policy(project).evaluate_argv(list(argv))


def check_line(project: Project, line: str) -> Decision:
    return load_project_policy(project).evaluate_line(line)
