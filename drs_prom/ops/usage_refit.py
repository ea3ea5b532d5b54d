"""Refitting the usage model on the cluster's own stored series, gated, and kept in a versioned store.

Every retraining run (drs_prom.ops.retrain_job) reads the pods drs-prom placed within ``usage.history_seconds``
(the decision journal: their namespace, name, top owner and requests) and what Prometheus stored of them (the per-pod
recording rules: their mean usage on the six signals, when they were first and last seen, their image), fits a
usage model on the pods that started before the last ``usage.refit_holdout_seconds`` and judges it and the model in
service on the pods that started within them (drs_prom.usage.fit.refit). Only a refit that predicts those pods at
least as well is promoted; the scheduler picks it up from the store without a restart (``usage_model_source``).
Nothing here stops retraining: an unreadable history is a logged, counted outcome.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from prometheus_client import CollectorRegistry, Counter

from drs_prom.config import Settings, UsageSettings, duration_seconds
from drs_prom.errors import MetricsError
from drs_prom.features import FEATURES
from drs_prom.signals import promql
from drs_prom.signals.pod_usage import Samples
from drs_prom.stores.journal import Decision, Journal
from drs_prom.stores.model_store import ModelStore, ModelWatcher
from drs_prom.usage.estimator import UsageModel, load_usage_model, save_usage_model, shipped_usage_model
from drs_prom.usage.fit import PodTable, Refit, refit, score

log = logging.getLogger(__name__)

USAGE_FILE = "usage.json"
"""The usage model inside each version directory of the usage store."""


def usage_store_path(settings: Settings) -> Path:
    """Where refitted usage models are kept: ``usage.model_store``, else ``usage`` beside the policy versions."""
    return Path(settings.usage.model_store or Path(settings.retrain.model_store) / "usage")


def usage_model_source(settings: Settings, check_seconds: float = 30.0) -> Callable[[], UsageModel]:
    """The usage model to estimate with, as a call: a fixed ``usage.model_path``, else the store's promoted version
    (re-read when it changes, at most every ``check_seconds``), else the shipped one."""
    if settings.usage.model_path:
        fixed = load_usage_model(settings.usage.model_path)
        return lambda: fixed
    shipped = shipped_usage_model()
    root = usage_store_path(settings)
    watcher: ModelWatcher[UsageModel] = ModelWatcher(
        ModelStore(root, settings.retrain.keep_versions), lambda d: load_usage_model(d / USAGE_FILE), check_seconds
    )

    def current() -> UsageModel:  # on every decision: the watcher reads the store's pointer at most every check_seconds
        watcher.reload_if_changed()
        return watcher.model if watcher.model is not None else shipped

    return current


@dataclass(frozen=True)
class Placed:
    """A pod whose stored usage is wanted: its top owner and requests (what the series do not hold)."""

    owner: str
    cpu_m: int
    mem_bytes: int


def journalled(decisions: Iterable[Decision | dict]) -> dict[tuple[str, str], Placed]:
    """(namespace, pod) -> Placed for every pod the journal says drs-prom bound."""
    out: dict[tuple[str, str], Placed] = {}
    for d in decisions:
        if isinstance(d, Decision) and d.outcome == "bound" and d.pod_cpu_m is not None:
            out[(d.namespace, d.pod_name)] = Placed(d.owner or f"Pod/{d.pod_name}", d.pod_cpu_m, d.pod_mem_bytes or 0)
    return out


def pod_table(
    placed: dict[tuple[str, str], Placed], source: Samples, usage: UsageSettings, now: float, history_seconds: float
) -> tuple[PodTable, int]:
    """The ``placed`` pods Prometheus stored usage of within ``history_seconds`` before ``now`` (the per-pod rules:
    mean usage, first and last seen, image), as a ``PodTable``; and how many of them had none."""
    history = f"{max(1, int(history_seconds))}s"
    stats: dict[tuple[str, str], dict[str, float]] = {}
    images: dict[tuple[str, str], str] = {}
    for ns in sorted({ns for ns, _ in placed}):
        for labels, value in source.samples(promql.pod_history(ns, history, usage.rate_window), at=now):
            stats.setdefault((labels.get("namespace", ns), labels.get("pod", "")), {})[
                labels.get(promql.HISTORY_STAT, "")
            ] = value
        ran = promql.matchers(f"namespace={promql.quote(ns)}")
        for labels, _ in source.samples(f"max_over_time({promql.POD_IMAGE_RULE}{ran}[{history}])", at=now):
            images.setdefault((labels.get("namespace", ns), labels.get("pod", "")), labels.get("image", ""))
    needed = (*FEATURES, "first", "last")
    rows = [(k, p, stats[k]) for k, p in placed.items() if k in stats and all(f in stats[k] for f in needed)]
    table = PodTable(
        namespace=tuple(k[0] for k, _, _ in rows),
        owner=tuple(p.owner for _, p, _ in rows),
        image=tuple(images.get(k, "") for k, _, _ in rows),
        cpu_m=np.array([p.cpu_m for _, p, _ in rows], dtype=np.int64),
        mem_bytes=np.array([p.mem_bytes for _, p, _ in rows], dtype=np.int64),
        start=np.array([s["first"] for _, _, s in rows], dtype=np.float64),
        last_seen=np.array([s["last"] for _, _, s in rows], dtype=np.float64),
        mean=np.array([[s[f] for f in FEATURES] for _, _, s in rows], dtype=np.float64).reshape(
            len(rows), len(FEATURES)
        ),
    )
    return table, len(placed) - len(rows)


def table_json(table: PodTable) -> dict[str, list]:
    """A ``PodTable`` as plain JSON (what ``benchmarks/usage_accuracy.py --pods-json`` reads)."""
    return {
        "namespace": list(table.namespace),
        "owner": list(table.owner),
        "image": list(table.image),
        "cpu_m": table.cpu_m.tolist(),
        "mem_bytes": table.mem_bytes.tolist(),
        "start": table.start.tolist(),
        "last_seen": table.last_seen.tolist(),
        "mean": table.mean.tolist(),
    }


@dataclass(frozen=True)
class UsageRefitResult:
    outcome: str  # promoted | kept | no_history | error
    detail: str
    refit: Refit | None = None
    version: str | None = None


class UsageRefitMetrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.refits = Counter(
            "drs_usage_refits_total",
            "Usage model refits by outcome (promoted, kept: no better than the model in service, no_history, error).",
            ["outcome"],
            registry=registry or CollectorRegistry(),
        )


def refit_usage(
    settings: Settings,
    source: Samples,
    journal: Journal,
    now: float | None = None,
    metrics: UsageRefitMetrics | None = None,
) -> UsageRefitResult:
    """One refit of the usage model (the module docstring says how it is judged); never raises."""
    at = time.time() if now is None else now
    result = _refit(settings, source, journal, at)
    if metrics is not None:
        metrics.refits.labels(result.outcome).inc()
    log.info("usage model refit: %s (%s)", result.outcome, result.detail)
    return result


def _refit(settings: Settings, source: Samples, journal: Journal, at: float) -> UsageRefitResult:
    u = settings.usage
    try:
        table, missing = pod_table(journalled(journal.since(at - u.history_seconds)), source, u, at, u.history_seconds)
    except MetricsError as exc:
        return UsageRefitResult("error", f"stored usage unreadable: {str(exc).splitlines()[0] if str(exc) else exc}")
    if not len(table):
        return UsageRefitResult("no_history", f"no journalled pod with stored usage ({missing} without)")
    store = ModelStore(usage_store_path(settings), settings.retrain.keep_versions)
    current = usage_model_source(settings, check_seconds=0.0)()
    got = refit(table, at, current, u.refit_holdout_seconds, lag=duration_seconds(u.rate_window))
    detail = (
        f"fitted on {got.fitted_pods} pods, judged on {got.judged_pods}: mean error {score(got.candidate_errors):.3f} "
        f"against {score(got.current_errors):.3f} in service"
    )
    if got.judged_pods == 0:
        return UsageRefitResult("kept", detail + "; nothing started within the holdout to judge a refit on", got)

    def save(version_dir: Path) -> None:
        save_usage_model(got.candidate, version_dir / USAGE_FILE)

    info = store.add(
        save, {"errors": got.candidate_errors, "in_service_errors": got.current_errors, "judged_pods": got.judged_pods}
    )
    if not got.promote:
        store.set_status(info.name, "rejected")
        return UsageRefitResult("kept", detail, got, info.name)
    store.promote(info.name, reason="usage refit")
    return UsageRefitResult("promoted", detail, got, info.name)
