"""Baselines for clusters of whole devices (GPUs): how the field places pods that ask for ``nvidia.com/gpu``.

Spreading policies leave every 8-GPU node partly used, so pods asking for a whole node wait (docs/traces.md). GPU
clusters do not run kube-scheduler's defaults; these are what they run instead. Both are baselines for GPU
clusters only (drs_prom.registry.DEVICE_HEURISTICS), not for the CPU suite.

- ``most-allocated-gpu``: kube-scheduler's default profile with NodeResourcesFit's scoring strategy set to
  MostAllocated over cpu, memory and ``nvidia.com/gpu`` (pkg/scheduler/framework/plugins/noderesources/
  most_allocated.go and resource_allocation.go)::

      s_r = min(requested_r, allocatable_r) * 100 // allocatable_r       # mostRequestedScore
      fit = sum_r(s_r * w_r) // sum_r(w_r)                                 # over the resources scored

  where requested_r includes the incoming pod (a zero cpu / memory request counts as 100m / 200Mi, as for
  kube-default). A resource is scored only where the node has some allocatable; an extended resource only for a
  pod that requests it (kube-scheduler returns (0, 0) for it and skips it), so a pod asking for no GPU is scored
  on cpu and memory alone and packs onto the busiest node that fits, GPU node or not. The weights are cpu 1,
  memory 1, ``nvidia.com/gpu`` 2: the values Volcano's binpack plugin documents for GPUs (the example
  configuration in volcano-sh/volcano pkg/scheduler/plugins/binpack/binpack.go, and the defaults of the Volcano
  add-on of Huawei Cloud CCE), the same MostAllocated arithmetic with per-resource weights. To this comes
  NodeResourcesBalancedAllocation over cpu and memory with kube-default's arithmetic
  (drs_prom.policies.baselines.kube_default_scores), both plugins at weight 1: score = fit + balanced, ties
  broken uniformly at random (seeded), as kube-scheduler's selectHost does.

- ``best-fit-gpu``: BestFit as the FGD paper's simulator defines it (Weng et al., "Beware of Fragmentation",
  USENIX ATC 2023; hkust-adsl/kubernetes-scheduler-simulator pkg/simulator/plugin/best_fit_score.go): the node
  whose remaining cpu and GPUs after the bind are the smallest weighted sum, each normalised by the largest node
  of the paper's cluster (128 cores, 8 GPUs), weights 0.5 and 0.5::

      left = 0.5 * (free_cpu_m - pod_cpu_m) / 128000 + 0.5 * (free_gpus - pod_gpus) / 8
      score = int((1 - left) * 100)                                        # truncated, as the plugin's int64()

  ties broken uniformly at random (seeded). Memory is not in the paper's formula and not here. A pod asking for
  no GPU is scored by the same formula, as the paper's simulator does (its variant for such pods is commented
  out there): it goes where the least cpu and the fewest free GPUs are left, so to CPU-only nodes first. The
  simulator counts GPUs in thousandths (GPU sharing); whole GPUs are its special case.

Neither reads load, so neither needs metrics. Every node given to ``score`` must report its devices in
``NodeInfo.allocatable_scalar`` / ``requested_scalar``; a node without the resource has none.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from drs_prom.policies.baselines import DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, MAX_NODE_SCORE
from drs_prom.policies.contract import DecisionContext, PolicyBase, node_requests
from drs_prom.types import NodeInfo, PodRequest

GPU = "nvidia.com/gpu"
"""The extended resource NVIDIA's device plugin advertises whole GPUs as."""

CPU_WEIGHT, MEMORY_WEIGHT, GPU_WEIGHT = 1, 1, 2
"""MostAllocated's per-resource weights for most-allocated-gpu (Volcano's documented binpack weights)."""

MAX_SPEC_CPU_M = 128_000
"""BestFit's cpu normaliser: the largest node of openb's cluster (128 cores), the paper simulator's MaxSpecCpu."""
MAX_SPEC_GPUS = 8
"""BestFit's GPU normaliser: 8 GPUs, the paper simulator's MaxSpecGpu (8000 thousandths)."""
BEST_FIT_WEIGHTS = (0.5, 0.5)
"""BestFit's weights of cpu and GPUs, as in the paper's simulator."""


def pod_devices(pod: PodRequest, resource: str = GPU) -> int:
    """How many of ``resource`` the pod requests (0 for none)."""
    return int(sum(amount for name, amount in pod.scalar if name == resource))


def device_columns(nodes: Sequence[NodeInfo], resource: str = GPU) -> tuple[np.ndarray, np.ndarray]:
    """(allocatable, requested) of ``resource`` on every node, int64; 0 where a node does not advertise it."""
    n = len(nodes)
    alloc = np.fromiter((x.allocatable_scalar.get(resource, 0) for x in nodes), dtype=np.int64, count=n)
    used = np.fromiter((x.requested_scalar.get(resource, 0) for x in nodes), dtype=np.int64, count=n)
    return alloc, used


def whole_nodes(nodes: Sequence[NodeInfo], resource: str = GPU) -> np.ndarray:
    """Per node: whether it advertises ``resource`` and has every one of it free (a whole node)."""
    alloc, used = device_columns(nodes, resource)
    return np.asarray((alloc > 0) & (used == 0))


def most_requested_score(requested: int, capacity: int) -> int:
    """kube-scheduler's mostRequestedScore: the integer percentage of the resource requested (capped at 100)."""
    if capacity == 0:
        return 0
    return min(requested, capacity) * MAX_NODE_SCORE // capacity


def _most(req: np.ndarray, alloc: np.ndarray) -> np.ndarray:
    """most_requested_score over arrays of nodes (same integer operations)."""
    return np.where(alloc > 0, np.minimum(req, alloc) * MAX_NODE_SCORE // np.maximum(alloc, 1), 0)


def most_allocated_scores(
    ctx: DecisionContext, resource: str = GPU, weights: tuple[int, int, int] = (CPU_WEIGHT, MEMORY_WEIGHT, GPU_WEIGHT)
) -> np.ndarray:
    """Integer kube-scheduler scores of every node, before tie-breaking: NodeResourcesFit with MostAllocated over
    cpu, memory and ``resource`` (weights in that order) plus NodeResourcesBalancedAllocation over cpu and memory."""
    cpu = ctx.pod.cpu_m or DEFAULT_MILLI_CPU_REQUEST
    mem = ctx.pod.mem_bytes or DEFAULT_MEMORY_REQUEST
    req = node_requests(ctx)
    acpu, amem = req[:, 1].astype(np.int64), req[:, 3].astype(np.int64)
    rc, rm = req[:, 0].astype(np.int64) + cpu, req[:, 2].astype(np.int64) + mem
    wc, wm, wg = weights
    num = _most(rc, acpu) * wc + _most(rm, amem) * wm
    den = wc * (acpu > 0) + wm * (amem > 0)
    gpus = pod_devices(ctx.pod, resource)
    if gpus > 0:  # an extended resource the pod does not request is not scored (resource_allocation.go)
        alloc, used = device_columns(ctx.nodes, resource)
        num = num + _most(used + gpus, alloc) * wg
        den = den + wg * (alloc > 0)
    fit = np.where(den > 0, num // np.maximum(den, 1), 0)
    fc = np.minimum(1.0, np.where(acpu > 0, rc / np.maximum(acpu, 1), 1.0))
    fm = np.minimum(1.0, np.where(amem > 0, rm / np.maximum(amem, 1), 1.0))
    balanced = np.floor((1 - np.abs((fc - fm) / 2)) * MAX_NODE_SCORE)
    return np.asarray(fit + balanced, dtype=np.float64)


class MostAllocatedGpu(PolicyBase):
    """kube-scheduler's default profile with MostAllocated scoring over cpu, memory and GPUs (see the module)."""

    name = "most-allocated-gpu"

    def __init__(self, seed: int = 0, metric_window_seconds: float = 0.0, gpu_weight: int = GPU_WEIGHT) -> None:
        del metric_window_seconds  # reads requests only, which are never late
        self.weights = (CPU_WEIGHT, MEMORY_WEIGHT, int(gpu_weight))
        self._rng = np.random.default_rng(seed)

    def score(self, ctx: DecisionContext) -> np.ndarray:
        # integer scores: a jitter in [0, 0.5) only breaks ties (uniformly, like selectHost)
        return most_allocated_scores(ctx, GPU, self.weights) + self._rng.uniform(0.0, 0.5, size=len(ctx.nodes))


def best_fit_scores(ctx: DecisionContext, resource: str = GPU) -> np.ndarray:
    """Integer BestFit scores (higher: less cpu and fewer GPUs left after the bind) of every node."""
    req = node_requests(ctx)
    alloc, used = device_columns(ctx.nodes, resource)
    free_cpu = req[:, 1] - req[:, 0] - float(ctx.pod.cpu_m)
    free_gpus = (alloc - used - pod_devices(ctx.pod, resource)).astype(np.float64)
    wc, wg = BEST_FIT_WEIGHTS
    left = wc * free_cpu / MAX_SPEC_CPU_M + wg * free_gpus / MAX_SPEC_GPUS
    return np.trunc((1.0 - left) * MAX_NODE_SCORE)


class BestFitGpu(PolicyBase):
    """BestFit of the FGD paper's simulator: least cpu and fewest GPUs left after the bind (see the module)."""

    name = "best-fit-gpu"

    def __init__(self, seed: int = 0, metric_window_seconds: float = 0.0) -> None:
        del metric_window_seconds  # reads requests only
        self._rng = np.random.default_rng(seed)

    def score(self, ctx: DecisionContext) -> np.ndarray:
        return best_fit_scores(ctx, GPU) + self._rng.uniform(0.0, 0.5, size=len(ctx.nodes))
