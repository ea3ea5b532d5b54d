"""A filter added in one file (tests/constraints/node_draining.py, the worked example of docs/extending.md) is
enforced by every caller of the chain: the simulator, the extender and the live scheduler on the real apiserver."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from drs_prom.constraints import chain
from drs_prom.constraints.framework import Filter, Stage
from drs_prom.policies.contract import choose
from drs_prom.registry import make_policy
from drs_prom.sim.env import SchedulingEnv
from drs_prom.sim.scenario import parse_scenario
from drs_prom.types import NodeInfo, PodRequest, Taint
from tests.constraints.node_draining import DRAIN_OK, DRAINING, FILTER, R_DRAINING
from tests.scheduler.conftest import events_for, list_pods, pod_body
from tests.scheduler.test_extender import _extender, node_json, post
from tests.specs import SPEC
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]

SCENARIO = f"""
name: draining
normalisation: default
nodes:
  - {{name: draining, count: 2, cpu_cores: 8, mem_bytes: 16Gi, net_rx_bytes: 1Mi, net_tx_bytes: 1Mi,
      disk_read_bytes: 1Mi, disk_write_bytes: 1Mi, labels: {{"{DRAINING}": "true"}}}}
  - {{name: open, count: 2, cpu_cores: 2, mem_bytes: 4Gi, net_rx_bytes: 1Mi, net_tx_bytes: 1Mi,
      disk_read_bytes: 1Mi, disk_write_bytes: 1Mi}}
profiles:
  job:
    demand: {{cpu_cores: 0.2, mem_bytes: 64Mi}}
    requests: {{cpu_m: 200, mem_bytes: 64Mi}}
    work_seconds: 20
arrivals:
  - {{pods: 60, rate_per_second: 1.0}}
"""


def _placed_on(scenario_text: str) -> Counter[str]:
    """Node types the pods of one seeded episode went to (kube-default prefers the big draining nodes)."""
    env = SchedulingEnv(parse_scenario(scenario_text), seed=0)
    policy = make_policy("kube-default", SPEC)
    ctx = env.reset(0)
    used: Counter[str] = Counter()
    while ctx is not None:
        node, _ = choose(policy, ctx)
        used[ctx.nodes[node].name.rsplit("-", 1)[0]] += 1
        ctx, _, _ = env.step(node)
    return used


def test_the_simulator_enforces_a_registered_filter():
    assert _placed_on(SCENARIO)["draining"] > 0  # the check can fail: without the filter they take pods
    with chain.registered(FILTER):
        used = _placed_on(SCENARIO)
    assert used["draining"] == 0 and used["open"] == 60
    assert "NodeDraining" not in [f.name for f in chain.filters()]  # unregistered at the end of the block


def test_the_extender_enforces_a_registered_filter():
    server, _ = _extender()
    server.start()
    try:
        drained = node_json("ex-a")
        drained["metadata"]["labels"] = {DRAINING: "true"}
        nodes = {"items": [drained, node_json("ex-b")]}
        pod = pod_body("p")
        pod["metadata"]["namespace"] = "ns"
        with chain.registered(FILTER):
            out = post(server.port, "filter", {"Pod": pod, "Nodes": nodes})
            assert [n["metadata"]["name"] for n in out["Nodes"]["items"]] == ["ex-b"]
            assert out["FailedNodes"] == {"ex-a": R_DRAINING}
            pod["metadata"]["labels"] = {DRAIN_OK: "true"}
            out = post(server.port, "filter", {"Pod": pod, "Nodes": nodes})
            assert len(out["Nodes"]["items"]) == 2
        pod["metadata"]["labels"] = {}
        assert len(post(server.port, "filter", {"Pod": pod, "Nodes": nodes})["Nodes"]["items"]) == 2
    finally:
        server.stop()


@pytest.mark.integration
def test_the_live_scheduler_enforces_a_registered_filter(core, ns, fake_nodes, make_scheduler):
    fake_nodes("draining", cpu="16", memory="64Gi", labels={DRAINING: "true"})
    fake_nodes("open", cpu="1", memory="8Gi")
    with chain.registered(FILTER):
        make_scheduler()
        for i in range(3):
            core.create_namespaced_pod(ns, pod_body(f"small-{i}", cpu="200m"), _preload_content=False)
        core.create_namespaced_pod(ns, pod_body("big", cpu="2"), _preload_content=False)
        ok = pod_body("cleaner", cpu="2", metadata={"labels": {DRAIN_OK: "true"}})
        core.create_namespaced_pod(ns, ok, _preload_content=False)

        def bound():
            return {p["metadata"]["name"]: p["spec"].get("nodeName") for p in list_pods(core, ns)}

        placed = wait_for(
            lambda: (b := bound()) and all(b.get(f"small-{i}") for i in range(3)) and b.get("cleaner") and b,
            60,
            "binds",
        )
        assert {placed[f"small-{i}"] for i in range(3)} == {"open"}
        assert placed["cleaner"] == "draining"
        ev = wait_for(
            lambda: [e for e in events_for(core, ns, "big") if e["reason"] == "FailedScheduling"], 30, "big refused"
        )
        assert f"1 {R_DRAINING}" in ev[0]["message"] and "1 Insufficient cpu" in ev[0]["message"]
        assert bound().get("big") is None


def test_the_first_failing_filter_in_order_gives_the_reason():
    node = NodeInfo("n", 4000, 8 << 30, labels={DRAINING: "true"}, taints=(Taint("k", "v"),))
    pod = PodRequest(name="p", cpu_m=100, mem_bytes=1 << 20)
    with chain.registered(FILTER):
        result = chain.filter_all(pod, [node])
        assert result.reasons == ((R_DRAINING,),) and result.failed_by == ("NodeDraining",)  # 15 runs before 20
        assert chain.failure_message(result) == f"0/1 nodes are available: 1 {R_DRAINING}."
    assert chain.filter_all(pod, [node]).failed_by == ("TaintToleration",)


def test_cached_masks_follow_the_chain_and_names_stay_unique():
    nodes = [NodeInfo("a", 4000, 8 << 30, labels={DRAINING: "true"}), NodeInfo("b", 4000, 8 << 30)]
    pod = PodRequest(name="p")
    static = chain.StaticMasks(nodes)
    assert static.mask(pod).tolist() == [True, True]
    with chain.registered(FILTER):
        assert static.mask(pod).tolist() == [False, True]  # a mask cached before the filter came is not reused
        with pytest.raises(ValueError, match="unique"):
            chain.register(FILTER)
    assert static.mask(pod).tolist() == [True, True]


class _NoMask(Filter):
    name = "NoMask"
    stage = Stage.REQUESTS

    def reasons(self, pod, node, state, near):
        return ()


def test_a_requests_stage_filter_without_a_mask_is_refused_in_one_line():
    static = chain.StaticMasks([NodeInfo("a", 4000, 8 << 30)])
    from drs_prom.constraints.framework import NodeArrays

    one = np.ones(1, dtype=np.int64)
    arrays = NodeArrays(one * 4000, one << 33, one * 110, one * 0, one * 0, one * 0)
    with chain.registered(_NoMask()), pytest.raises(TypeError, match="NoMask reads requests but has no mask"):
        chain.feasible(PodRequest(name="p"), static, arrays)


def test_the_worked_example_in_the_docs_is_this_file():
    """docs/extending.md shows the example filter whole; it must be the one these tests run."""
    doc = (REPO / "docs" / "extending.md").read_text()
    block = re.search(r"```python\n(.*?)```", doc[doc.index("## Add a filter") :], re.S)
    assert block is not None
    assert block.group(1) == (REPO / "tests" / "constraints" / "node_draining.py").read_text()
