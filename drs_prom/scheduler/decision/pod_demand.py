"""What load a pending pod will add: its six-feature demand in absolute units, and where it came from.

In order, the first that applies (the journal keeps the source of each decision's demand, and
``drs_usage_estimates_total{source}`` counts them):

1. ``annotation``: the ``drs.io/demand`` annotation's explicit values, e.g. ``cpu=0.5,mem=512Mi,net_tx=2M``
   (cpu in cores, mem in bytes, the rest bytes/s; omitted features are 0), unless ``usage.trust_annotations`` is
   false;
2. ``profile``: the ``drs.io/profile`` annotation naming a built-in profile (``video``, ``net``, ``disk``: DRS's
   three application types, converted from the paper's 0..100 scale on a 4-core / 8 GiB reference node with DRS's
   scales);
3. the estimate (drs_prom.usage.estimator) from the stored usage of the pods its top owner ran (``owner``), of
   other owners' pods in its namespace running its first container's image (``similar``), or its requests
   (``requests``; kube-scheduler's non-zero defaults for a pod that requests nothing: ``default``). The stored
   usage comes from a ``UsageHistory`` (PrometheusUsageHistory live), which answers from its cache and never makes
   a decision wait.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from drs_prom.config import UsageSettings
from drs_prom.features import FEATURES
from drs_prom.scheduler.watch import kube
from drs_prom.scheduler.watch.kube_terms import as_mapping, as_text
from drs_prom.signals.pod_usage import PrometheusUsageHistory
from drs_prom.usage import owners
from drs_prom.usage.estimator import SOURCES, UsageModel, estimate, load_usage_model, shipped_usage_model
from drs_prom.usage.history import PodUsage, UsageHistory

log = logging.getLogger(__name__)

DEMAND_ANNOTATION = "drs.io/demand"
PROFILE_ANNOTATION = kube.PROFILE_ANNOTATION
ANNOTATION, PROFILE = "annotation", "profile"
DEMAND_SOURCES: tuple[str, ...] = (ANNOTATION, PROFILE, *SOURCES)
"""Every value of ``PodDemand.source`` (and of ``PodRequest.demand_source`` on the live scheduler)."""

Demand = tuple[float, float, float, float, float, float]

MEMO_SECONDS, MEMO_SIZE = 10.0, 4096
"""How long, and for how many (requests, stored usage) pairs, the resolver keeps an estimate it made."""

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


@dataclass(frozen=True)
class PodDemand:
    demand: Demand
    source: str  # one of DEMAND_SOURCES


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


@functools.cache
def _shipped() -> UsageModel:
    return shipped_usage_model()


def _annotated(pod: Mapping[str, Any], trust_annotations: bool) -> PodDemand | None:
    """What the pod's annotations say, if they say it in a way that is used."""
    meta = as_mapping(pod.get("metadata"))
    ann = as_mapping(meta.get("annotations"))
    where = f"{as_text(meta.get('namespace'))}/{as_text(meta.get('name'))}"
    text = ann.get(DEMAND_ANNOTATION)
    if isinstance(text, str):
        if not trust_annotations:
            log.debug("%s: %s ignored (usage.trust_annotations is false)", where, DEMAND_ANNOTATION)
        else:
            try:
                return PodDemand(parse_demand(text), ANNOTATION)
            except ValueError as exc:
                log.warning("%s: %s; ignoring it", where, exc)
    profile = ann.get(PROFILE_ANNOTATION)
    if isinstance(profile, str) and profile:
        if profile in PROFILES:
            return PodDemand(PROFILES[profile], PROFILE)
        log.warning("%s: unknown %s %r (known: %s)", where, PROFILE_ANNOTATION, profile, ", ".join(PROFILES))
    return None


def resolve(
    pod: Mapping[str, Any],
    history: UsageHistory | None = None,
    model: UsageModel | None = None,
    *,
    trust_annotations: bool = True,
    now: float | None = None,
) -> PodDemand:
    """The pod's demand and where it came from (the module docstring gives the order). ``history`` None: no stored
    usage (the estimate is the requests'); ``model`` None: the shipped usage model; ``now``: epoch seconds."""
    told = _annotated(pod, trust_annotations)
    if told is not None:
        return told
    cpu_m, mem = kube.pod_requests(pod)
    at = time.time() if now is None else now
    own, similar = _stored(pod, history, at)
    got = estimate(cpu_m, mem, own, similar, model if model is not None else _shipped(), at)
    return PodDemand(got.demand, got.source)


def _stored(pod: Mapping[str, Any], history: UsageHistory | None, at: float) -> tuple[PodUsage | None, PodUsage | None]:
    """The stored usage of the pod's top owner's pods and of other owners' pods running its image."""
    if history is None:
        return None, None
    namespace = as_text(as_mapping(pod.get("metadata")).get("namespace"), "default")
    owner = owners.top_owner(pod)
    return history.owner(namespace, owner, at), history.image(namespace, owners.image_of(pod), owner, at)


def usage_model(settings: UsageSettings) -> UsageModel:
    """The usage model ``settings`` name (ConfigError, one line, for a file that is not one)."""
    return load_usage_model(settings.model_path) if settings.model_path else _shipped()


class DemandResolver:
    """``resolve`` with a scheduler's settings, stored usage and model, counting every demand by its source.

    ``history``: the live ``PrometheusUsageHistory`` (started and stopped with the resolver) or any other
    ``UsageHistory``; None: annotations and requests only. ``registry``: where ``drs_usage_estimates_total``
    is served."""

    def __init__(
        self,
        settings: UsageSettings | None = None,
        history: UsageHistory | None = None,
        *,
        registry: CollectorRegistry | None = None,
        model: UsageModel | Callable[[], UsageModel] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings or UsageSettings()
        self.history = history
        if model is None or isinstance(model, UsageModel):
            fixed = usage_model(self.settings) if model is None else model
            self._model: Callable[[], UsageModel] = lambda: fixed
        else:
            self._model = model
        self.clock = clock
        self.estimates = Counter(
            "drs_usage_estimates_total",
            "Pending pods' demands, by where each came from (annotation, profile, owner, similar, requests, default).",
            ["source"],
            registry=registry or CollectorRegistry(),
        )
        for source in DEMAND_SOURCES:
            self.estimates.labels(source)
        self._memo: dict[tuple[int, ...], tuple[PodUsage | None, PodUsage | None, float, PodDemand]] = {}

    @property
    def model(self) -> UsageModel:
        """The usage model in service (a promoted refit replaces it: ``model`` given as a call)."""
        return self._model()

    def resolve(self, pod: Mapping[str, Any]) -> PodDemand:
        """``resolve`` with this resolver's settings, history and model, counted by source."""
        got = _annotated(pod, self.settings.trust_annotations)
        if got is None:
            at = self.clock()
            cpu_m, mem = kube.pod_requests(pod)
            got = self._estimate(cpu_m, mem, *_stored(pod, self.history, at), at)
        self.estimates.labels(got.source).inc()
        return got

    def prefetch(self, pod: Mapping[str, Any]) -> None:
        """Ask the history for the stored usage of the pod's owner and image as it becomes pending (on the watch's
        thread), so that their reads start before its decision and the pods a relist or a burst brings share
        reads (PrometheusUsageHistory batches what is queued together). Nothing is estimated or counted."""
        if self.history is not None:
            _stored(pod, self.history, self.clock())

    def _estimate(self, cpu_m: int, mem: int, own: PodUsage | None, similar: PodUsage | None, at: float) -> PodDemand:
        """``estimate``, remembered per requests and stored usage (the very objects the history answered) for
        MEMO_SECONDS: the pending pods of one owner share one estimate, computed once."""
        model = self._model()
        key = (cpu_m, mem, id(own), id(similar), id(model))
        hit = self._memo.get(key)
        if hit is not None and hit[0] is own and hit[1] is similar and at - hit[2] < MEMO_SECONDS:
            return hit[3]
        est = estimate(cpu_m, mem, own, similar, model, at)
        got = PodDemand(est.demand, est.source)
        if len(self._memo) >= MEMO_SIZE:
            self._memo.clear()
        self._memo[key] = (own, similar, at, got)
        return got

    def start(self) -> DemandResolver:
        if isinstance(self.history, PrometheusUsageHistory):
            self.history.start()
        return self

    def stop(self) -> None:
        if isinstance(self.history, PrometheusUsageHistory):
            self.history.stop()
