"""The workflow of one task sent to workers: its steps in order, one activity each.

It runs inside Temporal's workflow sandbox and is replayed from its history, so it is
deterministic, and of bar it imports only the names the two sides meet by
(``bar.workers.contract``). It holds the orders waiting, the step running, the results,
and a ``decide`` question with its answer, as the JSON objects they travel as
(``contract.Order``, ``contract.Outcome``). A running step's output is not here (a
chatty step would fill the workflow's history): it travels in the activity's heartbeat,
which holds its newest part; the whole of it is in the record. The activity
(``bar.worker.activities``) does the work on whichever worker takes it;
``bar.workers.client`` talks to this from the developer's machine.

Signals: ``order`` (a step to run), ``question`` / ``answer`` (a ``decide`` from the
agent, the human's reply), ``cancel``, ``finished`` (the activity's result after a
cancel), ``took`` / ``claimed`` (which worker runs it), ``close``. Queries: ``state``,
``outcome`` (of one step), ``answer_of``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, TimeoutType
from temporalio.exceptions import TimeoutError as TimeoutError_

with workflow.unsafe.imports_passed_through():
    from bar.workers.contract import BUSY, CLAIM, CLAIMS, FINAL, NAME, STEP

_KEPT = 50  # results kept across continue-as-new
STICKY_WAIT = timedelta(seconds=5)  # for the worker that ran a task's last step to take its next


@workflow.defn(name=NAME)
class TaskFlow:
    def __init__(self) -> None:
        self._orders: list[dict[str, Any]] = []
        self._results: list[dict[str, Any]] = []
        self._running: dict[str, Any] | None = None
        self._question: dict[str, Any] | None = None
        self._answers: dict[str, Any] = {}
        self._cancelled: set[str] = set()
        self._finished: dict[str, dict[str, Any]] = {}
        self._closing = False
        self._handle: Any = None
        self._start: dict[str, Any] = {}
        self._claimed: dict[str, Any] | None = None
        self._sticky: str | None = None  # the own queue of the worker that ran the last step

    @workflow.run
    async def run(self, start: dict[str, Any]) -> dict[str, Any]:
        self._start = start
        carried = start.get("carried") or {}
        # signals that came with the start were handled before this line: kept, after
        # what an earlier run carried over
        self._results = [*carried.get("results", []), *self._results]
        self._orders = [*carried.get("orders", []), *self._orders]
        if start.get("claim") and not carried:
            # a planned task: its first step is whatever the worker that claims it runs
            self._orders.insert(0, {**start["claim"], "claim": True})
        while True:
            await workflow.wait_condition(lambda: bool(self._orders) or self._closing)
            if not self._orders:
                break
            order = self._orders.pop(0)
            if order["request"] in self._cancelled:
                self._done(order, {"status": "cancelled", "message": "cancelled before it ran"})
                continue
            await self._step(order)
            if workflow.info().is_continue_as_new_suggested() and not self._closing:
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(
                    {
                        **start,
                        "carried": {
                            "results": self._results[-_KEPT:],
                            "orders": self._orders,
                        },
                    }
                )
        await workflow.wait_condition(workflow.all_handlers_finished)
        return {"task_id": start["task_id"], "results": self._results[-_KEPT:]}

    async def _step(self, order: dict[str, Any]) -> None:
        request = order["request"]
        self._running = {
            "request": request,
            "argv": order["argv"],
            "since": workflow.now().isoformat().replace("+00:00", "Z"),
            "round": order.get("round", 0),
        }
        claim = bool(order.get("claim"))
        try:
            result: dict[str, Any] | None = None
            if self._sticky and not claim:
                # the worker that ran the task's last step has its worktree at the last
                # state: it takes this one if it can within a few seconds
                result = await self._attempt(STEP, order, self._sticky, STICKY_WAIT)
            if result is None:
                queue = self._start["queue"] + (CLAIMS if claim else "")
                result = await self._attempt(CLAIM if claim else STEP, order, queue, None)
            assert result is not None
        finally:
            self._handle = None
            self._running = None
            self._question = None
        self._sticky = result.get("sticky") if result.get("status") == "recorded" else None
        again = int(order.get("round", 0)) < int(self._start.get("retry", 0))
        if result.get("lost") and again and request not in self._cancelled:
            result = {**result, "retried": True}
            self._results.append({"request": request, **result})
            self._orders.insert(0, {**order, "round": int(order.get("round", 0)) + 1})
            return
        self._done(order, result)

    async def _attempt(
        self, name: str, order: dict[str, Any], queue: str, wait: timedelta | None
    ) -> dict[str, Any] | None:
        """Run the step's activity on ``queue``; None when ``wait`` passed before any
        worker of it started the step (a worker's own queue, its worker gone or busy)."""
        request = order["request"]
        self._handle = workflow.start_activity(
            name,
            order,
            task_queue=queue,
            start_to_close_timeout=timedelta(days=30),
            schedule_to_start_timeout=wait,
            heartbeat_timeout=timedelta(seconds=float(self._start.get("heartbeat", 10))),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(seconds=1),
                backoff_coefficient=2.0,
                maximum_interval=timedelta(seconds=30),
                maximum_attempts=0,  # a worker that cannot start it leaves it on the queue
                non_retryable_error_types=[FINAL],
            ),
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        )
        try:
            return dict(await self._handle)
        except ActivityError as err:
            cause = err.cause
            if (
                isinstance(cause, TimeoutError_)
                and cause.type == TimeoutType.SCHEDULE_TO_START
                and request not in self._cancelled
            ):
                # not started there: the shared queue takes it, with what an attempt that
                # did start it and went silent said (the step is then recorded first)
                details = list(cause.last_heartbeat_details or [])
                if details and isinstance(details[0], dict) and details[0].get("started"):
                    order["earlier"] = details[0]
                return None
            if isinstance(cause, ApplicationError) and cause.type == BUSY:
                return None  # the worker of its own queue is busy: the shared queue
            if isinstance(cause, CancelledError):
                try:
                    await workflow.wait_condition(
                        lambda: request in self._finished, timeout=timedelta(seconds=120)
                    )
                except TimeoutError:
                    pass
                return self._finished.pop(request, {}) or {
                    "status": "cancelled",
                    "message": "cancelled; the worker did not say how the step ended",
                }
            if isinstance(cause, ApplicationError):
                return {"status": "failed", "message": cause.message}  # (without its type)
            return {"status": "failed", "message": str(cause if cause is not None else err)}

    def _done(self, order: dict[str, Any], result: dict[str, Any]) -> None:
        self._results.append({"request": order["request"], "final": True, **result})

    # --- from the developer's machine ------------------------------------------------

    @workflow.signal
    def order(self, order: dict[str, Any]) -> None:
        # whoever may signal the workflow can send one: its words are checked where it
        # runs (``contract.Order.from_wire``, which refuses it for good); here only what
        # this workflow reads of it, lest a malformed one fail the workflow's every turn
        if (
            isinstance(order, dict)
            and isinstance(order.get("request"), str)
            and isinstance(order.get("round", 0), int)
        ):
            self._orders.append(order)

    @workflow.signal
    def cancel(self, request: str) -> None:
        """Stop the step ``request`` (or, empty, the running one and every waiting one)."""
        running = self._running["request"] if self._running else None
        targets = {request} if request else {o["request"] for o in self._orders} | {running}
        self._cancelled |= {t for t in targets if t}
        if self._handle is not None and running in self._cancelled:
            self._handle.cancel()

    @workflow.signal
    def answer(self, session_id: str, answer: dict[str, Any]) -> None:
        self._answers[session_id] = answer
        if self._question is not None and self._question.get("session_id") == session_id:
            self._question = None

    @workflow.signal
    def close(self) -> None:
        self._closing = True

    # --- from the activity -----------------------------------------------------------

    @workflow.signal
    def question(self, request: str, data: dict[str, Any]) -> None:
        self._question = {"request": request, **data}

    @workflow.signal
    def took(self, request: str, worker: str, step_id: str) -> None:
        """The worker that runs step ``request`` (as ``step_id``)."""
        if self._running is not None and self._running["request"] == request:
            self._running = {**self._running, "worker": worker, "step_id": step_id}

    @workflow.signal
    def claimed(self, request: str, worker: str, argv: list[str]) -> None:
        self._claimed = {"worker": worker, "argv": argv}
        if self._running is not None and self._running["request"] == request:
            self._running = {**self._running, "argv": argv, "worker": worker}

    @workflow.signal
    def finished(self, request: str, result: dict[str, Any]) -> None:
        self._finished[request] = result

    # --- what anyone may ask ---------------------------------------------------------

    @workflow.query
    def state(self) -> dict[str, Any]:
        return {
            "task_id": self._start.get("task_id"),
            "queue": self._start.get("queue"),
            "running": self._running,
            "waiting": [o["request"] for o in self._orders],
            "results": [{k: v for k, v in r.items() if k != "out"} for r in self._results[-_KEPT:]],
            "question": self._question,
            "closing": self._closing,
            "claimed": self._claimed,
        }

    @workflow.query
    def outcome(self, request: str) -> dict[str, Any]:
        """How step ``request`` ended (``result``: None while it has not), the interim
        results of its earlier rounds, and the step running now."""
        done = next(
            (r for r in reversed(self._results) if r["request"] == request and r.get("final")),
            None,
        )
        interim = [r for r in self._results if r["request"] == request and not r.get("final")]
        return {"result": done, "interim": interim, "running": self._running}

    @workflow.query
    def answer_of(self, session_id: str) -> dict[str, Any] | None:
        return self._answers.get(session_id)
