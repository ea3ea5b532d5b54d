"""The scheduler's metric families (SchedulerMetrics, RolloutMetrics); drs_prom.scheduler.http.server serves them.

Each Scheduler gets its own CollectorRegistry (tests run several in one process).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from drs_prom.scheduler import gc_pauses
from drs_prom.scheduler.thread_cpu import ThreadCPUCollector

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
# a pod's stages last from tens of microseconds (a hand-over between threads) to seconds (backoff)
STAGE_BUCKETS = (
    0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60
)  # fmt: skip
# drs_scheduling_stage_seconds{stage}: the intervals between a pod's timestamps (watch event read,
# queued, popped, decided, bind sent, bind acknowledged), in that order
STAGES = ("watch_to_queue", "queue_wait", "decide", "bind_handover", "bind_write", "event_to_bind")


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.decisions = Counter(
            "drs_decisions_total",
            "Placement decisions made, by the policy that decided and the pod's arm (model | heuristic).",
            ["policy", "arm"],
            registry=r,
        )
        self.binds = Counter(
            "drs_binds_total", "Bind attempts by outcome (bound, conflict, gone).", ["outcome"], registry=r
        )
        self.bind_failures = Counter(
            "drs_bind_failures_total", "Bind calls that failed for another reason.", registry=r
        )
        self.fallbacks = Counter(
            "drs_fallback_decisions_total",
            "Decisions made by the fallback heuristic, by reason.",
            ["reason"],
            registry=r,
        )
        self.journal_failures = Counter(
            "drs_journal_failures_total", "Journal rows that could not be written (binding went on).", registry=r
        )
        self.journal_backlog = Gauge(
            "drs_journal_backlog_rows",
            "Journal rows queued and not yet written (deferred while pods wait).",
            registry=r,
        )
        self.unschedulable = Counter("drs_unschedulable_total", "Attempts where no node was feasible.", registry=r)
        self.unsupported = Counter(
            "drs_unsupported_pods_total",
            "Scheduling attempts refused because the pod needs what drs-prom does not check, by what.",
            ["reason"],
            registry=r,
        )
        self.errors = Counter("drs_schedule_errors_total", "Attempts that raised (pod retried).", registry=r)
        self.latency = Histogram(
            "drs_scheduling_latency_seconds",
            "Time from a pod entering the queue to its bind.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.stages = Histogram(
            "drs_scheduling_stage_seconds",
            "Where a bound pod's time went, per stage: watch_to_queue (event read to queued: decode and cache), "
            "queue_wait (queued to popped), decide (popped to decided: filter, score, assume), bind_handover "
            "(decided to bind sent: a bind worker takes it, rate limit), bind_write (bind sent to acknowledged), "
            "event_to_bind (the whole: event read to bind acknowledged).",
            ["stage"],
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        for stage in STAGES:
            self.stages.labels(stage)
        self.attempt_latency = Histogram(
            "drs_scheduling_attempt_seconds",
            "Time of one attempt: filter + score (no bind).",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.prom_latency = Histogram(
            "drs_prometheus_query_seconds",
            "Time to refresh node state from Prometheus.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.prom_errors = Counter("drs_prometheus_errors_total", "Failed node-state refreshes.", registry=r)
        self.prom_error_kinds = Counter(
            "drs_prometheus_errors_by_kind_total",
            "Failed node-state refreshes by kind: timeout, unreachable, http_error, malformed, unusable, non_finite.",
            ["kind"],
            registry=r,
        )
        self.state_age = Gauge("drs_state_age_seconds", "Age of the node state used for decisions.", registry=r)
        self.queue_depth = Gauge("drs_queue_pending_pods", "Pods waiting in the scheduling queue.", registry=r)
        self.leader = Gauge("drs_leader", "1 while this replica holds the Lease.", registry=r)
        self.model = Info("drs_model", "The loaded model (empty version: none, fallback in use).", registry=r)
        self.model.info({"version": "", "policy": ""})
        self.rollout = RolloutMetrics(r)
        gc_pauses.install()
        r.register(gc_pauses.GCPauseCollector())
        r.register(ThreadCPUCollector())


class RolloutMetrics:
    """Shadow/canary comparison, guardrails and automatic rollback (drs_prom.scheduler.decision.rollout)."""

    def __init__(self, r: CollectorRegistry) -> None:
        self.comparisons = Counter(
            "drs_shadow_comparisons_total",
            "Decisions scored by both arms, by whether they chose the same node.",
            ["agree"],
            registry=r,
        )
        for agree in ("true", "false"):  # both series exist from the start, so rate() sees the first one
            self.comparisons.labels(agree)
        self.agreement = Gauge(
            "drs_shadow_agreement_ratio", "Share of the last 200 compared decisions where both arms agreed.", registry=r
        )
        self.counterfactual = Histogram(
            "drs_shadow_counterfactual_imbalance",
            "COUNTERFACTUAL ESTIMATE, not a measurement: imbalance (sum of per-feature std across nodes) each "
            "arm's choice would produce, computed from the decision's own node state plus the pod's load.",
            ["arm"],
            buckets=(0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3),
            registry=r,
        )
        self.guard_value = Gauge(
            "drs_guardrail_value",
            "Last evaluated guardrail value (its signal averaged over the lookback).",
            ["rule"],
            registry=r,
        )
        self.guard_threshold = Gauge("drs_guardrail_threshold", "Guardrail thresholds.", ["rule"], registry=r)
        self.guard_breached = Gauge(
            "drs_guardrail_breached", "1 while the rule's value is above its threshold.", ["rule"], registry=r
        )
        self.guard_tripped = Gauge(
            "drs_guardrail_tripped", "1 while the scheduler falls back because this rule tripped.", ["rule"], registry=r
        )
        self.guard_trips = Counter(
            "drs_guardrail_trips_total",
            "Times a guardrail switched the scheduler to its fallback.",
            ["rule"],
            registry=r,
        )
        self.guard_errors = Counter(
            "drs_guardrail_errors_total", "Guardrail evaluations that could not query Prometheus.", registry=r
        )
        self.stuck_pods = Gauge(
            "drs_queue_stuck_pods", "Pods queued longer than rollout.guardrails.pending_seconds.", registry=r
        )
        self.verdicts = Counter(
            "drs_promotion_verdicts_total", "Promotions judged on live metrics, by verdict.", ["verdict"], registry=r
        )
        self.rollbacks = Counter(
            "drs_model_rollbacks_total", "Automatic rollbacks of a promotion that made the cluster worse.", registry=r
        )
