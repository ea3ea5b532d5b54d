"""The garbage collector's pauses, timed, and the start-up heap kept out of them.

Why: CPython's cyclic collector re-scans every tracked container object in each full
collection, with the GIL held, so no pod is scheduled, bound or watched meanwhile. Most of the
scheduler's heap is made at start-up (the kubernetes client, pandas, the model; about 84 000
objects, a 37 ms full collection on the benchmark machine, and 350 000 / 150-250 ms while the
model was still read through TensorFlow) and lives as long as the process.
``freeze_startup_heap`` (gc.freeze, made for this) moves them to the permanent generation once
start-up is done; they are still freed by reference counting, only no longer scanned. ``drs_python_gc_pause_seconds_total`` shows what collections cost, as
Go's ``go_gc_duration_seconds`` does for kube-scheduler; prometheus_client's own GC collector
counts collections but does not time them.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

_GENERATIONS = (0, 1, 2)
_pause = dict.fromkeys(_GENERATIONS, 0.0)
_count = dict.fromkeys(_GENERATIONS, 0)
_started: list[float] = []  # a collection never nests, but threads take turns: one stack is enough
_lock = threading.Lock()
_installed = False
_timing = True  # off during freeze_startup_heap's own collection: start-up, not a pause while scheduling


def _on_gc(phase: str, info: dict[str, Any]) -> None:
    if not _timing:
        return
    if phase == "start":
        _started.append(time.perf_counter())
    elif _started:
        gen = int(info.get("generation", 2))
        _pause[gen] = _pause.get(gen, 0.0) + time.perf_counter() - _started.pop()
        _count[gen] = _count.get(gen, 0) + 1


def install() -> None:
    """Time every collection from now on (once per process, whoever asks)."""
    global _installed
    with _lock:
        if not _installed:
            gc.callbacks.append(_on_gc)
            _installed = True


def pauses() -> dict[int, tuple[int, float]]:
    """generation -> (collections, seconds paused) since ``install``."""
    return {g: (_count.get(g, 0), _pause.get(g, 0.0)) for g in _GENERATIONS}


def freeze_startup_heap() -> int:
    """Collect once (not counted as a pause), then move every object alive now out of future
    collections; returns how many."""
    global _timing
    _timing = False
    try:
        gc.collect()
    finally:
        _timing = True
    gc.freeze()
    return gc.get_freeze_count()


class GCPauseCollector(Collector):
    def collect(self) -> Iterator[CounterMetricFamily]:
        seconds = CounterMetricFamily(
            "drs_python_gc_pause_seconds",
            "Time the garbage collector held the process (GIL included), by generation.",
            labels=["generation"],
        )
        runs = CounterMetricFamily(
            "drs_python_gc_timed_collections",
            "Collections timed by drs_python_gc_pause_seconds.",
            labels=["generation"],
        )
        for gen, (n, s) in pauses().items():
            seconds.add_metric([str(gen)], s)
            runs.add_metric([str(gen)], n)
        yield seconds
        yield runs
