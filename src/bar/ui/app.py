"""The routes of ``bar ui``: URLs to pages, file diffs, artifacts, live updates, actions.

Every request has passed ``security.Guard`` (host, token, and for a POST the CSRF token
and origin) before it gets here. Library calls are blocking (git, file reads): Starlette
runs these plain functions in its thread pool. A ``BarError`` becomes a page with bar's
own message and hint; a name in a URL that names nothing is a 404.
"""

from __future__ import annotations

import asyncio
import codecs
import itertools
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from bar import api
from bar.errors import BarError, NotFound, StepNotFound
from bar.history.checkpoints import Checkpoint
from bar.model.tasks import Task
from bar.step.live import Follower, Lost, Mark, Output, Recorded, Taken
from bar.ui import actions, assets, board, decisions, pages, patch_pages, search, step_pages, views
from bar.ui.filters import StepFilter
from bar.ui.security import Guard, Secrets

POLL = 0.5  # seconds between looks at a live task's ledger
LIVE_POLL = 0.25  # seconds between looks at a running step's output
FILE_SHOWN = 2 << 20  # bytes of one file's diff sent to the page


def build(keys: Secrets) -> Starlette:
    """The UI's application: its routes (``_Site``), behind the guard of ``keys``."""
    return Starlette(routes=_Site(keys.csrf).routes(), middleware=[Middleware(Guard, keys=keys)])


def _the_task(request: Request) -> Task:
    """The task a URL names (its project and its task)."""
    return views.task(request.path_params["project"], request.path_params["task"])


class _Site:
    """The endpoints of the UI, ``csrf`` the token its forms carry."""

    def __init__(self, csrf: str) -> None:
        self.csrf = csrf

    def routes(self) -> list[Route | Mount]:
        """URLs to endpoints."""
        csrf, page, posted = self.csrf, self.page, self.posted
        task = "/p/{project}/t/{task}"
        return [
            Route("/", page(lambda r: pages.overview(csrf, r.query_params))),
            Route("/search", page(lambda r: search.search_page(r.query_params, csrf))),
            Route(
                "/p/{project}/board",
                page(lambda r: board.board_page(r.path_params["project"], r.query_params, csrf)),
            ),
            Route(task, self.timeline),
            Route(f"{task}/events", self.events),
            Route(f"{task}/s/{{step}}", page(self.step)),
            Route(f"{task}/s/{{step}}/file/{{n}}", _plain(self.step_file)),
            Route(f"{task}/s/{{step}}/live", self.step_live),
            Route(f"{task}/s/{{step}}/session/{{n}}", _plain(self.session_text)),
            Route(f"{task}/compare", page(self.compare)),
            Route(f"{task}/compare/file", _plain(self.compare_file)),
            Route(f"{task}/artifacts/{{name:path}}", _plain(self.artifact)),
            Route(f"{task}/actions", page(self.action_page)),
            Route(f"{task}/rollback/preview", posted(actions.rollback_preview), methods=["POST"]),
            Route(f"{task}/rollback", posted(actions.rollback), methods=["POST"]),
            Route(f"{task}/apply/preview", posted(actions.apply_preview), methods=["POST"]),
            Route(f"{task}/apply", posted(actions.apply), methods=["POST"]),
            Route(
                f"{task}/undo/preview",
                posted(lambda t, f, c: actions.undo_preview(t, c)),
                methods=["POST"],
            ),
            Route(f"{task}/undo", posted(actions.undo), methods=["POST"]),
            Route(
                f"{task}/decisions", page(lambda r: decisions.decisions_page(_the_task(r), csrf))
            ),
            Route(
                f"{task}/decisions/answer",
                posted(decisions.answer, decisions.failed),
                methods=["POST"],
            ),
            Mount(
                "/static/vendor",
                StaticFiles(directory=assets.vendor(), check_dir=False, follow_symlink=False),
            ),
            Mount("/static", StaticFiles(directory=assets.STATIC, follow_symlink=False)),
        ]

    def page(self, render: Callable[[Request], str]) -> Callable[[Request], Response]:
        """An HTML page; a ``BarError`` is a page with bar's message (404: nothing named)."""

        def endpoint(request: Request) -> Response:
            try:
                return HTMLResponse(render(request))
            except NotFound as exc:
                return _error(exc, 404, self.csrf)
            except BarError as exc:
                return _error(exc, 400 if exc.exit_code == 2 else 409, self.csrf)

        return endpoint

    def posted(
        self,
        act: Callable[[Task, dict[str, str], str], str],
        failed: Callable[[Task, dict[str, str], str, BarError], str] | None = None,
    ) -> Callable[[Request], Awaitable[Response]]:
        """A form's action: ``act`` on the task with the form, its page the answer; a
        ``BarError`` is ``failed``'s page (else the actions page saying it)."""
        csrf = self.csrf

        async def endpoint(request: Request) -> Response:
            form = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))

            def run() -> Response:
                try:
                    task = _the_task(request)
                except NotFound as exc:
                    return _error(exc, 404, csrf)
                try:
                    return HTMLResponse(act(task, form, csrf))
                except BarError as exc:
                    if failed is not None:
                        body = failed(task, form, csrf, exc)
                    else:
                        body = actions.actions_page(task, csrf, form.get("to", ""), exc)
                    return HTMLResponse(body, status_code=400 if exc.exit_code == 2 else 409)

            return await run_in_threadpool(run)

        return endpoint

    def timeline(self, request: Request) -> Response:
        """A task's steps, a page of them, streamed as they are read."""
        try:
            number = int(request.query_params.get("page", "1"))
        except ValueError:
            number = 1
        try:
            keep = StepFilter.of(request.query_params)
            parts = pages.timeline(_the_task(request), number, self.csrf, keep)
            head = next(parts)  # (a task that is not, or cannot be read, is an error page)
        except NotFound as exc:
            return _error(exc, 404, self.csrf)
        except BarError as exc:
            return _error(exc, 400 if exc.exit_code == 2 else 409, self.csrf)
        return StreamingResponse(
            itertools.chain([head], parts), media_type="text/html; charset=utf-8"
        )

    def step(self, request: Request) -> str:
        """A step's page, a checkpoint's, or the running step's."""
        task = _the_task(request)
        ref = request.path_params["step"]
        try:
            found = views.step_or_checkpoint(task, ref)
        except StepNotFound:
            live = views.live_step(task, ref)  # (a step not recorded yet)
            if live is None:
                raise
            return step_pages.live_page(task, live, self.csrf)
        if isinstance(found, Checkpoint):
            return step_pages.checkpoint_page(task, found, self.csrf)
        return step_pages.step_page(task, found, self.csrf)

    def step_file(self, request: Request) -> Response:
        """One file's diff of a step's patch."""
        task = _the_task(request)
        found = views.step_or_checkpoint(task, request.path_params["step"])
        rel = found.patch if isinstance(found, Checkpoint) else found.artifacts.patch
        return _section(views.patch_of(task, rel), request.path_params["n"])

    def session_text(self, request: Request) -> Response:
        """One long text of a step's session, whole."""
        p = request.path_params
        return PlainTextResponse(views.session_text(_the_task(request), p["step"], p["n"]))

    def compare(self, request: Request) -> str:
        """The changes between two recorded states."""
        q = request.query_params
        return step_pages.compare_page(
            _the_task(request), q.get("from", "base"), q.get("to", ""), self.csrf
        )

    def compare_file(self, request: Request) -> Response:
        """One file's diff between two recorded states."""
        q = request.query_params
        _, index = views.compare(_the_task(request), q.get("from", "base"), q.get("to", ""))
        return _section(index, q.get("n", ""))

    def artifact(self, request: Request) -> Response:
        """A step's artifact as text (a pty step's output made from its recording)."""
        name = request.path_params["name"]
        path = views.artifact(_the_task(request), name)
        try:
            # (the player gets the whole recording: the stored one refers to the text)
            whole = path.suffix == ".cast"
            data = views.whole_cast(path) if whole else patch_pages.read_regular(path)
        except (FileNotFoundError, IsADirectoryError):
            derived = None
            if name.endswith(".output") and name.count(".") == 1:  # a pty step's
                derived = views.derived_output(_the_task(request), name.split(".")[0])
            if derived is not None:
                return Response(derived, media_type="text/plain; charset=utf-8")
            raise views.PageNotFound(f"no artifact {name}") from None
        except OSError:  # a link where the file should be (O_NOFOLLOW)
            raise views.PageNotFound(f"artifact {name} is not a plain file") from None
        return Response(data, media_type="text/plain; charset=utf-8")

    def action_page(self, request: Request) -> str:
        """The task's actions: rollback, undo, apply."""
        return actions.actions_page(
            _the_task(request), self.csrf, request.query_params.get("to", "")
        )

    async def events(self, request: Request) -> Response:
        """The task's new steps as they are recorded (server-sent events)."""
        task = await run_in_threadpool(_the_task, request)
        try:
            last = int(request.query_params.get("last", "0"))
        except ValueError:
            last = 0
        return StreamingResponse(
            _live(request, task, last),
            media_type="text/event-stream",
            headers={"x-accel-buffering": "no"},
        )

    async def step_live(self, request: Request) -> Response:
        """The running step's output and checkpoints as they come (server-sent events)."""

        def follower() -> Follower:
            # where the page left off: its mark, or where the stream was when it broke
            said = request.headers.get("last-event-id") or request.query_params.get("from")
            return api.follower_of(
                _the_task(request), request.path_params["step"], Mark.parse(said)
            )

        try:
            following = await run_in_threadpool(follower)
        except BarError as exc:
            return PlainTextResponse(f"bar: {exc}\n", status_code=404)
        return StreamingResponse(
            _step_live(request, following),
            media_type="text/event-stream",
            headers={"x-accel-buffering": "no"},
        )


def _plain(endpoint: Callable[[Request], Response]) -> Callable[[Request], Response]:
    """A text endpoint: a name that names nothing is a bare 404, an error its sentence."""

    def wrapped(request: Request) -> Response:
        try:
            return endpoint(request)
        except NotFound as exc:
            return PlainTextResponse(f"bar: {exc}\n", status_code=404)
        except BarError as exc:
            return PlainTextResponse(f"bar: {exc}\n", status_code=400)

    return wrapped


def _section(index: patch_pages.PatchIndex, n: str) -> Response:
    if not (n.isascii() and n.isdigit()) or int(n) >= len(index.files):
        raise views.PageNotFound(f"the patch has no file {n}")
    data = index.section(int(n))
    cut = len(data) > FILE_SHOWN
    return Response(
        data[:FILE_SHOWN],
        media_type="text/plain; charset=utf-8",
        headers={"x-bar-cut": "1" if cut else "0"},
    )


def _error(exc: BarError, status: int, csrf: str) -> HTMLResponse:
    body = f"<h1>{'Not found' if status == 404 else 'Error'}</h1>{pages.error_html(exc)}"
    return HTMLResponse(pages.layout("error", body, csrf=csrf), status_code=status)


async def _live(request: Request, task: Task, last: int) -> AsyncIterator[str]:
    """Server-sent events for a timeline: the steps recorded after ``last`` and the running
    step, each time the ledger or the running marker changes (looked at every ``POLL``)."""
    seen: tuple[object, ...] | None = None
    running = ""
    quiet = 0.0
    while not await request.is_disconnected():
        now = await run_in_threadpool(_stamp, task)
        if now != seen:
            seen = now
            rows, newest, banner = await run_in_threadpool(_fresh, task, last)
            if rows or banner != running:
                last, running = max(last, newest), banner
                yield f"event: update\ndata: {json.dumps({'rows': rows, 'last': last, 'running': banner})}\n\n"
                quiet = 0.0
        quiet += POLL
        if quiet >= 15:  # a comment now and then keeps proxies and the browser patient
            yield ": still here\n\n"
            quiet = 0.0
        await asyncio.sleep(POLL)


async def _step_live(request: Request, follower: Follower) -> AsyncIterator[str]:
    """Server-sent events for a running step's page: ``output`` (a stream's new text),
    ``checkpoint`` (an item of the list), and last ``ended`` (the page then loads the
    step's record) or ``lost`` (its bar died, or stopped before the command ran). Each
    batch ends with the ``id`` a broken stream resumes from (``Last-Event-ID``)."""
    decoders = {
        name: codecs.getincrementaldecoder("utf-8")(errors="replace")
        for name in ("stdout", "stderr")
    }
    quiet = 0.0
    try:
        while not await request.is_disconnected():
            mark = follower.mark
            if follower.output and mark.shown + mark.err > views.OUTPUT_LIMIT:
                follower.output = False  # (a page shows that much; the file has the rest)
                note = step_pages.cut_note(follower.task, follower.step_id)
                yield f"event: cut\ndata: {json.dumps({'html': note})}\n\n"
            events = await run_in_threadpool(follower.poll)
            for event in events:
                if isinstance(event, Output):
                    text = decoders[event.stream].decode(event.data)
                    if text:
                        said = json.dumps({"stream": event.stream, "text": text})
                        yield f"event: output\ndata: {said}\n\n"
                elif isinstance(event, Taken):
                    item = step_pages.live_call(follower.task, event.checkpoint)
                    yield f"event: checkpoint\ndata: {json.dumps({'html': item})}\n\n"
                elif isinstance(event, Recorded):
                    yield "event: ended\ndata: {}\n\n"
                    return
                elif isinstance(event, Lost):
                    yield f"event: lost\ndata: {json.dumps({'reason': event.reason})}\n\n"
                    return
            if events:
                yield f"id: {follower.mark}\n\n"
                quiet = 0.0
            quiet += LIVE_POLL
            if quiet >= 15:
                yield ": still here\n\n"
                quiet = 0.0
            await asyncio.sleep(LIVE_POLL)
    finally:
        follower.close()


def _stamp(task: Task) -> tuple[object, ...]:
    """What changes when a step starts, takes a checkpoint or ends."""
    out: list[object] = []
    for path in (task.paths.ledger, task.paths.marker, task.paths.artifacts):
        try:
            info = os.stat(path)
            out += [info.st_size, info.st_mtime_ns]
        except OSError:
            out += [None, None]
    return tuple(out)


def _fresh(task: Task, last: int) -> tuple[str, int, str]:
    newer = views.steps_after(task, last)
    rows = "".join(pages.step_row(task, s) for s in newer)
    return rows, newer[0].number if newer else last, pages.running_html(task)
