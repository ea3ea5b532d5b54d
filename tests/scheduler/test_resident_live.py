"""The running scheduler keeps the resident load of its placements against a real apiserver.

Every pod it binds counts on the node it was bound to, with the expected load row it was placed with,
and stops counting once the pod is deleted (tests/scheduler/test_resident_cache.py walks the other
ends one by one on the cache alone)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.scheduler.conftest import list_pods, pod_body
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

PODS = 3


def test_bound_pods_count_where_they_run_until_deleted(core, ns, fake_nodes, make_scheduler):
    only_ours = {"drs-test/set": f"{ns}-resident"}
    nodes = [fake_nodes(f"{ns}-res-{i}", cpu="4", memory="16Gi", labels=only_ours) for i in range(2)]
    for i in range(PODS):
        body = pod_body(f"r{i}", cpu="500m", mem="256Mi", nodeSelector=only_ours)
        core.create_namespaced_pod(ns, body, _preload_content=False)
    sched = make_scheduler()
    bound: dict[str, str] = wait_for(
        lambda: (
            len(
                got := {
                    p["metadata"]["name"]: p["spec"]["nodeName"]
                    for p in list_pods(core, ns)
                    if p["spec"].get("nodeName")
                }
            )
            == PODS
            and got
        ),
        60,
        f"{PODS} pods bound",
    )
    resident = sched.cache.resident
    per_node = {n: sum(1 for on in bound.values() if on == n) for n in nodes}
    assert len(resident) == PODS
    assert {n: resident.count(n) for n in nodes} == per_node
    rows = resident.matrix(nodes)
    for i, n in enumerate(nodes):
        if per_node[n]:
            assert (rows[i] >= 0).all() and rows[i][0] > 0, f"{n}'s resident row {rows[i]} shows no cpu"
        else:
            assert not rows[i].any()
    first = next(i for i, n in enumerate(nodes) if per_node[n])
    one_pod = rows[first] / per_node[nodes[first]]
    for i, n in enumerate(nodes):  # identical pods on identical nodes: the same expectation each
        np.testing.assert_allclose(rows[i], per_node[n] * one_pod)

    gone, on = next(iter(bound.items()))
    core.delete_namespaced_pod(gone, ns, grace_period_seconds=0)
    wait_for(lambda: len(resident) == PODS - 1, 30, f"{gone} no longer counted")
    assert resident.count(on) == per_node[on] - 1
    np.testing.assert_allclose(resident.matrix([on])[0], (per_node[on] - 1) * one_pod, atol=1e-12)
    # the settings' rate window decides how long the deleted pod's load is taken off the metrics
    assert sched.cache.resident.ended([on], time.time())[0][0] > 0
    assert not sched.cache.resident.ended([on], time.time() + sched.settings.prometheus.window_seconds).any()
