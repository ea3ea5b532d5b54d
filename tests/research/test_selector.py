"""The heuristic-selector head (drs_prom_research.selector) and its training (drs_prom_research.selector_run)."""

import json
import math

import numpy as np
import pytest

from drs_prom.agent import load_policy
from drs_prom.agent.cluster_context import CLUSTER_FEATURES
from drs_prom.agent.persistence import read_metadata
from drs_prom.errors import ModelError
from drs_prom.policies.contract import choose
from drs_prom.sim.env import fit_to_scenario, unclipped_env
from drs_prom.sim.generator import training_scenario
from drs_prom_research.selector import ARMS, DEFAULT_ARM, HeuristicSelector
from drs_prom_research.selector_run import SelectorConfig, label_cluster, log_ratios, run_selector_training
from tests.specs import WINDOW


def _net(bias: np.ndarray) -> list:
    """A network that ignores its input and predicts ``bias`` (one log ratio per arm)."""
    n_in = len(CLUSTER_FEATURES)
    return [
        (np.zeros((n_in, 4), np.float32), np.zeros(4, np.float32), "relu"),
        (np.zeros((4, len(bias)), np.float32), np.asarray(bias, np.float32), "linear"),
    ]


def _episode(policy, seed=5):
    sc = training_scenario(seed)
    return unclipped_env(sc, seed).run(fit_to_scenario(policy, sc), seed=seed)


def test_a_selector_that_predicts_no_gain_is_exactly_its_default_arm():
    zero = _net(np.zeros(len(ARMS)))
    mine = _episode(HeuristicSelector(zero, margin=0.0, metric_window_seconds=WINDOW))
    ref = _episode(ARMS[DEFAULT_ARM](5, WINDOW))
    assert mine.composite == ref.composite and mine.decisions == ref.decisions


def test_a_selector_follows_the_arm_it_predicts_best_beyond_the_margin():
    arms = tuple(ARMS)
    bias = np.zeros(len(arms))
    bias[arms.index("kube-default")] = -0.5  # predicted 40 % lower composite than the default arm
    sel = HeuristicSelector(_net(bias), arms, margin=0.1, seed=5, metric_window_seconds=WINDOW)
    assert _episode(sel).composite == _episode(ARMS["kube-default"](5, WINDOW)).composite
    assert sel.last_arm == "kube-default"
    shy = HeuristicSelector(
        _net(bias), arms, margin=1.0, seed=5, metric_window_seconds=WINDOW
    )  # the gain is below the margin: stay on the default
    assert _episode(shy).composite == _episode(ARMS[DEFAULT_ARM](5, WINDOW)).composite


def test_every_arm_is_told_every_bind():
    arms = tuple(ARMS)
    bias = np.zeros(len(arms))
    bias[arms.index("least-loaded")] = -1.0
    sel = HeuristicSelector(_net(bias), arms, margin=0.0, metric_window_seconds=WINDOW)
    sc = training_scenario(8)
    env = unclipped_env(sc, 8)
    fit_to_scenario(sel, sc)
    ctx = env.reset(8)
    for _ in range(5):
        node, _ = choose(sel, ctx)
        ctx, _, _ = env.step(node)
    default = sel.arms[arms.index(DEFAULT_ARM)]
    assert default.recent.pending(ctx).sum() > 0  # the default arm remembers binds least-loaded made


def test_labels_are_each_arms_paired_episode_score():
    lab = label_cluster(4, decisions=3)
    assert lab.features.shape == (3, len(CLUSTER_FEATURES))
    y = log_ratios(lab, tuple(ARMS))
    assert np.allclose(y[:, list(ARMS).index(DEFAULT_ARM)], 0.0)
    ref = _episode(ARMS["kube-default"](4, WINDOW), seed=4).composite
    assert lab.composite[0, list(ARMS).index("kube-default")] == pytest.approx(ref)


def test_tiny_selector_training_saves_a_model_that_loads_and_schedules(tmp_path):
    out = tmp_path / "sel.keras"
    path = run_selector_training(
        out,
        clusters=4,
        decisions=3,
        selection_clusters=2,
        cfg=SelectorConfig(members=2, hidden=(4,), epochs=2, checkpoints=(2,)),
        workers=1,
        progress=False,
        command="drs-prom-research train-selector (test)",
        echo=lambda _: None,
    )
    meta = read_metadata(path)
    assert meta["head"]["kind"] == "heuristic-selector" and meta["head"]["arms"] == list(ARMS)
    assert meta["training"]["selection"]["ratio_to_default_arm"] <= 1.0
    assert "evaluation" in meta["data"]["never_used"]
    assert path.with_suffix(".png").stat().st_size > 0
    pol = load_policy(path, WINDOW)
    assert isinstance(pol, HeuristicSelector) and pol.normalisation is None
    assert _episode(pol, seed=6).decisions > 0
    if meta["head"]["margin"] is None:
        assert math.isinf(pol.margin)
    meta["head"]["features"] = ["something", "else"]
    path.with_suffix(".json").write_text(json.dumps(meta))
    with pytest.raises(ModelError, match="invalid head") as err:
        read_metadata(path)
    assert "\n" not in str(err.value)
