"""The rollout of a learned policy in the live scheduler: arms, guardrails, rollback.

``ArmedDecisions.decide`` is the one place a node is chosen (Decider.decide calls it
once the decision's context is built): it puts the pod in an arm (drs_prom.scheduler.decision.arms),
lets that arm's policy decide (the model, unless metrics/model are missing or a guardrail
tripped, then the fallback with its reason) and, in shadow and canary mode, lets the other
arm score the same context for the comparison. Metrics: ``drs_decisions_total{policy,arm}``,
``drs_fallback_decisions_total{reason}``, the agreement counters and ratio, and the
counterfactual imbalance histogram.

``RolloutWatcher`` is a thread beside the state refresh: every
``guardrails.evaluate_seconds`` it counts stuck pods, evaluates the guardrails and, on the
leader, judges the newest promotion (drs_prom.ops.promotion_judge). Trips, verdicts and rollbacks go
to the journal (``rollout_events``), the log, the metrics and an Event on the Lease.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np

from drs_prom.config import PrometheusSettings, RolloutSettings, SchedulerSettings
from drs_prom.ops.promotion_judge import PromotionJudge, Verdict
from drs_prom.policies.contract import DecisionContext, Policy, choose
from drs_prom.scheduler.decision.arms import (
    HEURISTIC,
    MODEL,
    AgreementWindow,
    Choice,
    ShadowRecord,
    assign_arm,
    compare,
)
from drs_prom.scheduler.decision.guardrails import Guardrails, Trip, signals
from drs_prom.scheduler.metrics import SchedulerMetrics
from drs_prom.scheduler.watch.kube import kube_timestamp
from drs_prom.scheduler.write.kube_response import drained
from drs_prom.stores.journal import Journal, RolloutEvent
from drs_prom.stores.model_store import ModelStore
from drs_prom.types import KubeClient


class Deciding(Protocol):
    """What the watcher reads and does of the scheduler's Decider (decide.Decider, which builds the rollout)."""

    rollout: ArmedDecisions

    @property
    def policy(self) -> Policy | None: ...

    @property
    def state_ok(self) -> bool: ...

    @property
    def model_version(self) -> str | None: ...

    def reload_model_now(self) -> None: ...


log = logging.getLogger(__name__)

GUARDRAIL = "guardrail"
"""Fallback reason while a tripped guardrail keeps the model from deciding."""


class ArmedDecisions:
    """Arm assignment, the model/fallback choice and the shadow comparison for one Decider."""

    def __init__(
        self,
        rollout: RolloutSettings,
        fallback_name: str,
        metrics: SchedulerMetrics,
        named: Callable[[str], Policy],
        fallback: Callable[[str], Policy],
    ) -> None:
        self.cfg = rollout
        self.fallback_name = fallback_name
        self.metrics = metrics
        self.named = named
        self.fallback = fallback
        self.guardrails: Guardrails | None = None
        self.agreement = AgreementWindow()
        self._lock = threading.Lock()

    @property
    def heuristic_name(self) -> str:
        return self.cfg.heuristic or self.fallback_name

    def decide(
        self, ctx: DecisionContext, reason: str | None, model: Policy | None, model_version: str | None
    ) -> Choice:
        pod = ctx.pod
        arm = assign_arm(self.cfg, pod.uid, pod.namespace, pod.labels)
        compare_arms = self.cfg.mode != "normal" and reason is None
        primary: Policy | None = None
        idx, scores = -1, np.full(len(ctx.nodes), -np.inf)
        if arm == MODEL:
            if reason is None and model is None:
                reason = "no_model"
            if reason is None and self.guardrails is not None and self.guardrails.tripped_for(model_version):
                reason = GUARDRAIL
            if reason is None:
                try:
                    idx, scores = choose(model, ctx)  # type: ignore[arg-type]
                    primary = model
                except Exception as exc:  # noqa: BLE001 - boundary: logged
                    log.warning("model failed on %s/%s (%s); using the fallback", pod.namespace, pod.name, exc)
                    reason = "model_error"
            if primary is None:
                primary = self.fallback(reason)  # type: ignore[arg-type]
                idx, scores = choose(primary, ctx)
            heuristic = self.named(self.heuristic_name) if compare_arms else None
            shadow_policy = heuristic if heuristic is not None and heuristic is not primary else None
        else:
            primary = self.named(self.heuristic_name) if reason is None else self.fallback(reason)
            idx, scores = choose(primary, ctx)
            shadow_policy = model if compare_arms else None
        shadow = self._compare(arm, ctx, idx, shadow_policy) if shadow_policy is not None and idx >= 0 else None
        self.metrics.decisions.labels(primary.name, arm).inc()
        if reason is not None:
            self.metrics.fallbacks.labels(reason).inc()
        return Choice(idx, scores, primary, reason, arm, shadow)

    def _compare(self, arm: str, ctx: DecisionContext, bound: int, other: Policy) -> ShadowRecord | None:
        try:
            s_idx, s_scores = choose(other, ctx, bind=False)
            other.bound(ctx, bound)  # what it keeps of the decision is the node actually bound, not its own choice
        except Exception as exc:  # noqa: BLE001 - a failing shadow must never affect the bind
            log.debug("shadow %s failed: %s", other.name, exc)
            return None
        rec = compare(arm, bound, other.name, s_idx, s_scores, ctx.load, ctx.pod_load)
        m = self.metrics.rollout
        m.comparisons.labels("true" if rec.agree else "false").inc()
        with self._lock:
            m.agreement.set(self.agreement.add(rec.agree))
        for a, value in rec.counterfactual.items():
            m.counterfactual.labels(a).observe(value)
        return rec


def arm_text(choice: Choice, names: list[str]) -> str:
    """The part of the Scheduled event message that says which arm decided."""
    text = f"arm {choice.arm}"
    if choice.shadow is not None and 0 <= choice.shadow.shadow_index < len(names):
        other = HEURISTIC if choice.arm == MODEL else MODEL
        text += f"; {other} {choice.shadow.shadow_policy} would pick {names[choice.shadow.shadow_index]}"
    return text


def promotion_lag_seconds(prometheus: PrometheusSettings, scheduler: SchedulerSettings) -> float:
    """How long after a promotion the new version can show in the metrics: a hot reload (one
    state refresh) plus one rate window. The promotion judge's after-window starts then."""
    return prometheus.window_seconds + scheduler.state_refresh_seconds


def lease_event(core_v1: KubeClient, cfg: SchedulerSettings, reason: str, message: str, warning: bool = True) -> None:
    """An Event on the scheduler's Lease (where `kubectl describe lease` shows it); best effort."""
    now = kube_timestamp(time.time())
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{cfg.lease_name}.{uuid.uuid4().hex[:16]}", "namespace": cfg.lease_namespace},
        "involvedObject": {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "name": cfg.lease_name,
            "namespace": cfg.lease_namespace,
        },
        "reason": reason,
        "message": message[:1024],
        "type": "Warning" if warning else "Normal",
        "source": {"component": cfg.scheduler_name},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    try:
        drained(core_v1.create_namespaced_event(cfg.lease_namespace, body, _preload_content=False))
    except Exception as exc:  # noqa: BLE001 - boundary: logged
        log.warning("could not record Event %s on Lease %s: %s", reason, cfg.lease_name, exc)


def _age_seconds(pod: dict[str, Any], now: float) -> float:
    ts = (pod.get("metadata") or {}).get("creationTimestamp")
    try:
        created = datetime.strptime(str(ts), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return 0.0
    return max(0.0, now - created)


class RolloutWatcher:
    """The periodic part: stuck pods, guardrails, promotion judging (see the module doc)."""

    def __init__(
        self,
        rollout: RolloutSettings,
        prometheus: PrometheusSettings,
        scheduler: SchedulerSettings,
        decider: Deciding,
        metrics: SchedulerMetrics,
        journal: Journal | None,
        query: Callable[[str], float | None],
        query_at: Callable[[str, float], float | None],
        *,
        store: ModelStore | None = None,
        pending_pods: Callable[[], list[dict[str, Any]]] = list,
        is_leader: Callable[[], bool] = lambda: True,
        core_v1: KubeClient = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.rollout = rollout
        self.prometheus = prometheus
        self.scheduler = scheduler
        self.decider = decider
        self.metrics = metrics
        self.journal = journal
        self.pending_pods = pending_pods
        self.is_leader = is_leader
        self.core_v1 = core_v1
        self.clock = clock
        r = rollout
        self.guardrails = (
            Guardrails(r.guardrails, prometheus, query, metrics.rollout, on_trip=self._on_trip, clock=clock)
            if r.guardrails.enabled
            else None
        )
        decider.rollout.guardrails = self.guardrails
        self.judge = (
            PromotionJudge(
                r,
                promotion_lag_seconds(prometheus, scheduler),
                store,
                journal,
                query_at,
                signals(r.guardrails, prometheus),
                on_verdict=self._on_verdict,
                started_at=clock(),
            )
            if r.rollback.enabled and store is not None and journal is not None
            else None
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def model_deciding(self) -> bool:
        """The model decides some pods right now (guardrails only judge the model)."""
        r = self.rollout
        if r.mode == "shadow" or self.decider.policy is None or not self.decider.state_ok:
            return False
        return r.mode == "normal" or r.canary_share > 0 or bool(r.canary_namespaces or r.canary_selector)

    def round(self) -> None:
        now = self.clock()
        limit = self.rollout.guardrails.pending_seconds
        self.metrics.rollout.stuck_pods.set(sum(_age_seconds(p, now) > limit for p in self.pending_pods()))
        if self.guardrails is not None:
            self.guardrails.evaluate(self.model_deciding(), self.decider.model_version)
        if self.judge is not None and self.is_leader():
            try:
                self.judge.check(now)
            except Exception as exc:  # noqa: BLE001 - the next round tries again
                log.warning("judging the last promotion failed: %s", exc)

    def start(self) -> RolloutWatcher:
        self._thread = threading.Thread(target=self._run, name="drs-rollout", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.prometheus.timeout_seconds * 4 + 5)

    def _run(self) -> None:
        every = self.rollout.guardrails.evaluate_seconds
        while not self._stop.wait(every):
            try:
                self.round()
            except Exception:  # never let the watcher die: the scheduler's safety depends on it
                log.exception("rollout watcher round failed")

    # -- recording ------------------------------------------------------------
    def _on_trip(self, trip: Trip) -> None:
        if self.journal is not None:
            self.journal.append_event(
                RolloutEvent(
                    "guardrail_trip",
                    {
                        "rule": trip.rule,
                        "value": trip.value,
                        "threshold": trip.threshold,
                        "breached_since": trip.breached_since,
                        "values": self.guardrails.last_values if self.guardrails else {},
                    },
                    version=trip.model_version,
                    ts=trip.at,
                )
            )
        if self.core_v1 is not None:
            lease_event(self.core_v1, self.scheduler, "GuardrailTripped", trip.describe())

    def _on_verdict(self, v: Verdict) -> None:
        m = self.metrics.rollout
        kind = "rolled_back" if v.rolled_back_to else ("worse_kept" if v.worse else "kept")
        m.verdicts.labels(kind).inc()
        if v.rolled_back_to:
            m.rollbacks.inc()
            self.decider.reload_model_now()
        if self.core_v1 is not None and v.worse:
            what = f"rolled back to {v.rolled_back_to}" if v.rolled_back_to else "could not roll back"
            lease_event(
                self.core_v1,
                self.scheduler,
                "ModelRolledBack",
                f"model {v.version} was worse than before its promotion ({'; '.join(v.reasons)}); {what}",
            )
