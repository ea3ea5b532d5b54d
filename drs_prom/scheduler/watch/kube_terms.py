"""Pod and Node JSON -> the parts the filters that go beyond cpu and memory read.

Scalar resources (ephemeral-storage, hugepages-*, extended and device-plugin resources), host
ports, required pod (anti-)affinity terms, DoNotSchedule topology spread constraints, what drs-prom
does not check (volumes claimed through PersistentVolumeClaims, DynamicResources claims), and a
placed pod as a ``PodRecord``. Pure functions over the dicts the apiserver sends; defaults follow
kube-scheduler's (an absent label selector selects nothing, an empty one everything).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping
from typing import Any

from drs_prom.constraints.preemption import Budget
from drs_prom.types import (
    HostPort,
    Json,
    LabelSelector,
    NodeSelectorRequirement,
    PodAffinityTerm,
    PodRecord,
    SpreadConstraint,
)

EPHEMERAL_STORAGE = "ephemeral-storage"
_NATIVE = ("cpu", "memory", "pods")
UNSUPPORTED_CLAIMS = "DynamicResources resourceClaims"


def as_mapping(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a JSON object, else empty (a stranger's body may put anything anywhere)."""
    return value if isinstance(value, Mapping) else {}


def as_list(value: Json) -> list[Json]:
    """``value`` if it is a JSON array, else empty."""
    return value if isinstance(value, list) else []


def as_text(value: Json, default: str = "") -> str:
    """``value`` if it is a JSON string, else ``default``."""
    return value if isinstance(value, str) else default


_mapping, _list, _text = as_mapping, as_list, as_text


def is_scalar(name: str) -> bool:
    """What NodeResourcesFit checks beyond cpu, memory and pods: ephemeral-storage, hugepages-*,
    attachable-volumes-* and any qualified ``vendor/name`` (``requests.``-prefixed quota names aside)."""
    if name in _NATIVE:
        return False
    if name == EPHEMERAL_STORAGE or name.startswith(("hugepages-", "attachable-volumes-")):
        return True
    return "/" in name and not name.startswith("requests.")


def scalar_requests(
    pod: Mapping[str, Any], amount: Callable[[Any], int], cap: int = 2**63 - 1
) -> tuple[tuple[str, int], ...]:
    """Effective requests of every scalar resource, by the rule ``kube.pod_requests`` applies to cpu
    and memory: containers plus sidecars against each init container (plus the sidecars started
    before it), the larger, plus the pod overhead. ephemeral-storage first, then by name."""
    spec = _mapping(pod.get("spec"))
    plain = not spec.get("initContainers") and not spec.get("overhead")
    if plain and all(_cpu_memory_only(c) for c in _list(spec.get("containers"))):
        return ()  # most pods: nothing beyond cpu and memory, decided without building a dict

    def requests(c: Json) -> dict[str, int]:
        res = _mapping(_mapping(c).get("resources"))
        merged = {**_mapping(res.get("limits")), **_mapping(res.get("requests"))}
        return {k: _amount(amount, v) for k, v in merged.items() if isinstance(k, str) and is_scalar(k)}

    total: dict[str, int] = {}
    for c in _list(spec.get("containers")):
        for k, v in requests(c).items():
            total[k] = total.get(k, 0) + v
    side: dict[str, int] = {}
    init: dict[str, int] = {}
    for c in _list(spec.get("initContainers")):
        r = requests(c)
        if _mapping(c).get("restartPolicy") == "Always":
            for k, v in r.items():
                total[k] = total.get(k, 0) + v
                side[k] = side.get(k, 0) + v
            running = dict(side)
        else:
            running = {k: r.get(k, 0) + side.get(k, 0) for k in set(r) | set(side)}
        for k, v in running.items():
            init[k] = max(init.get(k, 0), v)
    over = {
        k: _amount(amount, v) for k, v in _mapping(spec.get("overhead")).items() if isinstance(k, str) and is_scalar(k)
    }
    names = set(total) | set(init) | set(over)
    out = {k: min(cap, max(total.get(k, 0), init.get(k, 0)) + over.get(k, 0)) for k in names}
    return tuple(sorted(((k, v) for k, v in out.items() if v > 0), key=lambda kv: (kv[0] != EPHEMERAL_STORAGE, kv[0])))


def _cpu_memory_only(c: Json) -> bool:
    res = _mapping(_mapping(c).get("resources"))
    for part in (res.get("requests"), res.get("limits")):
        if isinstance(part, Mapping) and any(k not in _NATIVE for k in part):
            return False
    return True


def _amount(amount: Callable[[Json], int], q: Json) -> int:
    try:
        return max(0, amount(q))
    except ValueError:
        return 0


def node_scalar(alloc: Mapping[str, Any], amount: Callable[[Any], int]) -> dict[str, int]:
    """Allocatable scalar resources of a node (``status.allocatable``)."""
    return {k: _amount(amount, v) for k, v in alloc.items() if isinstance(k, str) and is_scalar(k)}


def host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """Host ports of the containers and of the sidecars (init containers with restartPolicy Always)."""
    containers = [c for c in map(_mapping, _list(spec.get("initContainers"))) if c.get("restartPolicy") == "Always"]
    containers += [_mapping(c) for c in _list(spec.get("containers"))]
    out = []
    for c in containers:
        for p in map(_mapping, _list(c.get("ports"))):
            port = p.get("hostPort")
            if isinstance(port, int) and not isinstance(port, bool) and port > 0:
                out.append(
                    HostPort(
                        port=port,
                        protocol=_text(p.get("protocol")) or "TCP",
                        host_ip=_text(p.get("hostIP")) or "0.0.0.0",
                    )
                )
    return tuple(out)


def label_selector(value: Json) -> LabelSelector:
    """metav1.LabelSelector; absent (null) selects nothing, ``{}`` everything."""
    if not isinstance(value, Mapping):
        return LabelSelector(nothing=True)
    labels = _mapping(value.get("matchLabels"))
    exprs = tuple(
        NodeSelectorRequirement(
            key=_text(e.get("key")),
            operator=_text(e.get("operator")),
            values=tuple(_text(v) for v in _list(e.get("values"))),
        )
        for e in map(_mapping, _list(value.get("matchExpressions")))
    )
    return LabelSelector(
        match_labels=tuple(sorted((k, v) for k, v in labels.items() if isinstance(k, str) and isinstance(v, str))),
        match_expressions=exprs,
    )


def affinity_terms(pod: Mapping[str, Any], kind: str) -> tuple[PodAffinityTerm, ...]:
    """Required terms of ``kind`` ("podAffinity" or "podAntiAffinity"), namespaces defaulted as
    kube-scheduler does: the pod's own namespace when neither namespaces nor namespaceSelector is set."""
    spec = _mapping(pod.get("spec"))
    block = _mapping(_mapping(spec.get("affinity")).get(kind))
    if not block:
        return ()
    own = _text(_mapping(pod.get("metadata")).get("namespace"), "default")
    out = []
    for t in map(_mapping, _list(block.get("requiredDuringSchedulingIgnoredDuringExecution"))):
        names = [n for n in _list(t.get("namespaces")) if isinstance(n, str)]
        ns_sel = t.get("namespaceSelector")
        namespaces = frozenset(names) if names or isinstance(ns_sel, Mapping) else frozenset((own,))
        out.append(
            PodAffinityTerm(
                selector=label_selector(t.get("labelSelector")),
                topology_key=_text(t.get("topologyKey")),
                namespaces=namespaces,
                namespace_selector=label_selector(ns_sel),
            )
        )
    return tuple(out)


def spread_constraints(
    spec: Mapping[str, Any], labels: Mapping[str, str], when: str = "DoNotSchedule"
) -> tuple[SpreadConstraint, ...]:
    """The constraints with ``whenUnsatisfiable: <when>`` (DoNotSchedule filters, ScheduleAnyway scores);
    matchLabelKeys add ``key In (the pod's value)`` to the selector."""
    out = []
    for c in map(_mapping, _list(spec.get("topologySpreadConstraints"))):
        if c.get("whenUnsatisfiable") != when:
            continue
        sel = label_selector(c.get("labelSelector"))
        extra = tuple(
            NodeSelectorRequirement(key=k, operator="In", values=(labels[k],))
            for k in _list(c.get("matchLabelKeys"))
            if isinstance(k, str) and k in labels
        )
        if extra and not sel.nothing:
            sel = LabelSelector(match_labels=sel.match_labels, match_expressions=sel.match_expressions + extra)
        skew, domains = c.get("maxSkew"), c.get("minDomains")
        out.append(
            SpreadConstraint(
                max_skew=skew if isinstance(skew, int) and not isinstance(skew, bool) else 1,
                topology_key=_text(c.get("topologyKey")),
                selector=sel,
                min_domains=domains if isinstance(domains, int) and not isinstance(domains, bool) else 1,
                node_affinity_policy=_text(c.get("nodeAffinityPolicy")) or "Honor",
                node_taints_policy=_text(c.get("nodeTaintsPolicy")) or "Ignore",
            )
        )
    return tuple(out)


def unsupported(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """What the pod needs that drs-prom's own filters do not check (the pod is refused, never guessed)."""
    out = []
    if _list(spec.get("resourceClaims")):
        out.append(UNSUPPORTED_CLAIMS)
    return tuple(out)


def claim_names(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """The PersistentVolumeClaims a pod mounts: named ones, and ``<pod>-<volume>`` for generic ephemeral volumes."""
    spec = _mapping(pod.get("spec"))
    pod_name = _text(_mapping(pod.get("metadata")).get("name"))
    out = []
    for v in map(_mapping, _list(spec.get("volumes"))):
        if "persistentVolumeClaim" in v:
            out.append(_text(_mapping(v.get("persistentVolumeClaim")).get("claimName")))
        elif "ephemeral" in v:
            out.append(f"{pod_name}-{_text(v.get('name'))}")
    return tuple(out)


def pod_record(
    pod: Mapping[str, Any], node: str, cpu_m: int, mem: int, scalar: tuple[tuple[str, int], ...]
) -> PodRecord:
    """A placed pod as the filters reading other pods see it (requests passed in, parsed once by the caller)."""
    meta = _mapping(pod.get("metadata"))
    spec = _mapping(pod.get("spec"))
    labels = _mapping(meta.get("labels"))
    return PodRecord(
        uid=_text(meta.get("uid")),
        namespace=_text(meta.get("namespace"), "default"),
        node=node,
        labels=tuple(sorted((k, v) for k, v in labels.items() if isinstance(k, str) and isinstance(v, str))),
        ports=host_ports(spec),
        anti_affinity=affinity_terms(pod, "podAntiAffinity"),
        cpu_m=cpu_m,
        mem_bytes=mem,
        scalar=scalar,
        terminating=bool(meta.get("deletionTimestamp")),
        claims=claim_names(pod),
        name=_text(meta.get("name")),
        priority=spec["priority"] if type(spec.get("priority")) is int else 0,
        start=start_time(pod),
    )


def start_time(pod: Mapping[str, Any]) -> float:
    """``status.startTime`` as epoch seconds; +inf when absent or unreadable (kube-scheduler reads a pod that
    has not started as started now, the newest, so the first to be preempted among equal priorities)."""
    text = _mapping(pod.get("status")).get("startTime")
    if not isinstance(text, str):
        return float("inf")
    try:
        return _dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return float("inf")


def to_budget(pdb: Mapping[str, Any]) -> Budget:
    """A PodDisruptionBudget as preemption reads it: selector, ``status.disruptionsAllowed`` (0 until the
    disruption controller has written it, so an unsynced budget protects its pods) and ``disruptedPods``."""
    meta = _mapping(pdb.get("metadata"))
    status = _mapping(pdb.get("status"))
    allowed = status.get("disruptionsAllowed")
    return Budget(
        namespace=_text(meta.get("namespace"), "default"),
        selector=label_selector(_mapping(pdb.get("spec")).get("selector")),
        allowed=allowed if type(allowed) is int else 0,
        disrupted=frozenset(k for k in _mapping(status.get("disruptedPods")) if isinstance(k, str)),
    )
