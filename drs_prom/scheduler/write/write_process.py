"""The binding cycle's writes (Bindings, Events) made by a child process, off the scheduler's GIL.

Why: the scheduler is one Python process, so all its threads share one core's worth of
Python. A POST through urllib3 cost 0.3-0.8 ms of that CPU (request building, the socket
calls, response parsing; on kept connections, ``api_connections``, about a third of that); with
one Binding and one Event per pod this was a third to a half of the scheduler's CPU per pod in a
queue drain (py-spy, benchmarks/profile_breakdown.py), while
kube-scheduler, in Go, spreads the same work over every core. ``RemoteWriter`` has
``ApiWriter``'s ``post``: the bind worker pickles the request (tens of microseconds), the
child (``write_child``: ``api_connections``) sends it on another core, and the reply wakes the worker.
``bind`` and ``emit_event`` do not know the difference, and the bind workers keep
kube-scheduler's assumed-pod semantics, fencing and the client rate limit as before.

Credentials stay the scheduler's: every request carries the headers ``ApiWriter`` computes
at that moment (a refreshed token reaches the child with the next request); the child gets
only the TLS files and the host. If the child cannot start, or dies, the requests it had
fail (their pods are forgotten and retried, as after any failed bind) and every later write
is made in-process: writing never stops. A proxy in the kubeconfig keeps all writes in-process,
and so does a process with fewer than 2 CPUs to run on (``usable_cpus``): on one core the child
has no core of its own and its hand-overs (pickling, a socket each way, two more thread wake-ups)
only add to the work that core does per pod.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import socket
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import orjson

from drs_prom.scheduler.write.bind import ApiWriter

log = logging.getLogger(__name__)

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0


def usable_cpus(cgroup: Path = Path("/sys/fs/cgroup")) -> float:
    """CPUs this process may use: its affinity (taskset, cpuset), lowered by a cgroup v2 CPU
    quota (``cpu.max``, a container's CPU limit) where one is set."""
    cpus = float(len(os.sched_getaffinity(0)))
    try:
        quota, period = (cgroup / "cpu.max").read_text().split()[:2]
        if quota != "max":
            cpus = min(cpus, int(quota) / int(period))
    except (OSError, ValueError):  # no cgroup v2 file: the affinity alone
        pass
    return cpus


def wanted(enabled: bool, cpus: float) -> bool:
    """Whether to write from a child: configured, and a second CPU for it to run on."""
    if enabled and cpus < 2:
        log.info("%.1f CPU usable: binds and events are written in-process (no core for a write process)", cpus)
    return enabled and cpus >= 2


class WriteProcessError(ConnectionError):
    """The child could not answer (it exited or never started)."""


class _Call:
    __slots__ = ("data", "done", "error", "status")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.status = 0
        self.data = b""
        self.error: str | None = None


class RemoteWriter:
    """``ApiWriter.post`` made by a child process; ``local`` writes when the child cannot."""

    def __init__(self, local: ApiWriter) -> None:
        self.local = local
        self._send_lock = threading.Lock()
        self._pending: dict[int, _Call] = {}
        self._seq = itertools.count()
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._sock: socket.socket | None = None
        self._reader: threading.Thread | None = None
        self._alive = False

    @property
    def alive(self) -> bool:
        """True while writes go through the child."""
        return self._alive

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> RemoteWriter:
        """Start the child; on any failure say why in one line and keep writing in-process."""
        setup = self.local.setup  # the child runs as many writer threads as the local writer keeps connections
        if setup["proxy"]:
            log.info("a proxy is configured: binds and events are written in-process")
            return self
        ours, theirs = socket.socketpair()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "drs_prom.scheduler.write.write_child", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
            )
        except OSError as exc:
            ours.close()
            log.warning("write process not started (%s): binds and events are written in-process", exc)
            return self
        finally:
            theirs.close()
        self._sock = ours  # kept for shutdown(): a half-close tells the child to finish
        conn = Connection(os.dup(ours.fileno()))
        try:
            conn.send(setup)
            if not conn.poll(START_TIMEOUT_S):
                raise WriteProcessError(f"no answer in {START_TIMEOUT_S:.0f} s")
            kind, detail = conn.recv()
            if kind != "ready":
                raise WriteProcessError(str(detail))
        except (OSError, EOFError, WriteProcessError) as exc:
            log.warning("write process failed to start (%s): binds and events are written in-process", exc)
            conn.close()
            ours.close()
            self._sock = None
            self._end_child(kill=True)
            return self
        self._conn = conn
        self._alive = True
        self._reader = threading.Thread(target=self._read, name="drs-write-replies", daemon=True)
        self._reader.start()
        return self

    def post(self, path: str, body: dict[str, Any], timeout: float) -> tuple[int, bytes]:
        """(HTTP status, response body), as ``ApiWriter.post``; a failed child raises WriteProcessError."""
        conn = self._conn
        if not self._alive or conn is None:
            return self.local.post(path, body, timeout)
        call = _Call()
        headers = self.local.headers()
        with self._send_lock:
            seq = next(self._seq)
            self._pending[seq] = call
            try:
                conn.send((seq, path, orjson.dumps(body), headers, timeout))
            except (OSError, ValueError) as exc:
                self._pending.pop(seq, None)
                raise WriteProcessError(f"write process unreachable: {exc}") from exc
        if not call.done.wait(timeout + 5.0):
            # its own requests time out after ``timeout``: a child this late is stuck, not slow
            self._abandon(f"no answer in {timeout + 5.0:.0f} s")
            raise TimeoutError(f"write process gave no answer in {timeout + 5.0:.0f} s")
        if call.error is not None:
            raise WriteProcessError(call.error)
        return call.status, call.data

    def _read(self) -> None:
        conn = self._conn
        assert conn is not None
        try:
            while True:
                seq, status, data, error = conn.recv()
                with self._send_lock:
                    call = self._pending.pop(seq, None)
                if call is not None:
                    call.status, call.data, call.error = status, data, error
                    call.done.set()
        except (EOFError, OSError):
            pass
        was_alive, self._alive = self._alive, False
        with self._send_lock:
            stranded, self._pending = list(self._pending.values()), {}
        for call in stranded:
            call.error = "write process exited"
            call.done.set()
        code = None
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):  # reaped, not left a zombie
                code = self._proc.wait(5)
        if was_alive:
            log.warning(
                "write process ended (exit %s, %d requests unanswered): binds and events are written in-process",
                code,
                len(stranded),
            )

    def _abandon(self, why: str) -> None:
        """Stop using a stuck child: kill it; its reader then fails what it still had."""
        if not self._alive:
            return
        self._alive = False
        log.warning("write process stuck (%s): killed; binds and events are written in-process", why)
        if self._proc is not None:
            self._proc.kill()

    def close(self) -> None:
        """Let the child answer what it has, then end it (killed after STOP_TIMEOUT_S)."""
        self._alive = False
        if self._sock is not None:
            with contextlib.suppress(OSError):  # the child sees the end, answers what it has, exits
                self._sock.shutdown(socket.SHUT_WR)
        if self._reader is not None:
            self._reader.join(STOP_TIMEOUT_S)
        self._end_child()
        if self._conn is not None:
            self._conn.close()
        if self._sock is not None:
            self._sock.close()

    def _end_child(self, kill: bool = False) -> None:
        proc = self._proc
        if proc is None:
            return
        if kill:
            proc.kill()
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
