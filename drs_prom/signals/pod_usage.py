"""The live scheduler's ``UsageHistory``: the stored usage of pods, read from Prometheus' per-pod recording rules.

A decision never waits on Prometheus. ``owner`` and ``image`` answer from a cache and queue what they miss; a
background thread (``start``/``stop``) reads the queue (drs_prom.signals.promql.pod_history over the rules of the
group ``drs-pod-usage``), each query within ``prometheus.timeout_seconds``. One query reads up to ``READ_BATCH``
queued owners of a namespace, or owners asking for one image there (``MAX_QUERY_CHARS`` of text at most), and the
answer is split between them by the same pod-name patterns the query matched: a burst of new owners (bare pods,
Jobs) costs a query per batch, not one per owner and another per image, each of them URL encoding and JSON in
Python on the scheduler's process. A miss answers None (the estimator goes on to the next source), as does an answer
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
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
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
Series = list[tuple[dict[str, str], float]]

READ_BATCH = 32
"""Queued keys read by one query at most (``shares_read``): the answer grows with each owner's pods."""

MAX_QUERY_CHARS = 4096
"""The longest query text a batch grows to (each owner's name pattern is in it once per statistic, eight times): the
query travels in the URL, which proxies in front of Prometheus refuse beyond 8 KiB (nginx's default), and this much
PromQL is about 5.7 KiB URL-encoded. One key's query is never cut (a Deployment's is about 1.6 KiB)."""

GATHER_SECONDS = 0.02
"""How long the refresher lets the oldest queued key wait for others to share its read, unless a batch is full: while
a scheduler decides a pod every few milliseconds, each read would otherwise carry one or two keys. Short beside
everything the estimate waits for (a pod is seen in the history a rate window after it starts)."""


def shares_read(a: Key, b: Key) -> bool:
    """Whether one query reads both keys: owners of one namespace, or owners asking for one image there."""
    return a[0] == b[0] and a[1] == b[1] and (a[0] == OWNER or a[3] == b[3])


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
        gather_seconds: float = GATHER_SECONDS,
    ) -> None:
        self.source = source
        self.settings = settings or UsageSettings()
        self.clock = clock
        self.retry_seconds = retry_seconds
        self.gather_seconds = gather_seconds
        self.errors = Counter(
            "drs_usage_history_errors_total",
            "Reads of pods' stored usage that failed or were dropped, by reason.",
            ["reason"],
            registry=registry or CollectorRegistry(),
        )
        for reason in ERROR_REASONS:
            self.errors.labels(reason)
        self._cache: OrderedDict[Key, _Entry] = OrderedDict()
        self._queue: dict[Key, float] = {}  # key -> when it was queued (clock); insertion order: the oldest read first
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
        self._queue[key] = t
        self._cond.notify()

    # -- the refresher ---------------------------------------------------------------------

    def query(self, keys: Sequence[Key]) -> str:
        """The PromQL that reads the stored usage of ``keys`` (keys that share a read, ``shares_read``): the owners'
        pods by their names; or the pods that ran the image, the asking owner's own left out by the query when one
        owner asks and by ``series`` when several share the read."""
        kind, namespace, owner, image = keys[0]
        window, history = self.settings.rate_window, f"{round(self.settings.history_seconds)}s"
        if kind == OWNER:
            pods = "|".join(pod_name_regex(k[2]) or "^$" for k in keys)
            return promql.pod_history(namespace, history, window, pods=pods)
        return promql.pod_history(
            namespace,
            history,
            window,
            exclude=(pod_name_regex(owner) or "") if len(keys) == 1 else "",
            image=promql.image_regex(image_spellings(image)),
        )

    def series(self, keys: Sequence[Key]) -> dict[Key, Series]:
        """One query for ``keys`` now, on the caller's thread, and each key's series of its answer: an owner's, those
        of the pods its name pattern matches; an image's, those of the pods the asking owner's pattern does not (the
        patterns read the same in Python and in Prometheus' RE2, fully anchored: drs_prom.usage.owners.escape).
        MetricsError when Prometheus could not answer."""
        answer = self.source.samples(self.query(keys))
        by_pod: dict[str, Series] = {}
        for labels, value in answer:
            by_pod.setdefault(labels.get("pod", ""), []).append((labels, value))
        owners = keys[0][0] == OWNER  # an owner's own pods are its answer; an image's answer leaves them out
        split: dict[Key, Series] = {}
        for key in keys:
            pattern = pod_name_regex(key[2])
            names = re.compile(pattern) if pattern else None
            split[key] = [
                sample
                for pod, samples in by_pod.items()
                if (names is not None and names.fullmatch(pod) is not None) is owners
                for sample in samples
            ]
        return split

    def read_many(self, keys: Sequence[Key]) -> dict[Key, PodUsage]:
        """The stored usage of each of ``keys`` (keys that share a read) from one query; MetricsError as ``series``."""
        found: dict[Key, PodUsage] = {}
        for key, samples in self.series(keys).items():
            usage, absurd = pod_usage(samples)
            if absurd:
                self.errors.labels("bad_series").inc(absurd)
                log.debug(
                    "usage history of %s/%s: %d pods with absurd series dropped", key[1], key[2] or key[3], absurd
                )
            found[key] = usage
        return found

    def read(self, key: Key) -> PodUsage:
        """One query for ``key`` now, on the caller's thread; MetricsError when Prometheus could not answer."""
        return self.read_many([key])[key]

    def _refresh(self, keys: list[Key]) -> None:
        t0 = self.clock()
        try:
            found = self.read_many(keys)
        except MetricsError as exc:
            reason = exc.kind if exc.kind in ERROR_REASONS else "other"
            self.errors.labels(reason).inc(len(keys))
            log.debug("usage history of %s/%s and %d more not read (%s): %s", *keys[0][1:3], len(keys) - 1, reason, exc)
            with self._cond:
                for key in keys:
                    entry = self._cache.get(key)
                    if entry is not None:
                        entry.tried, entry.failed = t0, True
            return
        log.debug("usage history: %d owners or images read in %.3fs", len(keys), self.clock() - t0)
        with self._cond:
            for key, usage in found.items():
                entry = self._cache.get(key)
                if entry is None:  # evicted while it was read: the answer is kept all the same
                    entry = self._cache[key] = _Entry()
                    while len(self._cache) > self.settings.cache_size:
                        self._cache.popitem(last=False)
                entry.usage, entry.fetched, entry.tried, entry.failed = usage, t0, t0, False

    def _take(self) -> list[Key]:
        """The oldest queued key and up to READ_BATCH - 1 more that share its read while the query stays within
        MAX_QUERY_CHARS, off the queue (lock held)."""
        first = next(iter(self._queue))
        batch = [first]
        for key in self._queue:
            if len(batch) == READ_BATCH:
                break
            if key is not first and shares_read(key, first) and len(self.query([*batch, key])) <= MAX_QUERY_CHARS:
                batch.append(key)
        for key in batch:
            del self._queue[key]
        return batch

    def refresh_queued(self) -> int:
        """Read every queued owner and image now, on the caller's thread (what the refresher does); how many."""
        done = 0
        while True:
            with self._cond:
                if not self._queue:
                    return done
                keys = self._take()
            self._refresh(keys)
            done += len(keys)

    def queued(self) -> int:
        with self._cond:
            return len(self._queue)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopping:
                    if not self._queue:
                        self._cond.wait()
                        continue
                    left = next(iter(self._queue.values())) + self.gather_seconds - self.clock()
                    if left <= 0 or len(self._queue) >= READ_BATCH:
                        break
                    self._cond.wait(left)  # a key queued meanwhile wakes it: a full batch goes at once
                if self._stopping:
                    return
                keys = self._take()
            try:
                self._refresh(keys)
            except Exception:  # the refresher must outlive one bad answer; those owners fall back to their requests
                log.exception("usage history of %s/%s and %d more failed", *keys[0][1:3], len(keys) - 1)

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
