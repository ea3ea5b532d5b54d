"""Node updates in the cluster cache: a status heartbeat (nothing a filter or score reads
changed) keeps the node table and wakes no backed-off pod, as kube-scheduler skips it;
a change that matters rebuilds the table and moves waiting pods."""

from __future__ import annotations

import copy
import logging

import numpy as np

from drs_prom.scheduler.watch.cache import ClusterCache


def _node(name: str, rv: str, cpu: str = "4", heartbeat: str = "2026-12-03T10:00:00Z") -> dict:
    return {
        "metadata": {"name": name, "resourceVersion": rv, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": heartbeat}],
        },
    }


def test_a_heartbeat_keeps_the_table_and_a_capacity_change_rebuilds_it() -> None:
    changes: list[int] = []
    cache = ClusterCache("drs", on_change=lambda: changes.append(1))
    cache._on_node_list([_node("a", "1"), _node("b", "1")])
    table = cache.view().table
    cache.assume("u1", "a", 500, 1 << 20)
    changes.clear()

    cache._on_node_event("MODIFIED", _node("a", "2", heartbeat="2026-12-03T10:00:40Z"))
    view = cache.view()
    assert view.table is table and not changes
    assert cache.nodes["a"]["metadata"]["resourceVersion"] == "2"  # the newest object is kept
    assert int(view.req_cpu[view.table.index["a"]]) == 500  # the assumed pod still counts

    bigger = copy.deepcopy(_node("a", "3", cpu="8"))
    cache._on_node_event("MODIFIED", bigger)
    view = cache.view()
    assert view.table is not table and changes == [1]
    assert int(view.table.alloc_cpu[view.table.index["a"]]) == 8000
    assert int(view.req_cpu[view.table.index["a"]]) == 500


def test_a_bandwidth_label_reaches_the_node_table_and_a_bad_one_is_named_once(caplog) -> None:
    cache = ClusterCache("drs", on_change=lambda: None)
    cache._on_node_list([_node("a", "1"), _node("b", "1")])
    view = cache.view()
    assert np.isnan(view.link(np.arange(2))).all()  # no labels: the standard bandwidth

    labelled = _node("a", "2")
    labelled["metadata"]["labels"]["drs.io/net-rx-bytes-per-second"] = "12500000"
    labelled["metadata"]["labels"]["drs.io/disk-read-bytes-per-second"] = "lots"
    resized = _node("a", "3", cpu="8")  # a change that rebuilds the table, the bad label still there
    resized["metadata"]["labels"].update(labelled["metadata"]["labels"])
    with caplog.at_level(logging.WARNING):
        cache._on_node_event("MODIFIED", labelled)
        view = cache.view()
        cache._on_node_event("MODIFIED", resized)
        assert cache.view().table is not view.table
    row = view.link(np.array([view.table.index["a"]]))[0]
    assert row[0] == 12.5e6 and np.isnan(row[1:]).all()
    bad = [r.getMessage() for r in caplog.records if "drs.io/disk-read-bytes-per-second" in r.getMessage()]
    assert bad == [
        "node a: label drs.io/disk-read-bytes-per-second='lots' is not a positive number of bytes per second; ignored"
    ]
