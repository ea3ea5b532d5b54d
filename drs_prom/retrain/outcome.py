"""A run's outcome (RetrainResult) and the job's Prometheus metrics (RetrainMetrics, one per registry)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import ClassVar

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client import Counter as C
from prometheus_client import Gauge as G


class RetrainMetrics:
    """The job's Prometheus metrics; one instance per registry."""

    _by_registry: ClassVar[dict[int, RetrainMetrics]] = {}

    def __init__(self, registry: CollectorRegistry) -> None:
        self.runs = C("drs_retrain_runs", "Retraining runs by outcome.", ["result"], registry=registry)
        self.last_success = G(
            "drs_retrain_last_success_timestamp_seconds",
            "End of the last run that trained a candidate.",
            registry=registry,
        )
        self.transitions = G(
            "drs_retrain_transitions_used", "Transitions rebuilt and used by the last run.", registry=registry
        )
        self.skipped = C(
            "drs_retrain_decisions_skipped",
            "Journal rows left out of retraining, by reason.",
            ["reason"],
            registry=registry,
        )
        self.approximated = C(
            "drs_retrain_transitions_approximated",
            "Transitions used with part of their input approximated, by reason (no_node_info: journal schema 1, zero requests).",
            ["reason"],
            registry=registry,
        )
        self.eval = G(
            "drs_retrain_eval_score",
            "Gate scores of the last run (higher is better).",
            ["benchmark", "model"],
            registry=registry,
        )
        self.duration = G("drs_retrain_last_duration_seconds", "Wall time of the last run.", registry=registry)
        self.current = G("drs_retrain_current_version", "Number of the promoted model version.", registry=registry)
        for r in ("promoted", "rejected", "insufficient_data", "unsupported", "error"):
            self.runs.labels(r)
        self.approximated.labels("no_node_info")

    @classmethod
    def get(cls, registry: CollectorRegistry | None = None) -> RetrainMetrics:
        if registry is None:
            registry = REGISTRY
        key = id(registry)
        if key not in cls._by_registry:
            cls._by_registry[key] = cls(registry)
        return cls._by_registry[key]


@dataclass
class RetrainResult:
    result: str  # promoted | rejected | insufficient_data | unsupported | error
    reason: str = ""
    decisions: int = 0
    transitions: int = 0
    trained_on: int = 0
    held_out: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    approximated: dict[str, int] = field(default_factory=dict)  # used, but inexact: no_node_info = schema-1 rows
    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    version: str | None = None
    previous: str | None = None
    cursor: float | None = None
    seconds: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        sk = ", ".join(f"{k}={v}" for k, v in sorted(self.skipped.items())) or "none"
        ap = ", ".join(f"{k}={v}" for k, v in sorted(self.approximated.items()) if v) or "none"
        sc = "; ".join(f"{b}: " + ", ".join(f"{m}={v:.4g}" for m, v in s.items()) for b, s in self.scores.items())
        return (
            f"retrain {self.result}: {self.reason}; decisions={self.decisions} transitions={self.transitions} "
            f"(train {self.trained_on}, held out {self.held_out}); skipped: {sk}; approximated: {ap}; scores: {sc or '-'}; "
            f"version={self.version} previous={self.previous}"
        )


def record(metrics: RetrainMetrics, res: RetrainResult, elapsed: float) -> None:
    metrics.runs.labels(res.result).inc()
    metrics.duration.set(elapsed)
    for reason, n in res.skipped.items():
        metrics.skipped.labels(reason).inc(n)
    for reason, n in res.approximated.items():
        metrics.approximated.labels(reason).inc(n)
    if res.result in ("promoted", "rejected"):
        metrics.last_success.set(time.time())
        metrics.transitions.set(res.transitions)
        for bench, s in res.scores.items():
            for model, v in s.items():
                metrics.eval.labels(bench, model).set(v)
