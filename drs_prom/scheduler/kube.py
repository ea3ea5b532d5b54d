"""Pod and Node API JSON (dicts as the apiserver sends them) -> types.PodRequest / NodeInfo.

Pure functions: no client calls. Quantities follow Kubernetes' rules; a malformed
quantity counts as zero for that container rather than failing the whole pod (the
apiserver validates quantities, so this only guards against hand-made objects).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from drs_prom.types import NodeInfo, NodeSelectorRequirement, NodeSelectorTerm, PodRequest, Taint, Toleration

PROFILE_ANNOTATION = "drs.io/profile"


def parse_quantity(q: Any) -> Decimal:
    """Kubernetes resource quantity ("500m", "1Gi", "1e3", 2) as a Decimal; ValueError if malformed."""
    try:
        return _parse_cached(q) if isinstance(q, str | int) else _parse_quantity(q)
    except TypeError:  # unhashable
        return _parse_quantity(q)


def _parse_quantity(q: Any) -> Decimal:
    from kubernetes.utils import parse_quantity as _parse

    try:
        return Decimal(_parse(q))
    except (ValueError, TypeError, InvalidOperation):
        raise ValueError(f"bad quantity {q!r}") from None


@functools.lru_cache(maxsize=4096)
def _parse_cached(q: str | int) -> Decimal:
    """Every pod of a workload repeats the same few quantity strings: parse each once."""
    return _parse_quantity(q)


def cpu_millis(q: Any) -> int:
    return int(math.ceil(parse_quantity(q) * 1000))


def mem_bytes(q: Any) -> int:
    return int(math.ceil(parse_quantity(q)))


def _container_requests(c: Mapping[str, Any]) -> tuple[int, int]:
    res = c.get("resources") or {}
    # a limit without a request defaults the request to the limit (apiserver defaulting)
    req = {**(res.get("limits") or {}), **(res.get("requests") or {})}
    try:
        cpu = cpu_millis(req["cpu"]) if "cpu" in req else 0
    except ValueError:
        cpu = 0
    try:
        mem = mem_bytes(req["memory"]) if "memory" in req else 0
    except ValueError:
        mem = 0
    return cpu, mem


def pod_requests(pod: Mapping[str, Any]) -> tuple[int, int]:
    """Effective (cpu_m, mem_bytes): max(sum of containers, largest init container) + overhead."""
    spec = pod.get("spec") or {}
    cpu = mem = 0
    for c in spec.get("containers") or []:
        c_cpu, c_mem = _container_requests(c)
        cpu += c_cpu
        mem += c_mem
    for c in spec.get("initContainers") or []:
        c_cpu, c_mem = _container_requests(c)
        cpu, mem = max(cpu, c_cpu), max(mem, c_mem)
    overhead = spec.get("overhead") or {}
    try:
        cpu += cpu_millis(overhead["cpu"]) if "cpu" in overhead else 0
        mem += mem_bytes(overhead["memory"]) if "memory" in overhead else 0
    except ValueError:
        pass
    return cpu, mem


def _tolerations(spec: Mapping[str, Any]) -> tuple[Toleration, ...]:
    out = []
    for t in spec.get("tolerations") or []:
        out.append(
            Toleration(
                key=t.get("key") or "",
                operator=t.get("operator") or "Equal",
                value=t.get("value") or "",
                effect=t.get("effect") or "",
            )
        )
    return tuple(out)


def _affinity_terms(spec: Mapping[str, Any]) -> tuple[NodeSelectorTerm, ...]:
    na = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = []
    for term in na.get("nodeSelectorTerms") or []:
        reqs = tuple(
            NodeSelectorRequirement(
                key=e.get("key", ""), operator=e.get("operator", ""), values=tuple(e.get("values") or ())
            )
            for e in term.get("matchExpressions") or []
        )
        # matchFields (metadata.name) is expressed as a requirement on a pseudo label
        reqs += tuple(
            NodeSelectorRequirement(
                key="metadata.name", operator=e.get("operator", ""), values=tuple(e.get("values") or ())
            )
            for e in term.get("matchFields") or []
        )
        terms.append(NodeSelectorTerm(match_expressions=reqs))
    return tuple(terms)


def owner_of(pod: Mapping[str, Any]) -> str | None:
    """``Kind/name`` of the controlling owner, if any."""
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return f"{ref.get('kind')}/{ref.get('name')}"
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    return f"{refs[0].get('kind')}/{refs[0].get('name')}" if refs else None


def to_pod_request(pod: Mapping[str, Any], demand: tuple[float, ...] | None = None) -> PodRequest:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    cpu, mem = pod_requests(pod)
    return PodRequest(
        name=meta.get("name", ""),
        namespace=meta.get("namespace", "default"),
        uid=meta.get("uid", ""),
        cpu_m=cpu,
        mem_bytes=mem,
        priority=int(spec.get("priority") or 0),
        node_selector=dict(spec.get("nodeSelector") or {}),
        affinity_terms=_affinity_terms(spec),
        tolerations=_tolerations(spec),
        demand=demand,  # type: ignore[arg-type]
        profile=(meta.get("annotations") or {}).get(PROFILE_ANNOTATION),
        owner=owner_of(pod),
    )


def node_ready(node: Mapping[str, Any]) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def to_node_info(node: Mapping[str, Any], bound: Iterable[tuple[int, int]] = ()) -> NodeInfo:
    """A node plus the (cpu_m, mem_bytes) requests of the pods already bound to it."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    alloc = status.get("allocatable") or status.get("capacity") or {}
    cpu = mem = count = 0
    for c, m in bound:
        cpu += c
        mem += m
        count += 1
    try:
        pods = int(parse_quantity(alloc.get("pods", 110)))
    except ValueError:
        pods = 0
    labels = dict(meta.get("labels") or {})
    labels.setdefault("metadata.name", meta.get("name", ""))  # for matchFields
    return NodeInfo(
        name=meta.get("name", ""),
        allocatable_cpu_m=_safe(cpu_millis, alloc.get("cpu", 0)),
        allocatable_mem_bytes=_safe(mem_bytes, alloc.get("memory", 0)),
        allocatable_pods=pods,
        requested_cpu_m=cpu,
        requested_mem_bytes=mem,
        pod_count=count,
        labels=labels,
        taints=tuple(
            Taint(key=t.get("key", ""), value=t.get("value") or "", effect=t.get("effect") or "NoSchedule")
            for t in spec.get("taints") or []
        ),
        unschedulable=bool(spec.get("unschedulable")),
        ready=node_ready(node),
    )


def _safe(fn: Any, q: Any) -> int:
    try:
        return int(fn(q))
    except ValueError:
        return 0


def is_terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_ours_pending(pod: Mapping[str, Any], scheduler_name: str) -> bool:
    """Unbound, not terminating, not finished, and addressed to our scheduler."""
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    return (
        spec.get("schedulerName") == scheduler_name
        and not spec.get("nodeName")
        and not meta.get("deletionTimestamp")
        and not is_terminal(pod)
    )
