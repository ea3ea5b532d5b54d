"""Generated cluster states and pods for the differential test against kube-scheduler.

A ``Case`` is valid Kubernetes JSON (the apiserver takes every object as generated) written with
placeholders, so that Hypothesis examples read short and one case can be created under any name
prefix: ``@ns`` and ``@ons`` are the case's two namespaces, ``@n0``..``@n7`` its nodes (names and
``kubernetes.io/hostname`` labels), ``@pv0``.. its PersistentVolumes and ``@sc-…`` its StorageClasses. Alphabets are small on purpose: labels, zones, taints, ports
and selectors collide often, which is where filters disagree.

Which kinds of constraint are generated is a set of feature names. ``ENABLED_FEATURES`` is the
switch the CI test and the command use by default.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from tests.differential import csi
from tests.differential.volumes import HOSTNAME, STORAGE_CLASS_NAMES, ZONE, claims, storage_classes

CORE = "core"
"""Always on: labels, zones, hostnames; cpu, memory and pod-count allocatable; bound pods with cpu/memory requests."""
TAINTS = "taints"
UNSCHEDULABLE = "unschedulable"
NODE_AFFINITY = "node_affinity"
INIT_CONTAINERS = "init_containers"
OVERHEAD = "overhead"
GPU = "gpu"
EPHEMERAL_STORAGE = "ephemeral_storage"
HOST_PORTS = "host_ports"
POD_AFFINITY = "pod_affinity"
POD_ANTI_AFFINITY = "pod_anti_affinity"
EXISTING_ANTI_AFFINITY = "existing_anti_affinity"
NAMESPACE_SELECTOR = "namespace_selector"
TOPOLOGY_SPREAD = "topology_spread"
VOLUMES = "volumes"
CSI_LIMITS = "csi_limits"

ALL_FEATURES = frozenset(
    {
        TAINTS,
        UNSCHEDULABLE,
        NODE_AFFINITY,
        INIT_CONTAINERS,
        OVERHEAD,
        GPU,
        EPHEMERAL_STORAGE,
        HOST_PORTS,
        POD_AFFINITY,
        POD_ANTI_AFFINITY,
        EXISTING_ANTI_AFFINITY,
        NAMESPACE_SELECTOR,
        TOPOLOGY_SPREAD,
        VOLUMES,
        CSI_LIMITS,
    }
)
ADAPTER_FEATURES = frozenset({TAINTS, UNSCHEDULABLE, NODE_AFFINITY, INIT_CONTAINERS, OVERHEAD})
"""What ``drs_prom.scheduler.feasibility`` over today's ``drs_prom.constraints.filters`` covers: NodeUnschedulable,
TaintToleration, NodeAffinity and NodeResourcesFit for cpu, memory and pod count (init containers
and RuntimeClass overhead included)."""

ENABLED_FEATURES = ALL_FEATURES
"""The switch: set to ``ALL_FEATURES`` once ``drs_prom.scheduler.feasibility`` runs every filter of
kube-scheduler's default profile (``--features all`` does the same for one command run)."""

RUNTIME_CLASS = "drs-diff-overhead"
RUNTIME_OVERHEAD = {"cpu": "250m", "memory": "128Mi"}
"""The RuntimeClass the oracle creates once; pods naming it get this overhead from admission."""

GPU_RESOURCE = "nvidia.com/gpu"
TOPOLOGY_KEYS = (ZONE, HOSTNAME, "disk")
POD_LABEL_KEYS = ("app", "tier")
POD_LABEL_VALUES = {"app": ("web", "db"), "tier": ("front", "back")}


def parse_features(text: str) -> frozenset[str]:
    """``all``, ``supported`` (the adapter's set) or a comma list of names; ValueError naming the unknown ones."""
    if text == "all":
        return ALL_FEATURES
    if text == "supported":
        return ADAPTER_FEATURES
    names = frozenset(n.strip() for n in text.split(",") if n.strip())
    unknown = sorted(names - ALL_FEATURES)
    if unknown:
        raise ValueError(f"unknown feature(s) {', '.join(unknown)}; known: {', '.join(sorted(ALL_FEATURES))}")
    return names


@dataclass(frozen=True)
class Case:
    """One cluster state and the pod to place, with placeholders for names (see the module docstring)."""

    namespaces: tuple[dict[str, Any], ...]
    nodes: tuple[dict[str, Any], ...]
    pods: tuple[dict[str, Any], ...]
    pod: dict[str, Any]
    storage_classes: tuple[dict[str, Any], ...] = ()
    pvs: tuple[dict[str, Any], ...] = ()
    pvcs: tuple[dict[str, Any], ...] = ()
    csi_nodes: tuple[dict[str, Any], ...] = ()
    attachments: tuple[dict[str, Any], ...] = ()

    def __repr__(self) -> str:
        return summary(self)


def materialize(obj: Any, names: Mapping[str, str]) -> Any:
    """``obj`` with every string equal to a placeholder replaced by its name (deep copy)."""
    if isinstance(obj, str):
        return names.get(obj, obj)
    if isinstance(obj, list | tuple):
        return [materialize(v, names) for v in obj]
    if isinstance(obj, dict):
        return {k: materialize(v, names) for k, v in obj.items()}
    return obj


def placeholders(case: Case, prefix: str) -> dict[str, str]:
    """Placeholder -> real name for a case created under ``prefix``."""
    names = {"@ns": prefix, "@ons": f"{prefix}-o"}
    names.update({f"@n{i}": f"{prefix}-n{i}" for i in range(len(case.nodes))})
    names.update({f"@pv{i}": f"{prefix}-pv{i}" for i in range(len(case.pvs))})
    names.update({sc: f"{prefix}-{sc[4:]}" for sc in (*STORAGE_CLASS_NAMES, csi.CSI_CLASS)})
    names.update({f"@va{i}": f"{prefix}-va{i}" for i in range(len(case.attachments))})
    return names


def summary(case: Case) -> str:
    """The case in a few lines: each node, each bound pod, the pod (only the fields that were generated)."""
    lines = []
    for ns in case.namespaces:
        lines.append(f"namespace {ns['metadata']['name']} labels={ns['metadata'].get('labels', {})}")
    for node in case.nodes:
        meta, spec, status = node["metadata"], node["spec"], node["status"]
        labels = {k: v for k, v in meta["labels"].items() if k != HOSTNAME}
        lines.append(
            f"node {meta['name']} labels={labels} alloc={status['allocatable']}"
            + (f" taints={spec['taints']}" if spec.get("taints") else "")
            + (" unschedulable" if spec.get("unschedulable") else "")
        )
    for pod in case.pods:
        lines.append(f"bound {_pod_text(pod)}")
    for pv in case.pvs:
        spec = pv["spec"]
        where = (
            f"nodeAffinity={spec['nodeAffinity']['required']['nodeSelectorTerms'][0]['matchExpressions'][0]}"
            if "nodeAffinity" in spec
            else f"csi={spec.get('csi')}"
        )
        lines.append(
            f"pv {pv['metadata']['name']} labels={pv['metadata']['labels']} class={spec['storageClassName']} "
            f"size={spec['capacity']['storage']} claimRef={spec.get('claimRef', {}).get('name')} {where}"
        )
    for pvc in case.pvcs:
        spec = pvc["spec"]
        lines.append(
            f"pvc {pvc['metadata']['name']} class={spec['storageClassName']} "
            f"size={spec['resources']['requests']['storage']} volumeName={spec.get('volumeName')}"
        )
    for obj in case.csi_nodes:
        lines.append(f"csinode {obj['metadata']['name']} drivers={obj['spec']['drivers']}")
    for va in case.attachments:
        lines.append(f"volumeattachment {va['metadata']['name']} {va['spec']}")
    lines.append(f"pod {_pod_text(case.pod)}")
    return "\n".join(lines)


def _pod_text(pod: Mapping[str, Any]) -> str:
    meta, spec = pod["metadata"], dict(pod["spec"])
    for key in ("schedulerName", "terminationGracePeriodSeconds"):
        spec.pop(key, None)
    spec["containers"] = [_container_text(c) for c in spec["containers"]]
    if "initContainers" in spec:
        spec["initContainers"] = [_container_text(c) for c in spec["initContainers"]]
    return f"{meta['namespace']}/{meta['name']} labels={meta.get('labels', {})} {json.dumps(spec, sort_keys=True)}"


def _container_text(c: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"requests": c.get("resources", {}).get("requests", {})}
    if c.get("ports"):
        out["ports"] = [{k: v for k, v in p.items() if k != "containerPort"} for p in c["ports"]]
    if c.get("restartPolicy"):
        out["restartPolicy"] = c["restartPolicy"]
    return out


# -- strategies ------------------------------------------------------------------------------


def _dedupe(items: Iterable[dict[str, Any]], key: Any) -> list[dict[str, Any]]:
    seen: set[Any] = set()
    out = []
    for item in items:
        k = key(item)
        if k not in seen:
            seen.add(k)
            out.append(item)
    return out


# Every strategy factory is cached: building a strategy per draw costs more than the draw itself.
@functools.cache
def _lists(elements: st.SearchStrategy[Any], min_size: int, max_size: int) -> st.SearchStrategy[list[Any]]:
    return st.lists(elements, min_size=min_size, max_size=max_size)


_HOST_PORTS = st.lists(
    st.fixed_dictionaries(
        {"hostPort": st.sampled_from((8080, 9090)), "protocol": st.sampled_from(("TCP", "UDP"))},
        optional={"hostIP": st.sampled_from(("127.0.0.1", "0.0.0.0"))},
    ),
    max_size=2,
)
_TAINTS = st.lists(
    st.fixed_dictionaries(
        {
            "key": st.sampled_from(("dedicated", "gpu")),
            "value": st.sampled_from(("a", "b", "")),
            "effect": st.sampled_from(("NoSchedule", "PreferNoSchedule", "NoExecute")),
        }
    ),
    max_size=2,
)
_ONE_IN_3 = st.sampled_from((False, False, True))
_ONE_IN_4 = st.sampled_from((False, False, False, True))
"""Each constraint of the pod is drawn one time in three, so that its feasible set is seldom empty."""
_NODE_LABELS = st.dictionaries(st.sampled_from(("disk", "tier")), st.sampled_from(("ssd", "1", "10")))
_NODE_SELECTOR = st.sampled_from(
    ({ZONE: "a"}, {ZONE: "b"}, {"disk": "ssd"}, {"tier": "1"}, {"tier": "10"}, {ZONE: "c"})
)
_SELECTOR_VALUES = {
    k: st.lists(st.sampled_from(v), min_size=1, max_size=2, unique=True) for k, v in POD_LABEL_VALUES.items()
}
_NODE_VALUES = st.lists(st.sampled_from(("a", "b", "ssd", "1")), min_size=1, max_size=2, unique=True)
pod_labels = st.fixed_dictionaries({}, optional={k: st.sampled_from(v) for k, v in POD_LABEL_VALUES.items()})


@functools.cache
@st.composite
def label_selector(draw: st.DrawFn) -> dict[str, Any]:
    """matchLabels and matchExpressions over the pods' small label alphabet (never empty: an
    empty selector matches every pod, a case the namespaceSelector covers)."""
    key = draw(st.sampled_from(POD_LABEL_KEYS))
    if draw(st.booleans()):
        return {"matchLabels": {key: draw(st.sampled_from(POD_LABEL_VALUES[key]))}}
    op = draw(st.sampled_from(("In", "NotIn", "Exists", "DoesNotExist")))
    expr: dict[str, Any] = {"key": key, "operator": op}
    if op in ("In", "NotIn"):
        expr["values"] = draw(_SELECTOR_VALUES[key])
    return {"matchExpressions": [expr]}


@functools.cache
@st.composite
def affinity_term(draw: st.DrawFn, features: frozenset[str]) -> dict[str, Any]:
    term: dict[str, Any] = {
        "labelSelector": draw(label_selector()),
        "topologyKey": draw(st.sampled_from(TOPOLOGY_KEYS)),
    }
    if NAMESPACE_SELECTOR in features:
        scope = draw(st.sampled_from(("own", "other", "both", "all", "team-a", "team-b")))
        if scope == "other":
            term["namespaces"] = ["@ons"]
        elif scope == "both":
            term["namespaces"] = ["@ns", "@ons"]
        elif scope == "all":
            term["namespaceSelector"] = {}
        elif scope.startswith("team-"):
            term["namespaceSelector"] = {"matchLabels": {"team": scope[-1]}}
    return term


@functools.cache
@st.composite
def resources(draw: st.DrawFn, features: frozenset[str]) -> dict[str, Any]:
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    if c := draw(st.sampled_from(("", "100m", "500m", "1", "1500m"))):
        requests["cpu"] = c
    if m := draw(st.sampled_from(("", "128Mi", "512Mi", "1Gi"))):
        requests["memory"] = m
    if GPU in features and (g := draw(st.sampled_from(("",) * 9 + ("1", "1", "2")))):
        requests[GPU_RESOURCE] = limits[GPU_RESOURCE] = g  # extended resources: requests == limits
    if EPHEMERAL_STORAGE in features and (e := draw(st.sampled_from(("",) * 9 + ("512Mi", "2Gi", "5Gi")))):
        requests["ephemeral-storage"] = e
    out: dict[str, Any] = {"requests": requests}
    if limits:
        out["limits"] = limits
    return out


@functools.cache
@st.composite
def container(draw: st.DrawFn, features: frozenset[str], name: str, ports: bool) -> dict[str, Any]:
    c: dict[str, Any] = {
        "name": name,
        "image": "registry.k8s.io/pause:3.10",
        "resources": draw(resources(features)),
    }
    if ports and HOST_PORTS in features:
        chosen = draw(_HOST_PORTS) if draw(st.booleans()) else []
        if chosen:
            c["ports"] = [{"containerPort": p["hostPort"], **p} for p in chosen]
    return c


def _unique_ports(containers: list[dict[str, Any]]) -> None:
    """Drop host ports a pod repeats (the apiserver refuses a pod that asks twice for one)."""
    seen: set[tuple[Any, Any]] = set()
    for c in containers:
        kept = []
        for p in c.get("ports", []):
            k = (p["hostPort"], p["protocol"])
            if k not in seen:
                seen.add(k)
                kept.append(p)
        if kept:
            c["ports"] = kept
        else:
            c.pop("ports", None)


@functools.cache
@st.composite
def node(draw: st.DrawFn, features: frozenset[str], index: int) -> dict[str, Any]:
    name = f"@n{index}"
    labels = {HOSTNAME: name}
    if zone := draw(st.sampled_from(("a", "a", "b", "c", ""))):
        labels[ZONE] = zone
    labels.update(draw(_NODE_LABELS))
    allocatable = {
        "cpu": draw(st.sampled_from(("8", "4", "2", "1"))),
        "memory": draw(st.sampled_from(("8Gi", "4Gi", "2Gi", "1Gi"))),
        "pods": draw(st.sampled_from(("110", "110", "4", "2", "1"))),
    }
    if GPU in features and (g := draw(st.sampled_from(("2", "1", "", "0")))):
        allocatable[GPU_RESOURCE] = g
    if EPHEMERAL_STORAGE in features and (e := draw(st.sampled_from(("10Gi", "10Gi", "1Gi", "")))):
        allocatable["ephemeral-storage"] = e
    spec: dict[str, Any] = {}
    if TAINTS in features:
        taints = draw(_TAINTS) if draw(_ONE_IN_4) else []
        if taints := _dedupe(taints, lambda t: (t["key"], t["effect"])):
            spec["taints"] = taints
    if UNSCHEDULABLE in features and draw(st.integers(0, 7)) == 7:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {
            "capacity": allocatable,
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready"}],
        },
    }


@functools.cache
@st.composite
def bound_pod(draw: st.DrawFn, features: frozenset[str], index: int, n_nodes: int) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeName": f"@n{draw(st.integers(0, n_nodes - 1))}",
        "containers": [draw(container(features, "c", ports=True))],
        "terminationGracePeriodSeconds": 0,
    }
    _unique_ports(spec["containers"])
    if OVERHEAD in features and draw(st.integers(0, 3)) == 3:
        spec["runtimeClassName"] = RUNTIME_CLASS
    if EXISTING_ANTI_AFFINITY in features and draw(st.integers(0, 2)) == 2:
        spec["affinity"] = {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [draw(affinity_term(features))]}
        }
    namespace = "@ons" if NAMESPACE_SELECTOR in features and draw(st.integers(0, 2)) == 0 else "@ns"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"b{index}", "namespace": namespace, "labels": draw(pod_labels)},
        "spec": spec,
    }


@functools.cache
@st.composite
def toleration(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(("all", "exists", "equal", "equal", "unschedulable")))
    if kind == "all":
        return {"operator": "Exists"}
    if kind == "unschedulable":
        return {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
    tol: dict[str, Any] = {"key": draw(st.sampled_from(("dedicated", "gpu")))}
    if kind == "exists":
        tol["operator"] = "Exists"
    else:
        tol["operator"] = "Equal"
        tol["value"] = draw(st.sampled_from(("a", "b", "")))
    if effect := draw(st.sampled_from(("", "NoSchedule", "NoExecute", "PreferNoSchedule"))):
        tol["effect"] = effect
    return tol


@functools.cache
@st.composite
def node_requirement(draw: st.DrawFn) -> dict[str, Any]:
    key = draw(st.sampled_from((ZONE, "disk", "tier")))
    op = draw(st.sampled_from(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")))
    req: dict[str, Any] = {"key": key, "operator": op}
    if op in ("In", "NotIn"):
        req["values"] = draw(_NODE_VALUES)
    elif op in ("Gt", "Lt"):
        req["values"] = [draw(st.sampled_from(("0", "1", "5", "10")))]
    return req


@functools.cache
@st.composite
def node_selector_term(draw: st.DrawFn, n_nodes: int) -> dict[str, Any]:
    term: dict[str, Any] = {}
    if exprs := draw(_lists(node_requirement(), 0, 2)):
        term["matchExpressions"] = exprs
    if draw(st.integers(0, 3)) == 0:
        term["matchFields"] = [
            {
                "key": "metadata.name",
                "operator": draw(st.sampled_from(("In", "NotIn"))),
                "values": [f"@n{draw(st.integers(0, n_nodes - 1))}"],
            }
        ]
    return term


@functools.cache
@st.composite
def spread_constraint(draw: st.DrawFn) -> dict[str, Any]:
    c: dict[str, Any] = {
        "maxSkew": draw(st.sampled_from((1, 1, 2))),
        "topologyKey": draw(st.sampled_from(TOPOLOGY_KEYS)),
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": draw(label_selector()),
    }
    if draw(st.integers(0, 3)) == 0:
        c["minDomains"] = draw(st.integers(1, 4))
    if draw(st.integers(0, 3)) == 0:
        c["nodeAffinityPolicy"] = draw(st.sampled_from(("Honor", "Ignore")))
    if draw(st.integers(0, 3)) == 0:
        c["nodeTaintsPolicy"] = draw(st.sampled_from(("Honor", "Ignore")))
    return c


@functools.cache
@st.composite
def incoming_pod(draw: st.DrawFn, features: frozenset[str], n_nodes: int) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [draw(container(features, f"c{i}", ports=True)) for i in range(draw(st.integers(1, 2)))],
        "terminationGracePeriodSeconds": 0,
    }
    if INIT_CONTAINERS in features and (n_init := draw(st.integers(0, 2))):
        inits = [draw(container(features, f"i{i}", ports=False)) for i in range(n_init)]
        for c in inits:
            if draw(st.booleans()):
                c["restartPolicy"] = "Always"  # a sidecar: runs beside the containers
        spec["initContainers"] = inits
    _unique_ports(spec["containers"])
    if OVERHEAD in features and draw(st.booleans()):
        spec["runtimeClassName"] = RUNTIME_CLASS
    if TAINTS in features or UNSCHEDULABLE in features:
        tols = draw(_lists(toleration(), 0, 2))
        if TAINTS not in features:
            tols = [t for t in tols if t.get("key") == "node.kubernetes.io/unschedulable"]
        if tols:
            spec["tolerations"] = tols
    affinity: dict[str, Any] = {}
    if NODE_AFFINITY in features:
        if draw(_ONE_IN_3):
            spec["nodeSelector"] = dict(draw(_NODE_SELECTOR))
        if draw(_ONE_IN_3):
            terms = draw(_lists(node_selector_term(n_nodes), 1, 2))
            affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    for feature, kind in ((POD_AFFINITY, "podAffinity"), (POD_ANTI_AFFINITY, "podAntiAffinity")):
        if feature in features and draw(_ONE_IN_3):
            terms = draw(_lists(affinity_term(features), 1, 2))
            affinity[kind] = {"requiredDuringSchedulingIgnoredDuringExecution": terms}
    if affinity:
        spec["affinity"] = affinity
    if TOPOLOGY_SPREAD in features and draw(_ONE_IN_3):
        constraints = _dedupe(draw(_lists(spread_constraint(), 1, 2)), lambda c: c["topologyKey"])
        spec["topologySpreadConstraints"] = constraints
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "incoming", "namespace": "@ns", "labels": draw(pod_labels)},
        "spec": spec,
    }


@functools.cache
@st.composite
def namespace(draw: st.DrawFn, name: str, features: frozenset[str]) -> dict[str, Any]:
    labels = {}
    if NAMESPACE_SELECTOR in features and (team := draw(st.sampled_from(("", "a", "b")))):
        labels["team"] = team
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


@functools.cache
@st.composite
def cases(draw: st.DrawFn, features: frozenset[str] = ENABLED_FEATURES) -> Case:
    """2-8 nodes, 0-12 bound pods, two namespaces, the incoming pod and its claims.

    Each case uses about half of ``features`` (each one with even odds): cases with a single kind
    of constraint name their cause plainly, cases with many show how the filters combine, and a
    pod under every constraint at once would seldom fit anywhere.
    """
    features = frozenset(f for f in sorted(features) if draw(st.booleans()))
    n_nodes = draw(st.integers(2, 8))
    nodes = tuple(draw(node(features, i)) for i in range(n_nodes))
    n_pods = draw(st.integers(0, 12))
    pods = tuple(draw(bound_pod(features, i, n_nodes)) for i in range(n_pods))
    namespaces = (draw(namespace("@ns", features)), draw(namespace("@ons", features)))
    pod = draw(incoming_pod(features, n_nodes))
    if VOLUMES not in features and CSI_LIMITS not in features:
        return Case(namespaces=namespaces, nodes=nodes, pods=pods, pod=pod)
    pvs: tuple[dict[str, Any], ...] = ()
    pvcs: tuple[dict[str, Any], ...] = ()
    pod_volumes: list[dict[str, Any]] = []
    if VOLUMES in features:
        volumes = draw(claims(n_nodes))
        pvs, pvcs, pod_volumes = volumes.pvs, volumes.pvcs, volumes.pod_volumes()
    classes = storage_classes() if pvcs else ()
    csi_nodes: tuple[dict[str, Any], ...] = ()
    attachments: tuple[dict[str, Any], ...] = ()
    if CSI_LIMITS in features:
        extra = draw(csi.csi_volumes(n_nodes, len(pvs)))
        pods = tuple(_with_mounts(draw, p, extra.claims) for p in pods)
        pod_volumes += csi.mounts(draw(st.lists(st.sampled_from(extra.bound_claims), max_size=2, unique=True)))
        pvs, pvcs, classes = pvs + extra.pvs, pvcs + extra.pvcs, (*classes, csi.storage_class())
        csi_nodes, attachments = extra.csi_nodes, extra.attachments
    if pod_volumes:
        pod = {**pod, "spec": {**pod["spec"], "volumes": pod_volumes}}
    return Case(
        namespaces=namespaces,
        nodes=nodes,
        pods=pods,
        pod=pod,
        storage_classes=classes,
        pvs=pvs,
        pvcs=pvcs,
        csi_nodes=csi_nodes,
        attachments=attachments,
    )


def _with_mounts(draw: st.DrawFn, pod: dict[str, Any], claim_names: tuple[str, ...]) -> dict[str, Any]:
    """A bound pod of ``@ns`` mounting 0-2 of ``claim_names`` (pods of ``@ons`` cannot mount them)."""
    if pod["metadata"]["namespace"] != "@ns":
        return pod
    names = draw(st.lists(st.sampled_from(claim_names), max_size=2, unique=True))
    return {**pod, "spec": {**pod["spec"], "volumes": csi.mounts(names)}} if names else pod
