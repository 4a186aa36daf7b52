"""What a running step's ``bar run`` does besides waiting for its command.

While the command runs, ``bar run`` stays the one writer of the task's files and the one
judge of the commands run inside the step. It listens on the task's channel socket
(``bar.channel``): each ``bar hook`` the agent starts hands it the agent's pre-tool event;
the supervisor judges it with the policy it compiled once (``bar.gate``), appends the
decision to ``artifacts/<step>.policy.jsonl`` at once (so a crash of bar loses none), and
answers. With ``--agent``, it also installs bar's hook into the agent's project-local
settings in the worktree for the run, pointing at this socket, and puts them back after.

A message on the socket can only ask for a judgement, which is recorded as coming from
inside the step (``source: hook:<agent>``); nothing on the channel can rewrite the
ledger. The socket is 0600 in the task's 0700 directory, and only a process descending
from this ``bar run`` is answered (its peer credentials say which).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import threading
import time
from types import TracebackType

from bar import channel, notices
from bar.agents import settings as agent_settings
from bar.agents.protocol import PROTOCOLS, HookReply, protocol
from bar.gate import Judgement, judge
from bar.policy import Policy
from bar.records import PolicyEventRecord
from bar.redact import Scrubber
from bar.sandbox.leftovers import stat_fields
from bar.tasks import Task

_ACCEPT_POLL = 0.25  # seconds between checks for the end of the step
_HEARTBEAT = 1.0  # seconds between touches of running.json while the step runs
_CLIENT_TIMEOUT = 10.0  # a hook that connects and then says nothing is dropped


class Supervisor:
    """``with Supervisor(task, step_id, policy, scrubber, agent) as sup:`` around the
    command; ``sup.env`` goes into the command's environment."""

    def __init__(
        self,
        task: Task,
        step_id: str,
        policy: Policy | None,
        scrubber: Scrubber,
        agent: str | None = None,
    ) -> None:
        if agent is not None:
            protocol(agent)  # an unknown agent fails before anything is set up
        self.task = task
        self.step_id = step_id
        self.policy = policy
        self.scrubber = scrubber
        self.agent = agent
        self.socket_path = task.paths.socket
        self.env: dict[str, str] = {"BAR_SOCKET": str(self.socket_path)}
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._record_lock = threading.Lock()
        self._installed: agent_settings.InstalledHook | None = None

    # --- set up and tear down ----------------------------------------------------------

    def __enter__(self) -> Supervisor:
        self.start()
        return self

    def start(self) -> None:
        """Listen on the task's socket and, with an agent, install its hook."""
        try:
            self._listen()
            if self.agent is not None:
                command = agent_settings.hook_command(self.agent, self.socket_path)
                self._installed = agent_settings.install_hook(
                    self.agent, self.task.worktree, command
                )
                proto = PROTOCOLS[self.agent]
                self.env.update(proto.run_env)
                if proto.run_notice:
                    notices.note(proto.run_notice)
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
        if self._installed is not None:
            installed, self._installed = self._installed, None
            installed.restore()
            if installed.discarded is not None:
                notices.warn(
                    f"{installed.relative_path} was left unreadable by the agent; "
                    "its earlier content was put back"
                )
        self._stop.set()
        if self._thread is not None:
            self._wake()
            self._thread.join()
            self._thread = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        self.socket_path.unlink(missing_ok=True)

    def _wake(self) -> None:
        """Connect once, so the thread's accept() returns now and sees the stop."""
        address = channel.Address(str(self.socket_path))
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as poke:
                poke.settimeout(1.0)
                poke.connect(address.name)
        except OSError:
            pass  # not listening any more: the thread ends at its next poll
        finally:
            address.close()

    def excludes(self) -> list[str]:
        """Worktree paths the supervisor writes, which no snapshot may record."""
        return [agent_settings.settings_path(self.agent)] if self.agent else []

    def _listen(self) -> None:
        self.socket_path.unlink(missing_ok=True)  # a crashed run's; we hold the task lock
        address = channel.Address(str(self.socket_path))
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
        with contextlib.suppress(OSError):
            os.utime(self.task.paths.marker)

    def _answer(self, conn: socket.socket) -> None:
        if not _from_this_step(conn):
            return  # another task's step (the socket's path is readable): no answer
        conn.settimeout(_CLIENT_TIMEOUT)
        chunks: list[bytes] = []
        size = 0
        while chunk := conn.recv(65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > channel.MAX_REQUEST:
                return
        request = channel.decode_request(b"".join(chunks))
        if request is None or request[0] != "hook" or request[1] not in PROTOCOLS:
            return
        _, agent, payload = request
        judgement = judge(agent, payload, self.policy)
        self._record(agent, judgement)
        reply: HookReply = judgement.reply
        conn.sendall(
            channel.encode_reply(
                channel.Reply(
                    reply.exit_code,
                    reply.stdout.encode("utf-8", "backslashreplace"),
                    reply.stderr.encode("utf-8", "backslashreplace"),
                )
            )
        )

    def _record(self, agent: str, judgement: Judgement) -> None:
        event = judgement.event
        if event is None or event.command is None:
            return  # an unreadable event was blocked; not a command of the step
        matches: list[tuple[str | None, str, str]] = [
            (e.rule, e.action, e.matched) for e in judgement.events
        ]
        records = [
            PolicyEventRecord(
                rule=rule, action=action, matched=matched, source=f"hook:{agent}",
                session_id=event.session_id, tool_use_id=event.tool_use_id,
                command=event.command, decision=judgement.action,
            )
            for rule, action, matched in matches or [(None, "allow", event.command)]
        ]  # fmt: skip
        data = b"".join(
            json.dumps(self.scrubber.scrub_obj(r.to_record()), ensure_ascii=False,
                       separators=(",", ":")).encode("utf-8", "backslashreplace") + b"\n"
            for r in records
        )  # fmt: skip
        path = self.task.paths.policy_events(self.step_id)
        with self._record_lock, contextlib.suppress(OSError):
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)


def _from_this_step(conn: socket.socket) -> bool:
    """Whether the process at the other end descends from this ``bar run`` (its command,
    or what the command left behind, re-parented to us): the socket's path can be read
    by another task's step, which must not add records to this one."""
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return True  # no peer credentials on this system: the 0600 socket is the guard
    pid = struct.unpack("3i", creds)[0]
    me = os.getpid()
    for _ in range(256):  # a chain of parents longer than this is not a process tree
        if pid == me:
            return True
        fields = stat_fields(pid) if pid > 1 else None
        if not fields or len(fields) < 2:
            return False
        pid = int(fields[1])
    return False


def read_recorded(task: Task, step_id: str) -> list[PolicyEventRecord]:
    """The decisions a step's supervisor recorded (also after bar died mid-step)."""
    try:
        raw = task.paths.policy_events(step_id).read_bytes()
    except FileNotFoundError:
        return []
    events: list[PolicyEventRecord] = []
    for line in raw.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line torn by a crash
        if isinstance(rec, dict):
            events.append(PolicyEventRecord.from_record(rec))
    return events
