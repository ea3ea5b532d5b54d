"""Guardrails: live-cluster limits, measured by PromQL, that a deciding model must keep.

Each rule is a signal from drs_prom.signals.promql (hot node, node-relative imbalance, fallback
rate, stuck pods) averaged over ``guardrails.lookback`` and compared with its threshold,
the same expressions the generated alerts use. ``BreachTracker`` (pure) turns the
periodic verdicts into a trip: a rule must stay breached for ``breach_window_seconds``
*while the model decides*; a breach while the fallback or the heuristic arm decides is
not the model's doing and restarts the clock. A trip is sticky for the model version
that caused it: the scheduler falls back (reason ``guardrail``) until another version is
loaded (a rollback or a new promotion) or the process restarts, so the cluster does not
flap between a bad model and its fallback.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from drs_prom.config import GuardrailSettings, PrometheusSettings
from drs_prom.scheduler.metrics import RolloutMetrics
from drs_prom.signals import promql

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GuardrailRule:
    name: str
    expr: str  # PromQL: the rule's signal averaged over the lookback (one value)
    threshold: float


def thresholds(g: GuardrailSettings) -> dict[str, float]:
    return {
        "hot_node": g.hot_node_time,
        "imbalance": g.imbalance,
        "fallback_rate": g.fallback_rate,
        "stuck_pods": g.pending_pods,
    }


def signals(g: GuardrailSettings, p: PrometheusSettings) -> dict[str, str]:
    """Every guardrail signal for these settings (also used to judge promotions)."""
    return promql.guardrail_signals(p.window, g.hot_cpu, p.node_selector, g.scheduler_job)


def rules_for(g: GuardrailSettings, p: PrometheusSettings) -> list[GuardrailRule]:
    """The rules in force, in ``guardrails.rules`` order."""
    sig, lim = signals(g, p), thresholds(g)
    return [GuardrailRule(n, promql.over_range(sig[n], g.lookback, g.step), lim[n]) for n in g.rules]


def breaches(values: Mapping[str, float | None], rules: list[GuardrailRule]) -> dict[str, bool]:
    """Rule name -> breached. No data (None/NaN) is not a breach: a guardrail never trips on
    a Prometheus that has nothing to say (that is what the metrics fallback is for)."""
    out = {}
    for r in rules:
        v = values.get(r.name)
        out[r.name] = v is not None and math.isfinite(v) and v > r.threshold
    return out


@dataclass
class BreachTracker:
    """When each rule started being breached; ``update`` returns the rule that has been
    breached for the whole window (the first such in rule order), else None."""

    window_seconds: float
    since: dict[str, float] = field(default_factory=dict)

    def update(self, now: float, breached: Mapping[str, bool], model_deciding: bool) -> str | None:
        if not model_deciding:
            self.since.clear()
            return None
        for name, b in breached.items():
            if not b:
                self.since.pop(name, None)
            else:
                self.since.setdefault(name, now)
        for name in breached:
            if name in self.since and now - self.since[name] >= self.window_seconds:
                return name
        return None


@dataclass(frozen=True)
class Trip:
    rule: str
    value: float
    threshold: float
    breached_since: float  # unix seconds
    at: float
    model_version: str | None

    def describe(self) -> str:
        return (
            f"guardrail {self.rule} breached for {self.at - self.breached_since:.0f}s "
            f"(value {self.value:.3g} > threshold {self.threshold:g}) while model {self.model_version or '?'} decided"
        )


class Guardrails:
    """Evaluates the rules (``evaluate``, called periodically) and holds the current trip.

    ``query(expr)`` returns one number or None (PrometheusSource.scalar). ``on_trip`` is
    called once per trip (journal, Event); metrics and the log line are written here.
    """

    def __init__(
        self,
        guardrails: GuardrailSettings,
        prometheus: PrometheusSettings,
        query: Callable[[str], float | None],
        metrics: RolloutMetrics,
        on_trip: Callable[[Trip], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.rules = rules_for(guardrails, prometheus)
        self.query = query
        self.metrics = metrics
        self.on_trip = on_trip
        self.clock = clock
        self.tracker = BreachTracker(guardrails.breach_window_seconds)
        self.trip: Trip | None = None
        self.last_values: dict[str, float | None] = {}
        self._lock = threading.Lock()
        for r in self.rules:
            metrics.guard_threshold.labels(r.name).set(r.threshold)
            metrics.guard_tripped.labels(r.name).set(0)

    def tripped_for(self, model_version: str | None) -> Trip | None:
        """The trip that applies to ``model_version`` (a trip of another version has expired)."""
        trip = self.trip
        return trip if trip is not None and trip.model_version == model_version else None

    def _expire(self, model_version: str | None) -> None:
        trip = self.trip
        if trip is not None and trip.model_version != model_version:
            log.info("guardrail %s cleared: model %s replaced by %s", trip.rule, trip.model_version, model_version)
            self.metrics.guard_tripped.labels(trip.rule).set(0)
            self.trip = None

    def values(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for r in self.rules:
            try:
                out[r.name] = self.query(r.expr)
            except Exception as exc:  # noqa: BLE001 - MetricsError mostly: no verdict this round
                self.metrics.guard_errors.inc()
                log.debug("guardrail %s not evaluated: %s", r.name, exc)
                out[r.name] = None
        return out

    def evaluate(self, model_deciding: bool, model_version: str | None) -> Trip | None:
        """One round; returns a new trip, if this round caused one."""
        with self._lock:
            self._expire(model_version)
            values = self.values()
            self.last_values = values
            verdict = breaches(values, self.rules)
            for r in self.rules:
                v = values[r.name]
                self.metrics.guard_value.labels(r.name).set(v if v is not None else float("nan"))
                self.metrics.guard_breached.labels(r.name).set(1 if verdict[r.name] else 0)
            now = self.clock()
            deciding = model_deciding and self.trip is None
            name = self.tracker.update(now, verdict, deciding)
            if name is None:
                return None
            rule = next(r for r in self.rules if r.name == name)
            trip = Trip(name, float(values[name] or 0.0), rule.threshold, self.tracker.since[name], now, model_version)
            self.trip = trip
            self.tracker.since.clear()
        self.metrics.guard_tripped.labels(name).set(1)
        self.metrics.guard_trips.labels(name).inc()
        log.warning("%s; switching to the fallback until another model version is loaded", trip.describe())
        if self.on_trip is not None:
            try:
                self.on_trip(trip)
            except Exception as exc:  # noqa: BLE001 - recording must never undo the trip
                log.warning("recording the guardrail trip failed: %s", exc)
        return trip
