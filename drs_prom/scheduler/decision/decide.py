"""One placement decision over already-filtered nodes, shared by the scheduler and the extender.

``Decider`` owns the node state (refreshed from the MetricsSource by its own thread
every ``state_refresh_seconds``, never per pod), the estimates for recent binds, the
model and the fallback rules:

  ``prometheus_unreachable``  the last state refresh failed (or none succeeded yet);
  ``metrics_stale``           a feasible node has no fresh metrics in the snapshot;
  ``no_model``                no valid model is loaded;
  ``model_error``             the model raised while scoring;
  ``guardrail``               a guardrail tripped for the loaded model version (rollout.py).

Without usable metrics the fallback is the request-based ``kube-default``; with metrics
but no model it is ``settings.scheduler.fallback`` (default ``capacity-balanced-overload``). Each
fallback decision is counted in ``drs_fallback_decisions_total{reason}``.

Which policy decides (the model or the heuristic arm in shadow/canary mode, or a
fallback) is settled in ONE call, ``self.rollout.decide`` (drs_prom.scheduler.decision.rollout),
once the decision's context is built.

Recent binds: a pod bound less than one rate window ago is not (fully) in the metrics
yet. The load-aware and learned policies keep that estimate themselves
(recent_binds.RecentBinds: the expected load of each of their placements, fading out over
the rate window), exactly as they did in simulation and training, so it is not added
here a second time; without it a burst would herd onto the node that looked idlest.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from drs_prom.config import Normalisation, RolloutSettings, SchedulerSettings, Settings
from drs_prom.errors import DrsError
from drs_prom.features import N_FEATURES
from drs_prom.ops.throttled_log import RateLimitedLog
from drs_prom.policies.contract import DecisionContext, Policy
from drs_prom.scheduler.decision.arms import Choice
from drs_prom.scheduler.decision.rollout import ArmedDecisions
from drs_prom.scheduler.metrics import SchedulerMetrics
from drs_prom.signals import link_capacity
from drs_prom.signals.state import MetricsSource, NodeSnapshot, node_matrix, pod_matrix
from drs_prom.signals.state import scales as feature_scales
from drs_prom.types import NodeInfo, PodRequest

if TYPE_CHECKING:
    from drs_prom.registry import PolicySpec

log = logging.getLogger(__name__)

NO_METRICS_FALLBACK = "kube-default"
METRICS_REASONS = ("prometheus_unreachable", "metrics_stale")


def fallback_policy(name: str, spec: PolicySpec) -> Policy:
    """A heuristic by its registry name (seeded, deterministic), built from the same spec as the model."""
    from drs_prom.registry import make_policy

    return make_policy(name, spec, seed=0)


__all__ = ["Choice", "Decider", "fallback_policy"]


@dataclass(frozen=True)
class _State:
    snapshot: NodeSnapshot | None = None
    error: str | None = None  # last refresh error; None when the last refresh succeeded


class Decider:
    """State refresh, the model or fallback choice and the rollout arms for the scheduler and the extender.

    It receives what it reads: the policies' spec (window, scales, model), the ``scheduler`` section (fallback,
    refresh period), the ``rollout`` section and the Prometheus timeout; ``from_settings`` cuts them from a
    loaded Settings."""

    def __init__(
        self,
        spec: PolicySpec,
        scheduler: SchedulerSettings,
        rollout: RolloutSettings,
        refresh_timeout_seconds: float,
        metrics: SchedulerMetrics,
        source: MetricsSource | None = None,
        policy: Policy | None = None,
        model_loader: Callable[[], Policy | None] | None = None,
    ) -> None:
        self.spec = spec
        self.scheduler = scheduler
        self.refresh_timeout_seconds = refresh_timeout_seconds
        self.metrics = metrics
        self.source = source
        self.policy = policy
        self.model_loader = model_loader
        self._label_log = RateLimitedLog(log, 600.0)  # a node's bad capacity label (the extender's nodes)
        self._state = _State(error="no state yet")
        self._load_memo: tuple[NodeSnapshot, tuple[str, ...], Normalisation, np.ndarray, np.ndarray] | None = None
        norm = spec.normalisation
        self._unclipped = norm.model_copy(update={"clip": False}) if norm.clip else norm
        """The configured scales without clip, made once: scales() is on every decision's path."""
        self._lock = threading.Lock()
        self._fallbacks: dict[str, Policy] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._set_model_info()
        self.rollout = ArmedDecisions(rollout, scheduler.fallback, metrics, self.named, self.fallback)

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        metrics: SchedulerMetrics,
        source: MetricsSource | None = None,
        policy: Policy | None = None,
        model_loader: Callable[[], Policy | None] | None = None,
    ) -> Decider:
        """The Decider of a scheduler or extender configured by ``settings``."""
        from drs_prom.registry import PolicySpec

        return cls(
            PolicySpec.from_settings(settings),
            settings.scheduler,
            settings.rollout,
            settings.prometheus.timeout_seconds,
            metrics,
            source=source,
            policy=policy,
            model_loader=model_loader,
        )

    # -- state refresh -------------------------------------------------------
    def start(self) -> Decider:
        if self.source is not None:
            self.refresh()  # first state before the first decision (bounded by the Prometheus timeout)
        self._thread = threading.Thread(target=self._run, name="drs-state", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.refresh_timeout_seconds + 5)

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.wait(self.scheduler.state_refresh_seconds):
            if self.source is not None:
                self.refresh()
            if self.model_loader is not None:
                self._reload_model()

    def refresh(self) -> None:
        t0 = time.monotonic()
        try:
            snap = self.source.snapshot()  # type: ignore[union-attr]
            if self._state.error is not None and self._state.snapshot is not None:
                log.info("node state refresh recovered")
            self._state = _State(snapshot=snap)
            self.metrics.state_age.set(max(0.0, time.time() - snap.taken_at))
        except Exception as exc:  # noqa: BLE001 - metrics boundary: counted in prom_errors, logged, decided by the fallback
            self.metrics.prom_errors.inc()
            self.metrics.prom_error_kinds.labels(getattr(exc, "kind", "other")).inc()
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if self._state.error is None:
                log.warning("node state refresh failed, using the fallback until it recovers: %s", msg)
            self._state = _State(snapshot=self._state.snapshot, error=msg)
        finally:
            self.metrics.prom_latency.observe(time.monotonic() - t0)

    def _reload_model(self) -> None:
        try:
            new = self.model_loader()  # type: ignore[misc]
        except DrsError as exc:
            log.warning("model reload failed, keeping the current one: %s", exc)
            return
        if new is not None and new is not self.policy:
            self.policy = new
            self._set_model_info()
            log.info("model switched to %s", new.version or new.name)

    def reload_model_now(self) -> None:
        """Pick up a model store change (e.g. an automatic rollback) without waiting a refresh."""
        if self.model_loader is not None:
            self._reload_model()

    @property
    def state_ok(self) -> bool:
        """The last node-state refresh succeeded."""
        return self._state.error is None and self._state.snapshot is not None

    def measured_at(self) -> float | None:
        """When the node state now in use was measured (its snapshot's evaluation time), None before the first
        snapshot: the time the scheduler fades its memories of binds and ended pods to (DecisionContext.measured_at).
        A refresh landing between this call and the next ``decide`` moves it by one refresh period at most."""
        snap = self._state.snapshot
        return None if snap is None else snap.taken_at

    def _set_model_info(self) -> None:
        p = self.policy
        self.metrics.model.info(
            {
                "version": p.version if p else "",
                "policy": p.name if p else "",
            }
        )

    @property
    def model_version(self) -> str | None:
        return (self.policy.version or None) if self.policy is not None else None

    # -- deciding ----------------------------------------------------------------
    def scales(self) -> Normalisation:
        """The scales node and pod load are built on: the configured ones, unclipped when the policy that decides
        (the model, else the fallback heuristic) reads overload, as the benchmark and the twin give it
        (drs_prom.policies.contract.input_scales; a model keeps the cluster's scales here, not its training ones)."""
        deciding = self.policy if self.policy is not None else self.named(self.scheduler.fallback)
        return self._unclipped if deciding.reads_unclipped_load else self.spec.normalisation

    def node_load(
        self, names: tuple[str, ...], scales: Normalisation | None = None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Normalised load (n, N_FEATURES) on ``scales`` (default: ``self.scales()``) and stale flags (n,) of
        ``names`` from the current snapshot, or None without usable metrics. Memoised per snapshot, node list
        and scales: the scheduler asks once per pod for the same names, and the pandas reindex is the
        expensive part."""
        state = self._state
        if self.source is None or state.snapshot is None or state.error is not None:
            return None
        norm = self.scales() if scales is None else scales
        memo = self._load_memo
        if (
            memo is not None
            and memo[0] is state.snapshot
            and (memo[1] is names or memo[1] == names)
            and (memo[2] is norm or memo[2] == norm)
        ):
            return memo[3], memo[4]
        snap = state.snapshot
        load = node_matrix(snap.features, norm, names).astype(np.float32)
        stale = np.isnan(load).any(axis=1) | np.array([n in snap.stale for n in names], dtype=bool).reshape(len(names))
        self._load_memo = (snap, names, norm, load, stale)
        return load, stale

    def load(
        self,
        nodes: Sequence[NodeInfo],
        feasible: np.ndarray,
        rows: np.ndarray | None = None,
        names: tuple | None = None,
        scales: Normalisation | None = None,
    ) -> tuple[np.ndarray, str | None]:
        """Normalised node load as the metrics show it, and the fallback reason, if any.

        ``names`` + ``rows``: ``nodes`` are ``names[rows]`` (the scheduler's node table and
        its sampled candidates), so the load matrix is taken once per snapshot, not per pod.
        """
        if names is None or rows is None:
            names, rows = tuple(n.name for n in nodes), None
        got = self.node_load(names, scales)
        if got is None:
            return np.full((len(nodes), N_FEATURES), np.nan, dtype=np.float32), "prometheus_unreachable"
        load, stale = got
        if rows is not None:
            load, stale = load[rows], stale[rows]
        else:  # the memo is shared: callers get their own copy
            load = load.copy()
        if (stale & feasible).any():
            return load, "metrics_stale"
        return load, None

    def fallback(self, reason: str) -> Policy:
        return self.named(NO_METRICS_FALLBACK if reason in METRICS_REASONS else self.scheduler.fallback)

    def named(self, name: str) -> Policy:
        """One shared instance per heuristic name (its recent-binds memory must see every bind it made)."""
        with self._lock:
            if name not in self._fallbacks:
                self._fallbacks[name] = fallback_policy(name, self.spec)
            return self._fallbacks[name]

    def decide(
        self,
        pod: PodRequest,
        demand: Sequence[float],
        nodes: Sequence[NodeInfo],
        feasible: np.ndarray,
        rows: np.ndarray | None = None,
        names: tuple[str, ...] | None = None,
        requests: np.ndarray | None = None,
        soft: np.ndarray | None = None,
        resident: np.ndarray | None = None,
        ended: np.ndarray | None = None,
        link: np.ndarray | None = None,
        devices: tuple[str, ...] | None = None,
    ) -> Choice:
        """Score ``nodes`` (infeasible ones get -inf) and pick one; index -1 if none is feasible.

        One policy call (one batched forward pass for the model) over all candidates.
        ``rows``/``names``: see ``load``. ``requests``: ``nodes``' DecisionContext.node_requests
        if the caller has the arrays (the scheduler's node table), else read from ``nodes``.
        ``soft``: the score terms every policy shares (DecisionContext.soft_scores), None when none apply.
        ``resident``: ``nodes``' DecisionContext.resident (the expected load of our running pods), None where the
        caller keeps none (the extender); ``ended``: what the metrics still show of our ended pods there
        (DecisionContext.ended), likewise. ``link``: ``nodes``' network/disk bandwidth (drs_prom.signals.link_capacity), read
        from their labels when None. ``devices``: DecisionContext.devices (read from ``nodes`` when None). The returned
        Choice carries the chosen node's pod_load row.
        """
        scales = self.scales()
        measured_at = self.measured_at()  # read before the load: a refresh in between only makes the load newer
        load, reason = self.load(nodes, feasible, rows, names, scales)
        if requests is None:
            alloc_cpu = np.fromiter((n.allocatable_cpu_m for n in nodes), np.float64, len(nodes))
            alloc_mem = np.fromiter((n.allocatable_mem_bytes for n in nodes), np.float64, len(nodes))
        else:
            alloc_cpu, alloc_mem = requests[:, 1].astype(np.float64), requests[:, 3].astype(np.float64)
        pod_load = pod_matrix(demand, alloc_cpu / 1000.0, alloc_mem, scales)
        if link is None:
            link, errors = link_capacity.matrix((n.name, n.labels) for n in nodes)
            for msg in errors:  # that resource reads as the standard one
                self._label_log.warn(msg, "%s", msg)
        ctx = DecisionContext(
            pod=pod,
            nodes=nodes,
            feasible=feasible,
            load=load,
            pod_load=pod_load,
            now=time.time(),
            measured_at=measured_at,
            full=link_capacity.full_matrix(link, feature_scales(scales)),
            node_requests=requests,
            soft_scores=soft,
            resident=resident,
            ended=ended,
            devices=devices,
        )
        policy = self.policy
        choice = self.rollout.decide(ctx, reason, policy, self.model_version if policy is not None else None)
        if choice.index >= 0:
            choice.expected = pod_load[choice.index]
        return choice
