"""RecentBinds' running sums give exactly the definition's estimate: the sum over
remembered placements younger than the window of row * (1 - age / w)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from drs_prom.policies.contract import DecisionContext
from drs_prom.policies.recent_binds import RecentBinds
from drs_prom.types import NodeInfo, PodRequest


def _ctx(names: list[str], now: float, pod_load: np.ndarray) -> DecisionContext:
    return DecisionContext(
        pod=PodRequest(name="p"),
        nodes=[NodeInfo(n, 4000, 8 << 30) for n in names],
        feasible=np.ones(len(names), bool),
        load=np.zeros((len(names), 6), np.float32),
        pod_load=pod_load,
        now=now,
    )


def _expected(log: list[tuple[float, str, np.ndarray]], names: list[str], now: float, w: float, fade: bool):
    out = np.zeros((len(names), 6))
    for t, name, row in log:
        if now - t < w and name in names:
            out[names.index(name)] += row * (max(0.0, 1.0 - (now - t) / w) if fade else 1.0)
    return out


@pytest.mark.parametrize("fade", [True, False])
def test_running_sums_match_the_definition_over_a_long_random_run(fade: bool) -> None:
    rng = np.random.default_rng(3)
    all_names = [f"n{i}" for i in range(12)]
    w = 7.5
    memory = RecentBinds(w)
    memory.fade = fade
    memory.MAX_REMEMBERED = 50  # small: the periodic rebuild and the size cap both happen
    log: list[tuple[float, str, np.ndarray]] = []
    now = 1.7e9  # wall-clock seconds, as the scheduler passes them: the sums must not lose precision
    for step in range(3000):
        now += float(rng.exponential(0.05))
        names = list(rng.choice(all_names, size=int(rng.integers(3, 12)), replace=False))
        pod_load = rng.uniform(0, 0.3, (len(names), 6))
        ctx = _ctx(names, now, pod_load)
        got = memory.pending(ctx)
        log = [e for e in log if now - e[0] < w][-memory.MAX_REMEMBERED :]
        np.testing.assert_allclose(got, _expected(log, names, now, w, fade), rtol=1e-9, atol=1e-12)
        node = int(rng.integers(len(names)))
        memory.record(ctx, node)
        log.append((now, names[node], pod_load[node].astype(np.float64)))
        if step % 500 == 250:  # a long pause: everything expires
            now += w * 2
    memory.pending(_ctx(all_names, now, np.zeros((len(all_names), 6))))
    assert 0 < len(memory) <= memory.MAX_REMEMBERED


def test_binds_fade_to_the_time_the_load_was_measured_and_later_ones_count_in_full() -> None:
    """The scheduler's load comes from a snapshot refreshed every few seconds: a bind made after it is missing from
    that load in full, one made before it only in part, whatever ``now`` is."""
    rng = np.random.default_rng(5)
    names = [f"n{i}" for i in range(6)]
    w = 5.0
    memory = RecentBinds(w)
    memory.MAX_REMEMBERED = 10_000
    log: list[tuple[float, str, np.ndarray]] = []
    now, measured = 1.7e9, 1.7e9
    after_seen = 0
    for _ in range(2000):
        now += float(rng.exponential(0.05))
        if rng.random() < 0.05:  # a refresh: a snapshot evaluated a moment ago
            measured = max(measured, now - float(rng.uniform(0.0, 0.3)))
        pod_load = rng.uniform(0, 0.3, (len(names), 6))
        ctx = dataclasses.replace(_ctx(names, now, pod_load), measured_at=measured)
        got = memory.pending(ctx)
        log = [e for e in log if measured - e[0] < w]
        want = np.zeros((len(names), 6))
        for t, name, row in log:
            want[names.index(name)] += row * min(1.0, 1.0 - (measured - t) / w)
        after_seen += any(t > measured for t, _, _ in log)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
        got += 1.0  # the guides of one decision ask again: each gets its own copy of the same answer
        np.testing.assert_allclose(memory.pending(ctx), want, rtol=1e-9, atol=1e-12)
        node = int(rng.integers(len(names)))
        memory.record(ctx, node)  # remembered at ``now``, the bind's own time
        log.append((now, names[node], pod_load[node].astype(np.float64)))
    assert after_seen > 1000  # most decisions had binds newer than their snapshot


def test_time_going_backwards_starts_over() -> None:
    memory = RecentBinds(10.0)
    load = np.full((2, 6), 0.2)
    memory.record(_ctx(["a", "b"], 100.0, load), 0)
    assert memory.pending(_ctx(["a", "b"], 101.0, load))[0, 0] == pytest.approx(0.2 * 0.9)
    assert memory.pending(_ctx(["a", "b"], 5.0, load)).sum() == 0.0
    assert len(memory) == 0


def test_binds_after_the_snapshot_kept_between_decisions_read_as_from_the_deque_to_the_bit() -> None:
    """A memory asked at every decision keeps the binds after the snapshot's time from one decision to the next; its
    answer equals, to the bit, that of a twin given the same binds that reads them from its deque at every call,
    across refreshes, expiry, binds out of time order, a periodic rebuild and a node set that changes."""
    rng = np.random.default_rng(11)
    all_names = [f"n{i}" for i in range(9)]
    w = 4.0
    kept, twin = RecentBinds(w), RecentBinds(w)
    kept.MAX_REMEMBERED = twin.MAX_REMEMBERED = 50  # the size cap drops binds after the snapshot; rebuilds happen
    now = measured = 1.7e9
    after = 0
    for step in range(3000):
        now += float(rng.exponential(0.03))
        if rng.random() < 0.02:  # a refresh
            measured = max(measured, now - float(rng.uniform(0.0, 0.3)))
        if step % 700 == 350:  # a pause: the window passes
            now += 2 * w
        t = now - float(rng.uniform(0.0, 0.5)) if rng.random() < 0.02 else now  # now and then out of order
        names = all_names if rng.random() < 0.8 else list(rng.choice(all_names, size=5, replace=False))
        pod_load = rng.uniform(0, 0.3, (len(names), 6))
        ctx = dataclasses.replace(_ctx(names, t, pod_load), measured_at=measured)
        twin._tail.forget()  # the twin reads the binds after the snapshot from its deque every time
        got, want = kept.pending(ctx), twin.pending(ctx)
        assert got.tobytes() == want.tobytes(), step
        after += kept._tail.size > 0  # binds after the snapshot were read from the kept arrays
        node = int(rng.integers(len(names)))
        kept.record(ctx, node)
        twin.record(ctx, node)
    assert after > 1000
