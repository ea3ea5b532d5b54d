"""The whole-node reserve (drs_prom.policies.whole_reserve) on hand-worked nodes, in ``drs`` as it ships, and in the
simulator: a pod asking for a whole GPU node finds one where spreading leaves none."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from drs_prom.config import SchedulerSettings, Settings
from drs_prom.policies.contract import choose, node_requests
from drs_prom.policies.whole_reserve import WholeNodeReserve, reserved
from drs_prom.registry import PolicySpec, make_policy
from drs_prom.sim.env import SchedulingEnv
from drs_prom.sim.scenario import GPU_RESOURCE
from drs_prom.sim.trace_sample import materialise
from tests.sim.test_replay import openb, spec
from tests.specs import SPEC
from tests.test_device_baselines import GPU, ctx, node, pod
from tests.test_device_stage import _gpu_decision

NO_RESERVE = replace(SPEC, whole_node_reserve=0, fill_window=0)  # the network alone

# four 8-GPU nodes and a 2-GPU one: "some" has a tenth of its cpu requested, "empty" nothing, "part" 4 GPUs taken,
# "cpu-only" no GPU taken but half its cpu; "small" is whole but not of the largest size
NODES = [
    node("some", 64000, 256, gpus=8, used_cpu_m=6400),
    node("empty", 64000, 256, gpus=8),
    node("part", 64000, 256, gpus=8, used_cpu_m=8000, used_gpus=4),
    node("small", 16000, 64, gpus=2),
    node("cpu-only", 64000, 256, gpus=8, used_cpu_m=32000),
]


def _held(nodes: list, count: int) -> list[str]:
    mask = reserved(nodes, node_requests(ctx(nodes, pod(1000, 1))), GPU, count)
    return [x.name for x, m in zip(nodes, mask, strict=True) if m]


def test_the_reserve_holds_the_whole_largest_nodes_with_the_most_room():
    # whole 8-GPU nodes: some (57.6 cores free), empty (64), cpu-only (32); part is not whole, small not the largest
    assert _held(NODES, 1) == ["empty"]
    assert _held(NODES, 2) == ["some", "empty"]
    assert _held(NODES, 5) == ["some", "empty", "cpu-only"]  # only whole nodes are held, however many are asked
    assert _held(NODES, 0) == []
    # the node a whole-node pod's cpu fits on first (a bigger node beats an emptier smaller one), then memory, then
    # by name, so the same cluster gives the same reserve every time
    sizes = [node("small", 64000, 256, gpus=8), node("big", 128000, 768, gpus=8, used_cpu_m=32000)]
    assert _held(sizes, 1) == ["big"]
    memory = [node("less", 64000, 256, gpus=8), node("more", 64000, 512, gpus=8)]
    assert _held(memory, 1) == ["more"]
    twins = [node("b", 64000, 256, gpus=8), node("a", 64000, 256, gpus=8)]
    assert _held(twins, 1) == ["a"]


def test_no_reserve_without_a_whole_node_or_where_a_node_has_one_device():
    assert _held([node("part", 64000, 256, gpus=8, used_gpus=1), node("cpu", 32000, 128)], 1) == []
    ones = [node("t0", 16000, 64, gpus=1), node("t1", 16000, 64, gpus=1)]
    assert _held(ones, 1) == []  # one device is never split between pods
    # a node that drains to whole joins the reserve
    drained = [node("part", 64000, 256, gpus=8, used_gpus=1), node("drained", 64000, 256, gpus=8)]
    assert _held(drained, 1) == ["drained"]


def test_a_pod_goes_to_the_reserve_only_where_nothing_else_is_feasible():
    stage = WholeNodeReserve(1, fill_window=0)  # pods come and go: the reserve, not the packing
    for asks in (pod(1000, 1, gpus=1), pod(1000, 1)):  # a GPU pod and a cpu-only pod alike
        assert stage.keep(ctx(NODES, asks)).tolist() == [True, False, True, True, True]
    # a whole-node pod that the filters admit on the whole nodes only takes a whole node outside the reserve
    whole_only = [True, True, False, False, True]
    assert stage.keep(ctx(NODES, pod(8000, 8, gpus=8), whole_only)).tolist() == [True, False, False, False, True]
    # and the reserve where it is all that is feasible
    reserve_only = [False, True, False, False, False]
    c = ctx(NODES, pod(8000, 8, gpus=8), reserve_only)
    assert stage.keep(c).tolist() == reserve_only and stage.narrow(c) is c
    with pytest.raises(ValueError):
        WholeNodeReserve(-1)


def test_on_a_cluster_without_devices_drs_decides_as_its_network():
    nodes = [node("a", 32000, 128, used_cpu_m=8000, used_gi=32), node("b", 16000, 64), node("c", 32000, 128)]
    shipped, network = make_policy("drs", SPEC, 3), make_policy("drs", NO_RESERVE, 3)
    assert shipped.name == network.name == "drs" and shipped.version == network.version
    c = ctx(nodes, pod(1000, 2))
    assert WholeNodeReserve(1).narrow(c) is c
    for cpu in (500, 2000, 4000, 1000):
        c = ctx(nodes, pod(cpu, 2))
        a, b = shipped.score(c), network.score(c)
        assert np.array_equal(a, b)
        shipped.bound(c, int(np.argmax(a)))
        network.bound(c, int(np.argmax(a)))


def test_drs_keeps_the_empty_gpu_node_whole_where_its_network_would_take_it():
    # the network alone prefers the empty, cold 8-GPU node for a 1-GPU pod; drs as it ships takes the other one
    c = _gpu_decision()
    assert choose(make_policy("drs", NO_RESERVE, 2), c)[0] == 1
    shipped = make_policy("drs", SPEC, 2)
    assert np.isneginf(shipped.score(c)[1]) and choose(shipped, c)[0] == 0


def test_the_reserve_is_a_scheduler_setting_passed_to_drs():
    assert Settings().scheduler.whole_node_reserve == SPEC.whole_node_reserve == 1
    settings = Settings(scheduler=SchedulerSettings(whole_node_reserve=3))
    assert PolicySpec.from_settings(settings).whole_node_reserve == 3
    with pytest.raises(ValidationError):
        SchedulerSettings(whole_node_reserve=-1)


def test_a_whole_node_pod_starts_at_once_under_drs_and_waits_under_spreading(tmp_path: Path) -> None:
    """Three 8-GPU nodes; twelve 1-GPU pods that run for 10,000 s arrive first, then one pod asking for 8 GPUs.
    Spreading puts four on each node, so the 8-GPU pod waits for them to end; drs keeps one node whole for it."""
    nodes = [f"g{i},64000,262144,8,V100" for i in range(3)]
    pods = [f"p{i},2000,4096,1,1000,,LS,Succeeded,{10 * i},{10 * i + 10_000},{10 * i}" for i in range(12)]
    pods.append("big,8000,16384,8,1000,,LS,Succeeded,500,1500,500")
    sc, _ = materialise(spec(openb(tmp_path, nodes, pods)), 0)
    waits = {}
    for name, policy_spec in (("drs", SPEC), ("network", NO_RESERVE), ("kube-default", SPEC)):
        env = SchedulingEnv(sc, seed=0)
        result = env.run(make_policy("kube-default" if name == "kube-default" else "drs", policy_spec, 0))
        assert result.decisions == 13
        wl, c = env.workload, env.cluster
        assert wl.scalar is not None
        big = next(i for i, asks in enumerate(wl.scalar) if dict(asks).get(GPU_RESOURCE, 0) == 8)
        waits[name] = float(c.start[big] - wl.arrival[big])
    assert waits["drs"] == pytest.approx(0.0)
    assert waits["network"] > 5_000 and waits["kube-default"] > 5_000
