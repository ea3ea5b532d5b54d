"""The scheduling environment: one decision per pod, on the simulated cluster.

Over 400 lines because the episode loop, its recorder and the per-step/episode results are one simulation contract.

    env = SchedulingEnv(load_scenario("drs-paper"), seed=0)
    ctx = env.reset()                       # DecisionContext of the first pod needing a node
    while ctx is not None:
        ctx, info, done = env.step(action)  # bind ctx.pod to node index `action`

Decisions see exactly what production sees: ``SimSource.snapshot()`` -> ``state.node_matrix``
for ``ctx.load``, ``state.pod_matrix`` for ``ctx.pod_load``, and the live scheduler's filter chain
(``chain.feasible``) for ``ctx.feasible``: the NODE stage cached per pod key, NodeResourcesFit over the
cluster's arrays, and, for the pods of a profile with a ``Placement``, the filters that read the running
pods (host ports, topology spread, pod anti-affinity, and for a ``volume_zones`` profile VolumeBinding /
VolumeZone on its bound claim), so no action offered breaks a constraint kube-scheduler would enforce.

Settling (the reward's "5 s later", DRS): ``info.load_after`` is the load the metrics
would show ``settle_seconds`` after the bind in a look-ahead copy of the cluster where
nothing else is bound meanwhile. The real timeline is not paused: pods that arrive
during the settle period are decided at their own arrival times. So each reward is
attributable to its own action, and training sees the same arrival process as the
benchmark (DRS instead blocked the scheduler for 5 s per pod).

What a policy is told of a pod's usage (``information``): by default what a live scheduler can know, the
estimate of drs_prom.usage from the stored usage of the pod's owner (``SimUsageHistory``, the simulator's per-pod
usage integrals up to the decision), of similar workloads, or its requests; ``told`` hands it the workload's
expected usage instead (an oracle: the pod's profile and owner mean, as a user annotating every pod would).

Pods that fit no node wait in a FIFO queue and are retried whenever a pod finishes;
they are never dropped (scenario validation guarantees every pod fits an empty node). A replica
that its anti-affinity, spread or host port keeps off every node waits the same way.
"""

from __future__ import annotations

import copy
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from typing import Protocol

import numpy as np

from drs_prom.config import Normalisation, ObjectiveSettings
from drs_prom.constraints import chain, soft_terms, taint_score
from drs_prom.constraints.framework import ClusterHints
from drs_prom.constraints.placed import EMPTY, Neighbours
from drs_prom.outcomes.objectives import (
    EpisodeObjectives,
    Integrals,
    composite,
    demand_fraction,
    episode_objectives,
    horizon,
)
from drs_prom.outcomes.objectives import segment as objective_segment
from drs_prom.outcomes.reward import composite_reward, cpu_mem_utilisation
from drs_prom.policies.contract import DecisionContext, Policy, choose, input_scales
from drs_prom.policies.resident import ResidentLoad
from drs_prom.registry import PolicySpec, configured_spec, make_policy
from drs_prom.signals.link_capacity import full_matrix
from drs_prom.signals.state import node_matrix, pod_matrix, scales
from drs_prom.sim.cluster import Cluster, Nodes
from drs_prom.sim.neighbours import has_interpod, sim_neighbours
from drs_prom.sim.scenario import Scenario
from drs_prom.sim.source import SimSource
from drs_prom.sim.usage_history import SimUsageHistory
from drs_prom.sim.workload import Workload, generate
from drs_prom.sim.zonal_volumes import workload_storage
from drs_prom.types import NodeInfo, PodRequest
from drs_prom.usage.estimator import UsageModel, estimate, shipped_usage_model

ESTIMATED, TOLD = "estimated", "told"
INFORMATION: tuple[str, ...] = (ESTIMATED, TOLD)
"""What a policy is told of a pod's usage: ``estimated`` from the stored series (what a live scheduler can know;
the default behind every published number), or ``told`` the workload's expected usage (a labelled oracle)."""


class Rebalancing(Protocol):
    """What moves running pods while an episode runs (drs_prom.sim.rebalancer): called every ``step_seconds`` of
    simulated time with the env, from the episode's start; it may evict pods (``SchedulingEnv.evict``), whose
    replacements the policy then places like any pending pod."""

    step_seconds: float

    def reset(self, env: SchedulingEnv) -> None: ...

    def tick(self, env: SchedulingEnv) -> None: ...


@dataclass(frozen=True)
class FinishedPod:
    name: str
    profile: str
    node: str
    arrival: float
    start: float
    finish: float
    work: float

    @property
    def completion(self) -> float:
        """Seconds from arrival (not bind) to finish: queueing counts."""
        return self.finish - self.arrival

    @property
    def slowdown(self) -> float:
        """Completion time over the work at full speed (1.0 = no wait, no contention)."""
        return self.completion / self.work


@dataclass(frozen=True)
class StepInfo:
    """What happened because of one bind (load matrices normalised like ``ctx.load``).

    ``load_after`` and ``util_after`` come from the settle look-ahead, computed on first
    access (a benchmark that never reads them skips it). drs_prom.sim.step_reward turns
    this into the reward's Outcome.
    """

    pod: str
    node: str
    node_index: int
    t: float  # simulated seconds at the bind
    load_before: np.ndarray  # (n, N_FEATURES) = ctx.load of this decision
    requested_after: np.ndarray  # (n, 2) requested/allocatable cpu and memory after the bind
    finished: tuple[FinishedPod, ...]  # pods that finished between this bind and the next decision
    queue_length: int  # pods waiting because nothing fits, at the next decision
    settle_seconds: float
    _settle: Callable[[], tuple[np.ndarray, np.ndarray]] = field(repr=False, compare=False)
    span: Integrals = field(default_factory=Integrals)
    """Objective integrals from this bind to the next decision (the episode's end for the last one)."""
    horizon: float = 1.0
    """The episode's contention-free span (objectives.horizon), the denominator of its time averages."""
    n_pods: int = 1
    """Scheduled pods in the episode, the denominator of its per-pod averages."""

    @cached_property
    def _settled(self) -> tuple[np.ndarray, np.ndarray]:
        return self._settle()

    @property
    def load_after(self) -> np.ndarray:
        """(n, N_FEATURES) as the metrics show it settle_seconds after the bind (look-ahead, no other binds)."""
        return self._settled[0]

    @property
    def metrics_after(self) -> np.ndarray:
        """(n, N_FEATURES) raw node features (FEATURES units) as the metrics show them at settle time."""
        return self._settled[1]

    @property
    def util_after(self) -> float:
        """Mean over nodes of the metrics' raw cpu and memory fractions at settle time (reward.cpu_mem_utilisation)."""
        return cpu_mem_utilisation(self._settled[1])

    def composite_reward(self, settings: ObjectiveSettings | None = None) -> float:
        """The default reward of this step: its share of minus the composite score (drs_prom.outcomes.reward)."""
        return composite_reward([p.slowdown for p in self.finished], self.span, self.n_pods, self.horizon, settings)


@dataclass
class EpisodeResult:
    """Outcome of one policy on one seeded workload; times are simulated seconds except *_wall."""

    policy: str
    scenario: str
    seed: int
    n_nodes: int
    decisions: int
    imbalance: float  # DRS: sum over features of std across nodes, time-averaged (true load, scenario's scales)
    utilisation: float  # time-averaged mean over nodes and resources of used/capacity
    completion_mean: float
    completion_p95: float
    slowdown_mean: float
    makespan: float
    max_queue: int
    wall_seconds: float
    policy_seconds: float
    series_t: list[float] = field(default_factory=list)
    series_imbalance: list[float] = field(default_factory=list)
    series_utilisation: list[float] = field(default_factory=list)
    objectives: EpisodeObjectives | None = None
    composite: float = float("nan")  # objectives.composite with the env's ObjectiveSettings; lower is better
    rebalance: dict[str, float] | None = None  # with a rebalancer: its evictions and where replacements went

    def objective_dict(self) -> dict[str, float]:
        """The episode's objectives by name; every episode the env finishes has them."""
        if self.objectives is None:
            raise ValueError("this episode result carries no objectives")
        return self.objectives.as_dict()

    @property
    def decisions_per_second(self) -> float:
        """Policy throughput (scoring + choice only)."""
        return self.decisions / self.policy_seconds if self.policy_seconds > 0 else float("inf")

    @property
    def placements_per_second(self) -> float:
        """Whole-simulation throughput: decisions over wall time including the simulator."""
        return self.decisions / self.wall_seconds if self.wall_seconds > 0 else float("inf")

    def summary(self) -> dict[str, float]:
        out = {
            "imbalance": self.imbalance,
            "utilisation": self.utilisation,
            "completion_mean": self.completion_mean,
            "completion_p95": self.completion_p95,
            "makespan": self.makespan,
            "decisions_per_s": self.decisions_per_second,
        }
        if self.objectives is not None:
            out |= {"composite": self.composite} | {
                k: v for k, v in self.objectives.as_dict().items() if k not in ("utilisation",)
            }
        return out


def scaled_load(used: np.ndarray, capacity: np.ndarray, norm: Normalisation) -> np.ndarray:
    """Absolute load (..., n, N_FEATURES) on the benchmark's scales: cpu/mem as fractions of capacity, then ``norm``."""
    raw = np.array(used, dtype=np.float64)
    raw[..., :2] /= capacity[..., :2]
    m = raw / scales(norm)
    return np.clip(m, 0.0, 1.0) if norm.clip else m


class _Recorder:
    """Time-weighted imbalance and utilisation over constant-rate segments, plus a sampled series,
    and the objectives' integrals (uncapped demand read from ``cluster`` for the same segment)."""

    def __init__(
        self, nodes: Nodes, norm: Normalisation, interval: float, cluster: Cluster, hot_fraction: float
    ) -> None:
        self.cap = nodes.capacity
        self.norm = norm
        self.interval = interval
        self.cluster = cluster
        self.hot_fraction = hot_fraction
        self.totals = Integrals()
        self.next_sample = 0.0
        self.imb_dt = self.util_dt = self.total = 0.0
        self.t: list[float] = []
        self.imb: list[float] = []
        self.util: list[float] = []

    @property
    def imbalance(self) -> float:
        """Time-averaged imbalance so far (the benchmark's measure)."""
        return self.imb_dt / self.total if self.total else 0.0

    def __call__(self, t0: float, t1: float, used: np.ndarray) -> None:
        m = scaled_load(used, self.cap, self.norm)
        imb = float(m.std(axis=0).sum())  # state.imbalance without the NaN handling (true load has none)
        util = float(np.mean(used / self.cap))
        dt = t1 - t0
        self.imb_dt += imb * dt
        self.util_dt += util * dt
        self.total += dt
        frac = demand_fraction(self.cluster.demand(), self.cap)  # the cluster calls us before it moves on
        self.totals = self.totals + objective_segment(dt, frac, imb, util, self.hot_fraction)
        while self.next_sample < t1:
            self.t.append(self.next_sample)
            self.imb.append(imb)
            self.util.append(util)
            self.next_sample += self.interval


class SchedulingEnv:
    """Seeded episodes of one scenario. ``reset(seed=None)`` uses ``seed``, ``seed+1``, ... on successive resets.

    ``norm`` (default: the scenario's) scales what the policy sees (ctx.load, ctx.pod_load,
    StepInfo loads); EpisodeResult metrics always use the scenario's scales.
    """

    def __init__(
        self,
        scenario: Scenario,
        seed: int = 0,
        norm: Normalisation | None = None,
        objectives: ObjectiveSettings | None = None,
        information: str = ESTIMATED,
        usage_model: UsageModel | None = None,
        rebalancer: Rebalancing | None = None,
    ) -> None:
        """``rebalancer``: what moves running pods during each episode (drs_prom.sim.rebalancer); None: nothing."""
        if information not in INFORMATION:
            raise ValueError(f"information must be one of {', '.join(INFORMATION)}, got {information!r}")
        self.scenario = scenario
        self.information = information
        self.usage_model = usage_model or _shipped_usage_model()
        self.seed = int(seed)
        self.norm = norm or scenario.norm
        self.objective_settings = objectives or ObjectiveSettings()
        self.nodes = Nodes.from_scenario(scenario)
        self.node_names = list(self.nodes.names)
        self.settle = scenario.settle_seconds
        self._resets = 0
        self.episode_seed = self.seed
        self.ctx: DecisionContext | None = None
        # the value of ctx.load at which each node's resource is full (cpu/mem are fractions of the node)
        self._full = full_matrix(self.nodes.capacity[:, 2:], scales(self.norm))
        self._static = chain.StaticMasks(self.nodes.infos)  # nodes never change within a scenario
        self._soft_tainted = any(taint_score.has_soft_taint(n) for n in self.nodes.infos)
        self._interpod = False
        self.rebalancer = rebalancer
        self.deciding: Policy | None = None
        """The policy ``run`` decides with (what a rebalancer asks where a replacement would go)."""
        self.prefer_not: np.ndarray | None = None
        """(n,) True on nodes carrying a PreferNoSchedule taint a rebalancer put there (None: none)."""

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    # --- episode ---------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> DecisionContext:
        if seed is None:
            seed = self.seed + self._resets
        self._resets += 1
        self.episode_seed = int(seed)
        self.workload: Workload = generate(self.scenario, self.episode_seed)
        self.cluster = Cluster(self.nodes, self.workload, metric_window=self.scenario.metric_window_seconds)
        self._interpod = has_interpod(self.workload)  # else the inter-pod filters have nothing to check
        self._storage = workload_storage(self.workload)  # the volume_zones pods' bound claims
        self.source = SimSource(self.cluster)
        self.history = SimUsageHistory(self.cluster, self.scenario.metric_window_seconds)
        # metrics always on the scenario's scales, so policies seeing other scales still compare
        self._own_recorder = _Recorder(
            self.nodes,
            self.scenario.norm,
            self.scenario.sample_interval_seconds,
            self.cluster,
            self.objective_settings.hot_fraction,
        )
        self.recorder: Callable[[float, float, np.ndarray], None] = self._own_recorder  # a test may wrap it
        self.scheduled = self.workload.scheduled
        self._pinned = self.workload.pinned
        self.n_scheduled = self.workload.n_scheduled
        self.horizon = horizon(self.workload.arrival[self.scheduled], self.workload.work[self.scheduled])
        self._next_arrival = 0
        self._open = self.n_scheduled  # scheduled pods not finished yet
        self._pending: deque[int] = deque()
        self._queue: deque[int] = deque()
        self._finished: list[FinishedPod] = []
        # expected load of the pods the policy placed, until they end, and then faded over the metrics' window
        self.resident = ResidentLoad(self.scenario.metric_window_seconds)
        self._current = -1
        self.decisions = 0
        self.max_queue = 0
        self.evictions: list[tuple[float, int, int]] = []  # (t, pod, node it left)
        self.landed: list[tuple[int, int, int]] = []  # (pod, node it left, node its replacement went to)
        self._evicted_from: dict[int, int] = {}
        self.prefer_not = None
        self._next_tick = float("inf")
        if self.rebalancer is not None:
            self.rebalancer.reset(self)
            self._next_tick = self.rebalancer.step_seconds
        ctx = self._advance_to_decision()
        if ctx is None:  # pragma: no cover - scenarios always have >= 1 pod
            raise RuntimeError("scenario produced no decisions")
        return ctx

    @property
    def arrived(self) -> int:
        """How many pods of the workload (in arrival order) have arrived so far."""
        return self._next_arrival

    def replace_future(self, workload: Workload) -> None:
        """Play the rest of the episode on ``workload``: the same first ``arrived`` pods, other pods to come (the
        look-ahead's sampled futures); the episode's counts and horizon follow the new workload."""
        arrived = self._next_arrival
        self.cluster.replace_future(workload, arrived)
        self.workload = workload
        self._interpod = has_interpod(workload)
        self._storage = workload_storage(workload)
        self.scheduled = workload.scheduled
        self._pinned = workload.pinned
        self.n_scheduled = workload.n_scheduled
        done = int((~np.isnan(self.cluster.finish[:arrived]) & self.scheduled[:arrived]).sum())
        self._open = self.n_scheduled - done
        self.horizon = horizon(workload.arrival[self.scheduled], workload.work[self.scheduled])

    def step(self, action: int) -> tuple[DecisionContext | None, StepInfo, bool]:
        ctx = self.ctx
        if ctx is None:
            raise RuntimeError("step() called with no pending decision; call reset()")
        action = int(action)
        if not 0 <= action < self.n_nodes or not ctx.feasible[action]:
            raise ValueError(f"node index {action} is not feasible for pod {ctx.pod.name}")
        pod = self._current
        c = self.cluster
        c.bind(pod, action)
        if self._evicted_from:
            left = self._evicted_from.pop(pod, None)
            if left is not None:
                self.landed.append((pod, left, action))
        self.resident.add(pod, self.node_names[action], ctx.pod_load[action])
        self.decisions += 1
        requested = np.stack([c.req_cpu_m / self.nodes.alloc_cpu_m, c.req_mem / self.nodes.alloc_mem], axis=1)
        look = c.copy()
        settle = partial(self._settle, look, c.t + self.settle)
        seen = len(self._finished)
        before = self._totals()
        nxt = self._advance_to_decision()
        info = StepInfo(
            pod=ctx.pod.name,
            node=self.node_names[action],
            node_index=action,
            t=look.t,
            load_before=ctx.load,
            requested_after=requested.astype(np.float32),
            finished=tuple(self._finished[seen:]),
            queue_length=len(self._queue),
            settle_seconds=self.settle,
            _settle=settle,
            span=self._totals() - before,
            horizon=self.horizon,
            n_pods=self.n_scheduled,
        )
        return nxt, info, nxt is None

    @property
    def current_pod(self) -> int:
        """Workload index of the pod the current context is for (-1 between episodes)."""
        return self._current

    def _totals(self) -> Integrals:
        """The objectives' integrals so far."""
        return self._own_recorder.totals

    def _settle(self, look: Cluster, until: float) -> tuple[np.ndarray, np.ndarray]:
        """Advance the look-ahead copy to ``until`` with no further binds and read it like the metrics would:
        normalised, and raw as rebuilt history reads it (drs_prom.outcomes.reward)."""
        while look.t < until - 1e-9:
            look.advance(until)
        features = SimSource(look).snapshot().features  # frame is in node order
        return node_matrix(features, self.norm), features.to_numpy(dtype=np.float64)

    def pod_request(self, pod: int) -> PodRequest:
        """Pod ``pod`` as the policy is told it: its spec, and its usage as ``information`` says."""
        req = self.workload.pod_request(pod)
        if self.information == TOLD:
            return replace(req, demand_source=TOLD)
        t, h = self.cluster.t, self.history
        owner = req.owner or ""
        got = estimate(
            req.cpu_m,
            req.mem_bytes,
            h.owner(req.namespace, owner, t),
            h.image(req.namespace, req.image, owner, t),
            self.usage_model,
            t,
        )
        return replace(req, demand=got.demand, demand_source=got.source)

    def _context(self, pod: int, cluster: Cluster | None = None) -> DecisionContext | None:
        """The decision for ``pod`` on the cluster (``cluster``: another state of it, a rebalancer's what-if)."""
        c = self.cluster if cluster is None else cluster
        req = self.pod_request(pod)
        near, hints = self._placed(c)
        mask = chain.feasible(req, self._static, c.arrays(), near, hints)
        if not mask.any():
            return None
        nodes = c.node_infos()
        snap = (self.source if cluster is None else SimSource(c)).snapshot()
        load = node_matrix(snap.features, self.norm)  # SimSource frames are in node order
        assert req.demand is not None
        pod_load = pod_matrix(req.demand, self.nodes.capacity[:, 0], self.nodes.capacity[:, 1], self.norm)
        return DecisionContext(
            pod=req,
            nodes=nodes,
            feasible=mask,
            load=load,
            pod_load=pod_load,
            now=self.cluster.t,
            full=self._full,
            resident=self.resident.matrix(self.node_names),
            ended=self.resident.ended(self.node_names, self.cluster.t),
            soft_scores=self._soft_scores(req, nodes, mask, near),
        )

    def _soft_scores(
        self, req: PodRequest, nodes: Sequence[NodeInfo], mask: np.ndarray, near: Callable[[], Neighbours]
    ) -> np.ndarray | None:
        """The score terms every policy sees, as the live scheduler adds them (scheduler.watch.nodes.NodeView.
        soft_scores): the pod's ScheduleAnyway spread over the placed pods ``near``, and TaintToleration's term for the
        nodes' own PreferNoSchedule taints and the one a rebalancer put on ``prefer_not``; None without any."""
        if not req.soft_spread and self.prefer_not is None and not self._soft_tainted:
            return None
        at = np.flatnonzero(mask)
        extra = None if self.prefer_not is None else self.prefer_not[at]
        return soft_terms.terms(req, nodes, at.tolist(), mask, near, self._soft_tainted, extra)

    def what_if_evicted(self, pod: int, before: Sequence[tuple[int, int]] = ()) -> DecisionContext | None:
        """The decision the policy would face for ``pod``'s replacement if it were evicted now, after the pods of
        ``before`` were moved to the nodes given with them (None: no node would take it)."""
        look = self.cluster.copy()
        resident = self.resident
        self.resident = _without(resident, [pod, *(other for other, _ in before)], look.t)
        for other, node in before:
            look.evict(other)
            look.bind(other, node)
        look.evict(pod)
        try:
            return self._context(pod, look)
        finally:
            self.resident = resident

    def evict(self, pod: int, extra_seconds: float = 0.0, lose_progress: bool = False) -> int:
        """Evict running ``pod`` (its replacement waits to be placed, first in line); returns the node it left."""
        node = self.cluster.evict(pod, extra_seconds, lose_progress)
        self.resident.drop(pod, self.cluster.t)
        self.evictions.append((self.cluster.t, pod, node))
        self._evicted_from[pod] = node
        self._pending.append(pod)
        return node

    def surge_context(self, pod: int) -> DecisionContext | None:
        """The decision the policy faces for a replica of running ``pod`` made before the pod goes (a surge): the
        cluster as it is, the pod still on its node (None: no node would take it)."""
        return self._context(pod)

    def surge(self, pod: int, node: int) -> None:
        """A replica of running ``pod`` starts on ``node``: it holds the pod's requests there until ``switch`` (or
        ``abandon_surge``); its own use while it starts is not modelled, the pod goes on running where it is."""
        self.cluster.hold(pod, node)

    def switch(self, pod: int, node: int, pod_load: np.ndarray, lose_progress: bool = False) -> int:
        """The replica of ``pod`` started by ``surge`` on ``node`` takes over and the pod goes (a move, counted with
        the evictions); ``pod_load``: the load the scheduler expected of it there. Returns the node the pod left."""
        t = self.cluster.t
        left = self.cluster.switch(pod, node, lose_progress)
        self.resident.drop(pod, t)
        self.resident.add(pod, self.node_names[node], pod_load)
        self.evictions.append((t, pod, left))
        self.landed.append((pod, left, node))
        return left

    def abandon_surge(self, pod: int, node: int) -> None:
        """The replica started by ``surge`` on ``node`` goes without taking over (the pod ended first, or the replica
        was placed on the pod's own node)."""
        self.cluster.hold(pod, node, -1)

    def _placed(self, cluster: Cluster | None = None) -> tuple[Callable[[], Neighbours], ClusterHints]:
        """The running pods as the PLACED-stage filters read them (interpod ones: only pods of a profile with a
        ``Placement`` carry labels, ports, terms or claims), and whether one of them has required anti-affinity."""
        if not self._interpod:
            return lambda: EMPTY, chain.NO_HINTS
        c = self.cluster if cluster is None else cluster
        near = sim_neighbours(self.workload, c.running, c.node_of, self.node_names, self._storage)
        return lambda: near, ClusterHints(near.has_anti_affinity())

    def _advance_to_decision(self) -> DecisionContext | None:
        c, wl = self.cluster, self.workload
        while True:
            while self._pending:
                pod = self._pending.popleft()
                ctx = self._context(pod)
                if ctx is not None:
                    self._current, self.ctx = pod, ctx
                    return ctx
                self._queue.append(pod)
                self.max_queue = max(self.max_queue, len(self._queue))
            t_arr = float(wl.arrival[self._next_arrival]) if self._next_arrival < len(wl) else float("inf")
            if self._open == 0 and not self._queue:  # only background left: the episode is over
                self._current, self.ctx = -1, None
                return None
            if t_arr == float("inf") and not len(c.running):
                if self._queue:  # pragma: no cover - prevented by scenario validation
                    raise RuntimeError(f"{len(self._queue)} pods can never be placed")
                self._current, self.ctx = -1, None
                return None
            done = c.advance(min(t_arr, self._next_tick), self.recorder)
            if len(done):
                for p in done:
                    if not self.scheduled[p]:
                        continue
                    self._open -= 1
                    self.resident.drop(int(p), float(c.finish[p]))
                    self._finished.append(
                        FinishedPod(
                            wl.names[p],
                            wl.profiles[p],
                            self.node_names[c.node_of[p]],
                            float(wl.arrival[p]),
                            float(c.start[p]),
                            float(c.finish[p]),
                            float(wl.work[p]),
                        )
                    )
                self._pending.extend(self._queue)  # retry waiting pods first, oldest first
                self._queue.clear()
            while self._next_tick <= c.t + 1e-12 and self.rebalancer is not None:
                self.rebalancer.tick(self)
                self._next_tick += self.rebalancer.step_seconds
            while self._next_arrival < len(wl) and wl.arrival[self._next_arrival] <= c.t + 1e-12:
                if self._pinned is not None and self._pinned[self._next_arrival] >= 0:
                    c.bind(self._next_arrival, int(self._pinned[self._next_arrival]))  # background: no decision
                else:
                    self._pending.append(self._next_arrival)
                self._next_arrival += 1

    # --- whole episodes --------------------------------------------------------------
    def run(
        self,
        policy: Policy,
        seed: int | None = None,
        on_step: Callable[[StepInfo], None] | None = None,
    ) -> EpisodeResult:
        """Run one whole episode with ``policy`` (via policy.choose) and summarise it."""
        wall0 = time.perf_counter()
        self.deciding = policy
        ctx: DecisionContext | None = self.reset(seed)
        policy_s = 0.0
        while ctx is not None:
            p0 = time.perf_counter()
            idx, _ = choose(policy, ctx)
            policy_s += time.perf_counter() - p0
            ctx, info, _ = self.step(idx)
            if on_step is not None:
                on_step(info)
        wall = time.perf_counter() - wall0
        return self.result(policy.name, wall, policy_s)

    def result(self, policy_name: str, wall_seconds: float = 0.0, policy_seconds: float = 0.0) -> EpisodeResult:
        """Summary of the finished episode."""
        c, wl, rec = self.cluster, self.workload, self._own_recorder
        sched = self.scheduled
        completion = (c.finish - wl.arrival)[sched]
        imbalance = rec.imbalance
        utilisation = rec.util_dt / rec.total if rec.total else 0.0
        objectives = episode_objectives(
            completion / wl.work[sched],
            rec.totals,
            self.horizon,
            self.objective_settings,
            drs_imbalance=imbalance,
            utilisation=utilisation,
        )
        return EpisodeResult(
            policy=policy_name,
            scenario=self.scenario.name,
            seed=self.episode_seed,
            n_nodes=self.n_nodes,
            decisions=self.decisions,
            imbalance=imbalance,
            utilisation=utilisation,
            completion_mean=float(np.nanmean(completion)),
            completion_p95=float(np.nanpercentile(completion, 95)),
            slowdown_mean=float(np.nanmean(completion / wl.work[sched])),
            makespan=float(np.nanmax(c.finish[sched]) - wl.arrival[sched][0]),
            max_queue=self.max_queue,
            wall_seconds=wall_seconds,
            policy_seconds=policy_seconds,
            series_t=list(rec.t),
            series_imbalance=list(rec.imb),
            series_utilisation=list(rec.util),
            objectives=objectives,
            composite=composite(objectives, self.objective_settings),
            rebalance=None if self.rebalancer is None else self._rebalance_stats(),
        )

    def _rebalance_stats(self) -> dict[str, float]:
        """The evictions of the episode (per node-hour of the simulated time), and where the replacements went."""
        node_hours = self.n_nodes * self._own_recorder.total / 3600.0
        back = sum(1 for _, left, went in self.landed if left == went)
        return {
            "evictions": float(len(self.evictions)),
            "evictions_per_node_hour": len(self.evictions) / node_hours if node_hours > 0 else 0.0,
            "landed_back": float(back),
            "landed_back_share": back / len(self.landed) if self.landed else 0.0,
        }


def _without(resident: ResidentLoad, pods: Sequence[int], at: float) -> ResidentLoad:
    """A copy of ``resident`` in which ``pods`` ended at ``at`` (as a scheduler's memory drops an evicted pod: its load
    still fades out of the metrics); the running sums' maps copied, the memory of ended pods deep-copied (small),
    the rest shared: a deep copy of all costs more than the decision it serves."""
    state = resident.__getstate__()
    for name, value in state.items():
        state[name] = dict(value) if isinstance(value, dict) else copy.deepcopy(value)
    out = ResidentLoad.__new__(ResidentLoad)
    out.__setstate__(state)
    for pod in pods:
        out.drop(pod, at)
    return out


_SHIPPED: list[UsageModel] = []


def _shipped_usage_model() -> UsageModel:
    """The shipped usage model, read once per process."""
    if not _SHIPPED:
        _SHIPPED.append(shipped_usage_model())
    return _SHIPPED[0]


def policy_norm(policy: Policy, scenario: Scenario) -> Normalisation:
    """The scales a policy sees in the simulator: drs_prom.policies.contract.input_scales over the scenario's."""
    return input_scales(policy, scenario.norm)


def unclipped_env(scenario: Scenario, seed: int, information: str = ESTIMATED) -> SchedulingEnv:
    """The env as the benchmark builds it for policies that read overload (``reads_unclipped_load``)."""
    return SchedulingEnv(
        scenario, seed=seed, norm=scenario.norm.model_copy(update={"clip": False}), information=information
    )


def scenario_spec(scenario: Scenario, spec: PolicySpec | None = None) -> PolicySpec:
    """``spec`` (default: the configured one, drs_prom.registry.configured_spec) on a simulated scenario:
    the scenario's scales, and the window never shorter than its metric lag (a memory at least as long as
    the lag is also the stronger heuristic, see baselines)."""
    base = configured_spec() if spec is None else spec
    return replace(base.with_window_at_least(scenario.metric_window_seconds), normalisation=scenario.norm)


def sim_policy(name: str, scenario: Scenario, seed: int, spec: PolicySpec | None = None) -> Policy:
    """Policy ``name`` built (drs_prom.registry.make_policy) for a simulated scenario (scenario_spec)."""
    return make_policy(name, scenario_spec(scenario, spec), seed)


def fit_to_scenario(policy: Policy, scenario: Scenario) -> Policy:
    """A policy constructed directly (research code, tests) given the memory sim_policy would have built it with:
    the configured rate window, never shorter than the scenario's metric lag."""
    if policy.recent is not None:
        policy.recent.window_seconds = scenario_spec(scenario).metric_window_seconds
    return policy
