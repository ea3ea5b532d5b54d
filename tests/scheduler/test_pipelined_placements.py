"""The pipelined binding cycle places every pod exactly where strictly one-by-one scheduling does.

Pipelined (the default), a pod is assumed on its node and the next pod is decided while its bind is
still being written; one-by-one (``pipelined=False``), each bind is acknowledged before the next
decision. The same seeded stream of pods (varied requests, some asking for the same host port)
goes through each on its own set of identical fake nodes of the real apiserver; the nodes chosen
must agree pod for pod. Were a decision to miss a pod whose bind is still in flight (no assume, or
an assume the filters do not see), the pipelined run would pile pods onto the emptiest node and put
two host ports on one node, and the lists would differ.
"""

from __future__ import annotations

import random

import pytest

from tests.scheduler.conftest import list_pods, pod_body
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

PODS = 36
NODES = [("0", "4"), ("1", "6"), ("2", "8"), ("3", "6"), ("4", "4")]  # (suffix, cpu): unequal, few ties
HOST_PORT = 9000


def stream(seed: int) -> list[dict]:
    """The pods' specs, the same for every ``seed``: cpu and memory requests, every 8th wants the host port."""
    rng = random.Random(seed)
    out = []
    for i in range(PODS):
        spec = {"cpu": f"{rng.randrange(100, 900, 50)}m", "mem": f"{rng.randrange(64, 1024, 64)}Mi"}
        if i % 8 == 0:
            spec["ports"] = True
        out.append(spec)
    return out


def create(core, ns: str, prefix: str, node_set: str, specs: list[dict]) -> None:
    for i, spec in enumerate(specs):
        body = pod_body(f"{prefix}{i:03d}", cpu=spec["cpu"], mem=spec["mem"], nodeSelector={"drs-test/set": node_set})
        if spec.get("ports"):
            body["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": HOST_PORT}]
        core.create_namespaced_pod(ns, body, _preload_content=False)


def placements(core, ns: str, prefix: str, node_set: str) -> list[str]:
    """Pod i's node, as the node's suffix (the two sets have the same nodes under different names)."""
    pods = {
        p["metadata"]["name"]: p["spec"].get("nodeName")
        for p in list_pods(core, ns)
        if p["metadata"]["name"].startswith(prefix)
    }
    return [pods[f"{prefix}{i:03d}"].removeprefix(f"pipe-{node_set}-") for i in range(PODS)]


def run(core, ns: str, fake_nodes, make_scheduler, node_set: str, prefix: str, pipelined: bool) -> list[str]:
    others = [n.metadata.name for n in core.list_node().items]
    assert not [n for n in others if n.startswith("pipe-")], "a previous run's nodes are still there"
    for suffix, cpu in NODES:
        fake_nodes(f"pipe-{node_set}-{suffix}", cpu=cpu, memory="16Gi", labels={"drs-test/set": node_set})
    create(core, ns, prefix, node_set, stream(seed=11))  # all pending before the scheduler starts: one order
    sched = make_scheduler(pipelined=pipelined)
    try:
        wait_for(
            lambda: (
                sum(
                    1
                    for p in list_pods(core, ns)
                    if p["metadata"]["name"].startswith(prefix) and p["spec"].get("nodeName")
                )
                == PODS
            ),
            120,
            f"all {PODS} pods bound ({'pipelined' if pipelined else 'one by one'})",
        )
        assert (sched.metrics.registry.get_sample_value("drs_binds_total", {"outcome": "bound"}) or 0) == PODS
    finally:
        sched.stop()
    return placements(core, ns, prefix, node_set)


def clear(core, ns: str, node_set: str) -> None:
    """Remove a run's pods and nodes: the next run's scheduler sees only its own, as the first did
    (kube-default breaks ties with a seeded jitter drawn per node looked at)."""
    core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    wait_for(lambda: not list_pods(core, ns), 60, "the first run's pods deleted")
    for suffix, _ in NODES:
        core.delete_node(f"pipe-{node_set}-{suffix}")


def test_pipelined_binds_place_every_pod_where_one_by_one_scheduling_does(core, ns, fake_nodes, make_scheduler):
    pipelined = run(core, ns, fake_nodes, make_scheduler, "a", "pa", pipelined=True)
    clear(core, ns, "a")
    one_by_one = run(core, ns, fake_nodes, make_scheduler, "b", "pb", pipelined=False)
    assert pipelined == one_by_one
    ported = [node for node, spec in zip(pipelined, stream(seed=11), strict=True) if spec.get("ports")]
    assert len(set(ported)) == len(ported)  # the host-port filter saw the assumed pods
    assert len(set(pipelined)) > 1  # the stream spreads: the comparison is not trivially one node


def test_each_bound_pod_has_its_path_timed_stage_by_stage(core, ns, fake_nodes, make_scheduler):
    fake_nodes("stage-a", cpu="8")
    sched = make_scheduler()
    for i in range(5):
        core.create_namespaced_pod(ns, pod_body(f"st{i}", nodeSelector={"kubernetes.io/hostname": "stage-a"}))
    value = sched.metrics.registry.get_sample_value
    count = lambda stage: value("drs_scheduling_stage_seconds_count", {"stage": stage}) or 0  # noqa: E731
    wait_for(lambda: count("event_to_bind") == 5, 60, "5 pods bound and timed")
    stages = ("watch_to_queue", "queue_wait", "decide", "bind_handover", "bind_write")
    assert all(count(s) == 5 for s in stages)
    parts = sum(value("drs_scheduling_stage_seconds_sum", {"stage": s}) for s in stages)
    whole = value("drs_scheduling_stage_seconds_sum", {"stage": "event_to_bind"})
    assert whole > 0
    assert parts == pytest.approx(whole, rel=1e-9)  # the stages partition the path from watch event to bind
