"""CPU seconds per thread of the scheduler process, by thread name, for its ``/metrics``.

Why: the scheduler is one process of many threads (scheduling, binds, events, the watches, the journal's writer, the
usage history's reads, the node state's refresh) sharing one GIL, and ``process_cpu_seconds_total`` says only
what they cost together. Which of them spends the CPU a pod costs is the first question when the scheduler falls
behind a burst; a sampling profiler answers it with its own distortions (py-spy's ``--gil`` attributes a thread's
wait for the GIL to the line it waits on). The kernel keeps each thread's CPU time exactly, and
``time.pthread_getcpuclockid`` reads it for a Python thread, at no cost between scrapes.

Threads of one pool (``drs-bind-0``, ``drs-bind-1``, ...) count under the pool's name (``drs-bind``). A thread that
ended keeps what it had used at the last scrape that saw it, so the counter never goes down (the CPU it used after
that scrape is not counted). Where the platform has no per-thread CPU clock the family is empty.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

_POOL_SUFFIX = re.compile(r"-\d+$")


def thread_group(name: str) -> str:
    """The label a thread counts under: its name without a pool's ``-<n>`` suffix."""
    return _POOL_SUFFIX.sub("", name)


def thread_seconds(thread: threading.Thread) -> float | None:
    """CPU seconds ``thread`` has used, None where it has ended or the platform cannot say."""
    ident = thread.ident
    if ident is None or not hasattr(time, "pthread_getcpuclockid"):
        return None
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(ident))
    except (OSError, ValueError):  # ended between enumerate() and the read
        return None


class ThreadCPUCollector(Collector):
    """``drs_thread_cpu_seconds_total{thread}``, read from the kernel at each scrape."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[int, tuple[str, float]] = {}  # thread ident -> (group, seconds at the last scrape)
        self._ended: dict[str, float] = {}  # group -> seconds of its threads that ended

    def totals(self) -> dict[str, float]:
        """group -> CPU seconds of its threads, live and ended."""
        with self._lock:
            now: dict[int, tuple[str, float]] = {}
            for t in threading.enumerate():
                seconds = thread_seconds(t)
                if seconds is not None and t.ident is not None:
                    now[t.ident] = (thread_group(t.name), seconds)
            for ident, (group, seconds) in self._last.items():
                later = now.get(ident)
                if later is None or later[0] != group or later[1] < seconds:  # ended (its ident maybe reused)
                    self._ended[group] = self._ended.get(group, 0.0) + seconds
            self._last = now
            out = dict(self._ended)
            for group, seconds in now.values():
                out[group] = out.get(group, 0.0) + seconds
            return out

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "drs_thread_cpu_seconds",
            "CPU seconds used by the scheduler's threads, by thread name (a pool's threads under the pool's name).",
            labels=["thread"],
        )
        for group, seconds in sorted(self.totals().items()):
            family.add_metric([group], seconds)
        yield family
