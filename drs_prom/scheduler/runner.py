"""Wiring for the two long-running commands: ``drs-prom run`` and ``drs-prom extender``.

The CLI only parses flags and calls ``run_scheduler``/``run_extender``; everything that
builds clients, sources and policies is here so tests can call it in-process.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from drs_prom.config import Settings
from drs_prom.errors import ConfigError, ModelError
from drs_prom.scheduler.gc_pauses import freeze_startup_heap
from drs_prom.types import KubeClient

if TYPE_CHECKING:  # built on demand: a command imports only what it runs
    from prometheus_client import CollectorRegistry

    from drs_prom.policies.contract import Policy
    from drs_prom.scheduler.decision.decide import Decider
    from drs_prom.scheduler.decision.pod_demand import DemandResolver
    from drs_prom.scheduler.http.extender import ExtenderServer
    from drs_prom.scheduler.loop import Scheduler
    from drs_prom.scheduler.watch.cache import ClusterCache
    from drs_prom.signals.prometheus import PrometheusSource
    from drs_prom.stores.model_store import ModelWatcher

log = logging.getLogger(__name__)

LOAD: Literal["load"] = "load"
"""``policy`` of the builders below: the configured model, or the version promoted in the model store."""


def api_client(kubeconfig: str | None) -> KubeClient:
    """Client from ``kubeconfig``, else in-cluster config, else ~/.kube/config; ConfigError if none."""
    from kubernetes import client, config

    try:
        if kubeconfig:
            return config.new_client_from_config(config_file=kubeconfig)
        try:
            config.load_incluster_config()
            return client.ApiClient()
        except config.ConfigException:
            return config.new_client_from_config()
    except (config.ConfigException, OSError, TypeError) as exc:
        raise ConfigError(
            f"no usable Kubernetes credentials ({str(exc).splitlines()[0] if str(exc) else exc})"
        ) from None


def load_policy(settings: Settings) -> Policy | None:
    """The configured model as a Policy, built from the settings like every policy (drs_prom.registry),
    or None (logged) so the scheduler runs on its fallback."""
    from drs_prom.registry import PolicySpec, make_policy

    try:
        return make_policy("drs", PolicySpec.from_settings(settings))
    except ModelError as exc:
        log.warning("no valid model (%s); scheduling with the %s fallback", exc, settings.scheduler.fallback)
        return None


def model_watcher(settings: Settings) -> ModelWatcher:
    """Hot reload from the retraining model store: a promoted version replaces the running model."""
    from drs_prom.registry import PolicySpec, stored_model_loader
    from drs_prom.stores.model_store import ModelStore, ModelWatcher

    store = ModelStore(settings.retrain.model_store, settings.retrain.keep_versions)
    return ModelWatcher(store, stored_model_loader(PolicySpec.from_settings(settings)))


def prometheus_source(settings: Settings, node_names: Callable[[], list[str]] | None = None) -> PrometheusSource:
    from drs_prom.signals.prometheus import PrometheusSource

    return PrometheusSource(settings.prometheus, expected_nodes=node_names)


def pod_demands(settings: Settings, registry: CollectorRegistry) -> DemandResolver:
    """Each pending pod's expected load: its annotations, else the estimate from the stored usage of its owner's
    pods, read from Prometheus by a history with a client of its own (``usage.history``; not started here)."""
    from drs_prom.ops.usage_refit import usage_model_source
    from drs_prom.scheduler.decision.pod_demand import DemandResolver
    from drs_prom.signals.pod_usage import PrometheusUsageHistory
    from drs_prom.signals.prometheus import PrometheusSource

    history = None
    if settings.usage.history:
        history = PrometheusUsageHistory(PrometheusSource(settings.prometheus), settings.usage, registry=registry)
    return DemandResolver(settings.usage, history, registry=registry, model=usage_model_source(settings))


# CPython hands the GIL over only every 5 ms by default when a thread keeps computing: a pod's watch
# event, its decision and its bind each wake a different thread, and any of them could wait behind
# the journal writer building rows, the node-state refresh or a bind worker for up to that long.
# A serving process of short hand-offs wants it near kube-scheduler's median (a few ms) / 5.
GIL_SWITCH_INTERVAL_S = 0.0005


def _serving_process() -> None:
    """Process-wide settings of ``drs-prom run`` and ``drs-prom extender`` (not of tests that embed them)."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    log.debug("%d start-up objects frozen out of garbage collection", freeze_startup_heap())


def _wait_for_signal() -> None:
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(1.0):
        pass


def build_scheduler(
    settings: Settings, kubeconfig: str | None = None, policy: Policy | Literal["load"] | None = LOAD, **kw: Any
) -> Scheduler:
    from drs_prom.scheduler.loop import Scheduler, default_identity
    from drs_prom.scheduler.metrics import SchedulerMetrics
    from drs_prom.stores.journal import open_journal

    client = api_client(kubeconfig)
    watcher = model_watcher(settings)
    chosen: Policy | None
    if policy == LOAD:
        # a version promoted in the model store wins over the configured file
        chosen = watcher.model if watcher.reload_if_changed() else load_policy(settings)

        def model_loader() -> Policy | None:
            watcher.reload_if_changed()
            return watcher.model

        kw.setdefault("model_loader", model_loader)  # an explicitly given policy is never hot-swapped
    else:
        chosen = policy
    journal = open_journal(settings.scheduler.journal_path) if settings.scheduler.journal_path else None
    holder: dict[str, Any] = {}
    source = prometheus_source(settings, lambda: list(holder["s"].cache.nodes))
    metrics = kw.pop("metrics", None) or SchedulerMetrics()
    kw.setdefault("demands", pod_demands(settings, metrics.registry))
    kw.setdefault("identity", default_identity())
    sched = Scheduler(settings, client, source=source, policy=chosen, journal=journal, metrics=metrics, **kw)
    holder["s"] = sched
    return sched


def run_scheduler(
    settings: Settings, kubeconfig: str | None = None, policy: Policy | Literal["load"] | None = LOAD
) -> None:
    """``policy``: "load" = the configured/promoted model; else a Policy object that decides instead
    (``drs-prom run --policy NAME``: a heuristic, as the testbed compares them on the live loop)."""
    sched = build_scheduler(settings, kubeconfig, policy=policy)
    _serving_process()
    sched.start()
    log.info(
        "drs-scheduler %s watching pods for schedulerName=%s; metrics on %s",
        sched.identity,
        settings.scheduler.scheduler_name,
        settings.scheduler.metrics_listen,
    )
    try:
        _wait_for_signal()
    finally:
        sched.stop()


def build_extender(
    settings: Settings,
    listen: str,
    kubeconfig: str | None = None,
    use_cache: bool = True,
    policy: Policy | Literal["load"] | None = LOAD,
) -> tuple[ExtenderServer, Decider, ClusterCache | None]:
    """The extender's server, its decider and its watch cache (None without one), not started."""
    from drs_prom.scheduler.decision.decide import Decider
    from drs_prom.scheduler.http.extender import Extender, ExtenderServer
    from drs_prom.scheduler.metrics import SchedulerMetrics
    from drs_prom.scheduler.watch.cache import ClusterCache

    cache = None
    kube_api = api_client(kubeconfig) if (use_cache or settings.serving.authenticate_metrics) else None
    if use_cache:
        from kubernetes import client as kclient

        cache = ClusterCache(scheduler_name="\0none")  # pods of any scheduler count for requests; none queued
        cache.start(kclient.CoreV1Api(kube_api))
    chosen = load_policy(settings) if policy == LOAD else policy
    source = prometheus_source(settings, (lambda: list(cache.nodes)) if cache else None)
    decider = Decider.from_settings(settings, SchedulerMetrics(), source=source, policy=chosen)
    extender = Extender(decider, cache, pod_demands(settings, decider.metrics.registry))
    server = ExtenderServer(extender, listen, settings.serving, kube_api)
    return server, decider, cache


def run_extender(settings: Settings, listen: str, kubeconfig: str | None = None, use_cache: bool = True) -> None:
    server, decider, cache = build_extender(settings, listen, kubeconfig, use_cache)
    _serving_process()
    decider.start()
    server.extender.demands.start()
    server.start()
    log.info("drs-prom extender listening on %s", listen)
    try:
        _wait_for_signal()
    finally:
        server.stop()
        server.extender.demands.stop()
        decider.stop()
        if cache is not None:
            cache.stop()
