"""The fill protocol's cluster and pod sequence for one sampling seed (drs_prom.sim.fill places it).

- the nodes: every node of the trace, or ``--trace-nodes`` of them stratified as the replay samples them (the
  same nodes as ``bench --trace`` for the same seed);
- the pods: every pod of the pod list, whatever its phase (the list is the workload's distribution of shapes, as
  the paper's simulator takes it), less those that fit no node even when it is empty (counted); a pod asking for
  part of a GPU gets a whole one (GPU sharing is not modelled), or the trace is refused (``gpu_sharing: refuse``);
- the sequence: the list in a seeded random order, then pods drawn from the list again, uniformly with replacement,
  until the arrived requests of the resource reach ``target`` times the cluster's capacity; a list that asks for
  more stops at the pod that reaches it. Each position draws its own usage from the trace's usage model.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from drs_prom.constraints import chain
from drs_prom.constraints.framework import NodeArrays
from drs_prom.errors import ConfigError
from drs_prom.features import N_FEATURES
from drs_prom.policies.fragmentation import ShapeMix, constraint_key
from drs_prom.sim.cluster import Nodes
from drs_prom.sim.scenario import GPU_RESOURCE, Scenario
from drs_prom.sim.trace_formats import TraceTable, read_trace
from drs_prom.sim.trace_sample import _whole_gpus, node_types, sample_nodes, usage_ratios  # the replay's rule
from drs_prom.sim.trace_spec import ReplayPods
from drs_prom.sim.workload import replayed
from drs_prom.types import PodRequest

NODE_SEED, ORDER_SEED = 0x7ACE, 0xF111
"""Streams of a sampling seed: the node sample (the replay's, drs_prom.sim.trace_sample) and the pod sequence."""
PLACEHOLDER_PROFILE = {
    "demand": {"cpu_cores": 0, "mem_bytes": 0},
    "requests": {"cpu_m": 0, "mem_bytes": 0},
    "work_seconds": 1,
    "tolerations": [{"operator": "Exists"}],
}
"""The one profile the filled scenario names (validation wants one); the pods are the list's."""


@dataclass(frozen=True)
class FillSpec:
    """What to fill with and where to look: the resource, the share of its capacity to reach, the curve's steps."""

    target: float = 1.3
    """Stop once the arrived requests of ``resource`` reach this share of the cluster's capacity of it."""
    resource: str = GPU_RESOURCE
    """``cpu``, ``memory`` or an extended resource the nodes offer (whole GPUs: ``nvidia.com/gpu``)."""
    step: float = 0.05
    """The curve's points are the multiples of this share from ``start`` to ``target``, with 1.0 and ``target``."""
    start: float = 0.5
    """The curve's first point (``step`` when the target is below it)."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.target) and 0 < self.target <= 10):
            raise ConfigError(f"--fill {self.target:g} must be a share of capacity in (0, 10], e.g. 1.3")
        if not (math.isfinite(self.step) and 0 < self.step <= self.target):
            raise ConfigError(f"--fill-step {self.step:g} must be in (0, --fill], e.g. 0.05")
        if not self.resource:
            raise ConfigError("--fill-resource must name a resource, e.g. nvidia.com/gpu")

    def checkpoints(self) -> tuple[float, ...]:
        """The arrived shares the curve reports, ascending, ``target`` last."""
        first = self.start if self.target > self.start else self.step
        k0 = math.ceil(first / self.step - 1e-9)
        points = {round(k * self.step, 9) for k in range(k0, int(self.target / self.step + 1e-9) + 1)}
        points |= {1.0} if self.target >= 1.0 else set()
        return tuple(sorted(p for p in points | {self.target} if 0 < p <= self.target))


@dataclass(frozen=True)
class FillStats:
    """What one seed's sequence holds, for its line and the report."""

    nodes: int
    capacity: float  # of the filled resource
    list_pods: int
    unfit: int  # of the list, fitting no node even when it is empty (dropped)
    shared: int  # of the list kept, asking for part of a GPU (given a whole one)
    pods: int  # in the sequence
    from_list: int  # of them, the list in random order
    drawn_again: int  # of them, drawn from the list again
    arrived: float  # share of the capacity the sequence asks for


@dataclass
class FillPods:
    """One seed's cluster and pod sequence, shared by every policy: the list's pods (``requests``, each asking for
    ``amount`` of the filled resource), the sequence as indices into them (``order``) and each position's drawn
    usage (``used``, absolute, FEATURES order)."""

    scenario: Scenario
    nodes: Nodes
    typical: ShapeMix
    """The shapes of the list, with their shares and the nodes whose NODE-stage filters admit each (the typical pods
    of the fragmentation the report measures)."""
    requests: list[PodRequest]
    amount: np.ndarray
    order: np.ndarray
    used: np.ndarray
    stats: FillStats
    spec: FillSpec


@lru_cache(maxsize=2)
def _table(path: str, fmt: str, pod_list: str) -> TraceTable:
    return read_trace(path, fmt, pod_list)


def _amounts(resource: str, pods: ReplayPods) -> np.ndarray:
    if resource == "cpu":
        return np.array(pods.cpu_m, dtype=np.float64)
    if resource == "memory":
        return np.array(pods.mem_bytes, dtype=np.float64)
    return np.array(pods.gpus if resource == GPU_RESOURCE else [0] * len(pods), dtype=np.float64)


def _capacity(resource: str, nodes: Nodes) -> float:
    if resource == "cpu":
        return float(nodes.alloc_cpu_m.sum())
    if resource == "memory":
        return float(nodes.alloc_mem.sum())
    return float(nodes.alloc_scalar[resource].sum()) if resource in nodes.alloc_scalar else 0.0


def fill_pods(scenario: Scenario, seed: int, spec: FillSpec) -> FillPods:
    """The cluster and the pod sequence of one sampling seed (the same seed gives the same sequence)."""
    trace = scenario.trace
    if trace is None:
        raise ConfigError(f"scenario {scenario.name} has no trace: section")
    table = _table(trace.path, trace.format, trace.pod_list)
    nodes_rng = np.random.default_rng(np.random.SeedSequence([int(seed), NODE_SEED]))
    sampled = sample_nodes(table.nodes, trace.nodes, nodes_rng)
    concrete = scenario.with_changes(
        nodes=node_types(sampled), profiles={"fill": PLACEHOLDER_PROFILE}, arrivals=[{"pods": 1, "rate_per_second": 1}]
    )
    nodes = Nodes.from_scenario(concrete)
    capacity = _capacity(spec.resource, nodes)
    if capacity <= 0:
        raise ConfigError(f"no node of trace {table.source} offers {spec.resource}; --fill-resource names what to fill")
    listed = list(table.pods)
    gpus = [_whole_gpus(p, trace, table.source) for p in listed]
    pods = ReplayPods(
        names=tuple(p.name for p in listed),
        arrival=(0.0,) * len(listed),
        work=(1.0,) * len(listed),
        cpu_m=tuple(p.cpu_m for p in listed),
        mem_bytes=tuple(p.mem_bytes for p in listed),
        gpus=tuple(gpus),
        cpu_used=(0.0,) * len(listed),
        mem_used=(0.0,) * len(listed),
        gpu_models=tuple(p.gpu_models for p in listed),
        node_selector=tuple(p.node_selector for p in listed),
        tolerations=tuple(p.tolerations for p in listed),
    )
    workload = replayed(pods)
    requests = [workload.pod_request(i) for i in range(len(pods))]
    static = chain.StaticMasks(nodes.infos)
    fits = _fit_empty(requests, static, nodes)
    keep = np.flatnonzero(fits)
    amount = _amounts(spec.resource, pods)
    if not keep.size or amount[keep].sum() <= 0:
        raise ConfigError(f"no pod of trace {table.source} that fits a node asks for {spec.resource}")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), ORDER_SEED]))
    order = _sequence(keep, amount, spec.target * capacity, rng)
    used = np.zeros((len(order), N_FEATURES))
    model = trace.usage
    used[:, 0] = usage_ratios(model, model.cpu_ratio, len(order), rng) * np.asarray(pods.cpu_m)[order] / 1000
    used[:, 1] = usage_ratios(model, model.mem_ratio, len(order), rng) * np.asarray(pods.mem_bytes)[order]
    stats = FillStats(
        nodes=len(nodes),
        capacity=capacity,
        list_pods=len(listed),
        unfit=len(listed) - len(keep),
        shared=sum(1 for i in keep if listed[i].gpus != int(listed[i].gpus)),
        pods=len(order),
        from_list=min(len(order), len(keep)),
        drawn_again=max(0, len(order) - len(keep)),
        arrived=float(amount[order].sum() / capacity),
    )
    typical = _typical(requests, keep, static, len(nodes))
    return FillPods(concrete, nodes, typical, requests, amount, order, used, stats, spec)


def _fit_empty(requests: Sequence[PodRequest], static: chain.StaticMasks, nodes: Nodes) -> np.ndarray:
    """Per listed pod: whether some node takes it when the cluster is empty (one filter pass per distinct pod)."""
    empty = NodeArrays(
        nodes.alloc_cpu_m,
        nodes.alloc_mem,
        nodes.alloc_pods,
        np.zeros(len(nodes), dtype=np.int64),
        np.zeros(len(nodes), dtype=np.int64),
        np.zeros(len(nodes), dtype=np.int64),
        nodes.alloc_scalar,
        {},
    )
    seen: dict[Hashable, bool] = {}
    out = np.zeros(len(requests), dtype=bool)
    for i, req in enumerate(requests):
        key = (chain.static_key(req), req.cpu_m, req.mem_bytes, req.scalar)
        if key not in seen:
            seen[key] = bool(chain.feasible(req, static, empty).any())
        out[i] = seen[key]
    return out


def _sequence(keep: np.ndarray, amount: np.ndarray, goal: float, rng: np.random.Generator) -> np.ndarray:
    """The kept pods in random order, then pods drawn again from them, up to the first that makes the arrived
    amount reach ``goal``."""
    order = rng.permutation(keep)
    total = np.cumsum(amount[order])
    while total[-1] < goal:  # the list asks for less: draw more of it, a list's length at a time
        more = rng.choice(keep, size=len(keep), replace=True)
        order = np.concatenate([order, more])
        total = np.concatenate([total, total[-1] + np.cumsum(amount[more])])
    return order[: int(np.searchsorted(total, goal - 1e-9)) + 1]


def _typical(requests: Sequence[PodRequest], keep: np.ndarray, static: chain.StaticMasks, n: int) -> ShapeMix:
    """The list's distribution of shapes, each admitted where its NODE-stage filters pass (node affinity, taints)."""
    counts: Counter[tuple[int, int, int, Hashable]] = Counter()
    sample: dict[Hashable, PodRequest] = {}
    for i in keep.tolist():
        req = requests[i]
        key = constraint_key(req)
        sample.setdefault(key, req)
        counts[(dict(req.scalar).get(GPU_RESOURCE, 0), req.cpu_m, req.mem_bytes, key)] += 1
    shapes = list(counts)
    masks = {key: static.mask(req) for key, req in sample.items()}
    total = float(sum(counts.values()))
    return ShapeMix(
        gpus=np.array([s[0] for s in shapes], dtype=np.float64),
        cpu_m=np.array([s[1] for s in shapes], dtype=np.float64),
        mem_bytes=np.array([s[2] for s in shapes], dtype=np.float64),
        prob=np.array([counts[s] / total for s in shapes], dtype=np.float64),
        admits=np.stack([masks[s[3]] for s in shapes]).reshape(len(shapes), n),
    )


def describe(seed: int, s: FillStats, spec: FillSpec) -> str:
    """One line about a seed's cluster and sequence."""
    return (
        f"seed {seed}: {s.nodes} nodes, {s.capacity:,.0f} {spec.resource}; {s.pods:,} pods ({s.from_list:,} of the "
        f"list's {s.list_pods - s.unfit:,} in random order, {s.drawn_again:,} drawn again) ask for "
        f"{100 * s.arrived:.1f} % of it; {s.unfit} fitting no node dropped, {s.shared:,} GPU shares rounded up"
    )
