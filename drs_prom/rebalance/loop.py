"""The rebalancer's rounds: read, decide (drs_prom.moves), act (a surge, drs_prom.rebalance.surge, for a Deployment's
pod; an eviction for any other) or only journal, keep the guardrails.

``Rebalancer.run_once`` is one round; ``run_rebalancer`` runs them every ``rebalance.interval_seconds`` behind
/metrics, /healthz and /readyz until SIGTERM. A round that cannot read Prometheus or the apiserver does nothing and
is counted (``drs_rebalance_round_errors_total{source}``): the rebalancer never moves a pod on data it does not have.

Safety, as kube's own eviction-based controllers keep it: only pods a controller recreates, budgets per node, per
namespace and per round, an owner's cool-down (recorded too when a PodDisruptionBudget refused the eviction, so a
refused pod is not asked about again at every round), ``dry-run`` by default. The guardrails are the scheduler's
(drs_prom.scheduler.decision.guardrails: the same PromQL rules, thresholds and breach tracker): a rule breached for
``breach_window_seconds`` while the rebalancer evicts stops the evictions (it goes on in dry-run) until the process
restarts, journalled, logged and shown as ``drs_rebalance_stopped{rule}``.
"""

from __future__ import annotations

import logging
import math
import signal
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from drs_prom.config import Settings
from drs_prom.errors import MetricsError, ModelError
from drs_prom.moves.hot import capacity_shares, hot_nodes
from drs_prom.moves.plan import Candidate, Cooldowns, Move, Plan, plan
from drs_prom.moves.refill import request_units
from drs_prom.moves.under_way import Recent, remembered, under_way
from drs_prom.policies.contract import Policy
from drs_prom.rebalance import actions
from drs_prom.rebalance.cluster import ClusterState, LivePlacer, blocked_by_budget, read_cluster
from drs_prom.rebalance.metrics import RebalanceMetrics
from drs_prom.rebalance.reads import node_quantiles, pod_usage
from drs_prom.rebalance.surge import BUDGET, MOVED, POD_GONE, SURGE_BLOCKERS, WAITING, InFlight, Surges, landed_back
from drs_prom.registry import PolicySpec, make_policy
from drs_prom.scheduler.decision.guardrails import BreachTracker, Trip, breaches, rules_for
from drs_prom.signals.prometheus import PrometheusSource
from drs_prom.stores.journal import Journal, RolloutEvent
from drs_prom.types import KubeClient

log = logging.getLogger(__name__)

MOVE_EVENT, STOP_EVENT, SURGE_EVENT = "rebalance_move", "rebalance_stop", "rebalance_surge"
"""Kinds of the journal's ``rollout_events`` rows the rebalancer writes."""


@dataclass
class RoundResult:
    """What one round saw and did."""

    at: float
    hot: frozenset[str] = frozenset()
    plan: Plan | None = None
    outcomes: list[tuple[Move, str, str]] = field(default_factory=list)
    """(move, outcome (actions.OUTCOMES), the apiserver's or the budget's word when refused)."""
    error: str = ""
    surges: list[tuple[InFlight, str]] = field(default_factory=list)
    """(surge under way, what this round did with it: surge.MOVED, TIMED_OUT, ABANDONED or WAITING)."""


def policies(settings: Settings) -> tuple[Policy, Policy]:
    """(what stands for drs-prom's scheduler, what stands for any other): ``drs_policy`` (the scheduler's fallback
    when its model cannot be loaded) and ``other_policy``, built from the settings like every policy. The cluster
    a rebalancer acts on is one pods leave (it evicts them), and its predictions bind nothing the stage could count,
    so ``drs`` predicts with the whole-node reserve, never the packing of a filling cluster
    (drs_prom.policies.filling)."""
    spec = replace(PolicySpec.from_settings(settings), fill_window=0)
    r = settings.rebalance
    try:
        own = make_policy(r.drs_policy, spec)
    except ModelError as exc:
        log.warning("no valid model for %s (%s); predicting with %s", r.drs_policy, exc, settings.scheduler.fallback)
        own = make_policy(settings.scheduler.fallback, spec)
    return own, make_policy(r.other_policy, spec)


class Rebalancer:
    """One rebalancer's state across rounds: the hot set (hysteresis), the cool-downs, its taints, its stop."""

    def __init__(
        self,
        settings: Settings,
        api: KubeClient,
        source: PrometheusSource,
        metrics: RebalanceMetrics | None = None,
        journal: Journal | None = None,
        clock: Any = time.time,
        own: Policy | None = None,
        other: Policy | None = None,
    ) -> None:
        from kubernetes import client

        self.settings, self.api, self.source, self.clock = settings, api, source, clock
        self.core = client.CoreV1Api(api)
        self.surges = Surges(self.core, client.AppsV1Api(api), client.AutoscalingV2Api(api))
        self.recent: list[Recent] = []
        self.metrics = metrics or RebalanceMetrics()
        self.journal = journal
        if own is None or other is None:
            own, other = policies(settings)
        self.own, self.other = own, other
        self.hot: frozenset[str] = frozenset()
        self.tainted: frozenset[str] = frozenset()
        self.cooldowns = Cooldowns()
        self.stopped: Trip | None = None
        g = settings.rebalance.guardrails
        self.rules = rules_for(g, settings.prometheus) if g.enabled else []
        self.tracker = BreachTracker(g.breach_window_seconds)
        self.rounds_done = 0
        self._update_mode()

    @property
    def evicting(self) -> bool:
        """Whether this round's moves are made (mode evict, no guardrail tripped), not only journalled."""
        return self.settings.rebalance.mode == "evict" and self.stopped is None

    def _update_mode(self) -> None:
        self.metrics.evicting.set(1 if self.evicting else 0)

    def run_once(self) -> RoundResult:
        """One round (module docstring)."""
        from kubernetes.client.rest import ApiException
        from urllib3.exceptions import HTTPError

        r = self.settings.rebalance
        now = float(self.clock())
        self.metrics.rounds.inc()
        out = RoundResult(at=now)
        try:
            state = read_cluster(self.api, self.settings, now)
            flights = self.surges.in_flight(r.namespaces)
        except (ApiException, HTTPError, OSError) as exc:
            self.metrics.round_errors.labels("kubernetes").inc()
            out.error = f"kubernetes: {getattr(exc, 'reason', exc)}"
            log.warning("rebalance round skipped: the apiserver could not be read (%s)", out.error)
            return out
        names = state.names
        try:
            raw = node_quantiles(self.source, self.settings, names)
            q = r.target_quantile
            busy = None if q is None else node_quantiles(self.source, self.settings, names, q)
            usage = pod_usage(self.source, self.settings)
            features = self.source.snapshot().features
        except MetricsError as exc:
            self.metrics.round_errors.labels("prometheus").inc()
            out.error = f"prometheus: {exc}"
            log.warning("rebalance round skipped: %s", exc)
            return out
        out.surges = self._advance(flights, state, usage, now)
        shares = capacity_shares(raw, state.link)
        self.hot = out.hot = hot_nodes(names, shares, self.hot, r.hot_above, r.cool_below)
        self.metrics.hot_nodes.set(len(self.hot))
        if r.taint_hot_nodes and self.evicting:
            self.tainted = actions.sync_taints(self.api, r.taint_key, self.hot, names)
            self.metrics.tainted_nodes.set(len(self.tainted))
        moving = [f for f, done in out.surges if done == WAITING]
        peaks = None if busy is None else capacity_shares(busy, state.link)
        out.plan = self._plan(state, shares, usage, features, now, moving, peaks)
        for move in out.plan.moves:
            outcome, detail = self._act(move, state, now)
            out.outcomes.append((move, outcome, detail))
        self._guard(now)
        self.rounds_done += 1
        return out

    def _plan(
        self,
        state: ClusterState,
        shares: np.ndarray,
        usage: dict[tuple[str, str], np.ndarray],
        features: Any,
        now: float,
        moving: list[InFlight],
        peaks: np.ndarray | None,
    ) -> Plan:
        r = self.settings.rebalance
        index = {n: i for i, n in enumerate(state.names)}
        unknown = np.full(shares.shape[1], np.nan)
        own = self.settings.scheduler.scheduler_name
        flying = [Recent(now, f.source, "", usage.get((f.namespace, f.pod), unknown)) for f in moving]
        moved = under_way([*self.recent, *flying], index)
        surging = {f.key for f in moving}
        candidates = [
            Candidate(
                p.facts,
                index[p.facts.node],
                usage.get((p.record.namespace, p.record.name), unknown),
                request_units(p.request.cpu_m / 1000.0, p.request.mem_bytes)
                if p.request.cpu_m or p.request.mem_bytes
                else None,
                placed_by_requests=p.scheduler != own,
            )
            for p in state.pods
            if p.facts.key not in surging
        ]
        placer = LivePlacer(state, self.settings, self.own, self.other, features, self.tainted, now)
        self.cooldowns.forget(now, r.cooldown_seconds)
        got = plan(
            state.names, shares, state.capacity, self.hot, candidates, r, self.cooldowns, now, placer, moved, peaks
        )
        for reason, n in got.skipped.items():
            self.metrics.skips.labels(reason).inc(n)
        return got

    def _act(self, move: Move, state: ClusterState, now: float) -> tuple[str, str]:
        pod = next(p for p in state.pods if p.facts.key == move.pod.key)
        r = self.settings.rebalance
        outcome, detail = "", ""
        if not self.evicting:
            outcome = actions.DRY_RUN
            detail = "a PodDisruptionBudget allows no disruption now" if blocked_by_budget(pod, state.budgets) else ""
        elif r.surge and pod.facts.owner_kind == "ReplicaSet":
            started, why = self.surges.start(move, pod.uid, now, blocked_by_budget(pod, state.budgets))
            if started:
                outcome = actions.SURGED
                message = f"Replaced first by drs-rebalancer (one replica more until it is ready): {move.describe()}"
                actions.pod_event(self.core, move, pod.uid, "RebalanceSurge", message)
            elif why == POD_GONE:
                outcome = actions.GONE
            elif why == BUDGET:
                outcome, detail = actions.PDB, "a PodDisruptionBudget allows no disruption now"
            elif why not in SURGE_BLOCKERS:
                outcome, detail = actions.FAILED, why
        if not outcome:
            outcome, detail = actions.evict(self.core, move, pod.uid)
            if outcome == actions.EVICTED:
                actions.pod_event(
                    self.core, move, pod.uid, "Rebalanced", f"Evicted by drs-rebalancer: {move.describe()}"
                )
        if outcome == actions.PDB and self.evicting:
            actions.pod_event(self.core, move, pod.uid, "RebalanceBlocked", f"Not moved ({detail}); not retried", True)
        if outcome in (actions.EVICTED, actions.SURGED, actions.DRY_RUN, actions.PDB):
            self.cooldowns.record(move.pod.owner, now)
        if outcome == actions.EVICTED:
            self.recent.append(Recent(now, move.source, "", np.asarray(move.usage, dtype=np.float64)))
        self.metrics.evictions.labels(outcome).inc()
        log.info(
            "%s %s: %s%s",
            "evicted" if outcome == actions.EVICTED else outcome,
            move.pod.key,
            move.describe(),
            f" ({detail})" if detail else "",
        )
        if self.journal is not None:
            self.journal.append_event(
                RolloutEvent(
                    kind=MOVE_EVENT,
                    detail={
                        "pod": move.pod.key,
                        "owner": move.pod.owner,
                        "outcome": outcome,
                        "detail": detail,
                        "mode": ("surge" if outcome == actions.SURGED else "evict") if self.evicting else "dry-run",
                        "source": move.source,
                        "target": move.target,
                        "source_before": move.source_before,
                        "source_after": move.source_after,
                        "target_after": move.target_after,
                        "usage": list(move.usage),
                    },
                    ts=now,
                )
            )
        return outcome, detail

    def _advance(
        self,
        flights: list[tuple[dict[str, Any], InFlight]],
        state: ClusterState,
        usage: dict[tuple[str, str], np.ndarray],
        now: float,
    ) -> list[tuple[InFlight, str]]:
        """This round's step of each surge under way (drs_prom.rebalance.surge), in dry-run too (a surge started
        before is finished, never left half done); forgets the moves the window no longer reads from before them."""
        r = self.settings.rebalance
        self.recent = remembered(self.recent, now, r)
        out = []
        for deployment, flight in flights:
            back = landed_back(flight, [p.facts for p in state.pods], now)
            done = self.surges.advance(deployment, flight, now, r.surge_timeout_seconds, back)
            out.append((flight, done))
            if done == WAITING:
                self.cooldowns.record(f"{flight.namespace}/Deployment/{flight.deployment}", now)
                continue
            self.metrics.surges.labels(done).inc()
            log.info("surge of %s (Deployment %s): %s", flight.key, flight.deployment, done)
            if done == MOVED:
                got = usage.get((flight.namespace, flight.pod))
                if got is not None:
                    self.recent.append(Recent(now, flight.source, "", got))
            if self.journal is not None:
                self.journal.append_event(
                    RolloutEvent(
                        kind=SURGE_EVENT,
                        detail={"pod": flight.key, "deployment": flight.deployment, "result": done},
                        ts=now,
                    )
                )
        self.metrics.surging.set(sum(1 for _, done in out if done == WAITING))
        return out

    def _guard(self, now: float) -> None:
        if not self.rules or self.stopped is not None:
            return
        values: dict[str, float | None] = {}
        for rule in self.rules:
            try:
                values[rule.name] = self.source.scalar(rule.expr)
            except MetricsError as exc:
                log.debug("guardrail %s not evaluated: %s", rule.name, exc)
                values[rule.name] = None
        name = self.tracker.update(now, breaches(values, self.rules), self.evicting)
        if name is None:
            return
        rule = next(x for x in self.rules if x.name == name)
        value = values.get(name)
        self.stopped = Trip(
            name,
            float(value) if value is not None and math.isfinite(value) else 0.0,
            rule.threshold,
            self.tracker.since.get(name, now),
            now,
            None,
        )
        self.metrics.stopped.labels(name).set(1)
        self._update_mode()
        log.warning(
            "guardrail %s breached for %.0fs (value %.3g > %g) while evicting: evictions stopped (dry-run) until "
            "restart",
            name,
            now - self.stopped.breached_since,
            self.stopped.value,
            rule.threshold,
        )
        if self.journal is not None:
            self.journal.append_event(
                RolloutEvent(
                    kind=STOP_EVENT,
                    detail={"rule": name, "value": self.stopped.value, "threshold": rule.threshold},
                    ts=now,
                )
            )


def run_rebalancer(
    settings: Settings, kubeconfig: str | None, stop: threading.Event | None = None, once: bool = False
) -> None:
    """Rounds every ``rebalance.interval_seconds`` (one with ``once``) behind /metrics until SIGTERM or ``stop``."""
    from drs_prom.scheduler.http.server import HealthServer
    from drs_prom.scheduler.runner import api_client
    from drs_prom.stores.journal import open_journal

    r = settings.rebalance
    api = api_client(kubeconfig)
    source = PrometheusSource(settings.prometheus)
    metrics = RebalanceMetrics()
    journal = open_journal(r.journal_path)
    rebalancer = Rebalancer(settings, api, source, metrics, journal)
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    server = None
    if not once:
        server = HealthServer(
            r.metrics_listen, metrics.registry, lambda: True, lambda: rebalancer.rounds_done > 0, settings.serving, api
        ).start()
    log.info(
        "rebalancer: mode %s, every %gs over %s (hot above %g, cool below %g of capacity)",
        r.mode,
        r.interval_seconds,
        r.window,
        r.hot_above,
        r.cool_below,
    )
    try:
        while True:
            result = rebalancer.run_once()
            log.info(
                "round: %d hot node(s), %d move(s)%s",
                len(result.hot),
                len(result.outcomes),
                f", skipped: {result.error}" if result.error else "",
            )
            if once or stop.wait(r.interval_seconds):
                break
    finally:
        if server is not None:
            server.stop()
        if journal is not None:
            journal.close()
        source.close()
