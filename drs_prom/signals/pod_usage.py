"""The live scheduler's ``UsageHistory``: the stored usage of pods, read from Prometheus' per-pod recording rules.

A decision never waits on Prometheus. ``owner`` and ``image`` answer from a cache and queue what they miss; a
background thread (``start``/``stop``) reads the queue, one query per owner or image
(drs_prom.signals.promql.pod_history over the rules of the group ``drs-pod-usage``), each within
``prometheus.timeout_seconds``. A miss answers None (the estimator goes on to the next source), as does an answer
older than ``usage.ttl_seconds``; an owner asked for again is read again every ``usage.refresh_seconds`` (30 s
after a failure). The cache holds ``usage.cache_size`` owners and images, least recently asked first out; at most
``usage.queue_size`` wait to be read. Failures are counted in ``drs_usage_history_errors_total{reason}``: the
client's kinds (``timeout``, ``unreachable``, ``http_error``, ``malformed``, ``unusable``), ``bad_series`` (a pod
whose series read NaN or negative: dropped), ``owner_unknown`` (an owner kind whose pods' names are not known),
``queue_full``.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from prometheus_client import CollectorRegistry, Counter

from drs_prom.config import UsageSettings
from drs_prom.errors import MetricsError
from drs_prom.features import FEATURES, N_FEATURES
from drs_prom.signals import promql
from drs_prom.usage.history import PodUsage
from drs_prom.usage.owners import image_spellings, pod_name_regex

log = logging.getLogger(__name__)

RETRY_SECONDS = 30.0
"""A read that failed is tried again this long after, not at every lookup (a down Prometheus costs one timeout
per owner per 30 s on the refresher's thread, none on the scheduler's)."""

ERROR_REASONS = (
    "timeout",
    "unreachable",
    "http_error",
    "malformed",
    "unusable",
    "other",
    "bad_series",
    "owner_unknown",
    "queue_full",
)

OWNER, IMAGE = "owner", "image"
NOTHING = PodUsage.empty()
"""The answer for an image-less pod: always this object, so that the pods that share it share an estimate."""
Key = tuple[str, str, str, str]
"""(OWNER or IMAGE, namespace, owner, image)."""


class Samples(Protocol):
    """An instant query answered as (labels, value) per series (drs_prom.signals.prometheus.PrometheusSource)."""

    def samples(self, query: str, at: float | None = None) -> list[tuple[dict[str, str], float]]: ...


@dataclass
class _Entry:
    usage: PodUsage | None = None
    fetched: float = -math.inf  # clock time of the last answer
    tried: float = -math.inf  # clock time of the last attempt (inf: never to be read)
    failed: bool = False


def pod_usage(samples: Iterable[tuple[dict[str, str], float]]) -> tuple[PodUsage, int]:
    """A ``pod_history`` answer as rows of stored usage, and how many pods were dropped for absurd values (NaN or
    negative means, no seen times). A signal a pod has no series for reads 0 (cAdvisor reports no network for a
    host-network pod, no disk I/O where its cgroup does not count it); a pod seen once has no duration and is left
    out by ``PodUsage.valid`` without being counted."""
    stats: dict[tuple[str, str], dict[str, float]] = {}
    for labels, value in samples:
        pod, stat = labels.get("pod", ""), labels.get(promql.HISTORY_STAT, "")
        if pod:
            stats.setdefault((labels.get("namespace", ""), pod), {})[stat] = value
    rows = list(stats.values())
    mean = np.array([[r.get(f, 0.0) for f in FEATURES] for r in rows], dtype=np.float64).reshape(-1, N_FEATURES)
    first = np.array([r.get("first", math.nan) for r in rows], dtype=np.float64)
    last = np.array([r.get("last", math.nan) for r in rows], dtype=np.float64)
    usage = PodUsage(mean, last - first, last)
    absurd = ~((np.isfinite(mean) & (mean >= 0)).all(axis=1) & np.isfinite(first) & np.isfinite(last))
    return usage.valid(), int(absurd.sum())


class PrometheusUsageHistory:
    """``UsageHistory`` over Prometheus, answered from a cache that a background thread fills (module docstring).

    ``source``: the Prometheus client (a ``PrometheusSource`` of its own: a slow history read never holds a
    connection the node-state refresh needs). ``registry``: where ``drs_usage_history_errors_total`` is served.
    ``clock``: monotonic seconds, for the cache's ages; ``retry_seconds``: how long after a failed read it is tried
    again.
    """

    def __init__(
        self,
        source: Samples,
        settings: UsageSettings | None = None,
        *,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.monotonic,
        retry_seconds: float = RETRY_SECONDS,
    ) -> None:
        self.source = source
        self.settings = settings or UsageSettings()
        self.clock = clock
        self.retry_seconds = retry_seconds
        self.errors = Counter(
            "drs_usage_history_errors_total",
            "Reads of pods' stored usage that failed or were dropped, by reason.",
            ["reason"],
            registry=registry or CollectorRegistry(),
        )
        for reason in ERROR_REASONS:
            self.errors.labels(reason)
        self._cache: OrderedDict[Key, _Entry] = OrderedDict()
        self._queue: dict[Key, None] = {}  # insertion-ordered set: the oldest request is read first
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None

    # -- UsageHistory: never blocks ------------------------------------------------------

    def owner(self, namespace: str, owner: str, now: float) -> PodUsage | None:
        del now  # the answer is as of its read; last_seen carries the pods' times
        return self._lookup((OWNER, namespace, owner, ""))

    def image(self, namespace: str, image: str, owner: str, now: float) -> PodUsage | None:
        del now
        if not image.strip():
            return NOTHING  # no image, nothing runs it
        return self._lookup((IMAGE, namespace, owner, image))

    def _lookup(self, key: Key) -> PodUsage | None:
        t = self.clock()
        with self._cond:
            entry = self._cache.get(key)
            if entry is None:
                entry = self._cache[key] = _Entry()
                if key[0] == OWNER and pod_name_regex(key[2]) is None:
                    entry.tried = math.inf  # nothing to ask: counted once, never queued
                    self.errors.labels("owner_unknown").inc()
                    log.debug("usage history: the pods of %s/%s cannot be named; not read", key[1], key[2])
                while len(self._cache) > self.settings.cache_size:
                    self._cache.popitem(last=False)
            else:
                self._cache.move_to_end(key)
            if t - entry.tried >= (self.retry_seconds if entry.failed else self.settings.refresh_seconds):
                self._enqueue(key, entry, t)
            if entry.usage is None or t - entry.fetched > self.settings.ttl_seconds:
                return None
            return entry.usage

    def _enqueue(self, key: Key, entry: _Entry, t: float) -> None:
        """Queue ``key`` for the refresher (lock held)."""
        if key in self._queue:
            return
        if len(self._queue) >= self.settings.queue_size:
            entry.tried, entry.failed = t, True  # asked again after retry_seconds
            self.errors.labels("queue_full").inc()
            log.debug("usage history: queue full (%d); %s/%s not read", len(self._queue), key[1], key[2] or key[3])
            return
        self._queue[key] = None
        self._cond.notify()

    # -- the refresher ---------------------------------------------------------------------

    def query(self, key: Key) -> str:
        """The PromQL that reads ``key``'s stored usage."""
        kind, namespace, owner, image = key
        window, history = self.settings.rate_window, f"{round(self.settings.history_seconds)}s"
        if kind == OWNER:
            return promql.pod_history(namespace, history, window, pods=pod_name_regex(owner) or "^$")
        return promql.pod_history(
            namespace,
            history,
            window,
            exclude=pod_name_regex(owner) or "",
            image=promql.image_regex(image_spellings(image)),
        )

    def read(self, key: Key) -> PodUsage:
        """One query for ``key`` now, on the caller's thread; MetricsError when Prometheus could not answer."""
        usage, absurd = pod_usage(self.source.samples(self.query(key)))
        if absurd:
            self.errors.labels("bad_series").inc(absurd)
            log.debug("usage history of %s/%s: %d pods with absurd series dropped", key[1], key[2] or key[3], absurd)
        return usage

    def _refresh(self, key: Key) -> None:
        t0 = self.clock()
        try:
            usage = self.read(key)
        except MetricsError as exc:
            reason = exc.kind if exc.kind in ERROR_REASONS else "other"
            self.errors.labels(reason).inc()
            log.debug("usage history of %s/%s not read (%s): %s", key[1], key[2] or key[3], reason, exc)
            with self._cond:
                entry = self._cache.get(key)
                if entry is not None:
                    entry.tried, entry.failed = t0, True
            return
        log.debug("usage history of %s/%s: %d pods in %.3fs", key[1], key[2] or key[3], len(usage), self.clock() - t0)
        with self._cond:
            entry = self._cache.get(key)
            if entry is None:  # evicted while it was read: the answer is kept all the same
                entry = self._cache[key] = _Entry()
                while len(self._cache) > self.settings.cache_size:
                    self._cache.popitem(last=False)
            entry.usage, entry.fetched, entry.tried, entry.failed = usage, t0, t0, False

    def refresh_queued(self) -> int:
        """Read every queued owner and image now, on the caller's thread (what the refresher does); how many."""
        done = 0
        while True:
            with self._cond:
                if not self._queue:
                    return done
                key = next(iter(self._queue))
                del self._queue[key]
            self._refresh(key)
            done += 1

    def queued(self) -> int:
        with self._cond:
            return len(self._queue)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                key = next(iter(self._queue))
                del self._queue[key]
            try:
                self._refresh(key)
            except Exception:  # the refresher must outlive one bad answer; that owner falls back to its requests
                log.exception("usage history of %s/%s failed", key[1], key[2] or key[3])

    def start(self) -> PrometheusUsageHistory:
        with self._cond:
            if self._thread is None:
                self._stopping = False
                self._thread = threading.Thread(target=self._run, name="drs-usage-history", daemon=True)
                self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """End the refresher (a read in flight finishes first: at most one Prometheus timeout)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)
