"""The APScheduler wrapper around ``retrain.retrain_run.run_once``: when to run, and never more than one at a time.

Runs beside the scheduler (``RetrainJob(...).start()`` in its process: a
BackgroundScheduler thread) or on its own (``drs-prom retrain``). ``max_instances=1``
plus ``coalesce=True`` mean a slow run makes the next trigger wait, never overlap, and
a backlog of missed triggers collapses into one run. Nothing escapes ``fire``: a
crash or a Prometheus outage during retraining is a counted, logged outcome and the
scheduler keeps binding pods with the model it has.

``build_run`` wires the production run: Prometheus, journal and model store from the settings, the usage model's
refit on the stored series (drs_prom.ops.usage_refit, ``usage.refit``), and the simulator checks
(drs_prom.sim.retrain_checks) when the gate or replay asks for them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED, JobEvent
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger
from prometheus_client import CollectorRegistry

from drs_prom.config import RetrainSettings, Settings
from drs_prom.errors import ConfigError
from drs_prom.ops.usage_refit import UsageRefitMetrics, refit_usage
from drs_prom.retrain.outcome import RetrainMetrics, RetrainResult
from drs_prom.retrain.retrain_run import run_once
from drs_prom.signals.prometheus import PrometheusSource
from drs_prom.sim.retrain_checks import SimulatorChecks
from drs_prom.stores.journal import Journal
from drs_prom.stores.model_store import ModelStore

log = logging.getLogger(__name__)


def make_trigger(rs: RetrainSettings) -> BaseTrigger:
    """Cron trigger when ``retrain.cron`` is set, else an interval trigger."""
    if rs.cron:
        try:
            return CronTrigger.from_crontab(rs.cron, timezone="UTC")
        except ValueError as exc:
            raise ConfigError(f"invalid retrain.cron {rs.cron!r}: {exc}") from None
    return IntervalTrigger(seconds=rs.interval_seconds, timezone="UTC")


class RetrainJob:
    """A BackgroundScheduler with one job that calls ``run()`` and contains every failure.

    It sees only the ``retrain`` section (when and how often); ``run`` is the whole run,
    ``build_run(settings)`` in production, a test's own callable in tests. ``fired``/``completed``/``failed``/``missed``
    count what happened (``missed``: a trigger found the previous run still going).
    """

    JOB_ID = "drs-retrain"

    def __init__(
        self,
        retrain: RetrainSettings,
        run: Callable[[], object],
        *,
        registry: CollectorRegistry | None = None,
        trigger: BaseTrigger | None = None,
    ) -> None:
        self.retrain = retrain
        self.run = run
        self.registry = registry
        self.trigger = trigger if trigger is not None else make_trigger(retrain)
        self.fired = 0
        self.completed = 0
        self.failed = 0
        self.missed = 0
        self.running = 0
        self.max_running = 0
        self.last_result: object = None
        self._lock = threading.Lock()
        self._scheduler: BackgroundScheduler | None = None

    def fire(self) -> object:
        """One run; returns its result, or None after an exception (logged and counted)."""
        with self._lock:
            self.fired += 1
            self.running += 1
            self.max_running = max(self.max_running, self.running)
        try:
            result = self.run()
            self.last_result = result
            with self._lock:
                self.completed += 1
            return result
        except BaseException as exc:
            with self._lock:
                self.failed += 1
            log.error(
                "retraining run failed: %s: %s", type(exc).__name__, exc, exc_info=log.isEnabledFor(logging.DEBUG)
            )
            try:
                RetrainMetrics.get(self.registry).runs.labels("error").inc()
            except ValueError as metrics_exc:  # the registry already holds these names from elsewhere
                log.warning("retraining error not counted: %s", metrics_exc)
            return None
        finally:
            with self._lock:
                self.running -= 1

    def start(self) -> RetrainJob:
        sched = BackgroundScheduler(timezone="UTC", job_defaults={"max_instances": 1, "coalesce": True})
        sched.add_job(
            self.fire,
            self.trigger,
            id=self.JOB_ID,
            name="drs-prom retrain",
            max_instances=1,
            coalesce=True,
            misfire_grace_time=int(max(1, self.retrain.misfire_grace_seconds)),
            replace_existing=True,
        )
        sched.add_listener(self._on_missed, EVENT_JOB_MAX_INSTANCES | EVENT_JOB_MISSED)
        sched.start()
        self._scheduler = sched
        log.info("retraining scheduled: %s", self.trigger)
        return self

    def _on_missed(self, event: JobEvent) -> None:
        with self._lock:
            self.missed += 1

    def run_now(self) -> None:
        """Move the next trigger to now (the standalone process runs once as it starts)."""
        if self._scheduler is not None:
            self._scheduler.modify_job(self.JOB_ID, next_run_time=_utcnow())

    def next_run_time(self) -> datetime | None:
        job = self._scheduler.get_job(self.JOB_ID) if self._scheduler else None
        return job.next_run_time if job else None

    def shutdown(self, wait: bool = True) -> None:
        """Stop triggering; with ``wait`` the run in progress finishes first."""
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=wait)
            self._scheduler = None


def build_run(settings: Settings, registry: CollectorRegistry | None = None) -> Callable[[], RetrainResult]:
    """The production ``run`` callable: Prometheus source, journal and store from settings.

    Everything is opened per run, so a Prometheus restart or a moved journal between
    runs needs no restart of the job.
    """

    rs = settings.retrain
    simulator = SimulatorChecks(settings) if rs.sim_benchmark_pods or rs.sim_replay_episodes or rs.twin else None
    usage_metrics = UsageRefitMetrics(registry) if settings.usage.refit else None

    def run() -> RetrainResult:
        source = PrometheusSource(settings.prometheus)
        journal = Journal(settings.scheduler.journal_path)
        try:
            if usage_metrics is not None:  # the usage model first: it needs no more than the stored series
                refit_usage(settings, source, journal, metrics=usage_metrics)
            return run_once(
                settings,
                source,
                journal,
                ModelStore(settings.retrain.model_store, settings.retrain.keep_versions),
                registry=registry,
                simulator=simulator,
            )
        finally:
            journal.close()
            source.close()

    return run


def run_forever(
    settings: Settings,
    registry: CollectorRegistry | None = None,
    stop: threading.Event | None = None,
    first_now: bool = True,
) -> None:
    """The standalone process: schedule runs until ``stop`` is set (SIGTERM/SIGINT in the CLI)."""
    stop = stop or threading.Event()
    job = RetrainJob(settings.retrain, build_run(settings, registry), registry=registry)
    job.start()
    if first_now:
        job.run_now()
    try:
        while not stop.wait(1.0):
            pass
    finally:
        job.shutdown(wait=True)


def _utcnow() -> datetime:
    return datetime.fromtimestamp(time.time(), tz=UTC)


def start_in_process(settings: Settings, registry: CollectorRegistry | None = None) -> RetrainJob | None:
    """For the scheduler: start the job when ``retrain.enabled``; call ``.shutdown()`` on exit.

    The job runs in its own thread and opens its own Prometheus client and journal
    connection per run, so a slow or failing run never blocks a scheduling cycle.
    """
    if not settings.retrain.enabled:
        return None
    return RetrainJob(settings.retrain, build_run(settings, registry), registry=registry).start()
