"""The models shipped in models/: they load, are small, and the drs one does no harm on short seeded runs."""

import numpy as np

from drs_prom.agent import default_model_path, default_original_path, load_policy, read_metadata
from drs_prom.agent.guided import GuidedPolicy
from drs_prom.features import FEATURE_SCHEMA_VERSION
from drs_prom.registry import make_policy
from drs_prom.sim.env import SchedulingEnv, fit_to_scenario, policy_norm
from drs_prom.sim.scenario import load_scenario
from tests.specs import SPEC, WINDOW


def _composites(name: str, scenario, seeds) -> list[float]:
    out = []
    for seed in seeds:
        policy = fit_to_scenario(
            load_policy(None, WINDOW) if name == "drs" else make_policy(name, SPEC, seed), scenario
        )
        env = SchedulingEnv(scenario, seed=seed, norm=policy_norm(policy, scenario))  # as `drs-prom bench` runs it
        out.append(env.run(policy, seed=seed).composite)
    return out


def test_shipped_models_are_small_and_describe_themselves():
    for path in (default_model_path(), default_original_path()):
        assert path.stat().st_size < 200_000, f"{path} should be kilobytes"
        meta = read_metadata(path)
        assert meta["feature_schema_version"] == FEATURE_SCHEMA_VERSION
        assert meta["training"]["command"].startswith("drs-prom train")
    drs = read_metadata(default_model_path())
    assert drs["training"]["learner"] == "guided"
    assert "generator seeds" in drs["data"]["train"] and "eval-*" in drs["data"]["never"]  # the train/eval split
    assert read_metadata(default_original_path())["training"]["nodes"] == 4


def test_shipped_drs_is_the_guided_network_and_beats_random_on_a_short_seeded_run():
    sc = load_scenario("drs-paper").truncated(60)
    assert isinstance(load_policy(None, WINDOW), GuidedPolicy)
    imb = {"drs": [], "random": []}
    for seed in (11, 12):
        imb["drs"].append(SchedulingEnv(sc, seed=seed).run(load_policy(None, WINDOW)).imbalance)
        imb["random"].append(SchedulingEnv(sc, seed=seed).run(make_policy("random", SPEC, seed)).imbalance)
    ratio = np.mean(imb["random"]) / np.mean(imb["drs"])
    print(f"shipped drs vs random on drs-paper (60 pods, seeds 11-12): imbalance {ratio:.2f}x lower")
    assert ratio > 1.1


def test_shipped_drs_is_no_worse_than_kube_default_on_a_short_seeded_heterogeneous_run():
    sc = load_scenario("heterogeneous").truncated(80)
    seeds = (21, 22, 23, 24)
    drs, kd = _composites("drs", sc, seeds), _composites("kube-default", sc, seeds)
    ratio = float(np.mean(drs) / np.mean(kd))
    print(f"shipped drs / kube-default composite on heterogeneous (80 pods, seeds 21-24): {ratio:.3f}")
    assert ratio <= 1.0


def test_shipped_drs_is_within_3_percent_of_capacity_balanced_overload_on_a_short_heterogeneous_run():
    sc = load_scenario("heterogeneous").truncated(80)
    seeds = (21, 22, 23, 24)  # paired: every policy replays the same workloads
    drs, cbo = _composites("drs", sc, seeds), _composites("capacity-balanced-overload", sc, seeds)
    ratio = float(np.mean(drs) / np.mean(cbo))
    print(f"shipped drs / capacity-balanced-overload composite on heterogeneous (80 pods, seeds 21-24): {ratio:.3f}")
    assert ratio <= 1.03


def test_shipped_drs_original_loads_as_a_4_node_policy():
    pol = load_policy(default_original_path(), WINDOW)
    assert pol.name == "drs-original" and pol.n_nodes == 4
    res = SchedulingEnv(load_scenario("drs-paper").truncated(20), seed=3).run(pol)
    assert res.decisions == 20
