"""What load a pending pod will add: its six-feature demand in absolute units.

Resolution order (first that applies wins; the journal records which via ``source``):

1. ``drs.io/demand`` annotation, explicit values, e.g. ``cpu=0.5,mem=512Mi,net_tx=2M``
   (cpu in cores, mem in bytes, the rest bytes/s; omitted features are 0).
2. ``drs.io/profile`` annotation naming a built-in profile (``video``, ``net``, ``disk``:
   DRS's three application types, converted from the paper's 0..100 scale on a
   4-core / 8 GiB reference node with DRS's scales).
3. The pod's requests: cpu request in cores, memory request in bytes, I/O 0.
4. The workload's observed usage: the mean per-pod usage of the pods of the same owner,
   from cAdvisor series in Prometheus (promql.owner_usage_queries); cached per owner.
5. ``DEFAULT_DEMAND`` (0.1 core, 128 MiB, no I/O): a small pod, like kube-scheduler's
   non-zero defaults for pods without requests.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from drs_prom.features import FEATURES
from drs_prom.scheduler.watch import kube

log = logging.getLogger(__name__)

DEMAND_ANNOTATION = "drs.io/demand"
PROFILE_ANNOTATION = kube.PROFILE_ANNOTATION

Demand = tuple[float, float, float, float, float, float]

_REF_CORES, _REF_MEM = 4.0, 8 * 2**30
_NET_FULL, _DISK_FULL = 40 * 1024, 10240 * 1024  # DRS prototype: 40 KB/s and 10240 KB/s read as 100


def _from_drs_scale(cpu: float, mem: float, rx: float, tx: float, rd: float, wr: float) -> Demand:
    return (
        cpu / 100 * 0.25 * _REF_CORES,  # DRS scaled cpu x4: 100 means 25% of the node
        mem / 100 * _REF_MEM,
        rx / 100 * _NET_FULL,
        tx / 100 * _NET_FULL,
        rd / 100 * _DISK_FULL,
        wr / 100 * _DISK_FULL,
    )


PROFILES: dict[str, Demand] = {
    "video": _from_drs_scale(100, 23.0, 11.25, 2.49, 0.0, 1.54),
    "net": _from_drs_scale(54.0, 46.2, 80.04, 71.4, 0.0, 1.58),
    "disk": _from_drs_scale(100, 22.96, 12.6, 2.73, 0.0, 86.26),
}

DEFAULT_DEMAND: Demand = (0.1, 128 * 2**20, 0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class PodDemand:
    demand: Demand
    source: str  # annotation | profile | requests | observed | default


def parse_demand(text: str) -> Demand:
    """``cpu=0.5,mem=512Mi,net_tx=2M`` -> absolute demand; ValueError naming the bad part."""
    values = dict.fromkeys(FEATURES, 0.0)
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, raw = part.partition("=")
        key = key.strip()
        if not sep or key not in values:
            raise ValueError(f"bad {DEMAND_ANNOTATION} entry {part!r} (keys: {', '.join(FEATURES)})")
        values[key] = float(kube.parse_quantity(raw.strip())) + 0.0  # + 0.0: no -0.0
        if values[key] < 0:
            raise ValueError(f"negative {key} in {DEMAND_ANNOTATION}")
        if not math.isfinite(values[key]):  # 1e999 parses, but an infinite load poisons every score
            raise ValueError(f"{key} in {DEMAND_ANNOTATION} is too large")
    return tuple(values[f] for f in FEATURES)  # type: ignore[return-value]


class ObservedUsage:
    """Per-owner mean usage from Prometheus, cached ``ttl`` seconds (also failures, so a
    down Prometheus costs one timeout per owner per ttl, not one per pod)."""

    def __init__(self, query: Callable[[str], float | None], window: str = "5m", ttl: float = 120.0) -> None:
        self._query = query
        self.window = window
        self.ttl = ttl
        self._cache: dict[tuple[str, str], tuple[float, Demand | None]] = {}
        self._lock = threading.Lock()

    def lookup(self, namespace: str, owner: str) -> Demand | None:
        from drs_prom.signals import promql

        key = (namespace, owner)
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
            if hit and now - hit[0] < self.ttl:
                return hit[1]
        _kind, _, name = owner.partition("/")
        queries = promql.owner_usage_queries(namespace, promql.owner_pod_regex(name), self.window)
        demand: Demand | None
        try:
            values = [self._query(queries[f]) for f in FEATURES]
            demand = None if values[0] is None and values[1] is None else tuple(v or 0.0 for v in values)  # type: ignore[assignment]
        except Exception as exc:  # noqa: BLE001 - observed usage is optional: logged, the next source in the chain answers
            log.info(
                "observed usage for %s/%s unavailable: %s",
                namespace,
                owner,
                str(exc).splitlines()[0] if str(exc) else exc,
            )
            demand = None
        with self._lock:
            self._cache[key] = (now, demand)
        return demand


def resolve(pod: Mapping[str, Any], observed: ObservedUsage | None = None) -> PodDemand:
    """The pod's demand and where it came from (see the module docstring for the order)."""
    meta = pod.get("metadata") or {}
    ann = meta.get("annotations") or {}
    if DEMAND_ANNOTATION in ann:
        try:
            return PodDemand(parse_demand(ann[DEMAND_ANNOTATION]), "annotation")
        except ValueError as exc:
            log.warning("%s/%s: %s; ignoring it", meta.get("namespace"), meta.get("name"), exc)
    profile = ann.get(PROFILE_ANNOTATION)
    if profile:
        if profile in PROFILES:
            return PodDemand(PROFILES[profile], "profile")
        log.warning(
            "%s/%s: unknown %s %r (known: %s)",
            meta.get("namespace"),
            meta.get("name"),
            PROFILE_ANNOTATION,
            profile,
            ", ".join(PROFILES),
        )
    cpu_m, mem = kube.pod_requests(pod)
    if cpu_m or mem:
        return PodDemand((cpu_m / 1000.0, float(mem), 0.0, 0.0, 0.0, 0.0), "requests")
    owner = kube.owner_of(pod)
    if observed is not None and owner:
        got = observed.lookup(meta.get("namespace", "default"), owner)
        if got is not None:
            return PodDemand(got, "observed")
    return PodDemand(DEFAULT_DEMAND, "default")
