"""API JSON -> records, pod demand resolution order (over a literal usage history), extender score scaling: pure,
literal data."""

import numpy as np
import pytest

from drs_prom.config import UsageSettings
from drs_prom.scheduler.decision import pod_demand
from drs_prom.scheduler.http.extender import scale_scores
from drs_prom.scheduler.watch import kube
from drs_prom.usage.estimator import UsageModel
from drs_prom.usage.history import PodUsage


def pod_json(**spec):
    meta = spec.pop("meta", {})
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1", **meta},
        "spec": {"schedulerName": "drs-scheduler", **spec},
    }


def ctr(cpu=None, mem=None, limits=None, image="x"):
    res = {"requests": {k: v for k, v in (("cpu", cpu), ("memory", mem)) if v is not None}}
    if limits:
        res["limits"] = limits
    return {"name": "c", "image": image, "resources": res}


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
    assert (r.cpu_m, r.priority, r.node_selector, r.profile, r.owner, r.image, r.demand_source) == (
        500,
        7,
        {"disk": "ssd"},
        "video",
        "ReplicaSet/web-1",  # no pod-template-hash label: the ReplicaSet is the top owner
        "x",
        "",
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


class StoredHistory:
    """``UsageHistory`` over literal rows (the Protocol's plainest implementation; the Prometheus-backed one is tested
    against a real Prometheus in tests/prom/test_pod_usage.py). ``None`` for an owner: the store could not answer."""

    def __init__(self, owners, images=None):
        self.owners, self.images, self.calls = owners, images or {}, []

    def owner(self, namespace, owner, now):
        self.calls.append((namespace, owner))
        return self.owners.get(owner, NOTHING)

    def image(self, namespace, image, owner, now):
        self.calls.append((namespace, image, owner))
        return self.images.get(image, NOTHING)


def usage(*rows):
    n = len(rows)
    return PodUsage(np.array(rows, dtype=np.float64), np.full(n, 3600.0), np.full(n, 1000.0))


NOTHING = PodUsage.empty()
RS = {
    "ownerReferences": [{"kind": "ReplicaSet", "name": "w-7d9f8", "controller": True}],
    "labels": {"pod-template-hash": "7d9f8"},
}
EXACT = UsageModel(prior_pods=0.0, cpu_ratio=0.5, mem_ratio=0.7)


def test_demand_resolution_order():
    explicit = pod_json(
        containers=[ctr("1")],
        meta={"annotations": {"drs.io/demand": "cpu=0.5,mem=1Gi,net_tx=2M", "drs.io/profile": "video"}, **RS},
    )
    history = StoredHistory({"Deployment/w": usage([0.3, 1e8, 1, 2, 3, 4])})
    assert pod_demand.resolve(explicit, history) == pod_demand.PodDemand((0.5, 2**30, 0, 2e6, 0, 0), "annotation")
    # not trusted: the profile, then the estimate answers
    got = pod_demand.resolve(explicit, history, trust_annotations=False)
    assert got.source == "profile" and got.demand == pod_demand.PROFILES["video"]
    prof = pod_json(containers=[ctr("1")], meta={"annotations": {"drs.io/profile": "disk"}, **RS})
    got = pod_demand.resolve(prof, history)
    assert got.source == "profile" and got.demand[5] > 1e6 and got.demand[0] == pytest.approx(1.0)
    assert history.calls == []  # an annotated pod costs no lookup
    # the owner's stored usage, whatever the requests say
    req = pod_json(containers=[ctr("250m", "512Mi", image="shop:1")], meta=RS)
    assert pod_demand.resolve(req, history, EXACT, now=2000.0) == pod_demand.PodDemand((0.3, 1e8, 1, 2, 3, 4), "owner")
    assert history.calls == [("ns", "Deployment/w"), ("ns", "shop:1", "Deployment/w")]
    # an owner with no stored pods: another owner's pods of the same image
    similar = StoredHistory({}, {"shop:1": usage([0.2, 5e7, 0, 0, 0, 9])})
    assert pod_demand.resolve(req, similar, EXACT).source == "similar"
    # the store could not answer (None) or has nothing: the requests, scaled by the model
    for empty in (StoredHistory({"Deployment/w": None}), StoredHistory({}), None):
        got = pod_demand.resolve(req, empty, EXACT)
        assert got == pod_demand.PodDemand((0.125, 0.7 * 512 * 2**20, 0.0, 0.0, 0.0, 0.0), "requests")
    bare = pod_json(containers=[ctr()])
    assert pod_demand.resolve(bare, StoredHistory({})).source == "default"
    unknown = pod_json(containers=[ctr()], meta={"annotations": {"drs.io/profile": "nope"}})
    assert pod_demand.resolve(unknown).source == "default"
    bad = pod_json(containers=[ctr("1")], meta={"annotations": {"drs.io/demand": "gpu=1"}})
    assert pod_demand.resolve(bad, None, EXACT).source == "requests"  # a malformed annotation is ignored


def test_the_resolver_counts_every_demand_by_source_and_the_pod_request_carries_it():
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    resolver = pod_demand.DemandResolver(
        UsageSettings(trust_annotations=False), StoredHistory({"Deployment/w": usage([0.3, 1e8, 1, 2, 3, 4])}),
        registry=registry, model=EXACT,
    )  # fmt: skip
    annotated = pod_json(containers=[ctr("1", image="shop:1")], meta={"annotations": {"drs.io/demand": "cpu=9"}, **RS})
    got = resolver.resolve(annotated)
    assert got.source == "owner"  # the annotation is not trusted
    for source in pod_demand.DEMAND_SOURCES:
        want = 1.0 if source == "owner" else 0.0
        assert registry.get_sample_value("drs_usage_estimates_total", {"source": source}) == want, source
    req = kube.to_pod_request(annotated, got.demand, got.source)
    assert (req.owner, req.image, req.demand_source, req.demand) == ("Deployment/w", "shop:1", "owner", got.demand)


def test_the_resolver_estimates_an_owners_pods_once_until_the_history_answers_anew():
    clock = [100.0]
    history = StoredHistory({"Deployment/w": usage([0.3, 1e8, 1, 2, 3, 4])})
    resolver = pod_demand.DemandResolver(history=history, model=EXACT, clock=lambda: clock[0])
    pod = pod_json(containers=[ctr("250m", "512Mi", image="shop:1")], meta=RS)
    first = resolver.resolve(pod)
    assert resolver.resolve(pod) is first  # the same requests and the same stored rows: remembered
    history.owners["Deployment/w"] = usage([0.5, 1e8, 1, 2, 3, 4])  # a refresh: new rows
    assert resolver.resolve(pod).demand[0] == pytest.approx(0.5)
    again = resolver.resolve(pod)
    clock[0] += pod_demand.MEMO_SECONDS
    assert resolver.resolve(pod) is not again and resolver.resolve(pod) == again  # made again after a while


def test_parse_demand_rejects_bad_keys():
    with pytest.raises(ValueError, match=r"bad drs\.io/demand entry"):
        pod_demand.parse_demand("gpu=1")


def test_scale_scores():
    import numpy as np

    assert scale_scores(np.array([1.0, 3.0, 2.0, -np.inf])) == [0, 10, 5, 0]
    assert scale_scores(np.array([2.0, 2.0])) == [10, 10]
    assert scale_scores(np.array([-np.inf])) == [0]


def test_the_runner_reads_stored_usage_through_a_client_of_its_own_unless_told_not_to():
    from prometheus_client import CollectorRegistry

    from drs_prom.config import Settings
    from drs_prom.scheduler.runner import pod_demands
    from drs_prom.signals.pod_usage import PrometheusUsageHistory

    s = Settings.model_validate({"prometheus": {"timeout_seconds": 2.5}, "usage": {"history_seconds": 10800}})
    demands = pod_demands(s, CollectorRegistry())
    assert isinstance(demands.history, PrometheusUsageHistory)
    assert demands.history.source.settings.timeout_seconds == 2.5  # each query within prometheus.timeout_seconds
    assert demands.history.settings.history_seconds == 10800 and demands.settings is s.usage
    off = Settings.model_validate({"usage": {"history": False}})
    assert pod_demands(off, CollectorRegistry()).history is None
