"""Core filters against literal nodes: each check, their order, and kube-scheduler's message."""

import numpy as np

from drs_prom.constraints import chain
from drs_prom.constraints.plugins import node_affinity, node_unschedulable
from drs_prom.types import (
    NodeInfo,
    PodRequest,
    Taint,
    Toleration,
)
from drs_prom.types import (
    NodeSelectorRequirement as Req,
)
from drs_prom.types import (
    NodeSelectorTerm as Term,
)


def node(name="n", cpu=4000, mem=8 << 30, **kw):
    return NodeInfo(name=name, allocatable_cpu_m=cpu, allocatable_mem_bytes=mem, **kw)


def pod(**kw):
    return PodRequest(name="p", cpu_m=kw.pop("cpu_m", 500), mem_bytes=kw.pop("mem_bytes", 1 << 30), **kw)


def test_requests_fit_allocatable_minus_bound():
    n = node(cpu=2000, requested_cpu_m=1600)
    assert chain.node_reasons(pod(cpu_m=400), n) == []
    assert chain.node_reasons(pod(cpu_m=401), n) == ["Insufficient cpu"]
    both = node(cpu=1000, mem=1 << 30, requested_mem_bytes=1 << 29)
    assert chain.node_reasons(pod(cpu_m=2000, mem_bytes=1 << 30), both) == ["Insufficient cpu", "Insufficient memory"]
    assert not chain.node_reasons(pod(cpu_m=0, mem_bytes=0), node(cpu=0, mem=0))  # zero requests are not checked


def test_pod_count_limit():
    assert chain.node_reasons(pod(), node(allocatable_pods=3, pod_count=3)) == ["Too many pods"]
    assert chain.node_reasons(pod(), node(allocatable_pods=3, pod_count=2)) == []


def test_unschedulable_and_its_toleration():
    assert chain.node_reasons(pod(), node(unschedulable=True)) == [node_unschedulable.R_UNSCHEDULABLE]
    tol = Toleration(key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule")
    assert chain.node_reasons(pod(tolerations=(tol,)), node(unschedulable=True)) == []


def test_taints_noschedule_noexecute_prefer():
    gpu = Taint("gpu", "true", "NoSchedule")
    assert chain.node_reasons(pod(), node(taints=(gpu,))) == ["node(s) had untolerated taint {gpu: true}"]
    assert chain.node_reasons(pod(), node(taints=(Taint("x", "", "NoExecute"),))) == [
        "node(s) had untolerated taint {x: }"
    ]
    assert chain.node_reasons(pod(), node(taints=(Taint("soft", "1", "PreferNoSchedule"),))) == []
    assert (
        chain.node_reasons(pod(tolerations=(Toleration("gpu", "Equal", "true", "NoSchedule"),)), node(taints=(gpu,)))
        == []
    )
    assert chain.node_reasons(pod(tolerations=(Toleration("gpu", "Equal", "false"),)), node(taints=(gpu,))) != []
    assert (
        chain.node_reasons(pod(tolerations=(Toleration("gpu", "Equal", "true", "NoExecute"),)), node(taints=(gpu,)))
        != []
    )
    assert (
        chain.node_reasons(pod(tolerations=(Toleration(operator="Exists"),)), node(taints=(gpu,))) == []
    )  # tolerate all
    assert chain.node_reasons(pod(tolerations=(Toleration(key="", operator="Equal"),)), node(taints=(gpu,))) != []


def test_not_ready_counts_as_not_ready_taint():
    assert chain.node_reasons(pod(), node(ready=False)) == [
        "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
    ]
    tol = Toleration(key="node.kubernetes.io/not-ready", operator="Exists")
    assert chain.node_reasons(pod(tolerations=(tol,)), node(ready=False)) == []


def test_node_selector_and_affinity_operators():
    labels = {"zone": "a", "disk": "ssd", "cores": "8"}
    n = node(labels=labels)
    assert chain.node_reasons(pod(node_selector={"zone": "a"}), n) == []
    assert chain.node_reasons(pod(node_selector={"zone": "b"}), n) == [node_affinity.R_AFFINITY]
    cases = {
        ("zone", "In", ("a", "b")): True,
        ("zone", "In", ("c",)): False,
        ("zone", "NotIn", ("c",)): True,
        ("zone", "NotIn", ("a",)): False,
        ("nolabel", "NotIn", ("a",)): True,
        ("disk", "Exists", ()): True,
        ("gpu", "Exists", ()): False,
        ("gpu", "DoesNotExist", ()): True,
        ("disk", "DoesNotExist", ()): False,
        ("cores", "Gt", ("4",)): True,
        ("cores", "Gt", ("8",)): False,
        ("cores", "Lt", ("16",)): True,
        ("zone", "Gt", ("1",)): False,  # not an integer
    }
    for (key, op, values), want in cases.items():
        p = pod(affinity_terms=(Term((Req(key, op, values),)),))
        assert (chain.node_reasons(p, n) == []) is want, (key, op, values)
    # terms are ORed, requirements ANDed, an empty term matches nothing
    any_term = (Term((Req("zone", "In", ("z",)),)), Term((Req("disk", "In", ("ssd",)),)))
    assert chain.node_reasons(pod(affinity_terms=any_term), n) == []
    all_reqs = (Term((Req("zone", "In", ("a",)), Req("disk", "In", ("hdd",)))),)
    assert chain.node_reasons(pod(affinity_terms=all_reqs), n) == [node_affinity.R_AFFINITY]
    assert chain.node_reasons(pod(affinity_terms=(Term(()),)), n) == [node_affinity.R_AFFINITY]


def test_first_failing_filter_decides_like_kube_scheduler():
    n = node(cpu=100, unschedulable=True, taints=(Taint("a", "b"),))
    assert chain.node_reasons(pod(), n) == [node_unschedulable.R_UNSCHEDULABLE]
    n.unschedulable = False
    assert chain.node_reasons(pod(), n) == ["node(s) had untolerated taint {a: b}"]


def test_mask_and_failure_message():
    nodes = [
        node("ok"),
        node("small1", cpu=100),
        node("small2", cpu=100),
        node("tainted", taints=(Taint("dedicated", "gpu"),)),
        node("cordoned", unschedulable=True),
    ]
    res = chain.filter_all(pod(), nodes)
    assert res.mask.tolist() == [True, False, False, False, False]
    assert np.array_equal(chain.node_mask(pod(), nodes), res.mask)
    nodes[0].requested_cpu_m = 4000
    msg = chain.failure_message(chain.filter_all(pod(), nodes))
    assert msg == (
        "0/5 nodes are available: 3 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: gpu}, "
        "1 node(s) were unschedulable."
    )
