"""The top-k correction head (drs_prom_research.corrector) and its rollout labels (drs_prom_research.playout_targets)."""

import copy
import json

import numpy as np
import pytest

from drs_prom.agent import load_policy
from drs_prom.agent.model_inputs import N_CANDIDATE
from drs_prom.agent.numpy_policy import forward
from drs_prom.agent.persistence import read_metadata
from drs_prom.errors import ModelError
from drs_prom.policies.contract import choose
from drs_prom.policies.load_aware import CapacityBalancedOverload
from drs_prom.sim.env import fit_to_scenario, unclipped_env
from drs_prom.sim.generator import training_scenario
from drs_prom_research.clairvoyant import fork_env, play_out
from drs_prom_research.corrector import TopKCorrection, block_ensemble, pick, top_k
from drs_prom_research.playout_targets import label_episode
from tests.specs import WINDOW


def _net(rng, hidden=8, n_in=N_CANDIDATE):
    return [
        (rng.normal(size=(n_in, hidden)).astype(np.float32), rng.normal(size=hidden).astype(np.float32), "relu"),
        (rng.normal(size=(hidden, hidden)).astype(np.float32), rng.normal(size=hidden).astype(np.float32), "relu"),
        (rng.normal(size=(hidden, 1)).astype(np.float32), rng.normal(size=1).astype(np.float32), "linear"),
    ]


def test_block_ensemble_is_exactly_the_members_mean():
    rng = np.random.default_rng(0)
    members = [_net(rng) for _ in range(3)]
    x = rng.normal(size=(7, N_CANDIDATE)).astype(np.float32)
    mean = np.mean([forward(m, x) for m in members], axis=0)
    merged = block_ensemble(members)
    assert [k.shape for k, _, _ in merged] == [(N_CANDIDATE, 24), (24, 24), (24, 1)]
    np.testing.assert_allclose(forward(merged, x), mean, rtol=1e-5, atol=1e-5)


def test_top_k_ranks_feasible_nodes_only_with_ties_to_the_lowest_index():
    scores = np.array([3.0, 5.0, 5.0, np.nan, 9.0, 1.0])
    feasible = np.array([True, True, True, True, False, True])
    assert top_k(scores, feasible, 3).tolist() == [1, 2, 0]
    assert top_k(scores, feasible, 10).tolist() == [1, 2, 0, 5, 3]  # NaN last, infeasible never
    assert top_k(scores, np.zeros(6, bool), 3).tolist() == []


def test_pick_leaves_the_heuristic_only_beyond_the_margin():
    assert pick(np.array([0.0, 0.4, 0.2]), 0.5) == 0
    assert pick(np.array([0.0, 0.6, 0.2]), 0.5) == 1
    assert pick(np.array([1.0, 0.6, 0.2]), 0.0) == 0
    assert pick(np.array([0.0, 9.0]), float("inf")) == 0


def test_infinite_margin_schedules_exactly_like_the_base_heuristic():
    sc = training_scenario(42)
    net = _net(np.random.default_rng(1))
    ref = unclipped_env(sc, 42)
    base = fit_to_scenario(CapacityBalancedOverload(42, WINDOW), sc)
    mine = fit_to_scenario(TopKCorrection(net, margin=float("inf"), metric_window_seconds=WINDOW), sc)
    env_b = unclipped_env(sc, 42)
    ctx_a, ctx_b = ref.reset(42), env_b.reset(42)
    while ctx_a is not None:
        a, _ = choose(base, ctx_a)
        b, _ = choose(mine, ctx_b)
        assert a == b
        ctx_a, _, _ = ref.step(a)
        ctx_b, _, _ = env_b.step(b)


def test_a_correction_only_ever_binds_one_of_the_top_k_feasible_nodes():
    sc = training_scenario(7)
    env = unclipped_env(sc, 7)
    pol = fit_to_scenario(
        TopKCorrection(_net(np.random.default_rng(2)), k=2, margin=0.0, metric_window_seconds=WINDOW), sc
    )
    shadow = fit_to_scenario(CapacityBalancedOverload(7, WINDOW), sc)
    ctx, moved = env.reset(7), 0
    while ctx is not None:
        allowed = top_k(shadow.node_scores(ctx), ctx.feasible, 2)
        node, _ = choose(pol, ctx)
        assert node in allowed and ctx.feasible[node]
        moved += int(node != allowed[0])
        shadow.recent.record(ctx, node)  # the shadow heuristic sees the binds actually made
        ctx, _, _ = env.step(node)
    assert moved > 0  # a random network does disagree with the heuristic somewhere


def test_rollout_labels_are_the_episode_costs_of_each_candidate():
    sc = training_scenario(11)
    samples = label_episode(sc, 11, "capacity-balanced-overload", 3, decisions=4)
    assert len(samples) >= 2
    assert np.isfinite(samples.cost[samples.mask]).all()
    # Re-derive one label by hand: replay the heuristic to that decision, fork, bind the candidate, play out.
    d = int(samples.decision[-1])
    env = unclipped_env(sc, 11)
    pol = fit_to_scenario(CapacityBalancedOverload(11, WINDOW), sc)
    ctx = env.reset(11)
    for _ in range(d):
        ctx, _, _ = env.step(choose(pol, ctx)[0])
    top = top_k(pol.node_scores(ctx), ctx.feasible, 3)
    for j in range(int(samples.mask[-1].sum())):
        fork = fork_env(env)
        fork.step(int(top[j]))
        branch = copy.deepcopy(pol)
        branch.recent.record(ctx, int(top[j]))
        assert play_out(fork, branch)[0] == pytest.approx(samples.cost[-1, j], rel=1e-12)


def test_tiny_rollout_training_run_saves_a_model_that_loads_as_a_correction(tmp_path):
    from drs_prom_research.correction_fit import FitConfig
    from drs_prom_research.correction_run import run_rollout_training

    out = tmp_path / "tiny.keras"
    lines: list[str] = []
    path = run_rollout_training(
        out,
        clusters=3,
        decisions=3,
        selection_clusters=2,
        cfg=FitConfig(members=2, hidden=(8, 8), epochs=2, checkpoints=(2,)),
        workers=1,
        progress=False,
        command="drs-prom-research train-correction (test)",
        echo=lines.append,
    )
    meta = read_metadata(path)
    assert meta["head"]["kind"] == "top-k-correction" and meta["head"]["k"] == 3
    assert meta["training"]["labelled_decisions"] > 0
    assert "never_used" in meta["data"] and "evaluation" in meta["data"]["never_used"]
    assert path.with_suffix(".png").stat().st_size > 0
    pol = load_policy(path, WINDOW)
    assert isinstance(pol, TopKCorrection) and pol.normalisation is None
    res = unclipped_env(training_scenario(3), 3).run(fit_to_scenario(pol, training_scenario(3)), seed=3)
    assert res.decisions > 0
    # selection never ships something worse than the base on its own held-out clusters
    assert meta["training"]["selection"]["ratio_to_base"] <= 1.0


def test_a_bad_head_section_is_refused_in_one_line(tmp_path):
    from drs_prom_research.correction_fit import FitConfig
    from drs_prom_research.correction_run import run_rollout_training

    path = run_rollout_training(
        tmp_path / "m.keras",
        clusters=2,
        decisions=2,
        selection_clusters=1,
        cfg=FitConfig(members=1, hidden=(4, 4), epochs=1, checkpoints=(1,)),
        workers=1,
        progress=False,
        echo=lambda _: None,
    )
    meta = json.loads(path.with_suffix(".json").read_text())
    meta["head"]["base"] = "no-such-heuristic"
    path.with_suffix(".json").write_text(json.dumps(meta))
    with pytest.raises(ModelError, match="invalid head") as err:
        read_metadata(path)
    assert "\n" not in str(err.value)
