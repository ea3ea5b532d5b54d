"""The device stage (drs_prom.policies.device_stage) on hand-worked nodes, and ``drs`` behind it (``drs+devices``).

The fragmentation growths below are worked out by hand in tests/test_device_baselines.py (FGD_NODES); here they decide
which nodes the stage keeps.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from drs_prom.features import N_FEATURES
from drs_prom.policies.contract import DecisionContext, choose
from drs_prom.policies.device_stage import DeviceStage, device_resources, is_device, within_band
from drs_prom.registry import make_policy
from drs_prom.types import NodeInfo
from tests.specs import SPEC
from tests.test_device_baselines import FGD_NODES, GI, ctx, node, pod


def test_extended_resources_outside_the_kubernetes_domains_are_devices():
    assert is_device("nvidia.com/gpu") and is_device("amd.com/gpu") and is_device("aws.amazon.com/neuron")
    for name in ("cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "kubernetes.io/batch-cpu", "x.kubernetes.io/y"):
        assert not is_device(name), name
    # a device counts where some node advertises it (allocatable above 0)
    nodes = [
        NodeInfo("a", 1000, GI, allocatable_scalar={"nvidia.com/gpu": 0, "hugepages-2Mi": 4}),
        NodeInfo("b", 1000, GI, allocatable_scalar={"amd.com/gpu": 2}),
    ]
    assert device_resources(nodes) == ("amd.com/gpu",)
    assert device_resources(nodes[:1]) == ()


def test_the_band_keeps_the_feasible_nodes_near_the_least_growth():
    growth = np.array([0.0, 0.01, 0.03, -0.5, 5.0])
    feasible = np.array([True, True, True, False, True])
    # the infeasible node's -0.5 does not set the least: 0.0 does, so 0.0 and 0.01 are within 0.02
    assert within_band(growth, feasible, 0.02).tolist() == [True, True, False, False, False]
    assert within_band(growth, feasible, 0.0).tolist() == [True, False, False, False, False]
    assert not within_band(growth, np.zeros(5, bool), 0.02).any()
    with pytest.raises(ValueError):
        DeviceStage(band=-0.1)


def test_without_devices_the_stage_hands_the_context_on_untouched():
    cpu_nodes = [node("a", 32000, 128, used_cpu_m=16000, used_gi=64), node("b", 32000, 128)]
    stage = DeviceStage()
    c = ctx(cpu_nodes, pod(1000, 1))
    assert stage.narrow(c) is c
    stage.record(c)
    assert len(stage.shapes) == 0  # nothing remembered on a CPU cluster


def test_the_stage_keeps_the_nodes_where_the_bind_strands_fewest_gpus_and_breaks_no_whole_node():
    # remembered: a pod of 8 GPUs + 8 cores; deciding 1 GPU + 1 core: growth A +2.5, B +3.5, C -0.5 (hand-worked in
    # test_device_baselines): only C is within the band of the least
    stage = DeviceStage()
    stage.record(ctx(FGD_NODES, pod(8000, 8, gpus=8)))
    c = ctx(FGD_NODES, pod(1000, 1, gpus=1))
    narrowed = stage.narrow(c)
    assert narrowed.feasible.tolist() == [False, False, True]
    assert c.feasible.tolist() == [True, True, True]  # narrowing is pure: the caller's context is not changed
    # a wide band keeps every node by the measure; best fit on the GPUs then keeps C (1 left, against 6 and 7)
    assert DeviceStage(band=10.0).narrow(c).feasible.tolist() == [False, False, True]
    # a pod asking for no GPU goes where no node is broken into: A or a CPU-only node
    with_cpu_node = [*FGD_NODES, node("d", 32000, 128)]
    assert DeviceStage(band=10.0).narrow(ctx(with_cpu_node, pod(1000, 1))).feasible.tolist() == [1, 0, 0, 1]
    # where every node in the band is whole, one of them is broken into
    assert DeviceStage(band=10.0).narrow(ctx(FGD_NODES[1:], pod(1000, 1))).feasible.tolist() == [True, True]
    # where the stage keeps every feasible node, it returns the context itself
    even = [node("x", 32000, 128, gpus=4), node("y", 32000, 128, gpus=4)]
    c = ctx(even, pod(1000, 1, gpus=1))
    assert DeviceStage().narrow(c) is c


def test_a_whole_node_stays_whole_before_any_pod_that_needs_it_was_seen():
    # only 1-GPU pods remembered: every node has room for the typical pod before and after, so the measure's growth
    # is 0 on both 8-GPU nodes; the whole one is kept whole
    nodes = [node("part", 64000, 256, gpus=8, used_cpu_m=8000, used_gpus=4), node("whole", 64000, 256, gpus=8)]
    stage = DeviceStage()
    for _ in range(3):
        stage.record(ctx(nodes, pod(1000, 1, gpus=1)))
    assert stage.narrow(ctx(nodes, pod(1000, 1, gpus=1))).feasible.tolist() == [True, False]


def _gpu_decision() -> DecisionContext:
    """Two 8-GPU nodes: ``part`` has 4 GPUs and half its cpu and memory requested, and runs hot (60 % cpu);
    ``whole`` is empty and cold. A 1-GPU pod, after an 8-GPU pod was bound."""
    nodes = [
        node("part", 64000, 256, gpus=8, used_cpu_m=32000, used_gi=128, used_gpus=4),
        node("whole", 64000, 256, gpus=8),
    ]
    load = np.zeros((2, N_FEATURES))
    load[0, 0] = 0.6
    return DecisionContext(
        pod=pod(4000, 16, gpus=1),
        nodes=nodes,
        feasible=np.ones(2, bool),
        load=load,
        pod_load=np.zeros((2, N_FEATURES)),
    )


def test_drs_behind_the_stage_keeps_a_whole_gpu_node_for_the_pods_that_need_it():
    # drs's network alone (and capacity-balanced-overload) sends the pod to the empty, cold node (the shipped drs keeps
    # it in reserve, tests/test_whole_reserve.py); behind the stage it keeps the
    # whole 8-GPU node free: taking one of its GPUs strands it for the 8-GPU shape (growth 7 * 0.5 = 3.5), taking
    # one of part's four costs 4 * 0.5 - 3 * 0.5 = -0.5
    remembered = ctx(_gpu_decision().nodes, pod(8000, 8, gpus=8))
    for alone in ("drs", "capacity-balanced-overload"):
        policy = make_policy(alone, replace(SPEC, whole_node_reserve=0, fill_window=0), 2)
        policy.bound(remembered, 0)
        assert choose(policy, _gpu_decision())[0] == 1, alone
    staged = make_policy("drs+devices", SPEC, 2)
    assert staged.name == "drs+devices" and staged.version == make_policy("drs", SPEC, 2).version
    staged.bound(remembered, 0)
    decision = _gpu_decision()
    scores = staged.score(decision)
    assert np.isneginf(scores[1]) and np.isfinite(scores[0])
    assert choose(staged, decision)[0] == 0


def test_drs_behind_the_stage_decides_a_cpu_cluster_as_drs():
    # the same scores with and without the stage on a cluster with no devices, decision after decision
    nodes = [node("a", 32000, 128, used_cpu_m=8000, used_gi=32), node("b", 16000, 64), node("c", 32000, 128)]
    staged = make_policy("drs+devices", SPEC, 3)
    alone = make_policy("drs", SPEC, 3)
    for cpu in (500, 2000, 4000, 1000):
        c = ctx(nodes, pod(cpu, 2))
        a, b = staged.score(c), alone.score(c)
        assert np.array_equal(a, b)
        chosen = int(np.argmax(a))
        staged.bound(c, chosen)
        alone.bound(c, chosen)


def test_best_fit_packs_a_gpu_pod_only_onto_a_node_it_leaves_cool():
    # three 8-GPU nodes: 6, 4 and 0 GPUs free; the pod (1 GPU) adds 0.3 of a node's cpu. The fullest (6 used) runs
    # at 0.6 cpu: 0.9 after the bind, above HOT (0.8), so best fit takes the next fullest, which runs cold
    nodes = [
        node("full", 64000, 256, gpus=8, used_cpu_m=8000, used_gpus=6),
        node("half", 64000, 256, gpus=8, used_cpu_m=8000, used_gpus=4),
        node("whole", 64000, 256, gpus=8),
    ]
    load = np.zeros((3, N_FEATURES))
    load[0, 0] = 0.6
    pod_load = np.zeros((3, N_FEATURES))
    pod_load[:, 0] = 0.3
    c = DecisionContext(pod=pod(4000, 16, gpus=1), nodes=nodes, feasible=np.ones(3, bool), load=load, pod_load=pod_load)
    assert DeviceStage().narrow(c).feasible.tolist() == [False, True, False]
    # when every node would be hot, best fit decides alone
    hot = DecisionContext(
        pod=c.pod, nodes=nodes, feasible=c.feasible, load=np.full((3, N_FEATURES), 0.7), pod_load=pod_load
    )
    assert DeviceStage().narrow(hot).feasible.tolist() == [True, False, False]
