"""Everything the testbed starts is stopped: on SIGTERM (as on Ctrl-C) through handle_termination + stop_all,
and by the kernel (PR_SET_PDEATHSIG) when the testbed itself is SIGKILLed and no Python code runs."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPT = """
import signal, sys, time
from pathlib import Path
from drs_prom.testbed.process import ManagedProcess, handle_termination, stop_all
# as started from a terminal: a non-interactive shell starts background jobs with SIGINT ignored, and Python
# then never installs its Ctrl-C handler, so SIGINT would reach nothing (the CI runner may be such a job)
signal.signal(signal.SIGINT, signal.default_int_handler)
with handle_termination():
    try:
        p = ManagedProcess("sleeper", ["sleep", "300"], Path(sys.argv[1]))
        print(p.pid, flush=True)
        time.sleep(300)
    finally:
        stop_all()
"""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _start(tmp_path: Path) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "sleeper.log")], stdout=subprocess.PIPE, text=True
    )
    child = int(proc.stdout.readline())
    assert _running(child)
    return proc, child


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _running(pid):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and PR_SET_PDEATHSIG")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_terminating_the_testbed_stops_its_children(tmp_path, sig):
    proc, child = _start(tmp_path)
    try:
        proc.send_signal(sig)
        proc.wait(timeout=30)
        assert _gone_within(child, 10)
    finally:  # never leave them behind, even when the test fails
        proc.kill()
        if _running(child):
            os.kill(child, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and PR_SET_PDEATHSIG")
def test_a_killed_testbed_still_takes_its_children_down(tmp_path):
    proc, child = _start(tmp_path)
    proc.kill()
    proc.wait(timeout=30)
    ok = _gone_within(child, 10)
    if not ok:  # never leave it behind, even when the assertion fails
        os.kill(child, signal.SIGKILL)
    assert ok


def test_a_child_started_from_a_short_lived_thread_outlives_the_thread(tmp_path):
    """PR_SET_PDEATHSIG fires when the creating thread ends; a fault script restarts Prometheus or the
    apiserver from its own thread, which must not take the restarted process down when it finishes."""
    import threading

    from drs_prom.testbed.process import ManagedProcess

    made: list[ManagedProcess] = []
    t = threading.Thread(target=lambda: made.append(ManagedProcess("s", ["sleep", "60"], tmp_path / "s.log")))
    t.start()
    t.join()
    try:
        time.sleep(0.5)
        assert made[0].alive()
    finally:
        made[0].stop()
    assert not made[0].alive()


def test_free_ports_are_outside_the_ephemeral_range_bindable_and_never_repeated():
    """Outgoing connections take their local port from the ephemeral range, so a port chosen there can be gone
    before the server binds it (or a client probing the address can connect to itself on it)."""
    import socket

    from drs_prom.testbed.process import LOOPBACK, _ephemeral_range, free_port

    low, high = _ephemeral_range()
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)
    assert all(not (low <= p <= high) for p in ports)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, ports[-1]))
        s.listen()
