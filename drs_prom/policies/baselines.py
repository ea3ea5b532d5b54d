"""Heuristic placement policies: the baselines of the benchmark and the live scheduler's fallback.

Each is a ``drs_prom.policies.contract.Policy`` (``name``, ``score(ctx)``, higher is better). The
scores below are the documented formulas; ``policy.choose`` masks infeasible nodes.

- ``kube-default``: kube-scheduler's default resource scoring (k8s >= 1.23), on requests.
  NodeResourcesFit with the LeastAllocated strategy (pkg/scheduler/framework/plugins/
  noderesources/least_allocated.go), per resource r in {cpu, memory} with weight 1::

      s_r = (allocatable_r - requested_r) * 100 // allocatable_r   (0 if requested_r > allocatable_r)
      fit = (s_cpu * 1 + s_mem * 1) // 2

  plus NodeResourcesBalancedAllocation (balanced_allocation.go)::

      f_r = min(1, requested_r / allocatable_r)
      balanced = int((1 - |f_cpu - f_mem| / 2) * 100)   # the std of two fractions

  where requested_r includes the incoming pod (a zero request counts as 100m / 200Mi,
  schedutil.GetNonzeroRequests). Both plugins have weight 1 in the default profile, so
  score = fit + balanced. Ties break uniformly at random, as kube-scheduler's
  selectHost does (seeded here). Live load is not read, so it works without metrics.
  Other default score plugins (TaintToleration, NodeAffinity, ImageLocality,
  InterPodAffinity, PodTopologySpread's system defaults) are constant for the simulated
  Job pods and are left out.
- ``least-loaded``: load-aware by live metrics, as Trimaran / crane-scheduler: the node
  whose load *after* adding the incoming pod's estimated load is lowest wins. Stronger
  than plain "lowest current CPU": all six features count, the bottleneck (max) first
  and the mean second: ``score = -(max_f(L + P + R) + mean_f(L + P + R))``, where R is
  the not-yet-visible load of our own placements within the metric window (Trimaran
  adds recently scheduled pods for the same reason; without R, every pod in a window
  herds onto the same node). The memory defaults to the Prometheus rate window of the
  settings (30 s); on drs-paper (1 s metric lag) a 30 s memory also works as a forecast,
  since recently placed pods outlive older ones (imbalance 0.66 vs 0.72 with a 1 s memory).
- ``balanced-load``: greedy on DRS's own objective: the node whose choice leaves the
  lowest cluster imbalance (sum over features of the std across nodes, with the pod's
  load added to that node's row), least-loaded breaking near ties.
- ``trimaran-tlp``, ``trimaran-lvrb``, ``capacity-balanced``, ``capacity-balanced-overload``:
  the field's load-aware scorers, see drs_prom.policies.load_aware.
- ``random``: uniform over feasible nodes (seeded). ``round-robin``: next feasible node
  after the last one chosen.

A node without metrics (NaN load) gets the lowest finite score, never -inf: it stays
usable when it is the only feasible node (Trimaran's behaviour).

Build policies by name through ``drs_prom.registry``; the recent-bind memory the load-aware
ones share with the learned policy lives in ``drs_prom.policies.recent_binds``.
"""

from __future__ import annotations

import numpy as np

from drs_prom.policies.array_math import nan_as
from drs_prom.policies.contract import DecisionContext, PolicyBase
from drs_prom.policies.load_aware import imbalance_if_placed, peak_load
from drs_prom.policies.recent_binds import RemembersRecentBinds

MAX_NODE_SCORE = 100
DEFAULT_MILLI_CPU_REQUEST = 100  # schedutil.DefaultMilliCPURequest
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024  # schedutil.DefaultMemoryRequest
_NO_METRICS = -1e9


def least_allocated_score(requested: int, allocatable: int) -> int:
    """k8s leastRequestedScore: integer percentage of the resource left free."""
    if allocatable == 0 or requested > allocatable:
        return 0
    return (allocatable - requested) * MAX_NODE_SCORE // allocatable


def balanced_allocation_score(fractions: list[float]) -> int:
    """k8s balancedResourceScorer: (1 - std of requested fractions) * 100, truncated."""
    f = [min(1.0, x) for x in fractions]
    if len(f) == 2:
        std = abs((f[0] - f[1]) / 2)
    elif len(f) > 2:
        mean = sum(f) / len(f)
        std = (sum((x - mean) ** 2 for x in f) / len(f)) ** 0.5
    else:
        std = 0.0
    return int((1 - std) * MAX_NODE_SCORE)


def kube_default_scores(ctx: DecisionContext) -> np.ndarray:
    """Integer kube-scheduler scores (fit + balanced, 0..200) of every node, before tie-breaking.

    Vectorised over nodes with the same integer and float operations as
    least_allocated_score and balanced_allocation_score (a test checks both agree).
    """
    cpu = ctx.pod.cpu_m or DEFAULT_MILLI_CPU_REQUEST
    mem = ctx.pod.mem_bytes or DEFAULT_MEMORY_REQUEST
    if ctx.node_requests is not None:  # the node table's arrays (NODE_REQUEST_COLUMNS): whole numbers as float64
        table = np.asarray(ctx.node_requests, dtype=np.float64)[:, :4].astype(np.int64)
        rc, acpu, rm, amem = table[:, 0] + cpu, table[:, 1], table[:, 2] + mem, table[:, 3]
    else:
        nodes = ctx.nodes
        acpu = np.fromiter((n.allocatable_cpu_m for n in nodes), dtype=np.int64, count=len(nodes))
        amem = np.fromiter((n.allocatable_mem_bytes for n in nodes), dtype=np.int64, count=len(nodes))
        rc = np.fromiter((n.requested_cpu_m for n in nodes), dtype=np.int64, count=len(nodes)) + cpu
        rm = np.fromiter((n.requested_mem_bytes for n in nodes), dtype=np.int64, count=len(nodes)) + mem

    def least(req: np.ndarray, alloc: np.ndarray) -> np.ndarray:
        ok = (alloc > 0) & (req <= alloc)
        return np.where(ok, (alloc - req) * MAX_NODE_SCORE // np.maximum(alloc, 1), 0)

    fit = (least(rc, acpu) + least(rm, amem)) // 2
    fc = np.minimum(1.0, np.where(acpu > 0, rc / np.maximum(acpu, 1), 1.0))
    fm = np.minimum(1.0, np.where(amem > 0, rm / np.maximum(amem, 1), 1.0))
    balanced = np.floor((1 - np.abs((fc - fm) / 2)) * MAX_NODE_SCORE)
    return (fit + balanced).astype(np.float64)


class KubeDefault(PolicyBase):
    name = "kube-default"

    def __init__(self, seed: int = 0, metric_window_seconds: float = 0.0) -> None:
        del metric_window_seconds  # keeps no memory of its binds (requests are never late)
        self._rng = np.random.default_rng(seed)

    def score(self, ctx: DecisionContext) -> np.ndarray:
        # scores are integers, so a jitter in [0, 0.5) only breaks ties (uniformly, like selectHost)
        return kube_default_scores(ctx) + self._rng.uniform(0.0, 0.5, size=len(ctx.nodes))


def _after(ctx: DecisionContext, pending: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Load after placing the pod on each node (n, N_FEATURES) and the rows that have metrics."""
    load = np.asarray(ctx.load, dtype=np.float64)
    ok = np.asarray(~np.isnan(load).any(axis=1))
    out = np.nan_to_num(load, nan=0.0) + np.asarray(ctx.pod_load, dtype=np.float64)
    if pending is not None:
        out += pending
    return out, ok


class LeastLoaded(RemembersRecentBinds):
    """Trimaran-style load-aware scoring on live metrics plus its own recent binds."""

    name = "least-loaded"

    def __init__(self, seed: int, metric_window_seconds: float) -> None:
        del seed
        super().__init__(metric_window_seconds)

    def _score(self, ctx: DecisionContext) -> np.ndarray:
        after, ok = _after(ctx, self.recent.pending(ctx))
        s = -peak_load(after)
        return np.where(ok, s, _NO_METRICS)

    def score(self, ctx: DecisionContext) -> np.ndarray:
        return self._score(ctx)


class BalancedLoad(LeastLoaded):
    name = "balanced-load"

    def _score(self, ctx: DecisionContext) -> np.ndarray:
        pending = self.recent.pending(ctx)
        after, ok = _after(ctx, pending)
        load = nan_as(ctx.load, 0.0) + pending
        imb = imbalance_if_placed(load, np.asarray(ctx.pod_load, dtype=np.float64))
        s = -imb - 1e-3 * peak_load(after)
        return np.where(ok, s, _NO_METRICS)


class RandomPolicy(PolicyBase):
    name = "random"

    def __init__(self, seed: int = 0, metric_window_seconds: float = 0.0) -> None:
        del metric_window_seconds  # keeps no memory of its binds (requests are never late)
        self._rng = np.random.default_rng(seed)

    def score(self, ctx: DecisionContext) -> np.ndarray:
        return self._rng.uniform(size=len(ctx.nodes))


class RoundRobin(PolicyBase):
    name = "round-robin"

    def __init__(self, seed: int = 0, metric_window_seconds: float = 0.0) -> None:
        del seed, metric_window_seconds  # deterministic, keeps no memory of its binds
        self._next = 0

    def score(self, ctx: DecisionContext) -> np.ndarray:
        n = len(ctx.nodes)
        order = (np.arange(n) - self._next) % max(n, 1)
        feasible = np.flatnonzero(ctx.feasible)
        if len(feasible):
            chosen = int(feasible[np.argmin(order[feasible])])
            self._next = (chosen + 1) % n
        return -order.astype(np.float64)
