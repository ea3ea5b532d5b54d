"""The models shipped in models/: they load, are small, and the drs one beats random."""

import numpy as np

from drs_prom.agent import default_model_path, default_original_path, load_policy, read_metadata
from drs_prom.features import FEATURE_SCHEMA_VERSION
from drs_prom.registry import make_policy
from drs_prom.sim.env import SchedulingEnv
from drs_prom.sim.scenario import load_scenario
from tests.specs import SPEC, WINDOW


def test_shipped_models_are_small_and_describe_themselves():
    for path in (default_model_path(), default_original_path()):
        assert path.stat().st_size < 200_000, f"{path} should be kilobytes"
        meta = read_metadata(path)
        assert meta["feature_schema_version"] == FEATURE_SCHEMA_VERSION
        assert meta["training"]["command"].startswith("drs-prom train")
        assert meta["training"]["scenario"].split(",")[0] == "drs-paper"
        assert meta["training"]["nodes"] == 4  # the generalisation claim is about a 4-node model


def test_shipped_drs_beats_random_on_a_short_seeded_run():
    sc = load_scenario("drs-paper").truncated(60)
    drs = load_policy(None, WINDOW)
    imb = {"drs": [], "random": []}
    for seed in (11, 12):
        imb["drs"].append(SchedulingEnv(sc, seed=seed).run(drs).imbalance)
        imb["random"].append(SchedulingEnv(sc, seed=seed).run(make_policy("random", SPEC, seed)).imbalance)
    ratio = np.mean(imb["random"]) / np.mean(imb["drs"])
    print(f"shipped drs vs random on drs-paper (60 pods, seeds 11-12): imbalance {ratio:.2f}x lower")
    assert ratio > 1.1


def test_shipped_drs_original_loads_as_a_4_node_policy():
    pol = load_policy(default_original_path(), WINDOW)
    assert pol.name == "drs-original" and pol.n_nodes == 4
    res = SchedulingEnv(load_scenario("drs-paper").truncated(20), seed=3).run(pol)
    assert res.decisions == 20
