"""The heuristic-guided ``drs`` (drs_prom.agent.guided): its inputs, its choice and its model file."""

import dataclasses
import json

import numpy as np
import pytest

from drs_prom.agent import load_policy
from drs_prom.agent.cluster_context import CLUSTER_FEATURES, ArrivalTrend, ClusterFeatures, decision_features
from drs_prom.agent.guided import (
    FIELD_GUIDES,
    GAP_CLIP,
    GUIDED_COLUMNS,
    GUIDES,
    N_GUIDED,
    RESIDENT_TEACHER,
    ROOM_TEACHER,
    GuidedPolicy,
    GuideScores,
    guided_columns,
    score_gaps,
)
from drs_prom.errors import ModelError
from drs_prom.policies.load_aware import CapacityBalancedOverload
from drs_prom.policies.room_keeping import slot_take
from drs_prom.sim.env import fit_to_scenario, unclipped_env
from drs_prom.sim.generator import training_scenario
from drs_prom.training.guided_run import GuidedFit, save_guided
from tests.specs import WINDOW


def _follow(column: str) -> list:
    """A network that scores each node by one input column only (gap columns are in [-GAP_CLIP, 0])."""
    k0 = np.zeros((N_GUIDED, 1), np.float32)
    k0[GUIDED_COLUMNS.index(column), 0] = 1.0
    return [
        (k0, np.array([GAP_CLIP], np.float32), "relu"),
        (np.ones((1, 1), np.float32), np.zeros(1, np.float32), "linear"),
    ]


def _episode(policy, seed=7):
    sc = training_scenario(seed)
    return unclipped_env(sc, seed).run(fit_to_scenario(policy, sc), seed=seed)


def test_score_gaps_are_scale_free_and_mask_infeasible_nodes():
    feasible = np.array([True, True, True, False])
    gap, first = score_gaps(np.array([1.0, 3.0, 2.0, 9.0]), feasible)
    gap100, _ = score_gaps(np.array([100.0, 300.0, 200.0, 900.0]), feasible)
    assert np.allclose(gap, gap100)
    assert first.tolist() == [0.0, 1.0, 0.0, 0.0]  # the infeasible 9.0 is nobody's first choice
    assert gap[1] == 0.0 and gap[3] == -GAP_CLIP and gap.min() >= -GAP_CLIP
    no_metrics, _ = score_gaps(np.array([-1e9, 0.0]), np.array([True, True]))
    assert no_metrics[0] == -GAP_CLIP


def test_rows_are_finite_and_named_even_without_metrics():
    sc = training_scenario(3)
    ctx = unclipped_env(sc, 3).reset(3)
    rows, raw = GuideScores(WINDOW).rows(ctx)
    assert rows.shape == (len(ctx.nodes), N_GUIDED) and np.isfinite(rows).all()
    assert raw.shape == (len(GUIDES), len(ctx.nodes))
    nan_ctx = dataclasses.replace(ctx, load=np.full_like(ctx.load, np.nan))
    rows, _ = GuideScores(WINDOW).rows(nan_ctx)
    assert np.isfinite(rows).all()


def test_a_network_that_reads_only_one_heuristic_makes_exactly_its_choices():
    """The inputs carry the heuristic's ranking on the cluster the policy itself built (shared bind memory)."""
    mine = _episode(GuidedPolicy(_follow("gap_capacity-balanced-overload"), WINDOW))
    ref = _episode(CapacityBalancedOverload(7, WINDOW))
    assert mine.decisions == ref.decisions and mine.composite == ref.composite


def test_never_picks_an_infeasible_node():
    sc = training_scenario(11)
    env = unclipped_env(sc, 11)
    policy = fit_to_scenario(GuidedPolicy(_follow("gap_kube-default"), WINDOW), sc)
    ctx = env.reset(11)
    while ctx is not None:
        scores = policy.score(ctx)
        if ctx.feasible.any():
            assert ctx.feasible[int(np.argmax(scores))]
            assert np.all(np.isneginf(scores[~ctx.feasible]))
        ctx, _, _ = env.step(int(np.argmax(scores)) if ctx.feasible.any() else -1)


def test_model_file_round_trips_and_refuses_a_foreign_head(tmp_path):
    layers = _follow("gap_capacity-balanced-overload")
    fit = GuidedFit(
        layers=layers,
        selected={"stage": "test"},
        curve=[{"stage": "test", "loss": 0.1, "ratio_to_floor": 1.0, "ratio_to_kube_default": 1.0}],
        config={"clusters": 2, "selection_clusters": 1},
    )
    path = save_guided(fit, tmp_path / "g.keras", command="drs-prom train --learner guided")
    policy = load_policy(path, WINDOW)
    assert isinstance(policy, GuidedPolicy) and policy.normalisation is None
    assert _episode(policy).composite == _episode(GuidedPolicy(layers, WINDOW)).composite
    meta = json.loads(path.with_suffix(".json").read_text())
    meta["head"]["columns"] = meta["head"]["columns"][:-1]
    path.with_suffix(".json").write_text(json.dumps(meta))
    with pytest.raises(ModelError, match="invalid head"):
        load_policy(path, WINDOW)


def test_inputs_outside_the_training_range_read_as_its_nearest_edge(tmp_path):
    """A cluster unlike the training ones (e.g. a faster arrival rate) must not make the network extrapolate."""
    col = GUIDED_COLUMNS.index("ctx_log_arrival_rate")
    k0 = np.zeros((N_GUIDED, 1), np.float32)
    k0[col, 0] = 1.0
    layers = [(k0, np.zeros(1, np.float32), "linear")]
    lo, hi = np.full(N_GUIDED, -1e6, np.float32), np.full(N_GUIDED, 1e6, np.float32)
    hi[col] = -50.0  # every real rate is above this edge, so every node reads exactly -50
    sc = training_scenario(3)
    ctx = unclipped_env(sc, 3).reset(3)
    scores = GuidedPolicy(layers, WINDOW, input_range=(lo, hi)).score(ctx)
    assert np.all(scores[ctx.feasible] == -50.0)
    fit = GuidedFit(layers=layers, selected={}, input_range=(lo, hi), config={"clusters": 2, "selection_clusters": 1})
    path = save_guided(fit, tmp_path / "r.keras")
    assert np.all(load_policy(path, WINDOW).score(ctx)[ctx.feasible] == -50.0)
    meta = json.loads(path.with_suffix(".json").read_text())
    meta["head"]["input_low"][0] = 2e6  # low above high
    path.with_suffix(".json").write_text(json.dumps(meta))
    with pytest.raises(ModelError, match="invalid head"):
        load_policy(path, WINDOW)


def test_training_options_widen_the_generated_clusters_and_refuse_bad_input():
    from drs_prom.errors import ConfigError
    from drs_prom.sim.generator import TRAINING_OWNER_PROBABILITY, GeneratorParams
    from drs_prom.training.guided_options import guided_config
    from drs_prom.training.guided_run import FLOOR

    default = guided_config(48, 0, "0.4,0.9", "1,5,15,30", "", 0)
    # the generator's own ranges, with owners on most profiles: the shipped run's clusters
    assert default.generator() == GeneratorParams(owner_probability=TRAINING_OWNER_PROBABILITY)
    wide = guided_config(48, 0, "0.4,1.3", "1,5,15,30,60", "kube-default", 1)
    assert wide.generator() == GeneratorParams(
        load=(0.4, 1.3), metric_windows=(1.0, 5.0, 15.0, 30.0, 60.0), owner_probability=TRAINING_OWNER_PROBABILITY
    )
    assert wide.label_arms == (FLOOR, "kube-default")  # the floor is always an arm
    assert wide.dagger_rounds == 1
    for bad in (("1.3,0.4", "30"), ("0.4", "30"), ("x,1", "30"), ("0.4,1", "-1")):
        with pytest.raises(ConfigError, match="train-load"):
            guided_config(48, 0, *bad, "", 0)
    with pytest.raises(ConfigError, match="least-busy"):
        guided_config(48, 0, "0.4,0.9", "30", "least-busy", 0)
    # the widened range reaches the clusters: a 60 s lag exists only in the widened ones
    only_60 = guided_config(4, 0, "1.2,1.3", "60", "", 0).generator()
    assert {training_scenario(s, only_60).metric_window_seconds for s in range(3)} == {60.0}


def test_cluster_features_are_finite_named_and_see_node_sizes():
    sc = training_scenario(3)
    env = unclipped_env(sc, 3)
    ctx = env.reset(3)
    x = decision_features(ctx, 30.0, 0.5)
    assert x.shape == (len(CLUSTER_FEATURES),) and np.isfinite(x).all()
    nan_ctx = dataclasses.replace(ctx, load=np.full_like(ctx.load, np.nan))
    y = decision_features(nan_ctx, 30.0, 0.5)
    assert np.isfinite(y).all() and y[CLUSTER_FEATURES.index("stale_share")] == 1.0
    tracker = ClusterFeatures(alpha=0.5)
    a = tracker.update(ctx, 30.0).copy()
    assert np.allclose(a, decision_features(ctx, 30.0, 1.0))  # the first decision has no rate yet


def test_the_arrival_trend_rises_into_a_burst_falls_after_it_and_starts_over_each_episode():
    """One decision a second for 300 s, then ten a second for 10 s, then one every 5 s: the trend reads 0 on a
    steady rate, above 0 into the burst, below 0 once arrivals thin out; an earlier time is a new episode."""
    ctx = unclipped_env(training_scenario(3), 3).reset(3)
    features, trend = ClusterFeatures(), ArrivalTrend()

    def decide(now: float) -> float:
        features.update(dataclasses.replace(ctx, now=now), 30.0)
        return trend.update(now, features.rate)

    assert decide(0.0) == 0.0  # no rate known yet
    steady = [decide(t) for t in np.arange(1.0, 300.0, 1.0)]
    assert abs(steady[-1]) < 0.05
    burst = [decide(t) for t in np.arange(300.0, 310.0, 0.1)]
    assert max(burst) > 0.5 and min(burst[1:]) > 0.0  # burst[0] still came a second after the last
    calm = [decide(t) for t in np.arange(315.0, 600.0, 5.0)]
    assert calm[-1] < -0.5
    assert decide(0.0) == 0.0  # an earlier time: a new episode, no rate yet


def test_a_model_of_the_field_guides_alone_still_loads_and_reads_its_own_columns(tmp_path):
    """drs-v2's head names the five field heuristics: it loads, builds rows of its own width and its own choices."""
    cols = guided_columns(FIELD_GUIDES)
    assert len(cols) < N_GUIDED and not any(c.startswith("resident_") for c in cols)
    k0 = np.zeros((len(cols), 1), np.float32)
    k0[cols.index("gap_capacity-balanced-overload"), 0] = 1.0
    layers = [
        (k0, np.array([GAP_CLIP], np.float32), "relu"),
        (np.ones((1, 1), np.float32), np.zeros(1, np.float32), "linear"),
    ]
    old = GuidedPolicy(layers, WINDOW, guides=FIELD_GUIDES)
    assert old.head["guides"] == list(FIELD_GUIDES) and old.head["columns"] == list(cols)
    assert _episode(old).composite == _episode(CapacityBalancedOverload(7, WINDOW)).composite
    fit = GuidedFit(layers=layers, selected={}, config={"clusters": 2, "selection_clusters": 1})
    path = save_guided(fit, tmp_path / "v2like.keras", guides=FIELD_GUIDES)
    assert load_policy(path, WINDOW).guides.guides == FIELD_GUIDES
    meta = json.loads(path.with_suffix(".json").read_text())
    meta["head"]["guides"] = ["kube-default"]  # a guide set this code does not build
    path.with_suffix(".json").write_text(json.dumps(meta))
    with pytest.raises(ModelError, match="invalid head"):
        load_policy(path, WINDOW)


def test_the_shipped_guided_model_reads_resident_load_over_request_and_room():
    """Its guides start with the peak teacher, and its rows carry what only the scheduler keeps."""
    from drs_prom.agent import default_model_path

    policy = load_policy(default_model_path(), WINDOW)
    assert isinstance(policy, GuidedPolicy) and policy.guides.guides == GUIDES
    assert {"resident_after_0", "over_request_take", "room_take", "gap_capacity-balanced-peak"} <= set(
        policy.head["columns"]
    )


def test_drs_v4_still_loads_on_its_room_teacher():
    """drs-v4's head names capacity-balanced-room first: the same columns, its own teacher's scores and room take."""
    from drs_prom.agent import default_model_path

    policy = load_policy(default_model_path().with_name("drs-v4.keras"), WINDOW)
    assert isinstance(policy, GuidedPolicy) and policy.guides.guides == (ROOM_TEACHER, *FIELD_GUIDES)
    assert policy.guides.room.name == ROOM_TEACHER
    assert len(policy.head["columns"]) == N_GUIDED and "room_take" in policy.head["columns"]
    ctx = unclipped_env(training_scenario(4), 4).reset(4)
    assert np.isfinite(policy.score(ctx)[np.asarray(ctx.feasible, bool)]).all()


def test_a_model_of_the_resident_teacher_still_loads_without_the_room_column(tmp_path):
    """drs-v3's head names capacity-balanced-resident first: its rows keep the resident columns, not room_take."""
    guides = (RESIDENT_TEACHER, *FIELD_GUIDES)
    cols = guided_columns(guides)
    assert "resident_after_0" in cols and "room_take" not in cols and len(cols) == N_GUIDED - 1
    k0 = np.zeros((len(cols), 1), np.float32)
    k0[cols.index(f"gap_{RESIDENT_TEACHER}"), 0] = 1.0
    layers = [
        (k0, np.array([GAP_CLIP], np.float32), "relu"),
        (np.ones((1, 1), np.float32), np.zeros(1, np.float32), "linear"),
    ]
    fit = GuidedFit(layers=layers, selected={}, config={"clusters": 2, "selection_clusters": 1})
    policy = load_policy(save_guided(fit, tmp_path / "v3like.keras", guides=guides), WINDOW)
    assert policy.guides.guides == guides
    rows, _ = policy.guides.rows(unclipped_env(training_scenario(3), 3).reset(3))
    assert rows.shape[1] == len(cols)


def test_the_room_column_is_the_teachers_room_take():
    """The row's room_take is the slot share the teacher subtracted for the same pod (one memory of shapes)."""
    sc = training_scenario(5)
    env = unclipped_env(sc, 5)
    guides = GuideScores(WINDOW)
    ctx = env.reset(5)
    for _ in range(20):
        rows, raw = guides.rows(ctx)
        col = rows[:, GUIDED_COLUMNS.index("room_take")]
        take = slot_take(ctx, *guides.room.shapes.shapes_with(ctx))
        assert np.allclose(col, np.clip(take, 0, 1), atol=1e-6)
        node = int(np.argmax(np.where(ctx.feasible, raw[0], -np.inf)))
        guides.bound(ctx, node)
        np.testing.assert_array_equal(slot_take(ctx, *guides.room.shapes.shapes(ctx)), take)  # kept as peeked
        ctx, _, done = env.step(node)
        if done:
            break
    assert len(guides.room.shapes) == 20
