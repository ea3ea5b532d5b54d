"""``drs`` as a per-node Q network that reads what the heuristics think of each node and what the metrics hide.

Every decision, each node gets one input row:
- the per-node candidate columns of the plain ``drs`` network (drs_prom.agent.model_inputs);
- the node's load relative to its *own* capacity after the pod (a small node is full sooner);
- what only the scheduler keeps (models whose guides start with a teacher): the expected load of the
  pods it placed that still run there, plus the pod, over the node's capacity (drs_prom.policies.resident:
  neither lagged nor capped as measured load is), the share of the node's free request room
  the pod's over-request would hold (drs_prom.policies.teachers.over_request_take), and (the room-keeping
  teachers' models) the share of the recent pods' slots the bind takes (drs_prom.policies.room_keeping);
- for each guide (the teacher capacity-balanced-peak, then capacity-balanced-overload,
  capacity-balanced, balanced-load, least-loaded, kube-default), how far the node's score
  is from that guide's best feasible node (in standard deviations of its scores over the feasible
  nodes, clipped at -5) and whether it is that guide's first choice;
- cluster context no single heuristic uses, the same on every row: node count and size spread,
  load and overload over capacity, hot and saturated shares, how far requests are from measured
  use, the metric window, the arrival rate (smoothed) and its trend (fast over slow rate).

Why these: on generated clusters no field heuristic wins everywhere, and the measured load they
read lags and saturates. The scores say what each guide would do; the resident load and the
over-request and the room say what the metrics cannot; the context says which to trust. The network
scores every node and the pod goes to the highest feasible score: the network decides, no heuristic
is called as a fallback. A model file names its guide set (``GUIDE_SETS``): drs-v4's (the
room-keeping teacher without the peak term), drs-v3's (the resident-aware teacher without room
keeping) and drs-v2's (the five field heuristics) still load, with their own columns.

All guides share one memory of the binds actually made (recent_binds), so their scores
describe the cluster the policy really built. Pure numpy at inference (the network is a
Dense chain, drs_prom.agent.numpy_policy.forward).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from drs_prom.agent.cluster_context import CLUSTER_FEATURES, ArrivalTrend, ClusterFeatures
from drs_prom.agent.model_inputs import CANDIDATE_COLUMNS, candidate_matrix
from drs_prom.agent.numpy_policy import Layers, forward
from drs_prom.config import Normalisation
from drs_prom.policies.array_math import nan_as, std_of
from drs_prom.policies.baselines import BalancedLoad, LeastLoaded, kube_default_scores
from drs_prom.policies.contract import DecisionContext
from drs_prom.policies.load_aware import CapacityBalancedLoad, CapacityBalancedOverload, CapacityTerms, full_of
from drs_prom.policies.recent_binds import RecentBinds
from drs_prom.policies.teachers import (
    CapacityBalancedPeak,
    CapacityBalancedResident,
    CapacityBalancedRoom,
    over_request_take,
    resident_relative,
)

GUIDED = "heuristic-guided"
"""``head.kind`` of a guided model's JSON."""

FIELD_GUIDES: tuple[str, ...] = (
    "capacity-balanced-overload",
    "capacity-balanced",
    "balanced-load",
    "least-loaded",
    "kube-default",
)
"""The field's heuristics whose scores are inputs, in column order (drs-v2 reads these five)."""

TEACHER = "capacity-balanced-peak"
ROOM_TEACHER = "capacity-balanced-room"
RESIDENT_TEACHER = "capacity-balanced-resident"
GUIDES: tuple[str, ...] = (TEACHER, *FIELD_GUIDES)
"""Guides of a model trained by this code: the teacher first, then the field's heuristics."""

GUIDE_SETS: tuple[tuple[str, ...], ...] = (
    GUIDES,
    (ROOM_TEACHER, *FIELD_GUIDES),
    (RESIDENT_TEACHER, *FIELD_GUIDES),
    FIELD_GUIDES,
)
"""Guide sets a model file may name (its head's ``guides``): this code's, drs-v4's, drs-v3's and drs-v2's."""

ROOM_KEEPERS: tuple[str, ...] = (TEACHER, ROOM_TEACHER)
"""Teachers that keep room for the recent pods' shapes (their models read ``room_take``)."""
RESIDENT_READERS: tuple[str, ...] = (*ROOM_KEEPERS, RESIDENT_TEACHER)
"""Teachers that read the resident load (their models read ``RESIDENT_COLUMNS``)."""

GAP_CLIP = 5.0
NO_METRICS = -1e8
"""Scores at or below this are the heuristics' 'no metrics' sentinel (-1e9), not a ranking."""

RESIDENT_COLUMNS: tuple[str, ...] = (*(f"resident_after_{i}" for i in range(6)), "over_request_take")
"""Read by models whose guides start with a teacher: our running pods' expected load plus the pod, over the node's
own capacity, and the share of the node's free request room the pod's over-request takes."""

ROOM_COLUMNS: tuple[str, ...] = ("room_take",)
"""Read by models of a room-keeping teacher: the share of the recent pods' slots the bind takes."""


def guided_columns(guides: tuple[str, ...]) -> tuple[str, ...]:
    """Input columns of a guided model with these guides, in order."""
    return (
        *CANDIDATE_COLUMNS,
        *(f"rel_after_{i}" for i in range(6)),  # load + recent binds + pod, over the node's own capacity
        "rel_peak_now",
        "added_overload",
        *(RESIDENT_COLUMNS if guides[0] in RESIDENT_READERS else ()),
        *(ROOM_COLUMNS if guides[0] in ROOM_KEEPERS else ()),
        *(f"gap_{g}" for g in guides),
        *(f"first_{g}" for g in guides),
        *(f"ctx_{c}" for c in CLUSTER_FEATURES),
        "ctx_rate_trend",
    )


GUIDED_COLUMNS: tuple[str, ...] = guided_columns(GUIDES)
N_GUIDED = len(GUIDED_COLUMNS)


def score_gaps(scores: np.ndarray, feasible: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(gap to the best feasible score in standard deviations, clipped to [-GAP_CLIP, 0]; 1 where first choice).

    Infeasible nodes read -GAP_CLIP and 0. Scale-free, so kube-default's 0..200 integers and
    capacity-balanced's small floats become comparable. A node without metrics (the heuristics'
    -1e9) reads -GAP_CLIP and stays out of the spread, which it would otherwise swamp.
    """
    s = np.asarray(scores, dtype=np.float64)
    f = np.asarray(feasible, bool) & np.isfinite(s) & (s > NO_METRICS)
    rated = s[f]
    if not len(rated):
        return np.full(len(s), -GAP_CLIP), np.zeros(len(s))
    best = np.maximum.reduce(rated)
    sd = std_of(rated)
    d = s - best
    gap = np.where(f, np.clip(d / (sd + 1e-9), -GAP_CLIP, 0.0), -GAP_CLIP)
    first = (f & (d >= -1e-12)).astype(np.float64)
    return gap, first


class GuideScores:
    """The guides' node scores on one shared memory of recent binds, plus the smoothed context.

    ``record(ctx, node)`` must follow every decision (whoever chose the node), so the
    memory and the arrival-rate estimates describe what was really bound.
    """

    def __init__(self, metric_window_seconds: float, guides: tuple[str, ...] = GUIDES) -> None:
        if guides not in GUIDE_SETS:
            raise ValueError(f"unknown guide set {guides}")
        self.guides = guides
        self.recent = RecentBinds(metric_window_seconds)
        room_keeper = CapacityBalancedPeak if guides[0] == TEACHER else CapacityBalancedRoom  # drs-v4's is the latter
        self.room = room_keeper(0, metric_window_seconds)
        self.cbr = CapacityBalancedResident(0, metric_window_seconds)
        self.cbo = CapacityBalancedOverload(0, metric_window_seconds)
        self.cb = CapacityBalancedLoad(0, metric_window_seconds)
        self.bl = BalancedLoad(0, metric_window_seconds)
        self.ll = LeastLoaded(0, metric_window_seconds)
        for h in (self.room, self.cbr, self.cbo, self.cb, self.bl, self.ll):
            h.recent = self.recent  # one memory of the binds actually made
        score: dict[str, Callable[[DecisionContext], np.ndarray]] = {
            TEACHER: self._room_scores,
            ROOM_TEACHER: self._room_scores,
            RESIDENT_TEACHER: self.cbr.node_scores,
            "capacity-balanced-overload": self._cbo_scores,
            "capacity-balanced": self._cb_scores,
            "balanced-load": self.bl._score,
            "least-loaded": self.ll._score,
            "kube-default": kube_default_scores,
        }
        self._scorers = [score[g] for g in guides]
        self._resident = guides[0] in RESIDENT_READERS
        self._room = guides[0] in ROOM_KEEPERS
        self._take = np.zeros(0)
        self._terms: CapacityTerms | None = None  # set only while heuristic_scores runs
        self._rel: np.ndarray | None = None  # set only while rows runs: resident_relative on the shared memory
        self.context = ClusterFeatures()
        self.trend = ArrivalTrend()
        self._staged: tuple[DecisionContext, tuple[np.ndarray, float, float], tuple[float, float]] | None = None

    @property
    def window(self) -> float:
        return self.recent.window_seconds

    def _room_scores(self, ctx: DecisionContext) -> np.ndarray:
        """The room-keeping teacher's scores (the peak teacher's, or drs-v4's room teacher's); keeps its room take for
        the input row. It reads the resident-relative load ``rows`` computed for the input row, when it did."""
        rel = self._rel if self._rel is not None else resident_relative(ctx, self.recent.pending(ctx))
        scores, self._take = self.room.scores_and_take_on(ctx, rel)
        return scores

    def _capacity_terms(self, ctx: DecisionContext) -> CapacityTerms:
        """capacity-balanced's terms of ``ctx``, once per ``heuristic_scores`` call: capacity-balanced and
        capacity-balanced-overload read the same load on the same memory of binds and differ only in the penalty."""
        if self._terms is None:
            self._terms = self.cb.node_terms(ctx)
        return self._terms

    def _cbo_scores(self, ctx: DecisionContext) -> np.ndarray:
        return self.cbo.scores_of(ctx, self._capacity_terms(ctx))

    def _cb_scores(self, ctx: DecisionContext) -> np.ndarray:
        return self.cb.scores_of(ctx, self._capacity_terms(ctx))

    def heuristic_scores(self, ctx: DecisionContext) -> np.ndarray:
        """(len(guides), n) raw scores in guide order (kube-default without its random tie-break); a room-keeping
        teacher counts the pod's own shape among the recent ones."""
        try:
            return np.stack([f(ctx) for f in self._scorers])
        finally:
            self._terms = None  # the memory of binds changes between calls, even for the same context

    def rows(self, ctx: DecisionContext) -> tuple[np.ndarray, np.ndarray]:
        """(n, len(guided_columns(guides))) float32 input rows and the (len(guides), n) raw heuristic scores.

        Reads the smoothed context as it would be with this decision counted; nothing is kept until ``bound``."""
        state = self.context.advanced(ctx, self.window)
        ctx_feats = state[0].copy()
        trend, trend_state = self.trend.advanced(ctx.now, state[1])
        self._staged = (ctx, state, trend_state)
        pending = self.recent.pending(ctx)
        cand = candidate_matrix(ctx, pending)
        full = full_of(ctx)
        load = nan_as(ctx.load, 1.0) + pending
        rel = load / full
        pod = nan_as(ctx.pod_load, 0.0) / full
        after = rel + pod
        added = (np.maximum(after - 1.0, 0.0) - np.maximum(rel - 1.0, 0.0)).sum(axis=1)
        resident_rel = resident_relative(ctx, pending) if self._resident else None
        self._rel = resident_rel
        try:
            raw = self.heuristic_scores(ctx)
        finally:
            self._rel = None
        feasible = np.asarray(ctx.feasible, bool)
        gaps, firsts = zip(*(score_gaps(s, feasible) for s in raw), strict=True)
        n = len(ctx.nodes)
        resident: list[np.ndarray] = []
        if resident_rel is not None:
            resident = [
                np.clip(resident_rel + pod, 0.0, 3.0),
                over_request_take(ctx)[:, None],
            ]
        if self._room:
            resident.append(np.clip(self._take, 0.0, 1.0)[:, None])
        out = np.concatenate(
            [
                cand,
                np.clip(after, 0.0, 3.0),
                np.clip(rel.max(axis=1), 0.0, 3.0)[:, None],
                np.clip(added, 0.0, 6.0)[:, None],
                *resident,
                np.stack(gaps, axis=1),
                np.stack(firsts, axis=1),
                np.broadcast_to(ctx_feats, (n, len(ctx_feats))),
                np.full((n, 1), trend),
            ],
            axis=1,
        )
        return out.astype(np.float32), raw

    def bound(self, ctx: DecisionContext, node: int) -> None:
        """Keep what the decision ``ctx`` adds (whoever chose; ``node`` -1: none was bound): the smoothed context and
        trend ``rows`` read, the pod's shape (room-keeping teachers) and the bind."""
        staged = self._staged
        if staged is not None and staged[0] is ctx:
            _, state, trend_state = staged
        else:  # not scored through ``rows`` (a decision the network did not see): count it all the same
            state = self.context.advanced(ctx, self.window)
            trend_state = self.trend.advanced(ctx.now, state[1])[1]
        self._staged = None
        self.context.commit(state)
        self.trend.commit(trend_state)
        if self._room:
            self.room.shapes.record(ctx)
        if node >= 0:
            self.recent.record(ctx, node)


class GuidedPolicy:
    """``drs`` with the heuristic-guided head: argmax over nodes of the network's score of each row."""

    reads_unclipped_load = True
    """Overload over capacity is an input; clipped loads hide it (the benchmark passes clip: false)."""

    def __init__(
        self,
        layers: Layers,
        metric_window_seconds: float,
        name: str = "drs",
        version: str = "",
        normalisation: Normalisation | None = None,
        input_range: tuple[np.ndarray, np.ndarray] | None = None,
        guides: tuple[str, ...] = GUIDES,
    ) -> None:
        self.layers = list(layers)
        self.input_range = input_range
        """(low, high) per input column as seen in training: rows are clipped to it, so a cluster unlike the
        training clusters (a faster arrival rate, a larger load) reads as the nearest case the network knows
        instead of extrapolating a ReLU network far outside its data."""
        self.name = name
        self.version = version
        self.normalisation = normalisation
        """None: the cluster's scales, unclipped (reads_unclipped_load), as its heuristics read them."""
        self.guides = GuideScores(metric_window_seconds, guides)

    @property
    def recent(self) -> RecentBinds:
        """The one memory of recent binds its guides share (the Policy contract's ``recent``)."""
        return self.guides.recent

    @property
    def metric_window_seconds(self) -> float:
        return self.guides.window

    def score(self, ctx: DecisionContext) -> np.ndarray:
        return self.scores_and_guides(ctx)[0]

    def scores_and_guides(self, ctx: DecisionContext) -> tuple[np.ndarray, np.ndarray]:
        """The network's score of every node (-inf where infeasible) and the (len(guides), n) raw guide scores it
        read (what the network made of each guide's view, for benchmarks/teacher_agreement.py)."""
        rows, raw = self.guides.rows(ctx)
        if self.input_range is not None:
            rows = np.clip(rows, self.input_range[0], self.input_range[1])
        q = forward(self.layers, rows)[:, 0].astype(np.float64)
        return np.where(np.asarray(ctx.feasible, bool), q, -np.inf), raw

    def bound(self, ctx: DecisionContext, node: int) -> None:
        self.guides.bound(ctx, node)

    @property
    def head(self) -> dict[str, Any]:
        guides = self.guides.guides
        out: dict[str, Any] = {"kind": GUIDED, "guides": list(guides), "columns": list(guided_columns(guides))}
        if self.input_range is not None:
            out["input_low"] = [float(x) for x in self.input_range[0]]
            out["input_high"] = [float(x) for x in self.input_range[1]]
        return out

    @classmethod
    def from_head(cls, layers: Layers, head: dict[str, Any], **kwargs: Any) -> GuidedPolicy:
        """The policy a checked head describes (persistence checks guides, columns and the input range)."""
        rng = None
        if head.get("input_low") is not None:
            rng = (np.asarray(head["input_low"], np.float32), np.asarray(head["input_high"], np.float32))
        return cls(layers, input_range=rng, guides=head_guides(head), **kwargs)


def head_guides(head: dict[str, Any]) -> tuple[str, ...]:
    """The guide set a head names; () when it names none this code knows."""
    guides = head.get("guides")
    if not isinstance(guides, list):
        return ()
    found = tuple(guides)
    return found if found in GUIDE_SETS else ()


def valid_guided_head(head: dict[str, Any]) -> bool:
    """A known guide set, the columns this code builds for it, and a valid input range."""
    guides = head_guides(head)
    return bool(guides) and head.get("columns") == list(guided_columns(guides)) and valid_input_range(head)


def head_inputs(head: dict[str, Any]) -> int:
    """Input columns of a checked guided head."""
    return len(guided_columns(head_guides(head)))


def valid_input_range(head: dict[str, Any]) -> bool:
    """A head's optional input range: absent, or two lists of one number per input column with low <= high."""
    lo, hi = head.get("input_low"), head.get("input_high")
    if lo is None and hi is None:
        return True
    n = len(guided_columns(head_guides(head))) if head_guides(head) else N_GUIDED
    if not (isinstance(lo, list) and isinstance(hi, list) and len(lo) == len(hi) == n):
        return False
    try:
        a, b = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return bool(np.all(np.isfinite(a)) and np.all(np.isfinite(b)) and np.all(a <= b))
