"""The clairvoyant headroom over a scenario's best heuristic (drs-prom-research headroom's numbers)."""

import math

import pytest

from drs_prom_research.headroom import SUITE_HEURISTICS, format_headroom, scenario_headroom


def test_headroom_is_measured_over_the_best_heuristic_and_is_never_negative():
    row = scenario_headroom("heterogeneous", [0, 1], top_k=2, with_drs=False, pods=20, samples=1)
    assert row.best_heuristic in SUITE_HEURISTICS
    assert row.pods == 20 and row.seeds == [0, 1]
    # fortified: the rollout over the best heuristic never ends above it, on every seed
    assert row.clairvoyant_composite <= row.best_heuristic_composite + 1e-12
    assert 0.0 <= row.headroom_min <= row.headroom <= row.headroom_max
    # the per-seed oracle picks among the same heuristics, so it is at least the best one on average
    assert row.oracle_gain >= 0.0
    assert math.isnan(row.drs_composite)  # drs was not asked for
    # the look-ahead plans on sampled futures, so unlike the clairvoyant it may end above its base
    assert row.samples == 1 and math.isfinite(row.lookahead_composite)
    assert row.lookahead_gain == pytest.approx(1.0 - row.lookahead_composite / row.best_heuristic_composite, abs=0.05)
    table = format_headroom([row.__dict__])
    assert "| heterogeneous | 6 / 20 |" in table and row.best_heuristic in table


def test_headroom_includes_the_shipped_model_when_given():
    from drs_prom.sim.bench import shipped_model

    path, _ = shipped_model()
    if path is None:
        pytest.fail("the shipped model is part of the repository")
    row = scenario_headroom("drs-paper", [0], top_k=1, model_path=path, pods=12)
    assert math.isnan(row.lookahead_gain)  # not asked for
    # top_k=1 branches only on the base's own choice: no headroom can be found
    assert row.headroom == pytest.approx(0.0, abs=1e-12)
    assert not math.isnan(row.drs_composite) and row.drs_gap == pytest.approx(
        row.drs_composite / row.best_heuristic_composite - 1.0, abs=1e-9
    )
