"""Which pod of each hot node to move, within the budgets, and only where its replacement would land better.

For every hot node, most loaded first, the eligible pods (drs_prom.moves.eligibility) are tried in the order of the
relief their move gives the node: how far its bottleneck share falls once the pod's stored usage (the mean of its
per-pod series over the window) is taken off. A node is left alone when moving ``max_moves_to_cool`` of its movable
pods would still leave it above ``hot_above``: its heat is load nothing may move, and moving pods off it would only
spread it. A pod is moved only when

- its owner has not been moved within ``cooldown_seconds`` (nor already in this round), and the round's budgets per
  node, per namespace and for the cluster are not spent;
- its scheduler would not simply fill the room it frees again (drs_prom.moves.refill: a scheduler that places by
  requests, kube-scheduler, sends new pods to the requests it frees; with ``refill_aware`` its pod moves only if its
  usage per request is above the cluster's);
- the filters let its replacement go to some node other than its own on which the pod's usage keeps that node's
  bottleneck ``margin`` below ``hot_above`` and below the hot node's: a clearly better node exists;
- the policy of the scheduler that owns the pod (the placer: drs-prom's model for its pods, kube-default for
  kube-scheduler's), asked where the replacement would go with the pod gone, picks such a node: not the hot node
  itself (the replacement would land back) and not a node that is no better.

Each accepted move updates the plan's view of the nodes' load, so the next one sees the cluster as it will be; so do
the moves still under way from earlier rounds (a surge whose replacement is starting): a node they bring to
``hot_above`` or below is left to them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from drs_prom.config import RebalanceSettings
from drs_prom.features import N_FEATURES
from drs_prom.moves.eligibility import PodFacts, skip_reason
from drs_prom.moves.hot import bottlenecks, usage_share
from drs_prom.moves.refill import refilled, usage_per_request

COOLDOWN, BUDGET_NODE, BUDGET_NAMESPACE, BUDGET_CLUSTER = (
    "cooldown",
    "budget_node",
    "budget_namespace",
    "budget_cluster",
)
FUTILE, REFILLS, RELIEVED = "futile", "refills", "relieved"
NO_USAGE, NO_RELIEF, NO_FEASIBLE_NODE, NO_BETTER_NODE, LANDS_BACK, NOT_BETTER = (
    "no_usage",
    "no_relief",
    "no_feasible_node",
    "no_better_node",
    "lands_back",
    "not_better",
)
PLAN_REASONS: tuple[str, ...] = (
    RELIEVED,
    FUTILE,
    REFILLS,
    COOLDOWN,
    BUDGET_NODE,
    BUDGET_NAMESPACE,
    BUDGET_CLUSTER,
    NO_USAGE,
    NO_RELIEF,
    NO_FEASIBLE_NODE,
    NO_BETTER_NODE,
    LANDS_BACK,
    NOT_BETTER,
)
"""Why an eligible pod on a hot node was not moved this round (the metrics' ``reason`` label)."""

MAX_TRIES_PER_NODE = 4
"""Pods of one hot node asked about (the placer runs the filters and a policy for each), best relief first."""


@dataclass(frozen=True)
class Candidate:
    """A running pod on a node of the plan's view."""

    facts: PodFacts
    node: int
    """Index of its node in the view."""
    usage: np.ndarray
    """(N_FEATURES,) its stored usage over the window, absolute units (cores, bytes, bytes/s); NaN: not known."""
    requests: np.ndarray | None = None
    """(N_FEATURES,) its requests in the units each signal is counted against (drs_prom.moves.refill.request_units);
    None: it requests nothing."""
    placed_by_requests: bool = False
    """The scheduler that places its replacement scores requests, not load (kube-scheduler's default scoring)."""


@dataclass(frozen=True)
class Placement:
    """Where the scheduler that owns a pod would put its replacement."""

    node: int
    """The node it would choose (-1: none would take it)."""
    feasible: np.ndarray
    """(n,) where the filters let the replacement go, the pod's own node (with the pod gone) included."""


Placer = Callable[[Candidate, np.ndarray, Sequence["Move"]], Placement]
"""``place(candidate, shares, planned)``: where the owner's scheduler would put the candidate's replacement, on the
cluster with the candidate gone from its node and the moves ``planned`` before it in this round made (their pods
gone, their replacements on their targets); ``shares`` (n, N_FEATURES) is the plan's view of the nodes' load then."""


@dataclass(frozen=True)
class Move:
    """A pod to evict, and what the plan expects of it (bottleneck shares of capacity)."""

    pod: PodFacts
    source: str
    target: str
    """Where the owner's scheduler is expected to put the replacement (it decides; this is the prediction)."""
    source_before: float
    source_after: float
    target_after: float
    usage: tuple[float, ...]

    def describe(self) -> str:
        """One line with the numbers (the Event's message, the log)."""
        return (
            f"node {self.source} hot ({100 * self.source_before:.0f}% of its capacity on its busiest signal); "
            f"moving this pod should leave it at {100 * self.source_after:.0f}% and its replacement is expected on "
            f"{self.target} at {100 * self.target_after:.0f}%"
        )


@dataclass(frozen=True)
class UnderWay:
    """A move of an earlier round not made yet: its replacement is starting on ``target`` while the pod still runs
    on ``source`` (indices in the plan's view; ``target`` -1: not known)."""

    source: int
    target: int
    usage: np.ndarray
    """(N_FEATURES,) the pod's stored usage over the window, absolute units; NaN: not known (then not counted)."""


@dataclass
class Plan:
    """What one round decided: the moves, in the order they should be made, and why other pods were not moved."""

    hot: frozenset[str]
    moves: list[Move] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)


@dataclass
class Cooldowns:
    """When each owner last had a pod moved (kept across rounds by the caller)."""

    moved_at: dict[str, float] = field(default_factory=dict)

    def cooling(self, owner: str, now: float, seconds: float) -> bool:
        at = self.moved_at.get(owner)
        return at is not None and now - at < seconds

    def record(self, owner: str, now: float) -> None:
        self.moved_at[owner] = now

    def forget(self, now: float, seconds: float) -> None:
        """Drop the owners whose cool-down is over (the map stays as small as the recent moves)."""
        for owner in [o for o, at in self.moved_at.items() if now - at >= seconds]:
            del self.moved_at[owner]


def relief(shares: np.ndarray, used: np.ndarray) -> float:
    """How far a node's bottleneck share falls when ``used`` (its share of this node, N_FEATURES) goes."""
    before = float(np.max(shares))
    return before - float(np.max(np.maximum(shares - used, 0.0)))


def plan(
    names: Sequence[str],
    shares: np.ndarray,
    capacity: np.ndarray,
    hot: frozenset[str],
    candidates: Sequence[Candidate],
    settings: RebalanceSettings,
    cooldowns: Cooldowns,
    now: float,
    place: Placer,
    under_way: Sequence[UnderWay] = (),
    peaks: np.ndarray | None = None,
) -> Plan:
    """This round's moves (module docstring). ``shares`` (n, N_FEATURES): the nodes' load over the window as shares
    of their own capacity (drs_prom.moves.hot); ``capacity`` (n, N_FEATURES): each node's capacity in the units of
    the pods' usage; ``candidates``: every running pod (those on hot nodes may move; all of them tell the cluster's
    usage per request); ``under_way``: moves of earlier rounds not yet made (their pods are not candidates);
    ``peaks`` (n, N_FEATURES): the nodes' load at a higher quantile over the window (``target_quantile``), which a
    target must have room at (None: ``shares``). Nothing is changed but the plan's own copies of the load; the caller
    records the cool-downs of the moves it makes."""
    view = np.array(shares, dtype=np.float64).reshape(len(names), N_FEATURES)
    cap = np.asarray(capacity, dtype=np.float64).reshape(len(names), N_FEATURES)
    busy = view.copy() if peaks is None else np.array(peaks, dtype=np.float64).reshape(len(names), N_FEATURES)
    relieving = set()
    for w in under_way:
        if not np.isfinite(w.usage).all():
            continue
        _shift(view, cap, w.source, w.target, w.usage)
        _shift(busy, cap, w.source, w.target, w.usage)
        relieving.add(w.source)
    out = Plan(hot=hot)
    index = {n: i for i, n in enumerate(names)}
    by_node: dict[int, list[Candidate]] = {}
    rate = _refill_rate(candidates, settings)
    for c in candidates:
        if names[c.node] not in hot:
            continue
        reason = skip_reason(c.facts, settings)
        if reason:
            out.skipped[reason] += 1
            continue
        if rate is not None and _refills(c, view[c.node], cap[c.node], rate):
            out.skipped[REFILLS] += 1
            continue
        by_node.setdefault(c.node, []).append(c)
    per_namespace: Counter[str] = Counter()
    owners: set[str] = set()
    peak = bottlenecks(view)
    order = sorted((index[h] for h in hot if h in index), key=lambda i: (-float(np.nan_to_num(peak[i])), names[i]))
    for h in order:
        pods = by_node.get(h, [])
        moved = 0
        if h in relieving and float(np.max(view[h])) <= settings.hot_above:
            out.skipped[RELIEVED] += len(pods)
            continue
        ranked = sorted(pods, key=lambda c: (-_relief(view, cap, c), c.facts.key))
        if not _rescuable(view[h], cap[h], ranked, settings):
            out.skipped[FUTILE] += len(ranked)
            continue
        for tries, c in enumerate(ranked):
            if len(out.moves) >= settings.max_per_interval:
                out.skipped[BUDGET_CLUSTER] += len(ranked) - tries
                break
            if moved >= settings.max_per_node:
                out.skipped[BUDGET_NODE] += len(ranked) - tries
                break
            if tries >= MAX_TRIES_PER_NODE:
                break
            if moved and float(np.max(view[h])) < settings.cool_below:
                break  # this round's moves cool it: no more
            why = _check(c, names, view, busy, cap, settings, cooldowns, now, owners, per_namespace, place, out.moves)
            if isinstance(why, str):
                out.skipped[why] += 1
                continue
            move, target = why, index[why.target]
            _shift(view, cap, h, target, c.usage)
            _shift(busy, cap, h, target, c.usage)
            out.moves.append(move)
            owners.add(c.facts.owner)
            per_namespace[c.facts.namespace] += 1
            moved += 1
    return out


def _shift(load: np.ndarray, cap: np.ndarray, source: int, target: int, usage: np.ndarray) -> None:
    """Move ``usage`` (absolute units) from node ``source`` to node ``target`` (-1: not known) of ``load`` (shares)."""
    load[source] = np.maximum(load[source] - usage_share(usage, cap[source]), 0.0)
    if target >= 0:
        load[target] = load[target] + usage_share(usage, cap[target])


def _refill_rate(candidates: Sequence[Candidate], settings: RebalanceSettings) -> np.ndarray | None:
    """The cluster's usage per request (drs_prom.moves.refill) over the candidates a scheduler places where it
    chooses and that request something (not a DaemonSet's pods, bound to their nodes, nor mirror pods, which no
    scheduler places), when the rule applies to some candidate; None when it applies to none."""
    if not settings.refill_aware or not any(c.placed_by_requests for c in candidates):
        return None
    placed = (c for c in candidates if c.facts.owner_kind != "DaemonSet" and not c.facts.mirror)
    return usage_per_request((c.usage, c.requests) for c in placed if c.requests is not None)


def _refills(c: Candidate, shares: np.ndarray, capacity: np.ndarray, rate: np.ndarray) -> bool:
    """Whether ``c``'s scheduler places by requests and would fill the room its move frees with as much load."""
    if not c.placed_by_requests or c.requests is None or not np.isfinite(c.usage).all():
        return False
    return refilled(shares, capacity, c.usage, c.requests, rate)


def _rescuable(shares: np.ndarray, capacity: np.ndarray, ranked: Sequence[Candidate], s: RebalanceSettings) -> bool:
    """Whether moving at most ``max_moves_to_cool`` of the node's movable pods (best relief first) brings its
    bottleneck to ``hot_above`` or below."""
    left = np.array(shares, dtype=np.float64)
    for c in [c for c in ranked if np.isfinite(c.usage).all()][: s.max_moves_to_cool]:
        left = np.maximum(left - usage_share(c.usage, capacity), 0.0)
        if float(np.max(left)) <= s.hot_above:
            return True
    return False


def _relief(view: np.ndarray, cap: np.ndarray, c: Candidate) -> float:
    if not np.isfinite(c.usage).all():
        return -np.inf
    return relief(view[c.node], usage_share(c.usage, cap[c.node]))


def _check(
    c: Candidate,
    names: Sequence[str],
    view: np.ndarray,
    busy: np.ndarray,
    cap: np.ndarray,
    settings: RebalanceSettings,
    cooldowns: Cooldowns,
    now: float,
    owners: set[str],
    per_namespace: Counter[str],
    place: Placer,
    planned: Sequence[Move],
) -> Move | str:
    """The move of ``c``, or why not (a PLAN_REASONS entry)."""
    if c.facts.owner in owners or cooldowns.cooling(c.facts.owner, now, settings.cooldown_seconds):
        return COOLDOWN
    if per_namespace[c.facts.namespace] >= settings.max_per_namespace:
        return BUDGET_NAMESPACE
    if not np.isfinite(c.usage).all():
        return NO_USAGE
    h = c.node
    before = float(np.max(view[h]))
    used_src = usage_share(c.usage, cap[h])
    gain = relief(view[h], used_src)
    if gain <= 0.0:
        return NO_RELIEF
    after = bottlenecks(busy + usage_share(c.usage, cap))  # every node's busier moments with the pod added to it
    bar = min(settings.hot_above, before) - settings.margin
    roomy = after <= bar
    roomy[h] = False
    if not roomy.any():
        return NO_BETTER_NODE  # no node has the room, whatever the filters say: the placer is not asked
    gone = view.copy()
    gone[h] = np.maximum(view[h] - used_src, 0.0)
    where = place(c, gone, planned)
    feasible = np.asarray(where.feasible, dtype=bool).copy()
    feasible[h] = False
    if not feasible.any():
        return NO_FEASIBLE_NODE
    good = feasible & roomy
    if not good.any():
        return NO_BETTER_NODE
    if where.node == h:
        return LANDS_BACK
    if where.node < 0 or not good[where.node]:
        return NOT_BETTER
    return Move(
        pod=c.facts,
        source=names[h],
        target=names[where.node],
        source_before=before,
        source_after=float(np.max(gone[h])),
        target_after=float(after[where.node]),
        usage=tuple(float(x) for x in c.usage),
    )
