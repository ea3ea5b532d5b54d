"""The scheduler cache's resident load follows each of our placements from assume to its end.

The cache is fed the objects a watch would deliver (as in test_cache_constraints); the clock is the
cache's injectable one so an assumption can outlive ASSUME_TTL without waiting.
tests/scheduler/test_resident_live.py checks the running scheduler against a real apiserver."""

from __future__ import annotations

import time

import numpy as np

from drs_prom.features import N_FEATURES
from drs_prom.scheduler.watch.cache import ClusterCache
from tests.scheduler.test_feasibility import node, pod

ROW = np.array([0.25, 0.5, 0.0, 0.0, 0.125, 0.0])


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _cache(clock: _Clock | None = None, window: float = 0.0) -> ClusterCache:
    cache = ClusterCache("drs", clock=clock or _Clock(), metric_window_seconds=window)
    cache._on_node_list([node("n1"), node("n2")])
    cache._on_pod_list([])
    return cache


def _assume(cache: ClusterCache, name: str, on: str, row: np.ndarray = ROW) -> str:
    uid = f"uid-{name}"
    cache.assume(uid, on, 100, 64 * 2**20, expected=row)
    return uid


def _on(cache: ClusterCache, name: str) -> np.ndarray:
    return cache.resident.matrix([name])[0]


def test_an_assumed_pod_counts_on_its_node_and_its_confirmed_bind_keeps_it() -> None:
    cache = _cache()
    _assume(cache, "a", "n1")
    _assume(cache, "b", "n1", ROW / 2)
    np.testing.assert_allclose(_on(cache, "n1"), 1.5 * ROW)
    assert not _on(cache, "n2").any()
    cache._on_pod_event("MODIFIED", pod("a", on="n1"))  # the watch sees the bind
    cache._on_pod_event("MODIFIED", pod("a", on="n1"))  # and a status update
    assert len(cache.resident) == 2
    np.testing.assert_allclose(_on(cache, "n1"), 1.5 * ROW)
    cache.assume("uid-c", "n2", 100, 0)  # no expectation given (a caller without one): nothing counted
    assert len(cache.resident) == 2 and not _on(cache, "n2").any()


def test_a_pod_that_ends_is_deleted_or_fails_to_bind_stops_counting() -> None:
    cache = _cache()
    for name in ("done", "failed", "deleted", "refused"):
        _assume(cache, name, "n1")
        if name != "refused":
            cache._on_pod_event("MODIFIED", pod(name, on="n1"))
    assert len(cache.resident) == 4
    cache._on_pod_event("MODIFIED", pod("done", on="n1", phase="Succeeded"))
    assert len(cache.resident) == 3
    cache._on_pod_event("MODIFIED", pod("failed", on="n1", phase="Failed"))
    assert len(cache.resident) == 2
    cache._on_pod_event("DELETED", pod("deleted", on="n1"))
    assert len(cache.resident) == 1
    np.testing.assert_allclose(_on(cache, "n1"), ROW)
    cache.forget("uid-refused")  # the bind failed
    assert len(cache.resident) == 0
    assert np.array_equal(_on(cache, "n1"), np.zeros(N_FEATURES))


def test_a_relist_drops_the_pods_that_vanished_while_the_watch_was_down() -> None:
    cache = _cache()
    _assume(cache, "stays", "n1")
    _assume(cache, "vanished", "n2")
    cache._on_pod_event("MODIFIED", pod("stays", on="n1"))
    cache._on_pod_event("MODIFIED", pod("vanished", on="n2"))
    cache._on_pod_list([pod("stays", on="n1"), pod("someone-elses", on="n2")])
    assert len(cache.resident) == 1
    np.testing.assert_allclose(_on(cache, "n1"), ROW)
    assert not _on(cache, "n2").any()
    # a relist that shows the pod ended drops it too
    cache._on_pod_list([pod("stays", on="n1", phase="Succeeded")])
    assert len(cache.resident) == 0


def test_an_expired_assumption_stops_counting_but_a_confirmed_pod_outlives_the_ttl() -> None:
    clock = _Clock()
    cache = _cache(clock)
    _assume(cache, "never-seen", "n1")
    _assume(cache, "bound", "n2")
    cache._on_pod_event("MODIFIED", pod("bound", on="n2"))
    clock.t += ClusterCache.ASSUME_TTL / 2
    cache.view()  # reads expire old assumptions
    assert len(cache.resident) == 2  # not yet
    clock.t += ClusterCache.ASSUME_TTL
    cache.view()
    assert len(cache.resident) == 1
    assert not _on(cache, "n1").any()
    np.testing.assert_allclose(_on(cache, "n2"), ROW)
    assert "uid-never-seen" not in cache.assumed()


def test_a_pod_that_ran_fades_out_of_the_metrics_and_one_that_never_ran_does_not() -> None:
    cache = _cache(window=600.0)  # long enough that the fade between two reads is tiny
    for name in ("done", "refused", "running"):
        _assume(cache, name, "n1" if name == "done" else "n2")
    cache._on_pod_event("MODIFIED", pod("done", on="n1"))
    before = time.time()
    cache._on_pod_event("MODIFIED", pod("done", on="n1", phase="Succeeded"))
    cache.forget("uid-refused")  # the bind failed
    ended = cache.resident.ended(["n1", "n2"], time.time())
    assert np.all(ended[0] <= ROW) and np.all(ended[0] >= ROW * (1.0 - (time.time() - before) / 600.0))
    assert ended[0][0] > 0 and not ended[1].any()
