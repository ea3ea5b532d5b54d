"""API JSON -> records, pod demand resolution order, extender score scaling: pure, literal data."""

import pytest

from drs_prom.scheduler.decision import pod_features
from drs_prom.scheduler.http.extender import scale_scores
from drs_prom.scheduler.watch import kube


def pod_json(**spec):
    meta = spec.pop("meta", {})
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1", **meta},
        "spec": {"schedulerName": "drs-scheduler", **spec},
    }


def ctr(cpu=None, mem=None, limits=None):
    res = {"requests": {k: v for k, v in (("cpu", cpu), ("memory", mem)) if v is not None}}
    if limits:
        res["limits"] = limits
    return {"name": "c", "image": "x", "resources": res}


def test_pod_requests_sum_init_max_overhead_and_limit_default():
    p = pod_json(
        containers=[ctr("250m", "256Mi"), ctr("0.5", "1Gi")],
        initContainers=[ctr("1", "64Mi")],
        overhead={"cpu": "100m"},
    )
    assert kube.pod_requests(p) == (1100, 256 * 2**20 + 2**30)
    assert kube.pod_requests(pod_json(containers=[ctr(limits={"cpu": "2"})])) == (2000, 0)
    assert kube.pod_requests(pod_json(containers=[ctr("bogus")])) == (0, 0)  # malformed: zero, not a crash


def test_to_pod_request_constraints():
    p = pod_json(
        containers=[ctr("500m")],
        priority=7,
        nodeSelector={"disk": "ssd"},
        tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
                }
            }
        },
        meta={
            "annotations": {"drs.io/profile": "video"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web-1", "controller": True}],
        },
    )
    r = kube.to_pod_request(p)
    assert (r.cpu_m, r.priority, r.node_selector, r.profile, r.owner) == (
        500,
        7,
        {"disk": "ssd"},
        "video",
        "ReplicaSet/web-1",
    )
    assert r.tolerations[0].key == "gpu" and r.tolerations[0].operator == "Exists"
    assert r.affinity_terms[0].match_expressions[0].values == ("a",)


def test_node_info_and_readiness():
    node = {
        "metadata": {"name": "n1", "labels": {"a": "b"}},
        "spec": {"unschedulable": True, "taints": [{"key": "k", "effect": "NoExecute"}]},
        "status": {
            "allocatable": {"cpu": "3500m", "memory": "7Gi", "pods": "20"},
            "conditions": [{"type": "Ready", "status": "False"}],
        },
    }
    info = kube.to_node_info(node, [(500, 1 << 30), (250, 0)])
    assert (info.allocatable_cpu_m, info.allocatable_mem_bytes, info.allocatable_pods) == (3500, 7 << 30, 20)
    assert (info.requested_cpu_m, info.requested_mem_bytes, info.pod_count) == (750, 1 << 30, 2)
    assert info.unschedulable and not info.ready and info.taints[0].effect == "NoExecute"


def test_is_ours_pending():
    assert kube.is_ours_pending(pod_json(), "drs-scheduler")
    assert not kube.is_ours_pending(pod_json(), "other")
    assert not kube.is_ours_pending(pod_json(nodeName="n1"), "drs-scheduler")
    assert not kube.is_ours_pending(pod_json(meta={"deletionTimestamp": "x"}), "drs-scheduler")
    assert not kube.is_ours_pending(pod_json(schedulingGates=[{"name": "example.com/quota"}]), "drs-scheduler")
    assert kube.is_ours_pending(pod_json(schedulingGates=[]), "drs-scheduler")  # all gates removed


class FakeObserved:
    """Stands in for Prometheus' cAdvisor answer (tested against real Prometheus elsewhere)."""

    def __init__(self, value):
        self.value, self.calls = value, []

    def lookup(self, ns, owner):
        self.calls.append((ns, owner))
        return self.value


def test_demand_resolution_order():
    owner = {"ownerReferences": [{"kind": "ReplicaSet", "name": "w-1", "controller": True}]}
    explicit = pod_json(
        containers=[ctr("1")],
        meta={"annotations": {"drs.io/demand": "cpu=0.5,mem=1Gi,net_tx=2M", "drs.io/profile": "video"}},
    )
    assert pod_features.resolve(explicit) == pod_features.PodDemand((0.5, 2**30, 0, 2e6, 0, 0), "annotation")
    prof = pod_json(containers=[ctr("1")], meta={"annotations": {"drs.io/profile": "disk"}})
    got = pod_features.resolve(prof)
    assert got.source == "profile" and got.demand[5] > 1e6 and got.demand[0] == pytest.approx(1.0)
    req = pod_json(containers=[ctr("250m", "512Mi")], meta=owner)
    obs = FakeObserved((0.3, 1e8, 1, 2, 3, 4))
    assert pod_features.resolve(req, obs) == pod_features.PodDemand((0.25, 512 * 2**20, 0, 0, 0, 0), "requests")
    assert obs.calls == []
    bare = pod_json(containers=[ctr()], meta=owner)
    assert pod_features.resolve(bare, obs) == pod_features.PodDemand((0.3, 1e8, 1, 2, 3, 4), "observed")
    assert obs.calls == [("ns", "ReplicaSet/w-1")]
    assert pod_features.resolve(bare, FakeObserved(None)).source == "default"
    assert (
        pod_features.resolve(pod_json(containers=[ctr()], meta={"annotations": {"drs.io/profile": "nope"}})).source
        == "default"
    )


def test_parse_demand_rejects_bad_keys():
    with pytest.raises(ValueError, match=r"bad drs\.io/demand entry"):
        pod_features.parse_demand("gpu=1")


def test_observed_usage_caches_failures():
    calls = []

    def query(expr):
        calls.append(expr)
        raise ConnectionError("down")

    obs = pod_features.ObservedUsage(query, window="1m", ttl=60)
    assert obs.lookup("ns", "ReplicaSet/w-1") is None
    n = len(calls)
    assert obs.lookup("ns", "ReplicaSet/w-1") is None and len(calls) == n  # cached, no second timeout
    assert 'pod=~"w\\\\-1-[a-z0-9]+"' in calls[0] or 'pod=~"w-1-[a-z0-9]+"' in calls[0]


def test_scale_scores():
    import numpy as np

    assert scale_scores(np.array([1.0, 3.0, 2.0, -np.inf])) == [0, 10, 5, 0]
    assert scale_scores(np.array([2.0, 2.0])) == [10, 10]
    assert scale_scores(np.array([-np.inf])) == [0]
