"""The live scheduler's path to the filters: the cluster cache keeps every placed pod (bound and
assumed) per node, so pods decided back to back see each other, and its vectorised mask agrees with
the reasons the FailedScheduling event gives and with ``feasible_nodes`` on the same objects.

The cache is fed the list results a watch would deliver (no apiserver needed for bookkeeping);
tests/scheduler/test_constraints_probe.py runs the same rules against a real apiserver."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from drs_prom.constraints.placed import record_of
from drs_prom.constraints.plugins import inter_pod_affinity
from drs_prom.scheduler.feasibility import feasible_nodes
from drs_prom.scheduler.watch import kube, kube_storage
from drs_prom.scheduler.watch.cache import ClusterCache, class_entry
from tests.scheduler.test_feasibility import HOST, ZONE, _anti, _spread, node, pod


def _cache(nodes: list[dict], pods: list[dict]) -> ClusterCache:
    cache = ClusterCache("drs")
    cache._on_node_list(nodes)
    cache._on_pod_list(pods)
    cache._on_ns_list([{"metadata": {"name": "default"}}])
    return cache


def _decide(cache: ClusterCache, body: dict) -> str | None:
    """What the scheduling loop does: the first feasible node, assumed with the pod's record."""
    req = kube.to_pod_request(body)
    view = cache.view()
    mask = view.feasible(req)
    if not mask.any():
        return None
    name = view.names[int(mask.argmax())]
    cache.assume(req.uid, name, req.cpu_m, req.mem_bytes, record_of(req, name))
    return name


def test_assumed_pods_count_for_anti_affinity_ports_spread_and_gpus() -> None:
    nodes = [node("n1", "a", **{"nvidia.com/gpu": "1"}), node("n2", "a"), node("n3", "b")]
    cache = _cache(nodes, [])
    web = {"app": "web"}
    anti = [_decide(cache, pod(f"w{i}", labels=web, affinity=_anti(web))) for i in range(4)]
    assert sorted(anti[:3]) == ["n1", "n2", "n3"] and anti[3] is None
    ports = [_decide(cache, pod(f"p{i}", ports=[{"containerPort": 1, "hostPort": 8080}])) for i in range(4)]
    assert sorted(ports[:3]) == ["n1", "n2", "n3"] and ports[3] is None
    app = {"app": "s"}
    spread = [_decide(cache, pod(f"s{i}", labels=app, topologySpreadConstraints=_spread(app))) for i in range(6)]
    zones = [{"n1": "a", "n2": "a", "n3": "b"}[n] for n in spread if n]
    assert len(zones) == 6 and zones.count("a") == zones.count("b") == 3
    gpu = [_decide(cache, pod(f"g{i}", requests={"nvidia.com/gpu": "1"})) for i in range(2)]
    assert gpu == ["n1", None]
    # the refusal the event would carry names kube-scheduler's reasons
    msg = cache.view().filter_result(kube.to_pod_request(pod("w9", labels=web, affinity=_anti(web))))
    assert set(msg.reasons) == {(inter_pod_affinity.R_POD_ANTI_AFFINITY,)}


def test_a_forgotten_assumption_frees_its_port_and_a_bound_pod_holds_it() -> None:
    cache = _cache([node("n1")], [])
    want = pod("p", ports=[{"containerPort": 1, "hostPort": 80}])
    assert _decide(cache, want) == "n1"
    assert _decide(cache, pod("q", ports=[{"containerPort": 1, "hostPort": 80}])) is None
    cache.forget("uid-p")
    cache._on_pod_event("ADDED", pod("other", on="n1", ports=[{"containerPort": 1, "hostPort": 80}]))
    assert _decide(cache, pod("q", ports=[{"containerPort": 1, "hostPort": 80}])) is None
    cache._on_pod_event("DELETED", pod("other", on="n1", ports=[{"containerPort": 1, "hostPort": 80}]))
    assert _decide(cache, pod("q", ports=[{"containerPort": 1, "hostPort": 80}])) == "n1"


def test_relabelling_a_bound_pod_changes_what_selects_it() -> None:
    cache = _cache([node("n1"), node("n2")], [pod("old", on="n1", labels={"app": "x"})])
    new = pod("new", labels={"app": "web"}, affinity=_anti({"app": "web"}))
    assert kube.to_pod_request(new) and cache.view().feasible(kube.to_pod_request(new)).tolist() == [True, True]
    cache._on_pod_event("MODIFIED", pod("old", on="n1", labels={"app": "web"}))
    assert cache.view().feasible(kube.to_pod_request(new)).tolist() == [False, True]


# -- the vectorised mask, the reasons and feasible_nodes agree ------------------------------------

_LABELS = st.sampled_from([{}, {"app": "a"}, {"app": "b"}, {"app": "a", "rev": "1"}])


@st.composite
def _placed(draw: st.DrawFn, i: int) -> dict:
    labels = draw(_LABELS)
    extra: dict = {}
    if draw(st.booleans()):
        extra["affinity"] = _anti(draw(_LABELS) or {"app": "a"}, key=draw(st.sampled_from([HOST, ZONE])))
    ports = [{"containerPort": 1, "hostPort": draw(st.sampled_from([80, 81]))}] if draw(st.booleans()) else None
    gpu = {"nvidia.com/gpu": "1"} if draw(st.booleans()) else {}
    if claim := draw(st.sampled_from([None, "csi1", "csi2"])):
        extra["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]
    return pod(
        f"e{i}", on=draw(st.sampled_from(["n1", "n2", "n3", "n4"])), labels=labels, ports=ports, requests=gpu, **extra
    )


@st.composite
def _incoming(draw: st.DrawFn) -> dict:
    labels = draw(_LABELS)
    extra: dict = {}
    kind = draw(st.sampled_from(["none", "anti", "spread", "both"]))
    if kind in ("anti", "both"):
        extra["affinity"] = _anti(draw(_LABELS) or {"app": "a"}, key=draw(st.sampled_from([HOST, ZONE])))
    if kind in ("spread", "both"):
        extra["topologySpreadConstraints"] = _spread(
            draw(_LABELS) or {"app": "a"}, skew=draw(st.integers(1, 2)), minDomains=draw(st.integers(1, 3))
        )
    ports = [{"containerPort": 1, "hostPort": 80, "hostIP": draw(st.sampled_from(["", "10.0.0.1"]))}]
    if draw(st.booleans()):
        ports = None
    gpu = {"nvidia.com/gpu": str(draw(st.integers(0, 2)))}
    claim = draw(st.sampled_from([None, "local", "zonal", "unbound", "missing", "csi1", "csi2"]))
    if claim:
        extra["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]
    return pod("incoming", labels=labels, ports=ports, requests=gpu, **extra)


CLAIMS = [
    {"metadata": {"name": "local", "namespace": "default"}, "spec": {"volumeName": "pv-local"}},
    {"metadata": {"name": "zonal", "namespace": "default"}, "spec": {"volumeName": "pv-zonal"}},
    {"metadata": {"name": "unbound", "namespace": "default"}, "spec": {"storageClassName": "fast"}},
    {"metadata": {"name": "csi1", "namespace": "default"}, "spec": {"volumeName": "pv-csi1"}},
    {"metadata": {"name": "csi2", "namespace": "default"}, "spec": {"volumeName": "pv-csi2"}},
]
VOLUMES = [
    {
        "metadata": {"name": "pv-local"},
        "spec": {
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": HOST, "operator": "In", "values": ["n2"]}]}]
                }
            }
        },
    },
    {"metadata": {"name": "pv-zonal", "labels": {ZONE: "b"}}, "spec": {}},
    {"metadata": {"name": "pv-csi1"}, "spec": {"csi": {"driver": "d.example.com", "volumeHandle": "h1"}}},
    {"metadata": {"name": "pv-csi2"}, "spec": {"csi": {"driver": "d.example.com", "volumeHandle": "h2"}}},
]
CSI_NODES = [
    {"metadata": {"name": n}, "spec": {"drivers": [{"name": "d.example.com", "allocatable": {"count": 1}}]}}
    for n in ("n1", "n2")
]
CLASSES = [{"metadata": {"name": "fast"}, "volumeBindingMode": "WaitForFirstConsumer"}]


@settings(max_examples=150, deadline=None)
@given(
    placed=st.integers(0, 8).flatmap(lambda n: st.tuples(*[_placed(i) for i in range(n)])),
    incoming=_incoming(),
    gpus=st.tuples(*[st.integers(0, 2) for _ in range(4)]),
)
def test_the_scheduler_mask_equals_the_reasons_and_feasible_nodes(placed: tuple, incoming: dict, gpus: tuple) -> None:
    nodes = [
        node(f"n{i + 1}", zone, **({"nvidia.com/gpu": str(g)} if g else {}))
        for i, (zone, g) in enumerate(zip(["a", "a", "b", None], gpus))
    ]
    cache = _cache(nodes, list(placed))
    cache._claims.update(
        ((c["metadata"]["namespace"], c["metadata"]["name"]), kube_storage.to_claim_info(c)) for c in CLAIMS
    )
    cache._volumes.update((v["metadata"]["name"], kube_storage.to_volume_info(v)) for v in VOLUMES)
    cache._classes.update(map(class_entry, CLASSES))
    cache._csi_limits.update(map(kube_storage.csi_node_limits, CSI_NODES))
    view = cache.view()
    req = kube.to_pod_request(incoming)
    mask = view.feasible(req).tolist()
    reasons = view.filter_result(req).reasons
    oracle = feasible_nodes(
        incoming,
        nodes,
        list(placed),
        namespaces=[{"metadata": {"name": "default"}}],
        pvcs=CLAIMS,
        pvs=VOLUMES,
        storage_classes=CLASSES,
        csi_nodes=CSI_NODES,
    )
    assert mask == [not r for r in reasons]
    assert dict(zip(view.names, reasons)) == oracle
