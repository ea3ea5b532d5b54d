"""Pod and Node API JSON (dicts as the apiserver sends them) -> types.PodRequest / NodeInfo.

Pure functions: no client calls. Quantities follow Kubernetes' rules; a malformed
quantity counts as zero for that container rather than failing the whole pod (the
apiserver validates quantities, so this only guards against hand-made objects).
"""

from __future__ import annotations

import functools
import math
import re
import time
from collections.abc import Iterable, Mapping
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, ROUND_CEILING, Context, Decimal
from typing import Any

from drs_prom.scheduler.watch import kube_terms
from drs_prom.types import (
    Json,
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodRecord,
    PodRequest,
    Taint,
    Toleration,
)
from drs_prom.usage import owners

PROFILE_ANNOTATION = "drs.io/profile"
INT64_MAX = 2**63 - 1
"""Amounts saturate here, as Go's int64 quantities do: a pod asking for 1e30 cores fits nowhere."""

# resource.ParseQuantity's grammar: signed decimal number, then a binary-SI, decimal-SI or
# e/E-exponent suffix. Nothing else (no spaces, underscores, "Infinity", non-ASCII digits),
# since the kubernetes client's own parser accepts all of those.
_QUANTITY = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?[0-9]+|)")
_SUFFIX = {
    "": 0,
    "m": -3,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
# Exact arithmetic that only moves exponents: a huge exponent costs nothing until an int is made.
_WIDE = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)


def parse_quantity(q: Json) -> Decimal:
    """Kubernetes resource quantity ("500m", "1Gi", "1e3", 2) as a Decimal; ValueError if malformed."""
    if isinstance(q, str | int) and not isinstance(q, bool):
        return _parse_cached(q)  # every pod of a workload repeats the same few strings
    return _parse_quantity(q)


def _parse_quantity(q: Json) -> Decimal:
    if isinstance(q, bool) or not isinstance(q, (str, int, float)):
        raise ValueError(f"bad quantity {str(q)[:40]!r}")
    if isinstance(q, int):
        return Decimal(q)
    if isinstance(q, float):
        if not math.isfinite(q):
            raise ValueError(f"bad quantity {q!r}")
        return Decimal(repr(q))
    m = _QUANTITY.fullmatch(q)
    if not m:
        raise ValueError(f"bad quantity {q[:40]!r}")
    number, suffix = m.groups()
    if suffix in _BINARY:
        return _WIDE.multiply(Decimal(number), Decimal(2 ** _BINARY[suffix]))
    if suffix in _SUFFIX:
        return Decimal(number).scaleb(_SUFFIX[suffix], _WIDE)
    exp = int(suffix[1:])
    if abs(exp) >= 2**31:  # Go reads the exponent as an int32
        raise ValueError(f"bad quantity {q[:40]!r}")
    return Decimal(number).scaleb(exp, _WIDE)


def _amount(value: Decimal, exp: int) -> int:
    """ceil(value * 10**exp), saturating at int64 (never builds a huge int)."""
    scaled = value.scaleb(exp, _WIDE)
    if scaled >= INT64_MAX:
        return INT64_MAX
    if scaled <= -INT64_MAX:
        return -INT64_MAX
    return int(scaled.to_integral_value(rounding=ROUND_CEILING))


@functools.lru_cache(maxsize=4096)
def _parse_cached(q: str | int) -> Decimal:
    """Every pod of a workload repeats the same few quantity strings: parse each once."""
    return _parse_quantity(q)


def cpu_millis(q: Json) -> int:
    return _amount(parse_quantity(q), 3)


def mem_bytes(q: Json) -> int:
    return _amount(parse_quantity(q), 0)


def _request(req: Mapping[str, Any], name: str, amount: Any) -> int:
    """One resource request; malformed or negative counts as 0 (the apiserver refuses both)."""
    if name not in req:
        return 0
    try:
        return max(0, amount(req[name]))
    except ValueError:
        return 0


def _container_requests(c: Mapping[str, Any]) -> tuple[int, int]:
    res = _mapping(c.get("resources"))
    # a limit without a request defaults the request to the limit (apiserver defaulting)
    req = {**_mapping(res.get("limits")), **_mapping(res.get("requests"))}
    return _request(req, "cpu", cpu_millis), _request(req, "memory", mem_bytes)


def pod_requests(pod: Mapping[str, Any]) -> tuple[int, int]:
    """Effective (cpu_m, mem_bytes), as component-helpers' PodRequests computes them.

    The containers plus the sidecars (init containers with ``restartPolicy: Always``, which
    keep running beside them), against each ordinary init container plus the sidecars
    started before it; the larger per resource, plus the pod overhead.
    """
    spec = _mapping(pod.get("spec"))
    cpu = mem = 0
    for c in _list(spec.get("containers")):
        c_cpu, c_mem = _container_requests(_mapping(c))
        cpu += c_cpu
        mem += c_mem
    side_cpu = side_mem = init_cpu = init_mem = 0
    for c in _list(spec.get("initContainers")):
        c = _mapping(c)
        c_cpu, c_mem = _container_requests(c)
        if c.get("restartPolicy") == "Always":
            cpu, mem = cpu + c_cpu, mem + c_mem
            side_cpu, side_mem = side_cpu + c_cpu, side_mem + c_mem
            c_cpu, c_mem = side_cpu, side_mem
        else:
            c_cpu, c_mem = c_cpu + side_cpu, c_mem + side_mem
        init_cpu, init_mem = max(init_cpu, c_cpu), max(init_mem, c_mem)
    overhead = _mapping(spec.get("overhead"))
    cpu = max(cpu, init_cpu) + _request(overhead, "cpu", cpu_millis)
    mem = max(mem, init_mem) + _request(overhead, "memory", mem_bytes)
    return min(cpu, INT64_MAX), min(mem, INT64_MAX)


# a stranger's body may put anything anywhere: these read a JSON value as the type expected, else empty
_mapping, _list, _text = kube_terms.as_mapping, kube_terms.as_list, kube_terms.as_text


def _tolerations(spec: Mapping[str, Any]) -> tuple[Toleration, ...]:
    out = []
    for t in _list(spec.get("tolerations")):
        t = _mapping(t)
        out.append(
            Toleration(
                key=_text(t.get("key")),
                operator=_text(t.get("operator")) or "Equal",
                value=_text(t.get("value")),
                effect=_text(t.get("effect")),
            )
        )
    return tuple(out)


def node_requirements(exprs: Json) -> tuple[NodeSelectorRequirement, ...]:
    return tuple(
        NodeSelectorRequirement(
            key=_text(e.get("key")),
            operator=_text(e.get("operator")),
            values=tuple(_text(v) for v in _list(e.get("values"))),
        )
        for e in map(_mapping, _list(exprs))
    )


def _affinity_terms(spec: Mapping[str, Any]) -> tuple[NodeSelectorTerm, ...]:
    na = _mapping(
        _mapping(_mapping(spec.get("affinity")).get("nodeAffinity")).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
    )
    return tuple(
        NodeSelectorTerm(
            match_expressions=node_requirements(term.get("matchExpressions")),
            # matchFields name node fields (only metadata.name exists), never labels
            match_fields=node_requirements(term.get("matchFields")),
        )
        for term in map(_mapping, _list(na.get("nodeSelectorTerms")))
    )


def labels_of(value: Json) -> dict[str, str]:
    return {k: v for k, v in _mapping(value).items() if isinstance(k, str) and isinstance(v, str)}


def _priority(value: Json) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > 2**31:
        raise ValueError(f"malformed pod: spec.priority {str(value)[:20]!r} is not an int32")
    return value


def to_pod_request(
    pod: Mapping[str, Any], demand: tuple[float, ...] | None = None, demand_source: str = ""
) -> PodRequest:
    """ValueError (one line) when ``pod`` is not a JSON object; odd fields inside read as absent. ``demand`` and
    ``demand_source``: the pod's expected load and where it came from (drs_prom.scheduler.decision.pod_demand)."""
    if not isinstance(pod, Mapping):
        raise ValueError(f"malformed pod: expected an object, got {type(pod).__name__}")
    meta = _mapping(pod.get("metadata"))
    spec = _mapping(pod.get("spec"))
    cpu, mem = pod_requests(pod)
    profile = _mapping(meta.get("annotations")).get(PROFILE_ANNOTATION)
    labels = labels_of(meta.get("labels"))
    return PodRequest(
        name=_text(meta.get("name")),
        namespace=_text(meta.get("namespace"), "default"),
        uid=_text(meta.get("uid")),
        cpu_m=cpu,
        mem_bytes=mem,
        priority=_priority(spec.get("priority")),
        node_selector=labels_of(spec.get("nodeSelector")),
        affinity_terms=_affinity_terms(spec),
        tolerations=_tolerations(spec),
        demand=demand,
        profile=profile if isinstance(profile, str) else None,
        owner=owners.top_owner(pod),
        image=owners.image_of(pod),
        demand_source=demand_source,
        labels=labels,
        scalar=kube_terms.scalar_requests(pod, mem_bytes, INT64_MAX),
        ports=kube_terms.host_ports(spec),
        pod_affinity=kube_terms.affinity_terms(pod, "podAffinity"),
        pod_anti_affinity=kube_terms.affinity_terms(pod, "podAntiAffinity"),
        spread=kube_terms.spread_constraints(spec, labels),
        soft_spread=kube_terms.spread_constraints(spec, labels, "ScheduleAnyway"),
        unsupported=kube_terms.unsupported(spec),
        claims=kube_terms.claim_names(pod),
        preempts=spec.get("preemptionPolicy") != "Never",
    )


def to_pod_record(pod: Mapping[str, Any], node: str) -> PodRecord:
    """A pod placed on ``node`` (bound or assumed) as the filters that read other pods see it."""
    cpu, mem = pod_requests(pod)
    return kube_terms.pod_record(pod, node, cpu, mem, kube_terms.scalar_requests(pod, mem_bytes, INT64_MAX))


def node_ready(node: Mapping[str, Any]) -> bool:
    for cond in map(_mapping, _list(_mapping(node.get("status")).get("conditions"))):
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def to_node_info(node: Mapping[str, Any], bound: Iterable[tuple[int, int]] = ()) -> NodeInfo:
    """A node plus the (cpu_m, mem_bytes) requests of the pods already bound to it.

    ValueError (one line) when ``node`` is not a JSON object; malformed quantities read as 0.
    """
    if not isinstance(node, Mapping):
        raise ValueError(f"malformed node: expected an object, got {type(node).__name__}")
    meta = _mapping(node.get("metadata"))
    spec = _mapping(node.get("spec"))
    status = _mapping(node.get("status"))
    alloc = _mapping(status.get("allocatable")) or _mapping(status.get("capacity"))
    cpu = mem = count = 0
    for c, m in bound:
        cpu += c
        mem += m
        count += 1
    return NodeInfo(
        name=_text(meta.get("name")),
        allocatable_cpu_m=_request(alloc, "cpu", cpu_millis),
        allocatable_mem_bytes=_request(alloc, "memory", mem_bytes),
        allocatable_pods=_request({"pods": alloc.get("pods", 110)}, "pods", mem_bytes),
        requested_cpu_m=cpu,
        requested_mem_bytes=mem,
        pod_count=count,
        labels=labels_of(meta.get("labels")),
        taints=tuple(
            Taint(key=_text(t.get("key")), value=_text(t.get("value")), effect=_text(t.get("effect")) or "NoSchedule")
            for t in map(_mapping, _list(spec.get("taints")))
        ),
        unschedulable=bool(spec.get("unschedulable")),
        ready=node_ready(node),
        allocatable_scalar=kube_terms.node_scalar(alloc, mem_bytes),
    )


def is_terminal(pod: Mapping[str, Any]) -> bool:
    return _mapping(pod.get("status")).get("phase") in ("Succeeded", "Failed")


def kube_timestamp(now: float) -> str:
    """``now`` (epoch seconds) as the API's RFC 3339 time, to the second (conditions, events, annotations)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))


def is_ours_pending(pod: Mapping[str, Any], scheduler_name: str) -> bool:
    """Unbound, not terminating, not finished, addressed to our scheduler and ready to be scheduled: a pod with
    ``schedulingGates`` waits for whoever set them (Kueue, a quota controller) to remove them, as kube-scheduler's
    SchedulingGates plugin keeps it out of the queue (the apiserver refuses its Binding meanwhile)."""
    spec = _mapping(pod.get("spec"))
    meta = _mapping(pod.get("metadata"))
    return (
        spec.get("schedulerName") == scheduler_name
        and not spec.get("nodeName")
        and not spec.get("schedulingGates")
        and not meta.get("deletionTimestamp")
        and not is_terminal(pod)
    )


def namespace_labels(ns: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    """A Namespace's name and labels (what a pod (anti-)affinity term's namespaceSelector reads)."""
    meta = _mapping(ns.get("metadata"))
    return _text(meta.get("name")), {str(k): str(v) for k, v in _mapping(meta.get("labels")).items()}
