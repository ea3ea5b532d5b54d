"""The rebalancer's own /metrics: what it did, what it skipped and why, and whether a guardrail stopped it."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from drs_prom.moves.eligibility import REASONS
from drs_prom.moves.plan import PLAN_REASONS
from drs_prom.rebalance.actions import OUTCOMES
from drs_prom.rebalance.surge import RESULTS

ROUND_ERRORS = ("prometheus", "kubernetes", "other")


class RebalanceMetrics:
    """Every series is created at start (zero), so a dashboard sees each outcome and reason before it happens."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.rounds = Counter("drs_rebalance_rounds_total", "Rounds the rebalancer ran.", registry=r)
        self.round_errors = Counter(
            "drs_rebalance_round_errors_total",
            "Rounds that could not read what they need, by source.",
            ["source"],
            registry=r,
        )
        self.evictions = Counter(
            "drs_rebalance_evictions_total",
            "Moves planned, by outcome: evicted, surged (its replacement made first), dry_run (shadow: not "
            "evicted), pdb (refused by a PodDisruptionBudget), gone (the pod was already gone), failed.",
            ["outcome"],
            registry=r,
        )
        self.skips = Counter(
            "drs_rebalance_skips_total",
            "Pods on hot nodes not moved, by reason (eligibility, budgets, cool-down, no better node, ...).",
            ["reason"],
            registry=r,
        )
        self.surges = Counter(
            "drs_rebalance_surges_total",
            "Surges ended, by result: moved (the pod handed over to its replacement), landed_back (the replacement "
            "was placed on the pod's own node and was taken back), timed_out (the replacement was not ready in time "
            "and was taken back), abandoned (someone else changed the Deployment's count).",
            ["result"],
            registry=r,
        )
        self.surging = Gauge("drs_rebalance_surges_in_flight", "Surges under way (Deployments annotated).", registry=r)
        self.hot_nodes = Gauge("drs_rebalance_hot_nodes", "Nodes hot in the last round (with hysteresis).", registry=r)
        self.tainted_nodes = Gauge(
            "drs_rebalance_tainted_nodes", "Nodes carrying the rebalancer's PreferNoSchedule taint.", registry=r
        )
        self.stopped = Gauge(
            "drs_rebalance_stopped",
            "1 while a tripped guardrail keeps the rebalancer from evicting.",
            ["rule"],
            registry=r,
        )
        self.evicting = Gauge(
            "drs_rebalance_evicting", "1 when the rebalancer evicts (mode evict, not stopped).", registry=r
        )
        for outcome in OUTCOMES:
            self.evictions.labels(outcome)
        for result in RESULTS:
            self.surges.labels(result)
        for reason in (*REASONS, *PLAN_REASONS):
            self.skips.labels(reason)
        for source in ROUND_ERRORS:
            self.round_errors.labels(source)
