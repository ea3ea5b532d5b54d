"""The scheduler's vectorised filters and node sampling, against the per-node reference
(chain.node_reasons) and kube-scheduler's numFeasibleNodesToFind. Pure: no servers."""

from __future__ import annotations

import numpy as np
import pytest

from drs_prom.constraints import chain, sampling
from drs_prom.scheduler.watch.nodes import NodeTable
from drs_prom.stores.journal import Decision, Journal
from drs_prom.types import NodeInfo, NodeSelectorRequirement, NodeSelectorTerm, PodRequest, Taint, Toleration


def random_nodes(rng: np.random.Generator, n: int) -> list[NodeInfo]:
    out = []
    for i in range(n):
        out.append(
            NodeInfo(
                name=f"n{i:04d}",
                allocatable_cpu_m=int(rng.choice([1000, 4000, 16000])),
                allocatable_mem_bytes=int(rng.choice([2, 8, 64])) << 30,
                allocatable_pods=int(rng.choice([3, 110])),
                labels={"zone": str(rng.choice(["a", "b", "c"])), "gpu": "yes"}
                if rng.random() < 0.3
                else {"zone": "a"},
                taints=(Taint(key="dedicated", value="gpu", effect="NoSchedule"),) if rng.random() < 0.2 else (),
                unschedulable=bool(rng.random() < 0.1),
                ready=bool(rng.random() < 0.9),
            )
        )
    return out


PODS = [
    PodRequest(name="plain", cpu_m=500, mem_bytes=1 << 30),
    PodRequest(name="zero", cpu_m=0, mem_bytes=0),
    PodRequest(name="sel", cpu_m=2000, mem_bytes=4 << 30, node_selector={"zone": "b"}),
    PodRequest(
        name="aff",
        cpu_m=100,
        mem_bytes=1 << 20,
        affinity_terms=(NodeSelectorTerm((NodeSelectorRequirement("gpu", "Exists"),)),),
        tolerations=(Toleration(key="dedicated", operator="Equal", value="gpu", effect="NoSchedule"),),
    ),
    PodRequest(name="tol-all", cpu_m=3000, mem_bytes=0, tolerations=(Toleration(operator="Exists"),)),
]


@pytest.mark.parametrize("seed", range(5))
def test_table_filters_equal_the_per_node_reference(seed):
    rng = np.random.default_rng(seed)
    nodes = random_nodes(rng, 300)
    table = NodeTable(nodes, version=1)
    for _ in range(400):  # bind pods at random, as the cache does
        i = int(rng.integers(len(nodes)))
        table.add(nodes[i].name, int(rng.integers(0, 900)), int(rng.integers(0, 1 << 30)), 1)
    view = table.view()
    infos = view.all_infos()
    for pod in PODS:
        expected = chain.node_mask(pod, infos)
        np.testing.assert_array_equal(view.feasible(pod), expected, err_msg=pod.name)
        np.testing.assert_array_equal(view.feasible(pod), expected, err_msg=f"{pod.name} (cached static part)")
    assert 0 < int(view.feasible(PODS[0]).sum()) < len(nodes)  # the scenario exercises both outcomes


def test_view_is_a_snapshot_and_infos_follow_the_table():
    table = NodeTable([NodeInfo(name="a", allocatable_cpu_m=1000, allocatable_mem_bytes=1 << 30)], version=1)
    before = table.view()
    table.add("a", 600, 0, 1)
    table.add("ghost", 600, 0, 1)  # a pod on a node we do not know is ignored
    after = table.view()
    assert before.infos([0])[0].requested_cpu_m == 0
    assert after.infos([0])[0].requested_cpu_m == 600 and after.infos([0])[0].pod_count == 1
    big = PodRequest(name="p", cpu_m=500, mem_bytes=0)
    assert before.feasible(big)[0] and not after.feasible(big)[0]
    table.add("a", -600, 0, -1)  # forgotten
    assert table.view().feasible(big)[0]


@pytest.mark.parametrize(
    ("n", "percentage", "expected"),
    [
        (5, 0, 5),
        (99, 0, 99),
        (100, 0, 100),  # 50% of 100 is 50, but never fewer than 100
        (1000, 0, 420),  # adaptive: 50 - 1000/125 = 42%
        (5000, 0, 500),  # 50 - 40 = 10%
        (20000, 0, 1000),  # floor of 5%
        (1000, 10, 100),
        (1000, 100, 1000),
        (1000, 30, 300),
    ],
)
def test_nodes_to_score_follows_kube_scheduler(n, percentage, expected):
    assert sampling.nodes_to_score(n, percentage) == expected


def test_sampling_goes_round_from_where_it_stopped():
    mask = np.array([True, False, True, True, False, True, True, False])
    found, processed = sampling.sample_feasible(mask, 3, start=0)
    assert found.tolist() == [0, 2, 3] and processed == 4
    found, processed = sampling.sample_feasible(mask, 3, start=4)
    assert found.tolist() == [0, 5, 6] and processed == 5  # 4,5,6,7 then wraps to 0
    found, processed = sampling.sample_feasible(mask, 10, start=3)
    assert found.tolist() == [0, 2, 3, 5, 6] and processed == len(mask)  # fewer feasible than asked: all


def _decision(i: int) -> Decision:
    return Decision(f"u{i}", f"p{i}", "ns", [0.0] * 6, ["a"], [True], "a", [1.0], "drs", ts=float(i))


def test_batched_journal_rows_are_readable_at_once_and_survive_close(tmp_path):
    j = Journal(tmp_path / "j.sqlite")
    for i in range(1200):  # more than one batch
        j.append_later(_decision(i) if i % 2 else (lambda i=i: _decision(i)))
    assert [d.pod_uid for d in j.since(0)][:3] == ["u0", "u1", "u2"]  # since() sees queued rows
    for i in range(1200, 1300):
        j.append_later(_decision(i))
    j.close()  # a clean shutdown writes what is still queued
    rows = list(Journal(tmp_path / "j.sqlite").since(0))
    assert [d.pod_uid for d in rows] == [f"u{i}" for i in range(1300)]
