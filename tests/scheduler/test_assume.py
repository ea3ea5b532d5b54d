"""kube-scheduler's assumed-pod semantics under concurrent binding, against the real apiserver.

An assumed pod counts on its node the moment it is chosen (before its bind returns), and
its room is released when the bind fails. To fail a bind after the decision on demand the
test holds the (single) bind worker, then deletes the pod while it keeps a finalizer: the
apiserver then refuses the binding ("pod is being deleted, cannot be assigned to a host"),
while the watch never reports the pod bound or gone-from-node, so only the failed bind can
release its room."""

from __future__ import annotations

import threading

import pytest

from tests.scheduler.conftest import events_for, list_pods, pod_body
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

HOLD = "drs-test.example.com/hold"


def node_of(core, ns: str, name: str) -> str | None:
    return next((p["spec"].get("nodeName") for p in list_pods(core, ns) if p["metadata"]["name"] == name), None)


def test_bind_failing_after_assume_releases_the_room_for_the_next_pod(core, ns, fake_nodes, make_scheduler):
    fake_nodes("one-slot", cpu="1", memory="8Gi", labels={"drs-test/slot": "one"})
    only_there = {"nodeSelector": {"drs-test/slot": "one"}}
    sched = make_scheduler(bind_workers=1)
    gate = threading.Event()
    sched._pool.submit(gate.wait, 60)  # the one bind worker waits: binds queue behind it
    try:
        core.create_namespaced_pod(
            ns, pod_body("first", cpu="600m", metadata={"finalizers": [HOLD]}, **only_there), _preload_content=False
        )
        uid = wait_for(
            lambda: next((u for u, node in sched.cache.assumed().items() if node == "one-slot"), None),
            30,
            "first assumed on one-slot",
        )
        # assumed, bind not yet sent: the node's room is taken at once
        assert sched.cache.view().infos([0])[0].requested_cpu_m == 600
        core.delete_namespaced_pod("first", ns, grace_period_seconds=0)  # stays, deletionTimestamp set
        core.create_namespaced_pod(ns, pod_body("second", cpu="600m", **only_there), _preload_content=False)
        msg = wait_for(
            lambda: next(
                (e["message"] for e in events_for(core, ns, "second") if e["reason"] == "FailedScheduling"), None
            ),
            30,
            "second pod found no room while first was assumed",
        )
        assert "Insufficient cpu" in msg
        gate.set()  # now the bind of `first` goes out and fails
        assert wait_for(lambda: node_of(core, ns, "second"), 30, "second bound once the failed bind freed the room")
        assert node_of(core, ns, "second") == "one-slot"
        assert node_of(core, ns, "first") is None  # the refused bind never happened
        assert uid not in sched.cache.assumed()
        failed = sched.metrics.registry.get_sample_value("drs_binds_total", {"outcome": "failed"}) or 0
        conflict = sched.metrics.registry.get_sample_value("drs_binds_total", {"outcome": "conflict"}) or 0
        assert failed + conflict == 1
    finally:
        gate.set()
        core.patch_namespaced_pod("first", ns, {"metadata": {"finalizers": None}})
