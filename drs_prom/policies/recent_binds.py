"""Memory of a policy's own recent binds, the load the metrics do not show yet.

Trimaran, crane-scheduler ("hot value") and koordinator (estimated fresh pods) all add
their own recent placements to lagging metrics; without it every pod inside one rate
window herds onto the same node. Load-aware heuristics (baselines, load_aware) and the
learned policy share this one implementation.
"""

from __future__ import annotations

from collections import deque
from itertools import islice, repeat, takewhile

import numpy as np

from drs_prom.features import N_FEATURES
from drs_prom.policies.contract import DecisionContext, PolicyBase


class _Tail:
    """The entries after one time ``now`` as arrays, oldest first, kept from call to call.

    While the scheduler drains a queue, every decision until the next snapshot asks for the binds after the same
    measurement time, and there are more of them at each decision: read from the deque each time, that was a Python
    pass over all of them per decision (quadratic over a burst). Kept here, a decision adds only the binds appended
    since the last one. Anything else that changes the entries after ``now`` (a drop among them, a rebuild, a
    clear, an appended bind not after ``now``) reads them from the deque again.
    """

    def __init__(self) -> None:
        self.now: float | None = None
        self.size = 0
        self.times = np.zeros(0)
        self.slots = np.zeros(0, dtype=np.int64)
        self.rows = np.zeros((0, N_FEATURES))
        self.appends = 0  # the memory's count of appends when the arrays were last brought up to date

    def forget(self) -> None:
        self.now = None

    def dropped(self, t: float) -> None:
        if self.now is not None and t > self.now:
            self.now = None

    def entries(
        self, now: float, deque_: deque[tuple[float, int, np.ndarray]], appends: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(times, node slots, rows) of the entries after ``now`` at the end of ``deque_``, oldest first;
        ``appends``: how many entries were ever appended to it (the ones since the last call are at its end)."""
        new = appends - self.appends
        if self.now == now and new <= len(deque_):
            added = list(islice(reversed(deque_), new))
            if all(e[0] > now for e in added):
                self._extend(added[::-1], appends)
                return self.times[: self.size], self.slots[: self.size], self.rows[: self.size]
        tail = list(takewhile(lambda e: e[0] > now, reversed(deque_)))
        self.now, self.size = now, 0
        self._extend(tail[::-1], appends)
        return self.times[: self.size], self.slots[: self.size], self.rows[: self.size]

    def _extend(self, entries: list[tuple[float, int, np.ndarray]], appends: int) -> None:
        self.appends = appends
        k = len(entries)
        if not k:
            return
        need = self.size + k
        if need > len(self.times):
            grow = max(need, 2 * len(self.times), 64)
            self.times = np.concatenate([self.times[: self.size], np.zeros(grow - self.size)])
            self.slots = np.concatenate([self.slots[: self.size], np.zeros(grow - self.size, dtype=np.int64)])
            self.rows = np.concatenate([self.rows[: self.size], np.zeros((grow - self.size, N_FEATURES))])
        self.times[self.size : need] = [e[0] for e in entries]
        self.slots[self.size : need] = [e[1] for e in entries]
        self.rows[self.size : need] = [e[2] for e in entries]
        self.size = need


class RecentBinds:
    """Load of our own recent placements that the metrics do not show yet (Trimaran's fix for herding).

    A rate over a window of ``w`` seconds shows a load step of L after ``dt`` seconds as
    L * dt / w, so the part still missing is L * (1 - dt / w). Each placement's expected
    load (its ``pod_load`` row) is remembered for ``w`` seconds, keyed by node name.

    The cost of a decision does not grow with the number of remembered binds: placements
    sit in a time-ordered deque and every node keeps running sums of its rows (S) and of
    its rows times their age offset (T), so the faded estimate of a node is
    S * (1 - (now - t0) / w) + T / w; an expiring placement is subtracted once. The sums
    are recomputed from the deque every MAX_REMEMBERED appends and a node's are zeroed
    when it has none left, so float drift never accumulates.
    """

    MAX_REMEMBERED = 10_000
    fade = True
    """False: a bind counts in full until ``w`` has passed (Trimaran's ScheduledPodsCache), not fading out."""

    def __init__(self, window_seconds: float) -> None:
        self.window_seconds = float(window_seconds)
        self._entries: deque[tuple[float, int, np.ndarray]] = deque()  # (t, node slot, row), oldest first
        self._slot: dict[str, int] = {}  # node name -> row of the running sums
        self._sum = np.zeros((0, N_FEATURES))  # S: sum of rows per node
        self._tsum = np.zeros((0, N_FEATURES))  # T: sum of rows * (t - t0) per node
        self._count = np.zeros(0, dtype=np.int64)
        self._t0 = 0.0
        self._ordered = True  # entries' times never decrease (else expiry re-sorts)
        self._appends = 0
        self._changes = 0  # bumped by every change to the entries: the key of ``faded``'s memo
        self._memo: tuple[tuple[str, ...], float, int, tuple[float, bool], np.ndarray] | None = None
        self._last_now = -np.inf
        self._index_key: tuple[str, ...] = ()
        self._index_slots = -1
        self._index = np.zeros(0, dtype=np.int64)
        self._tail = _Tail()

    def __len__(self) -> int:
        return len(self._entries)

    def pending(self, ctx: DecisionContext) -> np.ndarray:
        """Per node of ``ctx``, the load of the remembered binds that ``ctx.load`` does not show, as of the time it
        was measured (``ctx.measured_at``, else ``ctx.now``)."""
        return self.faded(ctx.node_names, ctx.now if ctx.measured_at is None else ctx.measured_at)

    def faded(self, names: tuple[str, ...], now: float) -> np.ndarray:
        """(len(names), N_FEATURES): per node, the remembered rows faded to ``now`` (what is still missing from, or
        for a memory of ended pods still in, a rate over the window)."""
        w = self.window_seconds
        memo = self._memo  # the guides of one decision all ask for the same nodes at the same time: computed once
        if memo is not None and memo[1:4] == (now, self._changes, (w, self.fade)) and memo[0] == names:
            return memo[4].copy()
        n = len(names)
        out = np.zeros((n, N_FEATURES))
        if now < self._last_now:  # time went backwards: a new simulated episode, forget the old one
            self.clear()
        self._last_now = now
        if w <= 0 or not self._entries:
            return out
        self._expire(now)
        if not self._entries:
            return out
        if names != self._index_key or self._index_slots != len(self._slot):
            self._index_key, self._index_slots = names, len(self._slot)
            self._index = np.fromiter(map(self._slot.get, names, repeat(-1)), np.int64, n)
        known = self._index >= 0
        slots = self._index[known]
        if self.fade:
            out[known] = self._sum[slots] * (1.0 - (now - self._t0) / w) + self._tsum[slots] / w
            if self._entries[-1][0] > now:
                self._cap_after(now, known, out)
        else:
            out[known] = self._sum[slots]
        self._memo = (names, now, self._changes, (w, self.fade), out.copy())
        return out

    def _cap_after(self, now: float, known: np.ndarray, out: np.ndarray) -> None:
        """Rows remembered after ``now`` count once, not more: the running sums fade every row by ``(now - t) / w``,
        which is negative for them. Only the newest entries can be after ``now`` (the binds since the snapshot the
        caller's load comes from), so they are taken from the end of the time-ordered deque."""
        times, slots, rows = self._tail.entries(now, self._entries, self._appends)
        where = np.full(len(self._slot), -1, dtype=np.int64)  # node slot -> row of ``out``
        where[self._index[known]] = np.flatnonzero(known)
        # newest first, as the entries are taken from the end: the same order of subtraction whatever was cached
        at = where[slots[::-1]]
        over = rows[::-1] * ((times[::-1] - now) / self.window_seconds)[:, None]
        seen = at >= 0
        np.subtract.at(out, at[seen], over[seen])

    def clear(self) -> None:
        self._changes += 1
        self._tail.forget()
        self._entries.clear()
        self._sum[:] = 0.0
        self._tsum[:] = 0.0
        self._count[:] = 0
        self._ordered = True

    def _expire(self, now: float) -> None:
        if not self._ordered:
            self._rebuild(sorted(self._entries, key=lambda e: e[0]))
        w, entries = self.window_seconds, self._entries
        while entries and (now - entries[0][0] >= w or len(entries) > self.MAX_REMEMBERED):
            self._drop(entries.popleft())

    def _drop(self, entry: tuple[float, int, np.ndarray]) -> None:
        self._changes += 1
        t, slot, row = entry
        self._tail.dropped(t)
        self._count[slot] -= 1
        if self._count[slot] == 0:  # exactly zero again, whatever rounding the sums collected
            self._sum[slot] = 0.0
            self._tsum[slot] = 0.0
        else:
            self._sum[slot] -= row
            self._tsum[slot] -= row * (t - self._t0)

    def _rebuild(self, entries: list[tuple[float, int, np.ndarray]]) -> None:
        """Recompute every sum from the entries (time order restored, t0 rebased)."""
        self._changes += 1
        self._tail.forget()
        self._entries = deque(entries)
        self._t0 = entries[0][0] if entries else 0.0
        self._sum[:] = 0.0
        self._tsum[:] = 0.0
        self._count[:] = 0
        for t, slot, row in entries:
            self._sum[slot] += row
            self._tsum[slot] += row * (t - self._t0)
            self._count[slot] += 1
        self._ordered = True

    def add(self, t: float, name: str, row: np.ndarray) -> None:
        """Remember ``row`` (N_FEATURES float64) on node ``name`` from time ``t``."""
        self._changes += 1
        slot = self._slot.get(name)
        if slot is None:
            slot = self._slot[name] = len(self._slot)
            if slot >= len(self._sum):
                grow = max(16, len(self._sum))
                self._sum = np.vstack([self._sum, np.zeros((grow, N_FEATURES))])
                self._tsum = np.vstack([self._tsum, np.zeros((grow, N_FEATURES))])
                self._count = np.concatenate([self._count, np.zeros(grow, dtype=np.int64)])
        if not self._entries:
            self._t0 = t
        elif t < self._entries[-1][0]:
            self._ordered = False
        self._entries.append((t, slot, row))
        self._sum[slot] += row
        self._tsum[slot] += row * (t - self._t0)
        self._count[slot] += 1
        self._appends += 1
        if self._appends % self.MAX_REMEMBERED == 0:  # amortised O(1): no drift over long runs
            self._rebuild(sorted(self._entries, key=lambda e: e[0]))

    def record(self, ctx: DecisionContext, node: int) -> None:
        """Record that ``node`` was bound for ``ctx``'s pod, whoever chose it, at ``ctx.now``."""
        if self.window_seconds <= 0 or not 0 <= node < len(ctx.nodes) or not ctx.feasible[node]:
            return
        self.add(
            float(ctx.now), ctx.nodes[node].name, np.array(self.row(ctx, node), dtype=np.float64).reshape(N_FEATURES)
        )

    def row(self, ctx: DecisionContext, node: int) -> np.ndarray:
        """What is remembered of a bind of ctx's pod to ``node``: its expected load there (N_FEATURES values)."""
        return np.asarray(ctx.pod_load[node], dtype=np.float64)


class RemembersRecentBinds(PolicyBase):
    """For policies that add their own not-yet-visible binds to the metrics (RecentBinds).

    ``metric_window_seconds``: the rate window behind ctx.load, always given by whoever
    builds the policy (drs_prom.registry.make_policy: ``prometheus.window`` of the settings,
    never shorter than a simulated scenario's metric lag); there is no default to drift from.
    """

    recent: RecentBinds

    def __init__(self, metric_window_seconds: float) -> None:
        self.recent = RecentBinds(metric_window_seconds)

    @property
    def metric_window_seconds(self) -> float:
        return self.recent.window_seconds

    @metric_window_seconds.setter
    def metric_window_seconds(self, value: float) -> None:
        self.recent.window_seconds = float(value)

    def bound(self, ctx: DecisionContext, node: int) -> None:
        """Remember the bind: the metrics show it only a rate window later."""
        self.recent.record(ctx, node)
