"""What a running step's ``bar run`` does besides waiting for its command.

While the command runs, ``bar run`` stays the one writer of the task's files and the one
judge of the commands run inside the step. It listens on the task's channel socket
(``bar.step.channel``): each ``bar hook`` the agent starts hands it one of the agent's events.
Before a shell command, the supervisor judges it with the policy it compiled once
(``bar.step.gate``), appends the decision to the step's call log at once (``bar.ledger.call_log``:
a crash of bar loses none), and answers; after it, it appends what the agent did with it
(ran, failed), so the ledger says what happened, not only what bar asked for. After every
tool call that can change files it takes a checkpoint before it answers
(``bar.history.checkpoints``), knowing from the kernel which paths changed
(``bar.base.inotify.TreeWatch``, which the step's owner started). With ``--agent``, it also gives the agent bar's hooks for the
run, pointing at this socket (``bar.agents.launch``: the worktree's settings file, put
back after, or Codex's command line).

A process of the step (the agent) can only hand the socket an event of its own, which
is recorded as coming from inside the step (``source: hook:<agent>``); nothing it sends
can rewrite the ledger. The developer's own ``bar``, outside the step, can ask for a
rollback between the agent's calls, done here as a checkpoint; and either side can give
the orders of ``bar.changes.orders`` (``bar decide``, ``bar flow``), done by ``bar.step.order_server``. The socket is
0600 in the task's 0700 directory, and the peer credentials of each connection say
which side it comes from.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING

from bar.base import notices, peers
from bar.base.clock import now_iso
from bar.base.inotify import TreeWatch
from bar.base.record import field, record, replace
from bar.base.socket_path import Address
from bar.errors import BarError, StepBusy
from bar.history import checkpoints
from bar.ledger import call_log
from bar.model import journals
from bar.model.records import PolicyEventRecord
from bar.model.tasks import Task
from bar.policy import Policy
from bar.policy.places import Places
from bar.redact import Scrubber
from bar.sandbox.leftovers import stat_fields
from bar.step import channel

if TYPE_CHECKING:  # the agents' code loads for a step with an agent or a hook event only
    from bar.agents import launch as agent_launch
    from bar.agents.protocol import HookEvent, HookReply
    from bar.agents.transcripts import Verifier
    from bar.session.capture import Capture, Totals
    from bar.session.prices import Budget
    from bar.step.gate import Judgement

_ACCEPT_POLL = 0.01  # seconds between checks for the end of the step
# seconds between touches of running.json while the step runs: what the step wrote later
# than the last one is not credited to it if bar is killed (``bar.step.interrupted``)
_HEARTBEAT = 0.01
_CLIENT_TIMEOUT = 10.0  # a hook that connects and then says nothing is dropped
_BUDGET_POLL = 0.5  # seconds between looks at the agent's transcript, with a budget
_CALL_WAIT = 1.0  # seconds a call's answer is waited for in the transcript, with a budget
# how an agent past its budget is stopped: each signal, then seconds to wait for its end
_BUDGET_SIGNALS = ((signal.SIGINT, 5.0), (signal.SIGTERM, 5.0), (signal.SIGKILL, 0.0))


def _over(budget: Budget, totals: Totals) -> str | None:
    """What the session passed, if it passed its budget."""
    if budget.max_tokens is not None and totals.tokens > budget.max_tokens:
        return f"its session used {totals.tokens} tokens, over --max-tokens {budget.max_tokens}"
    if (
        budget.max_cost_usd is not None
        and not totals.unpriced
        and totals.cost_usd > budget.max_cost_usd
    ):
        return f"its session cost ${totals.cost_usd:.4f}, over --max-cost {budget.max_cost_usd:g}"
    return None


class Supervisor:
    """``with Supervisor(task, step_id, policy, scrubber, agent, argv) as sup:`` around
    the command, which runs as ``sup.argv``; ``sup.env`` goes into its environment.
    ``terminal``: the agent gets a terminal with a person at it."""

    def __init__(
        self,
        task: Task,
        step_id: str,
        policy: Policy | None,
        scrubber: Scrubber,
        agent: str | None = None,
        argv: list[str] | None = None,
        terminal: bool = False,
        snapshot_before: str | None = None,
        watch: TreeWatch | None = None,
        budget: Budget | None = None,
        started_at: str | None = None,
        own_tmp: bool = False,
        places: Places | None = None,
    ) -> None:
        self.task = task
        self.places = places  # the worktree and homes, as the policy speaks of them
        # (rule, matched) of every policy event on file for the step: not twice at exec
        self.judged: set[tuple[str | None, str]] = set()
        self.step_id = step_id
        self.own_tmp = own_tmp  # the step has a /tmp of its own (bar.agents.managed)
        self.policy = policy
        self.scrubber = scrubber
        self.agent = agent
        self.socket_path = task.paths.socket
        self.argv = list(argv or [])
        self.launch: agent_launch.Launch | None = None
        self.mcp: list[str] | None = None  # `bar mcp` for this task, next to bar's hooks
        self._verify: Verifier | None = None  # is each call in the agent's transcript?
        self._sessions: dict[str, int | None] = {}  # session: the agent's process (its start)
        self._claimed: dict[str, int] = {}  # call id: the checkpoint that reported it
        self._origin: int | None = None  # the process that ran the hook now answered
        self._hook_command: str | None = None  # the command of bar's hook (as installed)
        if agent is not None:
            from bar.agents.launch import for_step
            from bar.agents.transcripts import Verifier

            self._verify = Verifier(task)
            self.launch, self.mcp = for_step(agent, self.argv, self.socket_path, task.id, terminal)
            self.argv = self.launch.argv
        self.env: dict[str, str] = {"BAR_SOCKET": str(self.socket_path)}
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._record_lock = threading.Lock()
        self._calls = 0
        self._pending: list[_Call] = []  # shell commands not reported back
        self._snapshot_before = snapshot_before
        self._checkpoints: checkpoints.Recorder | None = None
        self._checkpoint_failed = False
        self._watch = watch  # the step's, started and closed by its owner (bar.step.run)
        self._unreported: list[HookEvent] = []  # edits the agent never reports the end of
        self._in_flight: set[int] = set()  # shell commands running now (answered, not reported)
        self.budget = budget
        self.stopped: str | None = None  # why bar stopped the agent itself (``budget``)
        self._capture: Capture | None = None  # its transcripts, followed for the budget
        self._child: subprocess.Popen[bytes] | None = None
        self._budget_look = 0.0
        self._said_unpriced = False
        if agent is not None and budget is not None and started_at is not None:
            from bar.agents import AGENTS, homes
            from bar.agents.base import of
            from bar.session.capture import Capture

            if agent in AGENTS:
                prices = task.project.config.agents.prices
                home = homes.path(task, agent)
                package = of(agent).package
                self._capture = Capture(home, agent, started_at, prices, package=package)
                if budget.max_cost_usd is not None and not prices:
                    notices.warn(
                        "no prices in agents.prices of config.yaml: the cost of the session "
                        "cannot be known, so --max-cost cannot stop it (docs/sessions.md)"
                    )

    # --- set up and tear down ----------------------------------------------------------

    def __enter__(self) -> Supervisor:
        self.start()
        return self

    def start(self) -> None:
        """Listen on the task's socket and, with an agent, bring its home up to date
        (bar's hooks and ``bar mcp`` in it: ``bar.agents.homes``)."""
        try:
            if self._snapshot_before is not None:
                self._checkpoints = checkpoints.Recorder(
                    self.task,
                    self.step_id,
                    self._snapshot_before,
                    (),
                    self.scrubber,
                    self._watch,
                )
            self._listen()
            if self.agent is not None and self.launch is not None:
                from bar.agents.launch import hook_up

                assert self.mcp is not None
                env = hook_up(
                    self.agent,
                    self.task,
                    self.socket_path,
                    self.mcp,
                    self.step_id,
                    own_tmp=self.own_tmp,
                )
                self.env.update(env)
        except BaseException:
            self.close()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._wake()
            self._thread.join()
            self._thread = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        self.socket_path.unlink(missing_ok=True)
        self._checkpoint_unreported()  # the session ended after them
        self._settle_unreported()

    def _wake(self) -> None:
        """Connect once, so the thread's accept() returns now and sees the stop."""
        address = Address(str(self.socket_path))
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as poke:
                poke.settimeout(1.0)
                poke.connect(address.name)
        except OSError:
            pass  # not listening any more: the thread ends at its next poll
        finally:
            address.close()

    def record(self) -> dict[str, object] | None:
        """The step's ``agent`` entry: which agent, how bar's hooks reached it, and
        whether a person could be asked (``warn`` as a question)."""
        if self.agent is None or self.launch is None:
            return None
        return {
            "name": self.agent,
            "hooks": self.launch.hooked_by,
            "interactive": self.launch.interactive,
        }

    def _listen(self) -> None:
        self.socket_path.unlink(missing_ok=True)  # a crashed run's; we hold the task lock
        address = Address(str(self.socket_path))
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # the socket file is created 0600
        try:
            listener.bind(address.name)
        finally:
            os.umask(old_umask)
            address.close()
        listener.listen(16)
        listener.settimeout(_ACCEPT_POLL)
        self._listener = listener
        self._thread = threading.Thread(target=self._serve, name="bar-supervisor", daemon=True)
        self._thread.start()

    # --- serving -----------------------------------------------------------------------

    def _serve(self) -> None:
        assert self._listener is not None
        beat = time.monotonic()
        while not self._stop.is_set():
            if time.monotonic() - beat >= _HEARTBEAT:
                beat = time.monotonic()
                self._heartbeat()
            if self._capture is not None and beat - self._budget_look >= _BUDGET_POLL:
                self._check_budget()
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self._stop.is_set():
                conn.close()
                return
            with conn:
                try:
                    self._answer(conn)
                except OSError:
                    pass  # the hook went away; it answers its agent itself

    def _heartbeat(self) -> None:
        """Touch the step's intent journal: if bar is killed, its mtime says until when
        the step ran (the interrupted step's ``ended_at``)."""
        journals.touch_run(self.task.paths)

    def _answer(self, conn: socket.socket) -> None:
        inside = _from_this_step(conn)
        conn.settimeout(_CLIENT_TIMEOUT)
        chunks: list[bytes] = []
        size = 0
        while chunk := conn.recv(65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > channel.MAX_REQUEST:
                return
        request = channel.decode_request(b"".join(chunks))
        if request is None:
            return
        verb, arg, body = request
        if verb in ("rollback", "order") and not inside and _another_steps(conn):
            conn.sendall(channel.encode_reply(self._refuse_other_step(verb, arg)))
        elif verb == "hook" and inside:  # an agent bar knows: see _answer_hook
            self._answer_hook(conn, arg, body)
        elif verb == "rollback" and not inside:
            # the developer's own bar, outside the step; never the agent
            conn.sendall(channel.encode_reply(self._answer_rollback(body)))
        elif verb == "order":  # bar decide, bar flow, bar mcp: who may is the op's (orders)
            from bar.step import order_server

            conn.sendall(channel.encode_reply(order_server.answer(self, arg, body, inside=inside)))
        # else another task's step (the socket's path is readable): no answer

    def _refuse_other_step(self, verb: str, arg: str) -> channel.Reply:
        from bar.changes.orders import NotInsideStep

        what = arg if verb == "order" else "rollback"
        error = NotInsideStep(
            f"{what} comes from a process of another task's step; only task {self.task.name}'s "
            "own step and the developer may change it",
            hint=f"give it from your own terminal, outside every step (`bar --task "
            f"{self.task.name} ...`)",
        )
        text = f"{error}\nhint: {error.hint}"
        return channel.Reply(error.exit_code, b"", text.encode("utf-8", "replace"))

    def _answer_hook(self, conn: socket.socket, agent: str, payload: bytes) -> None:
        from bar.agents import AGENTS
        from bar.agents.protocol import protocol
        from bar.step.gate import judge

        if agent not in AGENTS:
            return  # no answer, as to anything that is not a request
        if self._hook_command is None:
            from bar.agents.settings import hook_command

            self._hook_command = hook_command(self.agent or agent, self.socket_path)
        self._origin = hook_origin(peers.peer_pid(conn), self._hook_command)
        ask = self.launch.interactive if self.launch is not None else False
        judgement = judge(agent, payload, self.policy, ask=ask, places=self.places)
        if self._capture is not None and judgement.event is not None:
            self._check_budget(
                judgement.event.tool_use_id if judgement.event.kind == "pre" else None
            )
            if self.stopped and judgement.event.kind == "pre":
                judgement = self._over_budget(agent, judgement)
        if self.agent is None:  # no agent runs here: a made-up event, answered, not recorded
            self._reply(conn, judgement.reply)
            return
        event = judgement.event
        if event is not None and event.kind == "post":  # reported after all: not twice
            self._unreported = [e for e in self._unreported if not _same_edit(e, event)]
        idle = event is not None and event.kind == "pre" and not self._in_flight
        if event is not None and event.kind != "post":
            self._in_flight.clear()  # the agent moved on: its earlier calls have ended
        self._checkpoint_unreported()  # the agent moved on: the edit before is done
        if idle and self._checkpoints is not None and not self._checkpoint_failed:
            # what changed while none of its calls ran (a background process, a subagent
            # that skips hooks) is a residual of its own, never the next call's
            with contextlib.suppress(BarError, OSError):
                self._checkpoints.catch_up()
        if event is not None and event.kind == "pre" and event.command is None:
            if protocol(agent).changes_files(event.tool_name) and judgement.answer != "deny":
                self._unreported.append(event)  # Codex's apply_patch: no post event follows
        elif event is not None and event.kind == "post":
            call = self._record_outcome(event)
            if protocol(agent).changes_files(event.tool_name):
                self._checkpoint(event, call)
        elif event is not None and event.kind == "start":
            self._sessions.setdefault(event.session_id or "", self._session_origin())
            self.append({"session_start": event.session_id or ""})
        else:
            self._record(agent, judgement)
        self._reply(conn, judgement.reply)

    @staticmethod
    def _reply(conn: socket.socket, reply: HookReply) -> None:
        conn.sendall(
            channel.encode_reply(
                channel.Reply(
                    reply.exit_code,
                    reply.stdout.encode("utf-8", "backslashreplace"),
                    reply.stderr.encode("utf-8", "backslashreplace"),
                )
            )
        )

    # --- the budget --------------------------------------------------------------------

    def child_started(self, proc: subprocess.Popen[bytes]) -> None:
        """The step's command runs as ``proc`` (what a budget stops)."""
        self._child = proc

    def _check_budget(self, call: str | None = None) -> None:
        """Whether the session has passed its budget: if so, say so once and stop the
        agent (``_stop_agent``); every tool call it asks for from then on is refused.
        ``call``: the agent is about to make this call; the answer that asked for it
        counts (Claude Code writes its transcript a moment after its hooks run: waited
        for, briefly)."""
        assert self._capture is not None and self.budget is not None
        self._budget_look = time.monotonic()
        if self.stopped is not None:
            return
        try:
            totals = self._capture.poll()
            deadline = time.monotonic() + _CALL_WAIT
            while (
                call
                and self._capture.files  # (an agent that keeps no transcript here: no wait)
                and not self._capture.has_call(call)
                and time.monotonic() < deadline
            ):
                time.sleep(0.01)
                totals = self._capture.poll()
        except OSError:
            return
        if totals.unpriced and self.budget.max_cost_usd is not None and not self._said_unpriced:
            self._said_unpriced = True
            notices.warn(
                f"no price in agents.prices for {', '.join(totals.unpriced)}: the session's "
                "cost is unknown and --max-cost cannot stop it (docs/sessions.md)"
            )
        over = _over(self.budget, totals)
        if over is None:
            return
        self.stopped = "budget"
        notices.warn(f"stopping {self.agent}: {over} (the step is recorded as stopped: budget)")
        threading.Thread(target=self._stop_agent, name="bar-budget", daemon=True).start()

    def _over_budget(self, agent: str, judgement: Judgement) -> Judgement:
        from bar.agents.protocol import render_reply
        from bar.policy import PolicyEvent
        from bar.step.gate import Judgement as Judged

        reason = "bar: this session has used up its budget; stop now"
        assert judgement.event is not None
        matched = judgement.event.command or judgement.event.tool_name or ""
        return Judged(
            render_reply(agent, "block", reason),
            judgement.event,
            "block",
            (PolicyEvent("bar:budget", "block", matched, reason),),
            "deny",
        )

    def _stop_agent(self) -> None:
        """The agent's own interrupt first (SIGINT: Ctrl-C, which ends its turn and
        saves its session), then SIGTERM, then SIGKILL, each after a grace period."""
        proc = self._child
        if proc is None:
            return
        for sig, grace in _BUDGET_SIGNALS:
            if proc.returncode is not None or self._stop.is_set():
                return
            try:
                if os.getpgid(proc.pid) == proc.pid:  # a session of its own: all of it
                    os.killpg(proc.pid, sig)
                else:
                    os.kill(proc.pid, sig)
            except OSError:
                return
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and proc.returncode is None:
                if self._stop.wait(0.05):
                    return

    def _record(self, agent: str, judgement: Judgement) -> None:
        event = judgement.event
        if event is None or event.command is None:
            return  # an unreadable event was blocked; not a command of the step
        matches: list[tuple[str | None, str, str]] = [
            (e.rule, e.action, e.matched) for e in judgement.events
        ]
        with self._record_lock:
            self.judged.update((rule, matched) for rule, _, matched in matches)
            self._calls += 1
            call = self._calls
            self._pending.append(_Call(call, event, judgement.action, judgement.answer))
            if judgement.answer != "deny":
                self._in_flight.add(call)
        records = [
            PolicyEventRecord(
                rule=rule,
                action=action,
                matched=matched,
                source=f"hook:{agent}",
                session_id=event.session_id,
                tool_use_id=event.tool_use_id,
                command=event.command,
                decision=judgement.action,
                answer=judgement.answer,
                agent_id=event.agent_id,
                agent_type=event.agent_type,
            )
            for rule, action, matched in matches or [(None, "allow", event.command)]
        ]
        self.append(*({**r.to_record(), call_log.CALL: call} for r in records))

    def _record_outcome(self, event: HookEvent) -> _Call | None:
        """A shell command the agent reported back: find its decision (by call id, or
        by command where the agent sends no id) and note what became of it."""
        if event.command is None or event.outcome is None:
            return None
        with self._record_lock:
            # the latest match: an agent without call ids (Gemini) reports a command right
            # after it ran, so an earlier one with the same text was not run
            found = next(
                (
                    i
                    for i in reversed(range(len(self._pending)))
                    if _same_call(self._pending[i].event, event)
                ),
                None,
            )
            if found is None:
                return None
            call = self._pending.pop(found)
            self._in_flight.discard(call.number)
        from bar.agents.base import of

        if not of(event.agent).tells_outcome:
            from bar.agents import rollout

            said = rollout.said(self.task, [event], recent=True)
            event = replace(event, outcome=said.get(event.tool_use_id or "", event.outcome))
        self.append({call_log.CALL: call.number, "outcome": event.outcome})
        return call

    def _settle_unreported(self) -> None:
        """Once the session ended, what the agent's own records say: how the Codex calls
        it sent no post-tool event for ended (``bar.agents.rollout``), and whether the
        calls not found in its transcript when checkpointed are there now."""
        from bar.agents import rollout
        from bar.agents.base import of

        with self._record_lock:
            left = [
                c
                for c in self._pending
                if not of(c.event.agent).tells_outcome and c.answer != "deny"
            ]
            self._pending = [c for c in self._pending if c not in left]
        for number, outcome in rollout.settle(self.task, [(c.number, c.event) for c in left]):
            self.append({call_log.CALL: number, "outcome": outcome})
        if self._verify and self._checkpoints is not None and not self._checkpoint_failed:
            self._verify.settle(self._checkpoints)

    def _checkpoint(self, event: HookEvent, call: _Call | None) -> None:
        """The state after a tool call that can change files, recorded before the agent
        hears back (so its next call cannot race it). A checkpoint that cannot be taken
        (a full disk) is said once; the step's own snapshot still records everything."""
        if self._checkpoints is None or self._checkpoint_failed:
            return
        try:
            self._checkpoints.take(
                "tool",
                started_at=call.started_at if call else None,
                tool=event.tool_name,
                call_id=event.tool_use_id,
                session_id=event.session_id,
                command=event.command,
                paths=self._relative(event.paths),
                decision=call.action if call else None,
                answer=call.answer if call else None,
                outcome=event.outcome,
                agent_id=event.agent_id,
                agent_type=event.agent_type,
                verified=self._verified(event, self._checkpoints.count + 1),
            )
        except (BarError, OSError) as exc:
            self._checkpoint_failed = True
            notices.warn(
                f"no more checkpoints in this step: {exc}; the step's own record keeps every change"
            )

    def _session_origin(self) -> int | None:
        """The agent's process, for a session that starts now: the process that ran its
        hook, unless that process descends from an agent's process bar knows (a command
        the agent ran, which can make up a session of its own and a transcript to match;
        an agent started inside another's tool call is such a one too). None: not one."""
        origin = self._origin
        known = {pid for pid in self._sessions.values() if pid is not None}
        if origin is None or any(_descends(origin, agent) for agent in known if agent != origin):
            return None
        return origin

    def _verified(self, event: HookEvent, n: int) -> bool | None:
        """Whether checkpoint ``n``'s call is one the agent made: its hook was run by the
        process that started the session (not by a command of the step, which can run
        ``bar hook`` too), no other event claimed the same call, and the agent's
        transcript has the call as the event tells it (``bar.agents.transcripts``)."""
        if self._verify is None:
            return None
        call = event.tool_use_id
        if call and call in self._claimed:  # (two reports of one call: neither is trusted)
            earlier = self._claimed[call]
            self._verify.distrust(earlier)
            if self._checkpoints is not None:
                self._checkpoints.amend(earlier, verified=False)
            return False
        if call:
            self._claimed[call] = n
        agent = self._sessions.get(event.session_id or "")
        if call and (agent is None or agent != self._origin):
            return False
        return self._verify.check(event, n)

    def _checkpoint_unreported(self) -> None:
        """Checkpoint the edits whose end the agent does not report (Codex sends no
        post-tool event for its apply_patch): the agent applies an edit before its next
        call, so that call's event (or the end of the session) marks the edit's end."""
        while self._unreported:
            self._checkpoint(self._unreported.pop(0), None)

    def _answer_rollback(self, body: bytes) -> channel.Reply:
        """``bar rollback --to STATE`` from the developer while the session runs: done
        here, by the one writer of the task's files, as a checkpoint of the step. Refused
        while the agent is running a tool (its files are changing)."""
        name = body.decode("utf-8", "replace").strip()
        try:
            done = self._rollback(name)
        except BarError as exc:
            text = str(exc) + (f"\nhint: {exc.hint}" if exc.hint else "")
            return channel.Reply(exc.exit_code, b"", text.encode("utf-8", "replace"))
        record = json.dumps(done.to_record(), ensure_ascii=False)
        return channel.Reply(0, record.encode("utf-8", "backslashreplace"), b"")

    def _rollback(self, name: str) -> checkpoints.Checkpoint:
        recorder = self._checkpoints
        if recorder is None or self._checkpoint_failed:
            raise StepBusy(
                f"step {self.step_id} is running and takes no checkpoints",
                hint="roll back when it has ended",
            )
        with self._record_lock:
            running = [c for c in self._pending if c.number in self._in_flight]
        if running:
            raise StepBusy(
                f"the agent is running a command ({running[-1].event.command}); the files "
                "are changing",
                hint="roll back when it waits for you (between turns)",
            )
        self._checkpoint_unreported()
        from bar.changes import rollback  # (a plain step does without it)

        return rollback.in_step(recorder, name)

    def _relative(self, paths: tuple[str, ...]) -> tuple[str, ...]:
        """Edit tools name files by absolute path: those in the worktree, relative to it."""
        root = str(self.task.worktree) + os.sep
        return tuple(p[len(root) :] if p.startswith(root) else p for p in paths)

    def append(self, *records: dict[str, object]) -> None:
        """Add lines to the step's decision log now (one write, under the lock)."""
        data = b"".join(
            json.dumps(
                self.scrubber.scrub_obj(r), ensure_ascii=False, separators=(",", ":")
            ).encode("utf-8", "backslashreplace")
            + b"\n"
            for r in records
        )
        path = self.task.paths.policy_events(self.step_id)
        with self._record_lock, contextlib.suppress(OSError):
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)


@record(frozen=True)
class _Call:
    """A shell command the agent was answered about and has not reported back."""

    number: int
    event: HookEvent
    action: str
    answer: str | None
    started_at: str = field(default_factory=now_iso)


def _same_call(pre: HookEvent, post: HookEvent) -> bool:
    """Whether a post-tool event reports the command of a pre-tool one: the same call id,
    or, from an agent that sends none, the same command in the same session."""
    if post.tool_use_id:
        return pre.tool_use_id == post.tool_use_id
    return pre.command == post.command and pre.session_id == post.session_id


def _same_edit(pre: HookEvent, post: HookEvent) -> bool:
    if post.tool_use_id:
        return pre.tool_use_id == post.tool_use_id
    return pre.tool_name == post.tool_name and pre.paths == post.paths


def _another_steps(conn: socket.socket) -> bool:
    """Whether the process at the other end, not one of this step's, is confined while
    this ``bar run`` is not: a process of another task's step (whose agent can reach this
    socket's path) or one it left behind. Such a process is neither this step's agent
    nor the developer, and may give no orders here."""
    return peers.confined_caller(conn)


def hook_origin(pid: int | None, command: str) -> int | None:
    """The process that ran bar's hook ``command`` as process ``pid``: its parent, or the
    parent of the shell that ran exactly ``command`` (None: not known)."""
    if pid is None:
        return None
    parent = _parent(pid)
    if parent is not None and _runs(parent, command):
        parent = _parent(parent)
    return parent


def _descends(pid: int, ancestor: int) -> bool:
    """Whether ``pid`` is a descendant of ``ancestor`` (up to init, or to this process)."""
    me = os.getpid()
    for _ in range(256):  # (a chain of parents longer than this is not a process tree)
        parent = _parent(pid)
        if parent is None or parent in (me, 1):
            return False
        if parent == ancestor:
            return True
        pid = parent
    return False


def _parent(pid: int) -> int | None:
    fields = stat_fields(pid) if pid > 1 else None
    return int(fields[1]) if fields and len(fields) >= 2 else None


def _runs(pid: int, command: str) -> bool:
    """Whether ``pid`` is a shell running exactly ``command`` (``sh -c COMMAND``)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")[:-1]
    except OSError:
        return False
    return len(argv) >= 3 and argv[-2] == b"-c" and argv[-1] == os.fsencode(command)


def _from_this_step(conn: socket.socket) -> bool:
    """Whether the process at the other end descends from this ``bar run`` (its command,
    or what the command left behind, re-parented to us): the socket's path can be read
    by another task's step, which must not add records to this one."""
    pid = peers.peer_pid(conn)
    if pid is None:
        return True  # no peer credentials on this system: the 0600 socket is the guard
    me = os.getpid()
    for _ in range(256):  # a chain of parents longer than this is not a process tree
        if pid == me:
            return True
        fields = stat_fields(pid) if pid > 1 else None
        if not fields or len(fields) < 2:
            return False
        pid = int(fields[1])
    return False
