"""The strongest load-aware heuristics the field ships, so that a learned policy's win means something.

- ``trimaran-tlp``: Trimaran's TargetLoadPacking (kubernetes-sigs/scheduler-plugins,
  pkg/trimaran/targetloadpacking). The pod's expected CPU is its limit, else its request
  x ``requests_multiplier`` (1.5), else ``default_request_m`` (1 core); our pods carry no
  limits. With U the node's measured CPU (millicores), P the pod's, M the expected CPU of
  pods this policy bound to the node within the metric window (counted in full, like
  Trimaran's ScheduledPodsCache) and C its CPU capacity::

      p = 100 * (U + P + M) / C
      p <= T:        score = round((100 - T) * p / T + T)       # pack up to the target T (40 %)
      T < p <= 100:  score = round(T * (100 - p) / (100 - T))   # then prefer the cooler hot nodes
      p > 100:       score = 0

- ``trimaran-lvrb``: Trimaran's LoadVariationRiskBalancing. Per resource r in {cpu, mem},
  with mu = (measured average + the pod's request) / capacity and sigma = the std of the
  measured utilisation over a recent window, both clamped to [0, 1]::

      risk_r = (mu + clamp(margin * sigma ** (1 / sensitivity), 0, 1)) / 2
      score_r = int((1 - risk_r) * 100 + 0.5);  score = round(min(score_cpu, score_mem))

  margin 1 and sensitivity 2 (the README's recommended values). The average is the
  metrics' window mean (ctx.load, like load-watcher's); the std comes from this policy's
  own samples of ctx.load per node over ``stats_window_seconds``. Upstream LVRB does not add
  recent binds; here, like least-loaded, the requests of its own binds fade in over the
  metric window (without it a burst inside one window herds onto one node).

- ``capacity-balanced``: balanced-load made capacity-aware: every load is divided by the
  node's own capacity (``ctx.full``), so a small node's network is full at its own link
  speed: ``score = -imbalance_after`` on node-relative loads, ties by least-loaded on the
  same relative scale. ``capacity-balanced-overload`` adds a penalty for the overload the
  placement would add (predicted demand over capacity, summed over resources), which
  DRS's capped usage never shows: ``- overload_penalty * added_overload`` (0.5). Both are
  benchmarked: on heterogeneous (3 seeds) the penalty cost 5 % of composite (2.89 -> 3.04;
  4.0 -> 3.34: measured usage is capped at capacity, so "added overload" mostly steers
  pods off the small nodes, which then idle), on burst it gained 1.5 % (6.80 -> 6.70).
  Both read unclipped load (bench passes ``clip: false``, ``reads_unclipped_load``).

Both Trimaran plugins give integer scores; ties break uniformly at random (seeded), as
kube-scheduler's selectHost does. A node without metrics gets the minimum score 0
(Trimaran's behaviour), so it stays usable when it is the only feasible node.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

import numpy as np

from drs_prom.features import N_FEATURES
from drs_prom.policies.array_math import mean_along, nan_as
from drs_prom.policies.contract import DecisionContext
from drs_prom.policies.recent_binds import RecentBinds, RemembersRecentBinds

MAX_NODE_SCORE = 100
NO_METRICS_SCORE = -1e9
"""The score of a node without metrics: the lowest finite one, so it stays usable when it is the only feasible node."""


def imbalance_if_placed(load: np.ndarray, pod_load: np.ndarray) -> np.ndarray:
    """For each node i: DRS imbalance of the cluster with pod_load[i] added to row i, in O(n * N_FEATURES)."""
    n = len(load)
    s = load.sum(axis=0)
    q = (load**2).sum(axis=0)
    s2 = s[None, :] + pod_load
    q2 = q[None, :] + (load + pod_load) ** 2 - load**2
    var = np.maximum(q2 / n - (s2 / n) ** 2, 0.0)
    return np.sqrt(var).sum(axis=1)


def full_of(ctx: DecisionContext) -> np.ndarray:
    """ctx.full, or ones when the context does not know the nodes' capacities."""
    if ctx.full is None:
        return np.ones((len(ctx.nodes), N_FEATURES))
    return np.asarray(ctx.full, dtype=np.float64)


def has_metrics(ctx: DecisionContext) -> np.ndarray:
    """Per node: whether every feature of its load is known (a NaN row has no metrics)."""
    return np.asarray(~np.isnan(np.asarray(ctx.load, dtype=np.float64)).any(axis=1))


class _RecentRequests(RecentBinds):
    """Recent binds remembered as the pod's expected [cpu millicores, memory bytes] (absolute, node-independent)."""

    def __init__(self, window_seconds: float, cpu_m: Callable[[DecisionContext], float], fade: bool) -> None:
        super().__init__(window_seconds)
        self._cpu_m = cpu_m
        self.fade = fade

    def row(self, ctx: DecisionContext, node: int) -> np.ndarray:
        del node
        return np.array([self._cpu_m(ctx), float(ctx.pod.mem_bytes), 0.0, 0.0, 0.0, 0.0])


def tlp_score(predicted_percent: float, target_percent: float) -> int:
    """TargetLoadPacking's score of a node whose CPU would be at ``predicted_percent`` with the pod."""
    p, t = float(predicted_percent), float(target_percent)
    if p > t:
        if p > 100:
            return 0
        return round(t * (100 - p) / (100 - t))
    return round((100 - t) * p / t + t)


def lvrb_resource_score(mu: float, sigma: float, margin: float, sensitivity: float) -> int:
    """LoadVariationRiskBalancing's score of one resource from fractional average (with the pod) and std."""
    mu = min(max(mu, 0.0), 1.0)
    sigma = min(max(sigma, 0.0), 1.0)
    if sensitivity > 0:
        sigma = sigma ** (1.0 / sensitivity)
    sigma = min(max(sigma * margin, 0.0), 1.0)
    risk = (mu + sigma) / 2
    return int((1.0 - risk) * MAX_NODE_SCORE + 0.5)


def lvrb_resource_scores(mu: np.ndarray, sigma: np.ndarray, margin: float, sensitivity: float) -> np.ndarray:
    """lvrb_resource_score over arrays of nodes (same operations, NaN rows give 0 and are masked by the caller)."""
    mu = np.clip(np.nan_to_num(mu), 0.0, 1.0)
    sigma = np.clip(np.nan_to_num(sigma), 0.0, 1.0)
    if sensitivity > 0:
        sigma = sigma ** (1.0 / sensitivity)
    sigma = np.clip(sigma * margin, 0.0, 1.0)
    return np.floor((1.0 - (mu + sigma) / 2) * MAX_NODE_SCORE + 0.5)


def _accumulate(acc: list[float], cpu: float, mem: float, sign: int) -> None:
    acc[0] += sign
    acc[1] += sign * cpu
    acc[2] += sign * cpu * cpu
    acc[3] += sign * mem
    acc[4] += sign * mem * mem


class TargetLoadPacking(RemembersRecentBinds):
    """Trimaran TargetLoadPacking: pack nodes up to a target CPU utilisation, then spread over the hot ones."""

    name = "trimaran-tlp"

    def __init__(
        self,
        seed: int,
        metric_window_seconds: float,
        target_percent: float = 40.0,
        requests_multiplier: float = 1.5,
        default_request_m: int = 1000,
    ) -> None:
        super().__init__(metric_window_seconds)
        self.target_percent = target_percent
        self.requests_multiplier = requests_multiplier
        self.default_request_m = default_request_m
        self.recent = _RecentRequests(self.recent.window_seconds, self.predicted_cpu_m, fade=False)
        self._rng = np.random.default_rng(seed)

    def predicted_cpu_m(self, ctx: DecisionContext) -> float:
        """PredictUtilisation: limit (not modelled), else request x multiplier, else the default request."""
        if ctx.pod.cpu_m > 0:
            return float(round(ctx.pod.cpu_m * self.requests_multiplier))
        return float(self.default_request_m)

    def node_scores(self, ctx: DecisionContext) -> np.ndarray:
        """Integer TLP scores (0..100) of every node, before tie-breaking."""
        load = np.asarray(ctx.load, dtype=np.float64)
        util = load[:, 0] / full_of(ctx)[:, 0]  # fraction of the node's CPU
        cap = np.array([n.allocatable_cpu_m for n in ctx.nodes], dtype=np.float64)
        missing = self.recent.pending(ctx)[:, 0]
        pod = self.predicted_cpu_m(ctx)
        out = np.zeros(len(ctx.nodes))
        for i in range(len(ctx.nodes)):
            if np.isnan(util[i]) or cap[i] <= 0:
                continue  # no metrics: the minimum score
            out[i] = tlp_score(100 * (util[i] * cap[i] + pod + missing[i]) / cap[i], self.target_percent)
        return out

    def score(self, ctx: DecisionContext) -> np.ndarray:
        return self.node_scores(ctx) + self._rng.uniform(0.0, 0.5, size=len(ctx.nodes))


class LoadVariationRiskBalancing(RemembersRecentBinds):
    """Trimaran LoadVariationRiskBalancing: balance mean + variability of CPU and memory utilisation."""

    name = "trimaran-lvrb"

    def __init__(
        self,
        seed: int,
        metric_window_seconds: float,
        margin: float = 1.0,
        sensitivity: float = 2.0,
        stats_window_seconds: float = 120.0,
        sample_seconds: float = 1.0,
    ) -> None:
        super().__init__(metric_window_seconds)
        self.margin = margin
        self.sensitivity = sensitivity
        self.stats_window_seconds = stats_window_seconds
        self.sample_seconds = sample_seconds
        self.recent = _RecentRequests(self.recent.window_seconds, lambda ctx: float(ctx.pod.cpu_m), fade=True)
        self._rng = np.random.default_rng(seed)
        self._samples: dict[str, deque[tuple[float, float, float]]] = {}
        self._sums: dict[str, list[float]] = {}
        self._last = -np.inf

    def _observe(self, ctx: DecisionContext, util: np.ndarray) -> None:
        """Keep one (t, cpu, mem) utilisation sample per node per ``sample_seconds``, within the stats window.

        Running sums per node (count, sum, sum of squares) make the std O(1) per node.
        """
        if ctx.now < self._last:  # a new simulated episode
            self._samples.clear()
            self._sums.clear()
            self._last = -np.inf
        if ctx.now - self._last < self.sample_seconds:
            return
        self._last = ctx.now
        horizon = ctx.now - self.stats_window_seconds
        for node, (cpu, mem) in zip(ctx.nodes, util.tolist()):
            if math.isnan(cpu) or math.isnan(mem):  # no metrics, no sample
                continue
            q = self._samples.setdefault(node.name, deque())
            acc = self._sums.setdefault(node.name, [0.0, 0.0, 0.0, 0.0, 0.0])
            q.append((ctx.now, cpu, mem))
            _accumulate(acc, cpu, mem, +1)
            while q and q[0][0] < horizon:
                _, c0, m0 = q.popleft()
                _accumulate(acc, c0, m0, -1)

    def std(self, name: str) -> tuple[float, float]:
        """Std of the node's sampled CPU and memory utilisation (0 with fewer than two samples)."""
        acc = self._sums.get(name)
        if acc is None or acc[0] < 2:
            return 0.0, 0.0
        n, sc, qc, sm, qm = acc
        return math.sqrt(max(qc / n - (sc / n) ** 2, 0.0)), math.sqrt(max(qm / n - (sm / n) ** 2, 0.0))

    def node_scores(self, ctx: DecisionContext) -> np.ndarray:
        """Integer LVRB scores (0..100) of every node, before tie-breaking."""
        load = np.asarray(ctx.load, dtype=np.float64)
        util = load[:, :2] / full_of(ctx)[:, :2]
        self._observe(ctx, util)
        pending = self.recent.pending(ctx)
        cap_cpu = np.array([n.allocatable_cpu_m for n in ctx.nodes], dtype=np.float64)
        cap_mem = np.array([n.allocatable_mem_bytes for n in ctx.nodes], dtype=np.float64)
        sd = np.array([self.std(n.name) for n in ctx.nodes]).reshape(-1, 2)
        ok = ~np.isnan(util).any(axis=1) & (cap_cpu > 0) & (cap_mem > 0)
        safe_cpu, safe_mem = np.where(cap_cpu > 0, cap_cpu, 1.0), np.where(cap_mem > 0, cap_mem, 1.0)
        mu_cpu = util[:, 0] + (ctx.pod.cpu_m + pending[:, 0]) / safe_cpu
        mu_mem = util[:, 1] + (ctx.pod.mem_bytes + pending[:, 1]) / safe_mem
        cpu = lvrb_resource_scores(mu_cpu, sd[:, 0], self.margin, self.sensitivity)
        mem = lvrb_resource_scores(mu_mem, sd[:, 1], self.margin, self.sensitivity)
        return np.where(ok, np.minimum(cpu, mem), 0.0)

    def score(self, ctx: DecisionContext) -> np.ndarray:
        return self.node_scores(ctx) + self._rng.uniform(0.0, 0.5, size=len(ctx.nodes))


def peak_load(after: np.ndarray) -> np.ndarray:
    """Per node: its busiest resource plus its mean resource, from (n, N_FEATURES) load after the bind. The
    bottleneck-first measure least-loaded ranks by, and balanced-load and capacity-balanced break near ties with;
    higher is a hotter node."""
    return np.asarray(np.maximum.reduce(after, axis=1) + mean_along(after, 1))


CapacityTerms = tuple[np.ndarray, np.ndarray, np.ndarray]
"""Per node: the imbalance after the bind, the overload it adds and the node's peak after it (capacity_terms)."""


def capacity_terms(rel: np.ndarray, pod: np.ndarray) -> CapacityTerms:
    """The terms of capacity_balanced_scores that do not depend on the overload penalty, from node-relative load
    ``rel`` and the pod's relative load ``pod``: computed once, they serve capacity-balanced and
    capacity-balanced-overload alike when both score one decision (the guided network's guides)."""
    after = rel + pod
    added = (np.maximum(after - 1.0, 0.0) - np.maximum(rel - 1.0, 0.0)).sum(axis=1)
    return imbalance_if_placed(rel, pod), added, peak_load(after)


def scores_from_terms(terms: CapacityTerms, overload_penalty: float) -> np.ndarray:
    """capacity_balanced_scores from its capacity_terms."""
    imbalance, added, peak = terms
    s = -imbalance - overload_penalty * added
    s -= 1e-3 * peak
    return s


def capacity_balanced_scores(rel: np.ndarray, pod: np.ndarray, overload_penalty: float) -> np.ndarray:
    """capacity-balanced's score of each node from node-relative load ``rel`` and the pod's relative load ``pod``
    (both (n, N_FEATURES)): minus the imbalance after placing it there and ``overload_penalty`` x the overload it
    adds, ties broken toward the least loaded node. Shared by every capacity-balanced variant, whatever load it
    reads."""
    return scores_from_terms(capacity_terms(rel, pod), overload_penalty)


class CapacityBalancedLoad(RemembersRecentBinds):
    """balanced-load on node-relative loads, with a penalty for the overload a placement adds."""

    name = "capacity-balanced"
    reads_unclipped_load = True
    """Overload is invisible in load clipped at the normalisation scale; the benchmark passes clip: false."""

    overload_penalty_default = 0.0

    def __init__(self, seed: int, metric_window_seconds: float, overload_penalty: float | None = None) -> None:
        del seed
        super().__init__(metric_window_seconds)
        self.overload_penalty = self.overload_penalty_default if overload_penalty is None else overload_penalty

    def node_scores(self, ctx: DecisionContext) -> np.ndarray:
        return self.scores_of(ctx, self.node_terms(ctx))

    def node_terms(self, ctx: DecisionContext) -> CapacityTerms:
        """capacity_terms of every node on the metrics plus this policy's recent binds, over each node's capacity."""
        full = full_of(ctx)
        rel = (nan_as(ctx.load, 0.0) + self.recent.pending(ctx)) / full
        return capacity_terms(rel, np.asarray(ctx.pod_load, dtype=np.float64) / full)

    def scores_of(self, ctx: DecisionContext, terms: CapacityTerms) -> np.ndarray:
        """The node scores from ``node_terms(ctx)`` (or another policy's on the same memory of binds)."""
        return np.where(has_metrics(ctx), scores_from_terms(terms, self.overload_penalty), NO_METRICS_SCORE)

    def score(self, ctx: DecisionContext) -> np.ndarray:
        return self.node_scores(ctx)


class CapacityBalancedOverload(CapacityBalancedLoad):
    """capacity-balanced with a penalty on the overload a placement adds."""

    name = "capacity-balanced-overload"
    overload_penalty_default = 0.5
