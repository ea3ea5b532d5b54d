"""Per-thread CPU (drs_prom.scheduler.thread_cpu), read from the kernel for this process's own threads."""

from __future__ import annotations

import threading
import time

from prometheus_client import CollectorRegistry, generate_latest

from drs_prom.scheduler.metrics import SchedulerMetrics
from drs_prom.scheduler.thread_cpu import ThreadCPUCollector, thread_group, thread_seconds


def _burn(seconds: float, used: list[float], go: threading.Event | None = None) -> None:
    """Spin for ``seconds`` of this thread's own CPU, then record what the thread used (and wait for ``go``)."""
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        sum(range(1000))
    used.append(time.thread_time())
    if go is not None:
        go.wait(30)


def test_pool_threads_count_under_their_pool_and_ended_threads_are_kept():
    collector = ThreadCPUCollector()
    used: list[float] = []
    go = threading.Event()
    workers = [threading.Thread(target=_burn, args=(0.2, used, go), name=f"test-spin-{i}") for i in range(2)]
    for t in workers:
        t.start()
    deadline = time.monotonic() + 60
    while len(used) < 2 and time.monotonic() < deadline:  # both have spun (bounded wait on the condition)
        time.sleep(0.01)
    assert len(used) == 2
    live = collector.totals()["test-spin"]
    # the kernel's clocks of the two threads: at least what each measured of itself, not more than both ever use
    assert sum(used) <= live < sum(used) + 0.5
    go.set()
    for t in workers:
        t.join(30)
    after = collector.totals()
    assert after["test-spin"] == live  # ended: kept as last seen, never lower
    assert collector.totals()["test-spin"] == live


def test_the_scheduler_metrics_serve_it():
    metrics = SchedulerMetrics(CollectorRegistry())
    text = generate_latest(metrics.registry).decode()
    assert 'drs_thread_cpu_seconds_total{thread="MainThread"}' in text


def test_names_and_reads():
    assert thread_group("drs-bind-12") == "drs-bind"
    assert thread_group("reflector-pods") == "reflector-pods"
    assert thread_group("MainThread") == "MainThread"
    t = threading.Thread(target=lambda: None)
    assert thread_seconds(t) is None  # not started: no clock
    me = thread_seconds(threading.current_thread())
    assert me is not None and me > 0
