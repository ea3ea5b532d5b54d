"""Background load (noisy neighbours) and tolerations in the simulator, on hand-checkable scenarios."""

from __future__ import annotations

import numpy as np
import pytest

from drs_prom.errors import ConfigError
from drs_prom.policies.contract import DecisionContext, PolicyBase
from drs_prom.sim.env import SchedulingEnv
from drs_prom.sim.scenario import parse_scenario
from drs_prom.sim.workload import generate
from tests.sim.helpers import tiny


class _First(PolicyBase):
    name = "first"

    def score(self, ctx: DecisionContext) -> np.ndarray:
        return -np.arange(len(ctx.nodes), dtype=np.float64)


def _with_hog():
    bg = {"node": "n-1", "demand": {"cpu_cores": 1.0, "mem_bytes": 0}, "rate_per_second": 2.0, "work_seconds": 100}
    return tiny(nodes=2, pods=2, rate=1.0, work=10.0, cpu=1.0).with_changes(background=[bg])


def test_background_pods_do_not_change_the_scheduled_workload():
    sc = tiny(nodes=2, pods=6, rate=0.5, work=10.0, cpu=0.5)
    bg = sc.with_changes(
        background=[
            {"node": "n-2", "demand": {"cpu_cores": 0.5, "mem_bytes": 0}, "rate_per_second": 0.5, "work_seconds": 5}
        ]
    )
    a, b = generate(sc, 1), generate(bg, 1)
    assert len(b) > len(a) and int(b.scheduled.sum()) == len(a)
    assert np.array_equal(a.arrival, b.arrival[b.scheduled])
    assert set(b.pinned[~b.scheduled].tolist()) == {1}


def test_a_noisy_neighbour_slows_the_pods_on_its_node_and_is_no_decision():
    # hogs of 1 core for 100 s on node n-1 (1 core) until the last scheduled arrival (1 s): pick
    # a seed where exactly one comes; both pods placed on n-1 share it with the hog.
    # Without the hog the hand-computed slowdowns are 1.9 (test_objectives).
    sc = _with_hog()
    seed = next(s for s in range(100) if int((~generate(sc, s).scheduled).sum()) == 1)
    env = SchedulingEnv(sc, seed=seed)
    res = env.run(_First(), seed=seed)
    assert res.decisions == 2 and env.n_scheduled == 2
    assert res.objectives.slowdown_mean > 2.5  # three demands of 1 core on 1 core
    quiet = SchedulingEnv(tiny(nodes=2, pods=2, rate=1.0, work=10.0, cpu=1.0), seed=seed).run(_First(), seed=seed)
    assert quiet.objectives.slowdown_mean == pytest.approx(1.9)
    assert res.composite > quiet.composite
    # the episode ends with the last scheduled pod, not with the background
    assert res.makespan < 40  # 10 s of work each at a third of the core, at worst


def test_background_node_must_exist_and_tolerations_open_tainted_nodes():
    with pytest.raises(ConfigError, match="background"):
        parse_scenario(
            tiny()
            .model_dump_json()
            .replace(
                '"background":[]',
                '"background":[{"node":"zz-1","demand":'
                '{"cpu_cores":1,"mem_bytes":0},"rate_per_second":1,"work_seconds":1}]',
            )
        )
    text = """
name: tainted
nodes:
  - {name: plain, count: 1, cpu_cores: 1, mem_bytes: 1Gi, net_rx_bytes: 1Mi, net_tx_bytes: 1Mi,
     disk_read_bytes: 1Mi, disk_write_bytes: 1Mi}
  - {name: gpu, count: 1, cpu_cores: 8, mem_bytes: 8Gi, net_rx_bytes: 1Mi, net_tx_bytes: 1Mi,
     disk_read_bytes: 1Mi, disk_write_bytes: 1Mi, taints: [{key: dedicated, value: ml}]}
profiles:
  big:
    demand: {cpu_cores: 4, mem_bytes: 1Gi}
    requests: {cpu_m: 4000, mem_bytes: 1Gi}
    work_seconds: 10
    tolerations: [{key: dedicated, value: ml}]
arrivals: [{pods: 3, rate_per_second: 1}]
"""
    sc = parse_scenario(text)  # fits only the tainted node, which it tolerates
    res = SchedulingEnv(sc, seed=0).run(_First())
    assert res.decisions == 3
    with pytest.raises(ConfigError, match="fits no node"):
        parse_scenario(text.replace("    tolerations: [{key: dedicated, value: ml}]\n", ""))
