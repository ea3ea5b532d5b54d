"""The scheduling loop: pop a pod, filter nodes, let the Decider choose, bind.

Over 400 lines because it is both cycles (schedule, bind) with their fencing, events and accounting.

One thread schedules (decisions are sequential, like kube-scheduler's scheduling
cycle); a small pool binds and records events (its binding cycle). Before a bind the
pod is *assumed* on its node in the cache, so the next decision already counts its
requests. Node state, the model and the fallback rules live in decide.Decider. Pods
that fit nowhere get a FailedScheduling event and ``PodScheduled=False`` (what autoscalers
read) and go back to the queue with backoff; an exception on one pod is logged and that
pod retried, never the loop stopped.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

from drs_prom.config import Settings
from drs_prom.constraints import chain, placed, sampling
from drs_prom.constraints.claim_binding import Plan
from drs_prom.ops.throttled_log import RateLimitedLog
from drs_prom.policies.contract import NODE_REQUEST_COLUMNS, Policy
from drs_prom.scheduler.decision.decide import Decider
from drs_prom.scheduler.decision.decided import BindRecorder, DecidedPod
from drs_prom.scheduler.decision.pod_demand import DemandResolver
from drs_prom.scheduler.decision.rollout import RolloutWatcher, arm_text
from drs_prom.scheduler.http.server import HealthServer
from drs_prom.scheduler.metrics import SchedulerMetrics
from drs_prom.scheduler.watch import kube
from drs_prom.scheduler.watch.cache import ClusterCache
from drs_prom.scheduler.watch.queue import QueuedPod, SchedulingQueue
from drs_prom.scheduler.write import bind as binder
from drs_prom.scheduler.write import write_process
from drs_prom.scheduler.write.evictions import NOT_FOUND, Preemptor
from drs_prom.scheduler.write.kube_response import drained
from drs_prom.scheduler.write.pod_condition import SCHEDULER_ERROR, UNSCHEDULABLE, not_scheduled_patch
from drs_prom.scheduler.write.volume_prebind import GONE, VolumePreBinder, failure_message, plan_for
from drs_prom.scheduler.write.workers import WorkerPool
from drs_prom.scheduler.write.write_limits import WriteLimits
from drs_prom.scheduler.write.write_process import RemoteWriter
from drs_prom.signals.state import MetricsSource
from drs_prom.stores.journal import NODE_KEYS, Decision, Journal, node_entries_from_values
from drs_prom.types import KubeClient, NodeInfo, PodRequest

log = logging.getLogger(__name__)

# the journal's per-candidate entry (NODE_KEYS) from the policy's request matrix (NODE_REQUEST_COLUMNS)
_JOURNAL_NODE_COLUMNS = [NODE_REQUEST_COLUMNS.index(k) for k in NODE_KEYS]
EVENT_WORKERS = 2
"""Threads writing events, beside ``bind_workers`` writing binds."""


class Scheduler:
    """A second scheduler for pods with ``spec.schedulerName == settings.scheduler.scheduler_name``.

    ``source``: node metrics (PrometheusSource in production), None = always fallback.
    ``policy``: the model, None = fallback (``no_model``). ``model_loader`` (optional) is
    called once per state refresh and may return a new policy (hot reload).
    ``pipelined=False`` binds on the scheduling thread, each pod's bind acknowledged before the
    next pod is decided: the one-by-one reference the pipelined path must place exactly like.
    """

    def __init__(
        self,
        settings: Settings,
        api_client: KubeClient,
        *,
        source: MetricsSource | None = None,
        policy: Policy | None = None,
        journal: Journal | None = None,
        metrics: SchedulerMetrics | None = None,
        identity: str | None = None,
        demands: DemandResolver | None = None,
        model_loader: Callable[[], Policy | None] | None = None,
        bind_workers: int | None = None,
        serve_http: bool = True,
        recorder: BindRecorder | None = None,
        pipelined: bool = True,
    ) -> None:
        from kubernetes import client

        self.settings = settings
        self.cfg = settings.scheduler
        self.api_client = api_client
        self.core = client.CoreV1Api(api_client)
        self.coord = client.CoordinationV1Api(api_client)
        workers = bind_workers or self.cfg.bind_workers
        # a kept connection per bind and event worker (and as many threads in the write process)
        self.writer = binder.ApiWriter(api_client, workers + EVENT_WORKERS)
        # the binds' and events' HTTP in a child process, off this process's GIL, given a core for it
        use_child = write_process.wanted(self.cfg.write_process, write_process.usable_cpus())
        self._remote = RemoteWriter(self.writer) if use_child else None
        self._post: binder.Writer = self._remote if self._remote is not None else self.writer
        self.journal = journal
        self._journal_log = RateLimitedLog(log, 60.0)  # a full disk fails every row: one line a minute
        self._status_log = RateLimitedLog(log, 60.0)  # a lost apiserver fails every status write: one line a minute
        self.metrics = metrics or SchedulerMetrics()
        if journal is not None:
            journal.on_write_failure = self._journal_write_failed
            self.metrics.journal_backlog.set_function(journal.backlog)
        self.decider = Decider.from_settings(
            settings, self.metrics, source=source, policy=policy, model_loader=model_loader
        )
        self.identity = identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        # the pod's expected load: annotations, else the estimate from its owner's stored usage (pod_demand)
        self.demands = demands or DemandResolver(settings.usage, registry=self.metrics.registry)
        self.recorder = recorder
        self.queue = SchedulingQueue(self.cfg.backoff_initial_seconds, self.cfg.backoff_max_seconds)
        if journal is not None:
            journal.busy = self.queue.has_active  # a burst is scheduled first, journalled right after
        self.cache = ClusterCache(
            self.cfg.scheduler_name,
            self.cfg.namespace,
            on_pending=self._pending,
            on_gone=self.queue.delete,
            on_change=self.queue.move_all,
            on_bound_end=journal.pod_ended if journal is not None else lambda uid: None,
            metric_window_seconds=settings.prometheus.window_seconds,
        )
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._pool = WorkerPool(workers, "drs-bind")
        self._pipelined = pipelined
        # kube-scheduler's clientConnection.qps/burst, a bucket for binds and another for events (its two clientsets)
        self._limits = WriteLimits(self.cfg.client_qps, self.cfg.client_burst)
        self._next_start = 0  # where the next node search starts (kube-scheduler's nextStartNodeIndex)
        # events go through their own pool so a slow event write never delays the next bind
        self._events = WorkerPool(EVENT_WORKERS, "drs-event")
        # pods whose claims waited for their first consumer wait here for them to bind, off the bind pool
        self._volume_pool = WorkerPool(self.cfg.volume_bind_workers, "drs-volume-bind")
        self.prebinder = VolumePreBinder(self.core, self.cache, self.cfg.volume_bind_timeout_seconds)
        self.preemptor = Preemptor(
            api_client,
            self.cache,
            self.cfg.scheduler_name,
            self._pool.submit,
            self._submit_event,
            self._limits.binds.wait,
        )
        self._serve_http = serve_http
        self.http: HealthServer | None = None
        self.elector = None
        if self.cfg.leader_election:
            from drs_prom.scheduler.leader import LeaseElector

            self.elector = LeaseElector(
                self.coord,
                self.cfg.lease_name,
                self.cfg.lease_namespace,
                self.identity,
                self.cfg.lease_duration_seconds,
                self.cfg.renew_deadline_seconds,
                self.cfg.retry_period_seconds,
                on_change=lambda leading: self.metrics.leader.set(1 if leading else 0),
            )
        self.rollout = self._rollout_watcher(source)

    def _rollout_watcher(self, source: MetricsSource | None) -> RolloutWatcher | None:
        """Guardrails and promotion judging need PromQL answers (PrometheusSource.scalar)."""
        r = self.settings.rollout
        if not (r.guardrails.enabled or r.rollback.enabled):
            return None
        scalar = getattr(source, "scalar", None)
        if scalar is None:
            log.warning("rollout guardrails/rollback need a Prometheus source; they are off")
            return None
        store = None
        if r.rollback.enabled:
            from drs_prom.stores.model_store import ModelStore

            store = ModelStore(self.settings.retrain.model_store, self.settings.retrain.keep_versions)
        return RolloutWatcher(
            self.settings.rollout,
            self.settings.prometheus,
            self.settings.scheduler,
            self.decider,
            self.metrics,
            self.journal,
            scalar,
            lambda q, at: scalar(q, at=at),
            store=store,
            pending_pods=self.cache.pending_pods,
            is_leader=self.is_leader,
            core_v1=self.core,
        )

    @property
    def bound_count(self) -> int:
        """Pods this replica bound. Read from drs_binds_total, which is thread-safe: bind
        workers run concurrently and a plain ``+= 1`` on an attribute can lose updates."""
        return int(self.metrics.registry.get_sample_value("drs_binds_total", {"outcome": binder.BOUND}) or 0)

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> Scheduler:
        if self._serve_http:
            self.http = HealthServer(
                self.cfg.metrics_listen,
                self.metrics.registry,
                self.healthy,
                self.ready,
                serving=self.settings.serving,
                api_client=self.api_client,
            ).start()
        if self._remote is not None:
            self._remote.start()
        self.cache.start(self.core)
        self.decider.start()
        self.demands.start()
        if self.rollout is not None:
            self.rollout.start()
        if self.elector is not None:
            self.elector.start()
        self._spawn(self._schedule_loop, "drs-schedule")
        return self

    def stop(self) -> None:
        self._stop.set()
        self.queue.close()
        for t in self._threads:
            t.join(10)
        if self.rollout is not None:
            self.rollout.stop()
        self.decider.stop()
        self.demands.stop()
        self._volume_pool.shutdown()
        self._pool.shutdown()
        self._events.shutdown()
        if self._remote is not None:
            self._remote.close()
        self.writer.close()
        if self.journal is not None:
            self.journal.flush()
        if self.elector is not None:
            self.elector.stop(release=True)
        self.cache.stop()
        if self.http is not None:
            self.http.stop()
        if self.recorder is not None:
            self.recorder.stop()

    def _pending(self, pod: dict[str, Any]) -> None:
        """One of our pods is pending (the pods watch's thread): its owner's stored usage asked for, then queued."""
        self.demands.prefetch(pod)
        self.queue.add(pod, self.cache.pod_event_received())

    def _spawn(self, fn: Callable[[], None], name: str) -> None:
        t = threading.Thread(target=fn, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def healthy(self) -> bool:
        return not self._stop.is_set() and self.decider.alive() and all(t.is_alive() for t in self._threads)

    def ready(self) -> bool:
        return self.healthy() and self.cache.synced

    def is_leader(self) -> bool:
        return self.elector is None or self.elector.is_leader()

    # -- the loop ---------------------------------------------------------------
    def _schedule_loop(self) -> None:
        if not self.cache.wait_synced(60):
            log.warning("caches not synced after 60 s; scheduling anyway")
        while not self._stop.is_set():
            if not self.is_leader():
                self._stop.wait(0.2)
                continue
            item = self.queue.pop(timeout=0.5)
            if item is None:
                continue
            try:
                self.schedule_one(item)
            except Exception:  # never let one pod stop the loop; it is retried with backoff
                self.metrics.errors.inc()
                log.exception("scheduling %s failed; will retry", item.key)
                self.queue.done(item, scheduled=False)

    def schedule_one(self, item: QueuedPod) -> str:
        """One scheduling cycle. Returns 'gone', 'unschedulable' or 'binding'.

        Filters run over the node table's arrays; like kube-scheduler, the search stops
        once ``nodes_to_score`` feasible nodes are found (starting where the last search
        stopped), and only the nodes looked at reach the policy (one call, one forward pass).
        """
        t0 = time.monotonic()
        pod = self.cache.pending_pod(item.uid)
        if pod is None:  # deleted or bound while queued
            self.queue.done(item, scheduled=True)
            return "gone"
        demand = self.demands.resolve(pod)
        req = kube.to_pod_request(pod, demand.demand, demand.source)
        own = self.cache.take_nomination(item.uid)  # the room a preemption reserved for it: its own to use
        view = self.cache.view()
        mask = view.feasible(req)
        if not mask.any():
            result = view.filter_result(req)
            msg = chain.failure_message(result) + self.preemptor.attempt(pod, req, view, result, own)
            self.metrics.unschedulable.inc()
            for what in result.refused:  # refused, not guessed: counted by what drs-prom cannot check
                self.metrics.unsupported.labels(what).inc()
            log.info("%s unschedulable: %s", item.key, msg)
            self._submit_event(pod, "FailedScheduling", msg, "Warning")
            self._not_scheduled(item, pod, UNSCHEDULABLE, msg)
            return "unschedulable"
        rows, feasible = self._candidates(mask)
        nodes = view.infos(rows)
        requests = view.requests(rows)
        soft = view.soft_scores(req, rows, feasible)  # ScheduleAnyway spread, PreferNoSchedule: terms every policy sees
        names = [n.name for n in nodes]
        resident = self.cache.resident.matrix(names)
        measured = self.decider.measured_at()
        ended = self.cache.resident.ended(names, time.time() if measured is None else measured)
        choice = self.decider.decide(
            req,
            demand.demand,
            nodes,
            feasible,
            rows=rows,
            names=view.names,
            requests=requests,
            soft=soft,
            resident=resident,
            ended=ended,
            link=view.link(rows),
            devices=view.devices(rows),
        )
        node = nodes[choice.index].name
        plan = plan_for(req, view.near().storage, nodes[choice.index]) if req.claims else None
        self.metrics.attempt_latency.observe(time.monotonic() - t0)
        self.cache.assume(
            item.uid, node, req.cpu_m, req.mem_bytes, placed.record_of(req, node), expected=choice.expected
        )
        decided = DecidedPod(item, pod, req, demand.demand, node, nodes, feasible, choice, requests, time.monotonic())
        if plan is not None:  # claims waiting for their first consumer bind first (VolumeBinding PreBind)
            if not isinstance(plan, str):
                self.cache.reserve_volumes({v.name: (c.namespace, c.name) for c, v in plan.static})
            self._volume_pool.submit(self._prebind, plan, nodes[choice.index], decided)
            return "binding"
        if self._pipelined:  # the next pod is decided while this one's bind is written
            self._pool.submit(self._bind, decided)
        else:
            self._bind(decided)
        return "binding"

    def _candidates(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows the policy sees and their feasibility: every node looked at until enough
        feasible ones were found (all nodes in clusters under 100), in table order."""
        n = len(mask)
        k = sampling.nodes_to_score(n, self.cfg.percentage_of_nodes_to_score)
        if k >= n:
            return np.arange(n), mask
        found, processed = sampling.sample_feasible(mask, k, self._next_start)
        start = self._next_start % n
        self._next_start = (start + processed) % n
        rows = np.sort((np.arange(processed) + start) % n)
        feasible = np.zeros(n, dtype=bool)
        feasible[found] = True
        return rows, feasible[rows]

    # -- binding cycle -------------------------------------------------------------
    def _submit_event(self, pod: dict[str, Any], reason: str, message: str, kind: str = "Normal") -> None:
        self._events.submit(self._event, pod, reason, message, kind)

    def _not_scheduled(self, item: QueuedPod, pod: dict[str, Any], reason: str, message: str) -> None:
        """Back the pod off, marked ``PodScheduled=False`` first where its condition says otherwise (the write goes
        to a bind worker, and the pod is retried only once it is made, so it cannot land after a later bind)."""
        patch = not_scheduled_patch(pod, reason, message, time.time())
        if patch is None:
            self.queue.done(item, scheduled=False)
        else:
            self._pool.submit(self._mark_not_scheduled, item, pod, patch)

    def _mark_not_scheduled(self, item: QueuedPod, pod: dict[str, Any], patch: dict[str, Any] | None) -> None:
        """Write the pod's PodScheduled condition (a bind token, as kube-scheduler's client), then back it off.
        A failed write is logged: the pod is retried all the same, and its next failure writes again."""
        from kubernetes.client.rest import ApiException

        try:
            if patch is not None:
                meta = pod.get("metadata") or {}
                self._limits.binds.wait()
                drained(
                    self.core.patch_namespaced_pod_status(
                        meta.get("name", ""), meta.get("namespace", "default"), patch, _preload_content=False
                    )
                )
        except ApiException as exc:
            if exc.status != NOT_FOUND:  # a pod deleted meanwhile needs no condition
                self._status_log.warn("pod-status", "marking %s not scheduled failed: %s", item.key, exc.reason)
        except Exception as exc:  # noqa: BLE001 - a lost connection never stops the pod's retries
            self._status_log.warn("pod-status", "marking %s not scheduled failed: %s", item.key, exc)
        finally:
            self.queue.done(item, scheduled=False)

    def _event(self, pod: dict[str, Any], reason: str, message: str, kind: str) -> None:
        self._limits.events.wait()
        binder.emit_event(self._post, pod, reason, message, self.cfg.scheduler_name, kind)

    def _prebind(self, plan: Plan | str, node: NodeInfo, decided: DecidedPod) -> None:
        """Bind the pod's waiting claims on ``node``, wait for them, then bind the pod; on failure the
        pod gets kube-scheduler's PreBind FailedScheduling message and is retried with backoff."""
        item, pod = decided.item, decided.pod
        reserved = [v.name for _, v in plan.static] if not isinstance(plan, str) else []
        try:
            if not self.is_leader():  # fencing: lost the lease since the decision
                self.cache.forget(item.uid)
                self.queue.requeue_now(item)
                return

            def wanted() -> bool:  # deleted or bound by another scheduler: stop waiting for its claims
                return self.cache.pending_pod(item.uid) is not None

            why = plan if isinstance(plan, str) else self.prebinder.run(plan, node, self._stop, wanted)
        except Exception as exc:  # noqa: BLE001 - one pod's volume binding (connection lost): retried with backoff
            why = f"binding volumes: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        finally:
            self.cache.release_volumes(reserved)
        if why is None:
            self._bind(decided)
            return
        if why == GONE or self._stop.is_set():  # deleted, bound elsewhere, or this scheduler stops
            self.cache.forget(item.uid)
            self.queue.done(item, scheduled=True)
            return
        log.info("%s: volumes on %s: %s", item.key, node.name, why)
        self.metrics.bind_failures.inc()
        self.cache.forget(item.uid)
        msg = failure_message(why)
        self._submit_event(pod, "FailedScheduling", msg, "Warning")
        self._mark_not_scheduled(item, pod, not_scheduled_patch(pod, SCHEDULER_ERROR, msg, time.time()))

    def _bind(self, decided: DecidedPod) -> None:
        item, pod, req, node, choice = decided.item, decided.pod, decided.req, decided.node, decided.choice
        try:
            if not self.is_leader():  # fencing: lost the lease since the decision
                self.cache.forget(item.uid)
                self.queue.requeue_now(item)
                return
            self._limits.binds.wait()
            sent = time.monotonic()
            outcome, detail = binder.bind(self._post, req.namespace, req.name, req.uid, node)
            acked = time.monotonic()
            self.metrics.binds.labels(outcome).inc()
            if outcome == binder.BOUND:
                self.metrics.latency.observe(acked - item.first_seen)
                self._observe_stages(item, decided.decided, sent, acked)
                self.queue.done(item, scheduled=True)
                names = decided.names
                self._submit_event(
                    pod,
                    "Scheduled",
                    self._scheduled_message(req, node, names, choice.scores, choice.policy, choice.reason)
                    + f"; {arm_text(choice, names)}",
                )
                if self.recorder is not None:
                    self.recorder.record(req, decided.demand, node, names)
            elif outcome in (binder.CONFLICT, binder.GONE):
                log.info("%s: bind to %s: %s (%s)", item.key, node, outcome, detail)
                self.cache.forget(item.uid)
                self.queue.done(item, scheduled=True)
            else:
                self.metrics.bind_failures.inc()
                log.warning("%s: bind to %s failed: %s; retrying", item.key, node, detail)
                self.cache.forget(item.uid)
                self.queue.done(item, scheduled=False)
            self._journal(decided, outcome)
        except Exception:
            log.exception("binding %s failed unexpectedly; retrying", item.key)
            self.cache.forget(item.uid)
            self.queue.done(item, scheduled=False)

    def _observe_stages(self, item: QueuedPod, decided: float, sent: float, acked: float) -> None:
        """A bound pod's stage durations (drs_scheduling_stage_seconds); the watch-to-queue and
        whole-path stages only for a pod bound at its first attempt (a retry's include its backoff)."""
        stage = self.metrics.stages.labels
        stage("queue_wait").observe(item.popped - item.queued)
        stage("decide").observe(decided - item.popped)
        stage("bind_handover").observe(sent - decided)
        stage("bind_write").observe(acked - sent)
        if item.attempts == 1:
            stage("watch_to_queue").observe(item.queued - item.received)
            stage("event_to_bind").observe(acked - item.received)

    @staticmethod
    def _scheduled_message(
        req: PodRequest, node: str, names: list[str], scores: np.ndarray, policy: Policy, reason: str | None
    ) -> str:
        ranked = np.argsort(-scores, kind="stable")
        order = ranked[np.isfinite(scores[ranked])][:3].tolist()
        top = ", ".join(f"{names[i]}={scores[i]:.3f}" for i in order)
        how = policy.name + (f" (fallback: {reason})" if reason else "")
        what = "top scores" if reason else "top Q-values"  # the model's scores are its Q-values
        return f"Successfully assigned {req.namespace}/{req.name} to {node} by {how}; {what}: {top}"

    def _journal_write_failed(self, exc: Exception, rows: int) -> None:
        """The journal's writer thread could not store ``rows`` rows (a full disk): count, say so once a minute."""
        self.metrics.journal_failures.inc(rows)
        self._journal_log.warn("journal", "journal append failed (%d rows), binding continues: %s", rows, exc)

    def _journal(self, decided: DecidedPod, outcome: str) -> None:
        """One journal row, built and written by the journal's writer thread: the nodes the pod was filtered and
        scored on, with their requests and allocatable as of that moment (NODE_REQUEST_COLUMNS), so retraining
        rebuilds the model's exact input."""
        if self.journal is None:
            return
        req, demand, node, feasible, requests = (
            decided.req,
            decided.demand,
            decided.node,
            decided.feasible,
            decided.requests,
        )
        choice = decided.choice
        scores, policy, reason = choice.scores, choice.policy, choice.reason
        model_version = (policy.version or None) if reason is None else None
        shadow = choice.shadow

        def row() -> Decision:
            flags = np.asarray(feasible, dtype=bool)
            names = decided.names
            order: slice | np.ndarray = slice(None)  # every candidate feasible (the common case): as they are
            if not flags.all():
                order = np.argsort(~flags, kind="stable")  # feasible first

            def aligned(v: np.ndarray) -> list[float | None]:
                values = np.asarray(v, dtype=np.float64)[order]
                if np.isfinite(values).all():
                    return values.tolist()
                return [x if math.isfinite(x) else None for x in values.tolist()]

            return Decision(
                pod_uid=req.uid,
                pod_name=req.name,
                namespace=req.namespace,
                owner=req.owner,
                pod_features=[float(v) for v in demand],
                demand_source=req.demand_source or None,
                candidates=list(names) if isinstance(order, slice) else [names[i] for i in order.tolist()],
                nodes=node_entries_from_values(np.asarray(requests)[order][:, _JOURNAL_NODE_COLUMNS]),
                pod_cpu_m=int(req.cpu_m),
                pod_mem_bytes=int(req.mem_bytes),
                feasible=flags[order].tolist(),
                chosen=node,
                scores=aligned(scores),
                policy=policy.name,
                model_version=model_version,
                fallback_reason=reason,
                outcome=outcome,
                arm=choice.arm,
                shadow_policy=shadow.shadow_policy if shadow else None,
                shadow_choice=names[shadow.shadow_index] if shadow and shadow.shadow_index >= 0 else None,
                shadow_scores=aligned(shadow.shadow_scores) if shadow else None,
                counterfactual=dict(shadow.counterfactual) if shadow else None,
            )

        try:
            self.journal.append_later(row)
        except Exception as exc:  # noqa: BLE001 - journal boundary: counted, logged once a minute; a full disk must not stop binding
            self.metrics.journal_failures.inc()
            self._journal_log.warn("journal", "journal append failed, binding continues: %s", exc)


def default_identity() -> str:
    """Leader-election identity: the pod name (downward API) plus a random suffix, so a
    restarted container never mistakes its predecessor's Lease for its own."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"
