"""Every policy the scheduler serves is built from its settings: a scheduler configured with
``prometheus.window: 2m`` remembers its own binds for 120 s in the model, in every heuristic it may fall back
to or shadow with, and in a model the store hot-reloads; retraining and the twin build theirs from the same
settings, so what they train and gate on is what serving runs.

Real parts: the shipped model file, a real model store, the Decider the scheduler and the extender share and
the retraining simulator checks; nothing is started (no apiserver or Prometheus is needed to build policies).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from drs_prom.agent import default_model_path, read_metadata
from drs_prom.config import Settings, load_settings
from drs_prom.registry import HEURISTICS, PolicySpec, make_candidate_policy, make_policy
from drs_prom.scheduler.decision.decide import Decider
from drs_prom.scheduler.metrics import SchedulerMetrics
from drs_prom.scheduler.runner import load_policy, model_watcher
from drs_prom.sim.retrain_checks import SimulatorChecks
from drs_prom.sim.scenario import load_scenario
from drs_prom.stores.model_store import MODEL_FILE, ModelStore

TWO_MINUTES = 120.0
REMEMBERING = [n for n in HEURISTICS if n not in ("kube-default", "random", "round-robin")]
"""The heuristics that keep a memory of their own binds (the others ignore the window)."""


@pytest.fixture(params=["environment", "config file"])
def settings(request, monkeypatch, tmp_path: Path) -> Settings:
    """``prometheus.window: 2m`` as an operator sets it: DRS_PROM_PROMETHEUS_WINDOW or the settings file."""
    store = tmp_path / "store"
    if request.param == "environment":
        monkeypatch.setenv("DRS_PROM_PROMETHEUS_WINDOW", "2m")
        monkeypatch.setenv("DRS_PROM_RETRAIN_MODEL_STORE", str(store))
        return load_settings(None)
    path = tmp_path / "config.yaml"
    path.write_text(f"prometheus:\n  window: 2m\nretrain:\n  model_store: {store}\n")
    return load_settings(path)


def test_a_scheduler_with_a_two_minute_window_builds_every_policy_with_120_s(settings: Settings) -> None:
    assert settings.prometheus.window_seconds == TWO_MINUTES
    model = load_policy(settings)  # what `drs-prom run` and `drs-prom extender` serve
    assert model is not None and model.name == "drs"
    assert model.metric_window_seconds == TWO_MINUTES
    decider = Decider.from_settings(settings, SchedulerMetrics(), policy=model)
    for name in REMEMBERING:  # any of them may be the fallback or the shadow/canary heuristic arm
        assert decider.named(name).metric_window_seconds == TWO_MINUTES, name
    for reason in ("no_model", "model_error", "guardrail"):
        assert decider.fallback(reason).metric_window_seconds == TWO_MINUTES, reason


def test_a_model_the_store_promotes_is_hot_loaded_with_the_configured_window(settings: Settings) -> None:
    store = ModelStore(settings.retrain.model_store, settings.retrain.keep_versions)

    def save(d: Path) -> None:
        shutil.copy(default_model_path(), d / MODEL_FILE)
        shutil.copy(default_model_path().with_suffix(".json"), d / "model.json")

    version = store.add(save).name
    store.promote(version)
    watcher = model_watcher(settings)
    assert watcher.reload_if_changed()
    assert watcher.model.version == version and watcher.model.metric_window_seconds == TWO_MINUTES


def test_serving_and_retraining_build_the_same_policy_settings(settings: Settings) -> None:
    serving = PolicySpec.from_settings(settings)
    checks = SimulatorChecks(settings)  # retraining's simulator run (the gate's scenario lags 1 s)
    # the twin's scenario carries the configured window as its metric lag (drs_prom.sim.twin)
    twin_like = load_scenario(settings.retrain.sim_scenario).with_changes(
        metric_window_seconds=settings.prometheus.window_seconds
    )
    twin = SimulatorChecks(settings, twin_like)
    assert checks.spec == serving and twin.spec == serving
    shipped = load_policy(settings)
    head = read_metadata(default_model_path()).get("head")  # the shipped model's head (heuristic-guided)
    # what the twin's gate runs for a candidate: the served network's layers (``inner``: the network behind drs's
    # whole-node reserve), behind the same reserve
    candidate = make_candidate_policy(shipped.inner.layers, head, twin.spec)
    teacher = make_policy(settings.retrain.twin_teacher, twin.spec)  # the twin's DQfD teacher
    for policy in (shipped, candidate, teacher):
        assert policy.metric_window_seconds == TWO_MINUTES, policy.name
    assert candidate.reads_unclipped_load == shipped.reads_unclipped_load
