"""The GPU clusters' baselines (drs_prom.policies.device_fit, drs_prom.policies.fragmentation) on hand-worked nodes.

Every expected score below is worked out by hand in the comments, from the formulas the modules' docstrings give.
"""

from __future__ import annotations

import numpy as np
import pytest

from drs_prom.features import N_FEATURES
from drs_prom.policies.baselines import balanced_allocation_score
from drs_prom.policies.contract import DecisionContext, choose
from drs_prom.policies.device_fit import (
    GPU,
    BestFitGpu,
    MostAllocatedGpu,
    best_fit_scores,
    most_allocated_scores,
    most_requested_score,
)
from drs_prom.policies.fragmentation import (
    FragmentationGradientDescent,
    Free,
    RecentDeviceShapes,
    ShapeMix,
    fragmentation,
    fragmentation_growth,
)
from drs_prom.registry import DEVICE_HEURISTICS, HEURISTICS, TEACHERS, make_policy
from drs_prom.sim.bench_command import trace_policies
from drs_prom.types import NodeInfo, NodeSelectorRequirement, NodeSelectorTerm, PodRequest
from tests.specs import SPEC

GI = 2**30


def node(name: str, cpu_m: int, mem_gi: int, gpus: int = 0, used_cpu_m: int = 0, used_gi: int = 0, used_gpus: int = 0):
    return NodeInfo(
        name,
        cpu_m,
        mem_gi * GI,
        requested_cpu_m=used_cpu_m,
        requested_mem_bytes=used_gi * GI,
        pod_count=1 if used_cpu_m else 0,
        allocatable_scalar={GPU: gpus} if gpus else {},
        requested_scalar={GPU: used_gpus} if used_gpus else {},
        labels={"gpu-model": "V100"} if gpus else {},
    )


def pod(cpu_m: int, mem_gi: int, gpus: int = 0, **kw: object) -> PodRequest:
    return PodRequest(name="p", cpu_m=cpu_m, mem_bytes=mem_gi * GI, scalar=((GPU, gpus),) if gpus else (), **kw)


def ctx(nodes: list[NodeInfo], p: PodRequest, feasible: list[bool] | None = None) -> DecisionContext:
    n = len(nodes)
    return DecisionContext(
        pod=p,
        nodes=nodes,
        feasible=np.ones(n, bool) if feasible is None else np.asarray(feasible, bool),
        load=np.zeros((n, N_FEATURES)),
        pod_load=np.zeros((n, N_FEATURES)),
    )


# --- most-allocated-gpu --------------------------------------------------------------------------------------------
# A: 32 cores, 128 GiB, 8 GPUs, half its cpu and memory and 6 GPUs requested; B: the same, empty;
# C: 16 cores, 64 GiB, no GPU, 12 cores and 16 GiB requested.
NODES = [
    node("a", 32000, 128, gpus=8, used_cpu_m=16000, used_gi=64, used_gpus=6),
    node("b", 32000, 128, gpus=8),
    node("c", 16000, 64, used_cpu_m=12000, used_gi=16),
]


def test_most_allocated_gpu_packs_a_gpu_pod_where_most_is_requested():
    # pod: 4 cores, 16 GiB, 1 GPU (C has no GPU: infeasible)
    # A: cpu 20000*100//32000 = 62, memory 80/128 -> 62, GPUs 7*100//8 = 87; (62 + 62 + 2*87) // 4 = 74;
    #    balanced: both fractions 0.625 -> 100; score 174
    # B: cpu 4000/32000 -> 12, memory 16/128 -> 12, GPUs 1/8 -> 12; (12 + 12 + 24) // 4 = 12; balanced 100 -> 112
    c = ctx(NODES, pod(4000, 16, gpus=1), feasible=[True, True, False])
    scores = most_allocated_scores(c)
    assert scores[:2].tolist() == [174.0, 112.0]
    fit_a = (most_requested_score(20000, 32000) + most_requested_score(80 * GI, 128 * GI) + 2 * 87) // 4
    assert fit_a + balanced_allocation_score([0.625, 0.625]) == 174
    assert choose(MostAllocatedGpu(0), c)[0] == 0


def test_most_allocated_gpu_scores_a_pod_without_gpus_on_cpu_and_memory_alone():
    # pod: 2 cores, 8 GiB, no GPU: the GPU is not scored (kube-scheduler skips an extended resource not requested)
    # A: cpu 18000/32000 -> 56, memory 72/128 -> 56; fit 56, balanced 100 -> 156
    # B: 2000/32000 -> 6, 8/128 -> 6; fit 6, balanced 100 -> 106
    # C: 14000/16000 -> 87, 24/64 -> 37; fit (87 + 37) // 2 = 62; balanced int((1 - |0.875 - 0.375| / 2) * 100) = 75
    #    -> 137
    c = ctx(NODES, pod(2000, 8))
    assert most_allocated_scores(c).tolist() == [156.0, 106.0, 137.0]
    assert choose(MostAllocatedGpu(0), c)[0] == 0  # the busiest node, a GPU node


def test_most_allocated_gpu_weight_is_configurable():
    # with GPU weight 0 the GPU term counts for nothing: A's fit is (62 + 62) // 2 = 62 -> 162
    c = ctx(NODES, pod(4000, 16, gpus=1), feasible=[True, True, False])
    assert most_allocated_scores(c, weights=(1, 1, 0))[0] == 162.0
    assert MostAllocatedGpu(0, gpu_weight=5).weights == (1, 1, 5)


# --- best-fit-gpu --------------------------------------------------------------------------------------------------
FIT_NODES = [
    node("a", 32000, 128, gpus=8, used_cpu_m=16000, used_gpus=6),  # 16 cores, 2 GPUs free
    node("b", 32000, 128, gpus=8),  # 32 cores, 8 GPUs free
    node("c", 8000, 32, gpus=2, used_cpu_m=4000, used_gpus=1),  # 4 cores, 1 GPU free
    node("d", 32000, 128, used_cpu_m=2000),  # CPU-only, 30 cores free
]


def test_best_fit_gpu_takes_the_node_with_the_least_left():
    # pod: 2 cores, 1 GPU; left = 0.5 * cpu_left / 128000 + 0.5 * gpus_left / 8
    # A: 0.5 * 14000/128000 + 0.5 * 1/8 = 0.1171875 -> int(88.28) = 88
    # B: 0.5 * 30000/128000 + 0.5 * 7/8 = 0.5546875 -> int(44.53) = 44
    # C: 0.5 * 2000/128000 + 0 = 0.0078125 -> int(99.22) = 99
    c = ctx(FIT_NODES, pod(2000, 4, gpus=1), feasible=[True, True, True, False])
    assert best_fit_scores(c)[:3].tolist() == [88.0, 44.0, 99.0]
    assert choose(BestFitGpu(0), c)[0] == 2


def test_best_fit_gpu_sends_a_pod_without_gpus_to_a_cpu_only_node():
    # pod: 2 cores, no GPU; D: 0.5 * 28000/128000 = 0.109375 -> 89; A: 0.0546875 + 0.5 * 2/8 = 0.1796875 -> 82;
    # C: 0.5 * 2000/128000 + 0.5 * 1/8 = 0.0703125 -> 92; B: 0.5 * 30000/128000 + 0.5 = 0.6171875 -> 38
    c = ctx(FIT_NODES, pod(2000, 4))
    assert best_fit_scores(c).tolist() == [82.0, 38.0, 92.0, 89.0]
    assert choose(BestFitGpu(0), c)[0] == 2


# --- fgd -----------------------------------------------------------------------------------------------------------
def test_fragmentation_counts_the_free_gpus_a_typical_pod_could_not_use():
    # two shapes, half each: 1 GPU + 1 core, 8 GPUs + 8 cores. Node 0: 8 free GPUs, 16 cores -> both fit: F = 0;
    # node 1: 7 free GPUs -> only the 1-GPU shape fits: F = 7 * 0.5 = 3.5; node 2: 7 GPUs, 0.5 core -> nothing
    # fits: F = 7; node 3: no GPU free: F = 0
    free = Free(np.array([8.0, 7, 7, 0]), np.array([16000.0, 16000, 500, 16000]), np.full(4, 1e12), np.full(4, 10.0))
    shapes = ShapeMix(
        gpus=np.array([1.0, 8.0]),
        cpu_m=np.array([1000.0, 8000.0]),
        mem_bytes=np.zeros(2),
        prob=np.array([0.5, 0.5]),
        admits=np.ones((2, 4), bool),
    )
    assert fragmentation(free, shapes).tolist() == [0.0, 3.5, 7.0, 0.0]
    # a shape the node's filters refuse counts as not fitting
    refused = ShapeMix(
        shapes.gpus, shapes.cpu_m, shapes.mem_bytes, shapes.prob, np.array([[1, 1, 1, 1], [0, 1, 1, 1]], bool)
    )
    assert fragmentation(free, refused).tolist() == [4.0, 3.5, 7.0, 0.0]
    # binding 1 GPU + 1 core: node 0 loses the 8-GPU slot (0 -> 7 * 0.5 = 3.5), node 1: 3.5 -> 6 * 0.5 = 3
    growth = fragmentation_growth(free, shapes, 1, 1000, 0)
    assert growth[:2].tolist() == [3.5, -0.5]


def _remembering(shapes: list[PodRequest], nodes: list[NodeInfo], seed: int = 0) -> FragmentationGradientDescent:
    fgd = FragmentationGradientDescent(seed)
    for p in shapes:
        fgd.bound(ctx(nodes, p), 0)
    return fgd


FGD_NODES = [
    node("a", 32000, 128, gpus=8, used_cpu_m=30500, used_gpus=1),  # 7 GPUs, 1.5 cores free
    node("b", 32000, 128, gpus=8),  # 8 GPUs, 32 cores free
    node("c", 16000, 64, gpus=2),  # 2 GPUs, 16 cores free
]


def test_fgd_binds_where_the_expected_unusable_gpus_grow_least():
    # remembered: one pod of 8 GPUs + 8 cores; deciding: 1 GPU + 1 core; each shape half of the workload
    # A: before, the 1-GPU shape fits: F = 7 * 0.5 = 3.5; after (6 GPUs, 0.5 core) nothing fits: F = 6; growth +2.5
    # B: before both fit: F = 0; after (7 GPUs) the 8-GPU shape does not: F = 3.5; growth +3.5
    # C: before the 1-GPU shape fits: F = 2 * 0.5 = 1; after: 1 * 0.5 = 0.5; growth -0.5: the best
    fgd = _remembering([pod(8000, 8, gpus=8)], FGD_NODES)
    c = ctx(FGD_NODES, pod(1000, 1, gpus=1))
    scores = fgd.score(c)
    assert scores == pytest.approx([-2.5, -3.5, 0.5], abs=1e-8)
    assert choose(fgd, c)[0] == 2
    assert len(fgd.shapes) == 2  # the bind was recorded


def test_fgd_keeps_a_pod_without_gpus_off_the_cpu_that_gpu_pods_need():
    # remembered: 8 GPUs + 8 cores; deciding: 1 core, no GPU (half each; the CPU pod counts every free GPU as a
    # fragment). D (CPU-only): no GPU, growth 0. B (8 GPUs, 32 cores): F = 8 * 0.5 = 4 before and after: growth 0.
    # E (8 GPUs, 8.5 cores free): before F = 4; after (7.5 cores) the 8-GPU shape does not fit: F = 8; growth +4
    nodes = [
        node("d", 32000, 128),
        node("b", 32000, 128, gpus=8),
        node("e", 32000, 128, gpus=8, used_cpu_m=23500),
    ]
    fgd = _remembering([pod(8000, 8, gpus=8)], nodes)
    scores = fgd.score(ctx(nodes, pod(1000, 1)))
    assert scores == pytest.approx([0.0, 0.0, -4.0], abs=1e-8)
    # the tie between D and B is broken at random, by seed; E is never chosen
    picks = {
        choose(_remembering([pod(8000, 8, gpus=8)], nodes, seed), ctx(nodes, pod(1000, 1)))[0] for seed in range(20)
    }
    assert picks == {0, 1}


def test_fgd_learns_which_nodes_a_constraint_refuses():
    # a V100-only pod found node t (a T4 node with room) infeasible: the T4 node no longer hosts that shape
    t4 = NodeInfo("t", 32000, 128 * GI, allocatable_scalar={GPU: 4}, labels={"gpu-model": "T4"})
    v100 = NodeInfo("v", 32000, 128 * GI, allocatable_scalar={GPU: 4}, labels={"gpu-model": "V100"})
    only_v100 = (NodeSelectorTerm((NodeSelectorRequirement("gpu-model", "In", ("V100",)),)),)
    p = pod(1000, 1, gpus=1, affinity_terms=only_v100)
    memory = RecentDeviceShapes()
    memory.record(ctx([t4, v100], p, feasible=[False, True]))
    workload = memory.mix(ctx([t4, v100], pod(1000, 1, gpus=1)))
    admits = {(g, tuple(row)) for g, row in zip(workload.prob.tolist(), workload.admits.tolist())}
    assert admits == {(0.5, (False, True)), (0.5, (True, True))}  # the unconstrained pod being decided: both
    # a node the pod did not fit by its requests teaches nothing
    full = NodeInfo("f", 32000, 128 * GI, allocatable_scalar={GPU: 4}, requested_scalar={GPU: 4})
    memory.record(ctx([full, v100], p, feasible=[False, True]))
    workload = memory.mix(ctx([full, t4], p))
    assert workload.prob.tolist() == [1.0] and workload.admits.tolist() == [[True, False]]


def test_fgd_remembers_only_the_last_pods():
    memory = RecentDeviceShapes(size=2)
    for gpus in (1, 2, 4):
        memory.record(ctx(FGD_NODES, pod(1000, 1, gpus=gpus)))
    workload = memory.mix(ctx(FGD_NODES, pod(1000, 1, gpus=8)))
    assert sorted(zip(workload.gpus.tolist(), workload.prob.tolist())) == [(2.0, 1 / 3), (4.0, 1 / 3), (8.0, 1 / 3)]
    with pytest.raises(ValueError):
        RecentDeviceShapes(size=0)


# --- the registry --------------------------------------------------------------------------------------------------
def test_device_baselines_are_registered_apart_from_the_cpu_suites_heuristics():
    assert DEVICE_HEURISTICS == ("most-allocated-gpu", "best-fit-gpu", "fgd")
    assert not set(DEVICE_HEURISTICS) & set(HEURISTICS) and not set(DEVICE_HEURISTICS) & set(TEACHERS)
    for name in DEVICE_HEURISTICS:
        assert make_policy(name, SPEC, 3).name == name
    default = trace_policies(None)
    assert set(DEVICE_HEURISTICS) <= set(default) and set(HEURISTICS) <= set(default)
    assert default.index("fgd") < default.index(TEACHERS[0])
    assert trace_policies("fgd,random") == ["kube-default", "fgd", "random"]
