"""The UI's apply of a task whose worktree was removed (``bar worktree remove``: pending
again): the preview and the apply land its record, as ``bar apply`` does, in a real
browser (Debian's chromium, driven by Playwright) against a real ``bar ui`` child."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from ui_session import (
    CHROMIUM,
    NO_CHROMIUM,
    Session,
    base_of,
    chromium,
    sealed_env,
    serving,
)

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=NO_CHROMIUM)

sync_api = pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def pending(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Session, str]]:
    """A task with one step whose worktree was removed, and ``bar ui`` serving it."""
    root = tmp_path_factory.mktemp("ui-apply-pending")
    repo = root / "shop"
    repo.mkdir()
    s = Session(root, repo, sealed_env(root), "", "")
    s.git("init", "-q", "-b", "main")
    (repo / "cart.py").write_text("def total(items):\n    return sum(items)\n")
    s.git("add", "-A")
    s.git("commit", "-qm", "initial")
    s.bar("init")
    s.git("add", ".bar")
    s.git("commit", "-qm", "bar policy")
    task = json.loads(s.bar("task", "new", "discounts", "--json").stdout)
    s.task_id = task["id"]
    s.project = Path(task["worktree"]).parent.parent.name
    s.bar("run", "--no-pty", "--", "sh", "-c", "printf 'RATE = 0.1\\n' > discount.py")
    s.bar("worktree", "remove", "discounts")
    assert not Path(task["worktree"]).exists()
    with serving(s) as (_, url):
        yield s, url


def test_the_apply_preview_and_the_apply_of_a_task_without_worktree(
    pending: tuple[Session, str],
) -> None:
    s, url = pending
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        page.goto(url)
        page.goto(s.task_url(base_of(url), "/actions"))
        page.click("text=Preview apply")
        preview = page.locator(".preview")
        sync_api.expect(preview).to_contain_text("Applying task discounts to main")
        sync_api.expect(preview).to_contain_text("discount.py")
        assert page.locator(".error").count() == 0
        assert s.git("log", "-1", "--format=%s", "main").strip() == "bar policy"
        page.click("text=Confirm: apply to main")
        sync_api.expect(page.locator(".done")).to_contain_text("Applied task discounts to main")
        context.close()
    assert s.ledger()[-1]["kind"] == "apply"
    assert s.git("show", "main:discount.py") == "RATE = 0.1\n"
    assert (s.repo / "discount.py").read_text() == "RATE = 0.1\n"  # the checkout too
    shown = json.loads(s.bar("task", "show", "discounts", "--json").stdout)
    assert shown["board"]["status"] == "pending"  # no worktree was made for it
