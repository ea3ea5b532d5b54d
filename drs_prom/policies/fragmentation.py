"""Fragmentation Gradient Descent (``fgd``) for whole GPUs: the bind that grows the expected unusable GPUs least.

Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent" (USENIX
ATC 2023), define the fragmentation of a node with respect to a workload as the GPUs of the node that a typical pod
of the workload could not use there, expected over the workload's distribution of pods; FGD binds each pod where
that fragmentation grows least (hkust-adsl/kubernetes-scheduler-simulator pkg/utils/frag.go, fgd_score.go).

Adapted to whole GPUs (the extended resource ``nvidia.com/gpu``, no sharing) and to what drs-prom's filters check:

- a node with G free GPUs, C free cpu, M free memory and room for P more pods can host a pod shape (g GPUs, c cpu,
  m memory) when g >= 1, g <= G, c <= C, m <= M, P >= 1 and no filter other than NodeResourcesFit refuses the
  shape's constraints there (its node selector, required node affinity and tolerations: a GPU-model constraint);
- the fragmentation of the node is ``F = G * (1 - sum_s p_s * hosts(node, s))`` over the shapes s with probability
  p_s: all G free GPUs are fragments for a shape that does not fit (the paper's "lack GPU", "lack CPU", "lack both"
  and "no access" cases) and none for a shape that fits (whole GPUs leave no partly used GPU, which the paper counts
  for shared ones), and all of them for a shape that asks for no GPU (the paper counts every idle GPU as a fragment
  for a non-GPU pod). Memory is checked as well (the paper's nodes have cpu and GPUs only);
- the score of a node is ``F_before - F_after``, the decrease of its fragmentation if the pod is bound there
  (higher is better); ties (equal to 1e-9) are broken uniformly at random (seeded), as kube-scheduler's selectHost
  does. The paper's simulator maps the same difference through ``int(100 * sigmoid(diff))``, which changes no
  order but merges close values into ties; here the difference decides exactly. A pod asking for no GPU is scored
  the same way, as in the paper: the cpu and memory it takes on a GPU node can leave typical GPU pods no room, so
  it goes where that costs no GPU (CPU-only nodes give 0);
- the distribution: the paper counts the shapes of the whole trace. A scheduler knows the pods it has decided, so
  ``p_s`` is the share of shape s among the last ``size`` pods this policy was told were bound (recorded by
  ``bound``) and the pod being decided. Pods that no node could take are never bound, so they are not counted.
  The paper keeps the most common shapes that make up 95 % of pods; every remembered shape counts here.
- which nodes a shape's constraints admit is learned from the binds: once a pod with the same constraints found a
  node infeasible although its requests fitted there, a filter other than NodeResourcesFit refused it, and the node
  no longer hosts that shape. A node never seen so is taken to admit it. A refusal is kept until more than
  MAX_CONSTRAINTS constraint sets have been seen (then all are forgotten), so a node refused while cordoned counts
  as refusing until then; this changes which free GPUs count as fragments, never where a pod may go.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from drs_prom.policies.contract import DecisionContext, PolicyBase, node_requests
from drs_prom.policies.device_fit import GPU, device_columns, pod_devices
from drs_prom.types import NodeInfo, PodRequest

DEFAULT_SHAPES = 1000
"""Pods remembered: openb's default pod list (8,152 pods) has 112 distinct (whole GPUs, cpu, memory) shapes; the 35
most common make up 95 % of its pods, and a random thousand of its pods nearly always holds all 35."""
MAX_CONSTRAINTS = 256
"""Distinct constraint sets whose refusals are remembered (a bound on memory); more start the memory over."""
TIE = 1e-9
"""Score differences below this are ties, broken at random."""

Shape = tuple[int, int, int, Hashable]
"""(GPUs, cpu millicores, memory bytes, constraint key) of a pod."""


def constraint_key(pod: PodRequest) -> Hashable:
    """What decides which nodes' filters (other than NodeResourcesFit) admit a pod: its node selector, required node
    affinity and tolerations."""
    return (tuple(sorted(pod.node_selector.items())), pod.affinity_terms, pod.tolerations)


def shape_of(pod: PodRequest, resource: str = GPU) -> Shape:
    return (pod_devices(pod, resource), int(pod.cpu_m), int(pod.mem_bytes), constraint_key(pod))


@dataclass(frozen=True)
class Free:
    """What each node has left: GPUs, cpu millicores, memory bytes, pods (float64 arrays of one length)."""

    gpus: np.ndarray
    cpu_m: np.ndarray
    mem_bytes: np.ndarray
    pods: np.ndarray

    def after(self, gpus: float, cpu_m: float, mem_bytes: float) -> Free:
        """What is left once a pod with these requests is bound on every node (each node on its own)."""
        return Free(self.gpus - gpus, self.cpu_m - cpu_m, self.mem_bytes - mem_bytes, self.pods - 1.0)

    def take(self, rows: np.ndarray) -> Free:
        return Free(self.gpus[rows], self.cpu_m[rows], self.mem_bytes[rows], self.pods[rows])


def free_of(ctx: DecisionContext, resource: str = GPU) -> Free:
    """What every node of ``ctx`` has left of its allocatable."""
    req = node_requests(ctx)
    alloc, used = device_columns(ctx.nodes, resource)
    return Free((alloc - used).astype(np.float64), req[:, 1] - req[:, 0], req[:, 3] - req[:, 2], req[:, 5] - req[:, 4])


@dataclass(frozen=True)
class ShapeMix:
    """A distribution of pod shapes: k distinct shapes, their probabilities, and the nodes each one's constraints
    admit (k, n)."""

    gpus: np.ndarray
    cpu_m: np.ndarray
    mem_bytes: np.ndarray
    prob: np.ndarray
    admits: np.ndarray

    def take(self, rows: np.ndarray) -> ShapeMix:
        """The same shapes on a subset of the nodes (columns)."""
        return ShapeMix(self.gpus, self.cpu_m, self.mem_bytes, self.prob, self.admits[:, rows])


def fragmentation(free: Free, mix: ShapeMix) -> np.ndarray:
    """Per node: its free GPUs that a pod drawn from ``mix`` could not use there, expected over the mix
    (``G * (1 - P(the drawn pod asks for GPUs and fits))``; see the module docstring)."""
    g = mix.gpus[:, None]
    hosts = (
        mix.admits
        & (g > 0)
        & (g <= free.gpus[None, :])
        & (mix.cpu_m[:, None] <= free.cpu_m[None, :])
        & (mix.mem_bytes[:, None] <= free.mem_bytes[None, :])
        & (free.pods[None, :] >= 1.0)
    )
    usable = mix.prob @ hosts
    return np.asarray(np.maximum(free.gpus, 0.0) * (1.0 - usable))


def fragmentation_growth(free: Free, mix: ShapeMix, gpus: int, cpu_m: int, mem_bytes: int) -> np.ndarray:
    """Per node: how much its fragmentation would grow if a pod with these requests were bound there."""
    out = np.zeros(len(free.gpus))
    rows = np.flatnonzero(free.gpus > 0)  # a node without free GPUs has no fragments, before or after
    if len(rows):
        part, shapes = free.take(rows), mix.take(rows)
        out[rows] = fragmentation(part.after(gpus, cpu_m, mem_bytes), shapes) - fragmentation(part, shapes)
    return out


class RecentDeviceShapes:
    """The shapes of the last ``size`` pods bound, and, per constraint key, the nodes that refused it."""

    def __init__(self, size: int = DEFAULT_SHAPES, resource: str = GPU) -> None:
        if size < 1:
            raise ValueError(f"size must be at least 1, got {size}")
        self.size = size
        self.resource = resource
        self._ring: list[Shape] = []
        self._next = 0
        self._counts: Counter[Shape] = Counter()
        self._refused: dict[Hashable, set[str]] = {}

    def __len__(self) -> int:
        return len(self._ring)

    def record(self, ctx: DecisionContext) -> None:
        """Remember ``ctx.pod``'s shape, and the nodes where something other than its requests kept it off."""
        shape = shape_of(ctx.pod, self.resource)
        if len(self._ring) < self.size:
            self._ring.append(shape)
        else:
            old = self._ring[self._next]
            self._counts[old] -= 1
            if self._counts[old] <= 0:
                del self._counts[old]
            self._ring[self._next] = shape
        self._next = (self._next + 1) % self.size
        self._counts[shape] += 1
        refused = ~np.asarray(ctx.feasible, bool) & requests_fit(ctx)
        if refused.any():
            key = shape[3]
            if key not in self._refused and len(self._refused) >= MAX_CONSTRAINTS:
                self._refused.clear()
            self._refused.setdefault(key, set()).update(ctx.nodes[i].name for i in np.flatnonzero(refused).tolist())

    def mix(self, ctx: DecisionContext) -> ShapeMix:
        """The remembered shapes and ``ctx.pod``'s own, with their shares, over ``ctx.nodes``; records nothing."""
        counts = self._counts.copy()
        counts[shape_of(ctx.pod, self.resource)] += 1
        shapes = list(counts)
        total = float(sum(counts.values()))
        admits = np.ones((len(shapes), len(ctx.nodes)), dtype=bool)
        masks: dict[Hashable, np.ndarray] = {}
        for row, (_, _, _, key) in enumerate(shapes):
            refused = self._refused.get(key)
            if refused:
                if key not in masks:
                    masks[key] = _admitted(ctx.nodes, refused)
                admits[row] = masks[key]
        return ShapeMix(
            gpus=np.array([s[0] for s in shapes], dtype=np.float64),
            cpu_m=np.array([s[1] for s in shapes], dtype=np.float64),
            mem_bytes=np.array([s[2] for s in shapes], dtype=np.float64),
            prob=np.array([counts[s] / total for s in shapes], dtype=np.float64),
            admits=admits,
        )


class DeviceShapes:
    """A RecentDeviceShapes per device resource, made when a resource is first seen: the memory of a stage that
    narrows per device resource (drs_prom.policies.device_stage, drs_prom.policies.whole_reserve)."""

    def __init__(self, size: int = DEFAULT_SHAPES) -> None:
        self.size = size
        self._by_resource: dict[str, RecentDeviceShapes] = {}

    def __len__(self) -> int:
        """The device resources with a memory."""
        return len(self._by_resource)

    def of(self, resource: str) -> RecentDeviceShapes:
        if resource not in self._by_resource:
            self._by_resource[resource] = RecentDeviceShapes(self.size, resource)
        return self._by_resource[resource]

    def record(self, ctx: DecisionContext, resources: Sequence[str]) -> None:
        """Remember ``ctx``'s pod for each of ``resources``."""
        for resource in resources:
            self.of(resource).record(ctx)


def _admitted(nodes: Sequence[NodeInfo], refused: set[str]) -> np.ndarray:
    return np.fromiter((x.name not in refused for x in nodes), dtype=bool, count=len(nodes))


def requests_fit(ctx: DecisionContext) -> np.ndarray:
    """Per node: whether ctx.pod's requests (cpu, memory, a pod slot, every extended resource) fit what is left."""
    req = node_requests(ctx)
    pod = ctx.pod
    ok = req[:, 4] + 1 <= req[:, 5]
    if pod.cpu_m > 0:
        ok &= pod.cpu_m <= req[:, 1] - req[:, 0]
    if pod.mem_bytes > 0:
        ok &= pod.mem_bytes <= req[:, 3] - req[:, 2]
    for name, amount in pod.scalar:
        if amount > 0:
            alloc, used = device_columns(ctx.nodes, name)
            ok &= amount <= alloc - used
    return np.asarray(ok)


class FragmentationGradientDescent(PolicyBase):
    """FGD on whole GPUs: the node whose expected unusable GPUs grow least (see the module docstring)."""

    name = "fgd"

    def __init__(self, seed: int = 0, metric_window_seconds: float = 0.0, size: int = DEFAULT_SHAPES) -> None:
        del metric_window_seconds  # reads requests only
        self.shapes = RecentDeviceShapes(size)
        self._rng = np.random.default_rng(seed)

    def score(self, ctx: DecisionContext) -> np.ndarray:
        pod = ctx.pod
        growth = fragmentation_growth(
            free_of(ctx), self.shapes.mix(ctx), pod_devices(pod), int(pod.cpu_m), int(pod.mem_bytes)
        )
        decrease = np.round(-growth / TIE) * TIE
        return decrease + self._rng.uniform(0.0, TIE / 2, size=len(ctx.nodes))

    def bound(self, ctx: DecisionContext, node: int) -> None:
        del node  # the shape and the refusals do not depend on where the pod went
        self.shapes.record(ctx)
