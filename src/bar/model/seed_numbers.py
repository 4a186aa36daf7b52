"""The numbers the seed's layout gives tasks (``board.layout: seed``, ``bar.task.seed_board``).

``board-numbers.json`` in the project directory: ``{"version": 1, "numbers": {"<task id>":
N}}``. Read here (every task reference may be a number), written by ``seed_board``
under the project lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bar.errors import CorruptFile
from bar.store.files import read_json

if TYPE_CHECKING:
    from pathlib import Path

    from bar.model.project import Project

NUMBERS_FILE = "board-numbers.json"


def path_of(project: Project) -> Path:
    return project.paths.dir / NUMBERS_FILE


def load(project: Project) -> dict[str, int]:
    """Each task's number (none while the layout was never the seed's)."""
    try:
        data = read_json(path_of(project), NUMBERS_FILE)
    except FileNotFoundError:
        return {}
    found = data.get("numbers")
    if not isinstance(found, dict):
        raise CorruptFile(f"{path_of(project)} has no numbers")
    return {str(k): v for k, v in found.items() if isinstance(v, int) and not isinstance(v, bool)}


def highest(project: Project) -> int:
    """The highest number ever given (0: none, or not kept)."""
    try:
        data = read_json(path_of(project), NUMBERS_FILE)
    except FileNotFoundError:
        return 0
    value = data.get("highest", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def task_id_of(project: Project, number: int) -> str | None:
    """bar's id of the task numbered ``number`` (None: no such task)."""
    return next((task_id for task_id, n in load(project).items() if n == number), None)
