"""Child processes the testbed starts, and the guarantee that it stops every one of them.

Each child runs in its own session (process group), writes to a log file and, on Linux,
gets SIGTERM from the kernel if our process dies even by SIGKILL (PR_SET_PDEATHSIG).
Every live ``ManagedProcess`` is in one registry: ``stop_all()`` ends them (children
first, newest first), runs at interpreter exit, and ``handle_termination()`` turns
SIGTERM/SIGHUP into KeyboardInterrupt so ``finally`` blocks run on Ctrl-C and ``kill``.
Only loopback addresses are used anywhere (``LOOPBACK``, ``free_port``).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import random
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

LOOPBACK = "127.0.0.1"

_REGISTRY: dict[int, ManagedProcess] = {}
_REGISTRY_LOCK = threading.Lock()


_HANDED_OUT: set[int] = set()
_PORT_LOCK = threading.Lock()
_PORT_TRIES = 200


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for the local ports of outgoing connections (Linux's default when unreadable)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago, outside the kernel's ephemeral range.

    A port from ``bind(0)`` comes from the ephemeral range, so between this call and the server's own bind any
    outgoing connection on the host may take it as its local port, and a client that already probes the address (a
    Prometheus scrape of a target about to start) can even connect to itself on it; either way the server's bind
    fails with "Address already in use". Ports below the range are never handed to outgoing connections. Each port
    is handed out once per process, so two servers started side by side never get the same one.
    """
    low, _high = _ephemeral_range()
    first = 20000 if low > 21000 else 1025
    rng = random.Random()
    with _PORT_LOCK:
        for _ in range(_PORT_TRIES):
            port = rng.randrange(first, low)
            if port in _HANDED_OUT:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind((LOOPBACK, port))
                except OSError:
                    continue
            _HANDED_OUT.add(port)
            return port
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # a crowded host: the kernel's choice
            s.bind((LOOPBACK, 0))
            return int(s.getsockname()[1])


def tail(path: Path, n: int = 40) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-n:])


def run(cmd: Sequence[str], timeout: float = 60.0, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, check=False, **kw)


def _die_with_parent() -> None:  # runs in the child between fork and exec
    """Linux: have the kernel SIGTERM the child when its parent dies, even by SIGKILL (a backstop
    for atexit, which does not run then)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)
    except Exception:  # noqa: BLE001 - best effort; atexit and stop_all remain
        pass


_IS_LINUX = os.name == "posix" and os.uname().sysname == "Linux"


class ManagedProcess:
    """A child process in its own process group whose output goes to a log file; stop() is bounded."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = Path(log_path)
        self._log: IO[bytes] = open(self.log_path, "ab")  # noqa: SIM115 - lives as long as the child

        def spawn() -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                self.argv,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,  # our signals go to it alone, not to our caller's group
                preexec_fn=_die_with_parent if _IS_LINUX else None,
            )

        # PR_SET_PDEATHSIG fires when the creating THREAD ends: a process restarted from a short-lived
        # thread (a fault script) must be created by a thread that lives as long as we do.
        self.popen = (
            spawn() if threading.current_thread() is threading.main_thread() else _spawner().submit(spawn).result()
        )
        self.port: int | None = None
        with _REGISTRY_LOCK:
            _REGISTRY[self.popen.pid] = self

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, n: int = 40) -> str:
        with contextlib.suppress(ValueError):
            self._log.flush()
        return tail(self.log_path, n)

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to the child's whole process group (it leads its own session)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, sig)

    def kill(self) -> None:
        """SIGKILL now (a fault injection: no graceful shutdown), then reap."""
        self.signal_group(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=10)
        self._forget()

    def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM the group, wait up to ``grace`` seconds, then SIGKILL it (bounded)."""
        if self.popen.poll() is None:
            self.signal_group(signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.signal_group(signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.popen.wait(timeout=10)
        else:  # the leader is gone; make sure nothing it forked lingers
            self.signal_group(signal.SIGKILL)
        self._forget()
        return self.popen.returncode

    def _forget(self) -> None:
        with contextlib.suppress(Exception):
            self._log.close()
        with _REGISTRY_LOCK:
            _REGISTRY.pop(self.popen.pid, None)

    def __repr__(self) -> str:
        return f"<ManagedProcess {self.name} pid={self.pid} port={self.port} alive={self.alive()}>"


_SPAWNER: ThreadPoolExecutor | None = None


def _spawner() -> ThreadPoolExecutor:
    global _SPAWNER
    with _REGISTRY_LOCK:
        if _SPAWNER is None:
            _SPAWNER = ThreadPoolExecutor(1, thread_name_prefix="spawner")
        return _SPAWNER


def live_processes() -> list[ManagedProcess]:
    with _REGISTRY_LOCK:
        return list(_REGISTRY.values())


def stop_all(grace: float = 5.0, keep: Iterable[ManagedProcess] = ()) -> None:
    """Stop every ManagedProcess still alive but those in ``keep`` (started by someone else, e.g. the
    control plane a ``--kubeconfig`` run was given), newest first (schedulers before the apiserver
    before etcd)."""
    kept = {id(p) for p in keep}
    for proc in reversed(live_processes()):
        if id(proc) not in kept:
            with contextlib.suppress(Exception):
                proc.stop(grace=grace)


atexit.register(stop_all)


@contextlib.contextmanager
def handle_termination() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise KeyboardInterrupt in the main thread like Ctrl-C does,
    so the caller's ``finally`` stops what it started. A no-op outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    old = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def wait_http(
    proc: ManagedProcess | None,
    url: str,
    ok: Callable[[bytes], bool],
    timeout: float,
    token: str | None = None,
    cafile: Path | None = None,
    insecure: bool = False,
    error: type[Exception] = RuntimeError,
) -> None:
    """Poll ``url`` until ``ok(body)``; ``error`` (with the log tail) if ``proc`` dies or time runs out."""
    deadline = time.monotonic() + timeout
    ctx = None
    if url.startswith("https"):
        if insecure:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        else:
            ctx = ssl.create_default_context(cafile=str(cafile) if cafile else None)
    last = ""
    name = proc.name if proc else url
    while time.monotonic() < deadline:
        if proc is not None and not proc.alive():
            raise error(
                f"{proc.name} exited with rc={proc.popen.returncode} during startup "
                f"(log {proc.log_path}):\n{proc.log_tail()}"
            )
        req = urllib.request.Request(url)
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=5, context=ctx) as resp:
                body = resp.read()
                if ok(body):
                    return
                last = f"HTTP {resp.status}: {body[:200]!r}"
        except urllib.error.HTTPError as e:
            last = f"HTTP {e.code}: {e.read()[:300]!r}"
        except Exception as e:  # noqa: BLE001 - connection refused, TLS not up yet, ...
            last = repr(e)
        time.sleep(0.3)
    where = f" (log {proc.log_path}):\n{proc.log_tail()}" if proc else ""
    raise error(f"{name} not ready at {url} within {timeout:.0f}s (last: {last}){where}")
