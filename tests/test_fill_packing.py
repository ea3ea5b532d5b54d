"""While the cluster fills, ``drs`` packs its devices: the watch that tells a filling cluster from one where pods come
and go (drs_prom.policies.filling), the packing itself on hand-worked nodes (drs_prom.policies.fill_packing), the
stage that switches between packing and the whole-node reserve, and in the simulator two pods that each need a whole
node arriving into a cluster nobody leaves."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from drs_prom.config import FILL_WINDOW, SchedulerSettings, Settings
from drs_prom.policies.contract import Policy
from drs_prom.policies.fill_packing import packing_keep
from drs_prom.policies.filling import FillWatch
from drs_prom.policies.fragmentation import RecentDeviceShapes
from drs_prom.policies.staged import Staged
from drs_prom.policies.whole_reserve import WholeNodeReserve
from drs_prom.rebalance.loop import policies
from drs_prom.registry import PolicySpec, make_policy
from drs_prom.sim.env import SchedulingEnv
from drs_prom.sim.scenario import GPU_RESOURCE
from drs_prom.sim.trace_sample import materialise
from tests.sim.test_replay import openb, spec
from tests.specs import SPEC
from tests.test_device_baselines import GPU, ctx, node, pod
from tests.test_whole_reserve import NODES

RESOURCES = (GPU,)


def _mix(c, *recorded):
    """The shape mix of ``c``'s decision after the pods of ``recorded`` (contexts) were bound."""
    memory = RecentDeviceShapes(100, GPU)
    for r in recorded:
        memory.record(r)
    return memory.mix(c)


def _kept(nodes, c, recorded=()) -> list[str]:
    keep = packing_keep(c, np.asarray(c.feasible, bool), GPU, _mix(c, *recorded))
    return [x.name for x, k in zip(nodes, keep, strict=True) if k]


# "part": 4 of 8 GPUs and half the cpu taken; "whole" and "roomy": every GPU free, 64 and 128 cores; "cpu": no GPU
PACK = [
    node("part", 64000, 256, gpus=8, used_cpu_m=32000, used_gpus=4),
    node("whole", 64000, 256, gpus=8),
    node("roomy", 128000, 512, gpus=8),
    node("cpu", 64000, 256),
]


def test_a_filling_cluster_breaks_no_whole_node_where_a_broken_one_takes_the_pod():
    # the pod's own shape is the whole mix: it fits before and after on every GPU node, so the measure is 0
    # everywhere and no whole node is broken
    assert _kept(PACK, ctx(PACK, pod(4000, 16, gpus=1), [True, True, True, False])) == ["part"]
    # a pod asking for no GPU goes to the cpu node or the broken one, never into a whole one
    assert _kept(PACK, ctx(PACK, pod(4000, 16))) == ["part", "cpu"]


def test_where_a_whole_node_must_be_broken_it_is_not_the_roomiest():
    # an 8-GPU pod fits only whole nodes: the 64-core one, so the 128-core one stays whole for a bigger pod
    assert _kept(PACK, ctx(PACK, pod(60000, 64, gpus=8), [False, True, True, False])) == ["whole"]
    # the same for a 1-GPU pod the filters admit on the whole nodes only
    assert _kept(PACK, ctx(PACK, pod(4000, 16, gpus=1), [False, True, True, False])) == ["whole"]
    # of three sizes, the policy chooses between the two smaller; of equals, among all
    sizes = [*PACK, node("mid", 96000, 384, gpus=8)]
    assert _kept(sizes, ctx(sizes, pod(4000, 16, gpus=1), [False, True, True, False, True])) == ["whole", "mid"]
    twins = [node("x", 96000, 384, gpus=8), node("y", 96000, 384, gpus=8)]
    assert _kept(twins, ctx(twins, pod(4000, 16, gpus=1))) == ["x", "y"]


def test_the_least_fragmentation_comes_first():
    # after a 2-GPU pod: on "one" (1 GPU free) a 1-GPU pod uses the GPU the 2-GPU shape could not (growth -0.5);
    # on "three" it leaves 2 free, which both shapes still use (growth 0): best fit, by FGD's measure
    nodes = [
        node("three", 64000, 256, gpus=8, used_cpu_m=8000, used_gpus=5),
        node("one", 64000, 256, gpus=8, used_cpu_m=8000, used_gpus=7),
    ]
    two = ctx(nodes, pod(2000, 8, gpus=2))
    assert _kept(nodes, ctx(nodes, pod(2000, 8, gpus=1)), [two]) == ["one"]
    assert _kept(nodes, ctx(nodes, pod(2000, 8, gpus=1))) == ["three", "one"]  # the pod alone: a tie


def _at(cpu_used: int, gpus_used: int):
    return [node("a", 64000, 256, gpus=8, used_cpu_m=cpu_used, used_gpus=gpus_used), node("b", 64000, 256)]


def test_the_watch_counts_the_binds_since_a_pod_left():
    w = FillWatch(2)
    assert w.filling and w.since_departure is None  # nobody has left a new cluster
    w.record(ctx(_at(0, 0), pod(1000, 1, gpus=1)), RESOURCES)
    # the bind is there, and another scheduler bound 500 millicores more: only growth, still filling
    w.record(ctx(_at(1500, 1), pod(1000, 1)), RESOURCES)
    assert w.filling and w.since_departure is None
    # a GPU came free (expected 2500 millicores and 1 GPU, the cluster has 2500 and 0): a pod left
    w.record(ctx(_at(2500, 0), pod(1000, 1)), RESOURCES)
    assert w.since_departure == 0 and not w.filling
    w.record(ctx(_at(3500, 0), pod(1000, 1)), RESOURCES)
    assert w.since_departure == 1 and not w.filling
    w.record(ctx(_at(4500, 0), pod(1000, 1)), RESOURCES)
    assert w.since_departure == 2 and w.filling  # the window's binds without a departure: filling again
    w.record(ctx(_at(100, 0), pod(1000, 1)), RESOURCES)  # cpu alone falling is a departure too
    assert not w.filling
    never = FillWatch(0)
    assert not never.filling
    with pytest.raises(ValueError):
        FillWatch(-1)


def test_drs_packs_while_the_cluster_fills_and_keeps_the_reserve_once_pods_leave():
    stage = WholeNodeReserve(1, fill_window=5)
    one_gpu = ctx(NODES, pod(1000, 1, gpus=1))
    # filling (no pod has left): the only node already broken; whole nodes, held or not, stay whole
    assert stage.keep(one_gpu).tolist() == [False, False, True, False, False]
    stage.record(ctx(NODES, pod(1000, 1, gpus=1)))
    stage.record(ctx(NODES, pod(1000, 1, gpus=1)))  # the first bind is not in these nodes: a pod left
    assert not stage.watch.filling
    # pods come and go: the reserve ("empty", the roomiest whole node) held back, the rest to the network
    assert stage.keep(one_gpu).tolist() == [True, False, True, True, True]
    assert WholeNodeReserve(1, fill_window=0).keep(one_gpu).tolist() == [True, False, True, True, True]


def _watch(policy: Policy) -> FillWatch:
    assert isinstance(policy, Staged) and isinstance(policy.stage, WholeNodeReserve)
    return policy.stage.watch


def test_the_fill_window_is_a_scheduler_setting_passed_to_drs():
    assert Settings().scheduler.fill_window == SPEC.fill_window == FILL_WINDOW
    settings = Settings(scheduler=SchedulerSettings(fill_window=0))
    assert PolicySpec.from_settings(settings).fill_window == 0
    assert _watch(make_policy("drs", PolicySpec.from_settings(settings), 0)).window == 0
    with pytest.raises(ValidationError):
        SchedulerSettings(fill_window=-1)
    # the rebalancer evicts pods and binds none it predicts: its drs keeps the reserve, never the packing
    own, _ = policies(Settings())
    assert own.name == "drs" and _watch(own).window == 0 and not _watch(own).filling


def test_two_whole_node_pods_start_at_once_in_a_cluster_nobody_leaves(tmp_path: Path) -> None:
    """Four 8-GPU nodes; sixteen 1-GPU pods that run for 10,000 s arrive first, then two pods asking for 8 GPUs.
    Spreading puts four on each node; the reserve alone keeps one node whole, for the first; packing keeps two."""
    nodes = [f"g{i},64000,262144,8,V100" for i in range(4)]
    pods = [f"p{i},2000,4096,1,1000,,LS,Succeeded,{10 * i},{10 * i + 10_000},{10 * i}" for i in range(16)]
    pods += [f"big{i},8000,16384,8,1000,,LS,Succeeded,{500 + i},{10_500 + i},{500 + i}" for i in range(2)]
    sc, _ = materialise(spec(openb(tmp_path, nodes, pods)), 0)
    no_fill = replace(SPEC, fill_window=0)
    waits = {}
    for name, policy_spec in (("drs", SPEC), ("reserve", no_fill), ("network", replace(no_fill, whole_node_reserve=0))):
        env = SchedulingEnv(sc, seed=0)
        assert env.run(make_policy("drs", policy_spec, 0)).decisions == 18
        wl, c = env.workload, env.cluster
        assert wl.scalar is not None
        big = [i for i, asks in enumerate(wl.scalar) if dict(asks).get(GPU_RESOURCE, 0) == 8]
        waits[name] = sorted(float(c.start[i] - wl.arrival[i]) for i in big)
    assert waits["drs"] == pytest.approx([0.0, 0.0])
    assert waits["reserve"][0] == pytest.approx(0.0) and waits["reserve"][1] > 5_000
    assert min(waits["network"]) > 5_000
