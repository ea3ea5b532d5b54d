"""The training loop end to end on the real simulator, with budgets of seconds."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from drs_prom.agent import load_policy
from drs_prom.sim.env import SchedulingEnv
from drs_prom.sim.scenario import load_scenario
from drs_prom.training.episodes import TrainConfig, train
from drs_prom.training.train_run import save_result, scenario_env_factory
from tests.specs import WINDOW

TINY = load_scenario("drs-paper").truncated(25)


def test_tiny_drs_training_saves_a_model_that_schedules(tmp_path):
    make, norm = scenario_env_factory(TINY)
    cfg = TrainConfig(
        episodes=3,
        learning_starts=20,
        batch=16,
        eval_every=2,
        eval_seeds=1,
        imitate="balanced-load",
        imitate_episodes=1,
        imitate_steps=20,
        hidden=(16,),
    )
    result = train(make, cfg, progress=False)
    assert result.steps == 3 * 25 and len(result.returns) == 3 and result.n_nodes == 4
    assert result.notes["imitation"]["decisions"] == 25
    assert "selected" in result.notes
    path = save_result(result, cfg, tmp_path / "tiny.keras", norm, command="test")
    assert path.with_suffix(".png").stat().st_size > 1000
    meta = json.loads(path.with_suffix(".json").read_text())
    assert meta["training"]["steps"] == 75 and meta["training"]["config"]["reward"]["imbalance_mode"] == "delta"
    policy = load_policy(path, WINDOW)
    res = SchedulingEnv(TINY, seed=7).run(policy)
    assert res.decisions == 25 and policy.name == "drs"


def test_training_is_reproducible_for_a_seed():
    make, _ = scenario_env_factory(TINY)
    cfg = TrainConfig(episodes=2, learning_starts=10, batch=8, eval_every=0, hidden=(8,), seed=3)
    a = train(make, cfg, progress=False)
    b = train(make, cfg, progress=False)
    assert a.returns == b.returns
    for wa, wb in zip(a.model.get_weights(), b.model.get_weights()):
        np.testing.assert_array_equal(wa, wb)


def test_tiny_drs_original_training(tmp_path):
    make, norm = scenario_env_factory(load_scenario("drs-paper").truncated(60))
    cfg = TrainConfig(policy="drs-original", episodes=2)
    result = train(make, cfg, progress=False)
    assert result.steps == 120 and result.notes["drs_config"]["replay"] == 100
    path = save_result(result, cfg, tmp_path / "orig.keras", norm)
    policy = load_policy(path, WINDOW)
    assert policy.name == "drs-original" and policy.n_nodes == 4
    assert SchedulingEnv(TINY, seed=1).run(policy).decisions == 25


def _cli(*args, cwd):
    exe = Path(sys.executable).with_name("drs-prom")
    return subprocess.run(
        [str(exe), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )


def test_train_command_writes_model_json_and_curve(tmp_path):
    out = tmp_path / "m" / "cli.keras"
    r = _cli("train", "--episodes", "1", "--out", str(out), "--bench-seeds", "1", "--no-progress", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert out.exists() and out.with_suffix(".png").exists()
    meta = json.loads(out.with_suffix(".json").read_text())
    assert meta["training"]["command"].startswith("drs-prom train --episodes 1")
    assert "kube-default" in meta["benchmark"]["drs-paper"]["policies"]
    assert "imbalance" in r.stdout


def test_train_command_bad_flag_is_one_line(tmp_path):
    r = _cli("train", "--out", "model.h5", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "must end in .keras" in r.stderr


def test_mixed_scenarios_alternate_by_episode_seed():
    make, norm = scenario_env_factory("drs-paper,drs-paper-lag")
    assert make(0).scenario.name == "drs-paper" and make(1).scenario.name == "drs-paper-lag"
    assert norm == load_scenario("drs-paper").norm
