"""The promotion gate refuses a candidate that is not non-inferior to the best heuristic on the twin: the paired
interval of (candidate - best heuristic) / best heuristic, the bench's interval (drs_prom.outcomes.paired_stats), must end at
or below ``retrain.gate_inferiority_margin``, whatever the candidate gains over the current model."""

from __future__ import annotations

import numpy as np
import pytest

from drs_prom.agent.model_inputs import N_CANDIDATE
from drs_prom.agent.persistence import load_model
from drs_prom.config import Settings
from drs_prom.outcomes.paired_stats import relative_interval
from drs_prom.policies.contract import input_scales
from drs_prom.registry import make_candidate_policy, make_policy
from drs_prom.retrain.gate import non_inferior
from drs_prom.sim.env import SchedulingEnv
from drs_prom.sim.retrain_checks import SimulatorChecks
from drs_prom.sim.scenario import load_scenario

HEURISTICS = ["capacity-balanced-overload", "kube-default"]


@pytest.mark.parametrize(
    ("high", "promote"),
    [(-0.01, True), (0.0, True), (0.03, True), (0.0301, False), (float("nan"), False)],
)
def test_non_inferior_promotes_only_an_upper_end_within_the_margin(high: float, promote: bool) -> None:
    versus = {"against": "capacity-balanced-overload", "mean": -0.02, "low": -0.05, "high": high, "seeds": 10}
    verdict = non_inferior(versus, 0.03)
    assert verdict.promote is promote
    assert ("non-inferior to capacity-balanced-overload" in verdict.reason) and ("not" in verdict.reason) != promote


def _checks(seeds: int = 4) -> SimulatorChecks:
    settings = Settings.model_validate(
        {"retrain": {"gate_seeds": seeds, "gate_heuristics": HEURISTICS, "sim_benchmark_pods": 40}}
    )
    return SimulatorChecks(settings, load_scenario("heterogeneous").truncated(40))


def test_a_candidate_that_piles_pods_on_one_node_is_refused_against_the_best_heuristic() -> None:
    checks = _checks()
    flat = [(np.zeros((N_CANDIDATE, 1), np.float32), np.zeros(1, np.float32), "linear")]  # ties: the first node
    versus = checks.versus_best_heuristic(flat)
    assert versus["against"] in HEURISTICS and versus["seeds"] == 4
    assert versus["low"] > 0.03  # far worse than either heuristic on every seed
    verdict = non_inferior(versus, checks.settings.retrain.gate_inferiority_margin)
    assert not verdict.promote and versus["against"] in verdict.reason


def test_the_gate_interval_is_the_bench_interval_on_the_twins_seeds() -> None:
    """Recomputed here from plain simulator runs of the same policies on the same seeds: the gate compares
    the candidate with the heuristic of lowest mean composite, paired by seed."""
    checks = _checks(seeds=3)
    shipped = load_model()
    versus = checks.versus_best_heuristic(shipped.layers, shipped.head)
    settings, seeds = checks.settings, checks.gate_seeds()

    def composites(build) -> dict[int, float]:
        out = {}
        for s in seeds:
            policy = build(s)
            norm = input_scales(policy, settings.normalisation)  # the settings' scales, as serving reads them
            out[s] = SchedulingEnv(checks.scenario, seed=s, norm=norm).run(policy, seed=s).composite
        return out

    heur = {h: composites(lambda s, h=h: make_policy(h, checks.spec, s)) for h in HEURISTICS}
    best = min(heur, key=lambda h: np.mean(list(heur[h].values())))
    mine = composites(lambda s: make_candidate_policy(shipped.layers, shipped.head, checks.spec))
    expected = relative_interval(mine, heur[best])
    assert versus["against"] == best
    assert (versus["mean"], versus["low"], versus["high"]) == pytest.approx(
        (expected.mean, expected.low, expected.high)
    )
