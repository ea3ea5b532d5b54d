"""The binding cycle's writes from a child process (scheduler.write_process), against the real apiserver.

The child gets only TLS files and the host; the ServiceAccount's token travels with each
request. Killing the child (SIGKILL, a fault a real part produces on demand) must not leave
a pod pending: its binds fail, are retried, and every later write is made in-process.
"""

from __future__ import annotations

import os
import signal

import psutil
import pytest

from drs_prom.scheduler.write.write_process import usable_cpus, wanted
from tests.scheduler.conftest import list_pods, pod_body, scheduled_message
from tests.waiting import wait_for

# the child is started only where it has a core of its own
needs_two_cpus = pytest.mark.skipif(usable_cpus() < 2, reason="the write process needs 2 usable CPUs")


def bound(core, ns: str) -> dict[str, str]:
    return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in list_pods(core, ns) if p["spec"].get("nodeName")}


@pytest.mark.integration
@needs_two_cpus
def test_binds_and_events_go_through_the_child_which_ends_with_the_scheduler(core, ns, fake_nodes, make_scheduler):
    fake_nodes("wp-a")
    fake_nodes("wp-b")
    sched = make_scheduler()
    remote = sched._remote
    assert remote is not None and remote.alive
    child = psutil.Process(remote.pid)
    assert child.ppid() == os.getpid() and "drs_prom.scheduler.write.write_child" in " ".join(child.cmdline())
    for i in range(6):
        core.create_namespaced_pod(ns, pod_body(f"p{i}"), _preload_content=False)
    wait_for(lambda: len(bound(core, ns)) == 6, 60, "6 pods bound")
    assert set(bound(core, ns).values()) <= {"wp-a", "wp-b"}
    msg = scheduled_message(core, ns, "p0")
    assert msg.startswith(f"Successfully assigned {ns}/p0 to ")
    assert remote.alive  # every write went through the child; none fell back
    sched.stop()
    assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
    assert not remote.alive


@pytest.mark.integration
@needs_two_cpus
def test_a_killed_child_leaves_no_pod_pending(core, ns, fake_nodes, make_scheduler, caplog):
    fake_nodes("wk-a")
    sched = make_scheduler()
    remote = sched._remote
    core.create_namespaced_pod(ns, pod_body("before"), _preload_content=False)
    wait_for(lambda: "before" in bound(core, ns), 60, "first pod bound through the child")
    os.kill(remote.pid, signal.SIGKILL)
    wait_for(lambda: not remote.alive, 30, "the scheduler sees the child gone")
    # the flag drops before the log line is written
    wait_for(lambda: any("write process ended" in r.getMessage() for r in caplog.records), 10, "the log line")
    for i in range(4):
        core.create_namespaced_pod(ns, pod_body(f"after{i}"), _preload_content=False)
    wait_for(lambda: len(bound(core, ns)) == 5, 60, "later pods bound in-process")
    assert scheduled_message(core, ns, "after0")  # the in-process write posted its event too


@pytest.mark.integration
def test_write_process_off_writes_in_process(core, ns, fake_nodes, make_scheduler):
    fake_nodes("wo-a")
    sched = make_scheduler(overrides={"scheduler.write_process": False})
    assert sched._remote is None
    core.create_namespaced_pod(ns, pod_body("solo"), _preload_content=False)
    assert wait_for(lambda: bound(core, ns).get("solo"), 60, "bound in-process") == "wo-a"


@pytest.mark.integration
@needs_two_cpus
def test_a_stuck_child_is_killed_and_writing_goes_on_in_process(core, ns, fake_nodes, make_scheduler, caplog):
    """SIGSTOP: the child neither answers nor exits. The bind waiting on it times out (its 15 s
    request timeout + 5 s), the child is killed, and that pod and later ones are bound in-process."""
    fake_nodes("ws-a")
    sched = make_scheduler()
    remote = sched._remote
    child = psutil.Process(remote.pid)
    os.kill(remote.pid, signal.SIGSTOP)
    try:
        core.create_namespaced_pod(ns, pod_body("stalled"), _preload_content=False)
        wait_for(lambda: not remote.alive, 60, "the stuck child abandoned")
        wait_for(lambda: any("write process stuck" in r.getMessage() for r in caplog.records), 10, "the log line")
        core.create_namespaced_pod(ns, pod_body("later"), _preload_content=False)
        wait_for(lambda: {"stalled", "later"} <= set(bound(core, ns)), 60, "both pods bound in-process")
        assert wait_for(lambda: not child.is_running() or child.status() == psutil.STATUS_ZOMBIE, 30, "child gone")
    finally:
        if child.is_running():
            child.kill()


def test_usable_cpus_is_the_affinity_lowered_by_a_cgroup_cpu_quota(tmp_path):
    affinity = len(os.sched_getaffinity(0))
    assert usable_cpus(tmp_path) == affinity  # no cpu.max: the affinity alone
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert usable_cpus(tmp_path) == affinity
    (tmp_path / "cpu.max").write_text("150000 100000\n")  # a 1.5 CPU limit
    assert usable_cpus(tmp_path) == min(affinity, 1.5)


def test_the_child_is_wanted_only_when_configured_and_given_a_second_cpu():
    assert wanted(True, 2.0) and wanted(True, 16.0)
    assert not wanted(True, 1.5)  # one core: the child's hand-overs would only add work to it
    assert not wanted(False, 16.0)
