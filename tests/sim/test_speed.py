"""Simulator throughput at 4, 50 and 500 nodes (pytest-benchmark; printed, never asserted as a limit)."""

import pytest

from drs_prom.registry import make_policy
from drs_prom.sim.env import SchedulingEnv
from drs_prom.sim.scenario import load_scenario
from tests.specs import SPEC


@pytest.mark.parametrize(("scenario", "pods"), [("drs-paper", 100), ("cluster-50", 500), ("cluster-500", 500)])
def test_placements_per_second(benchmark, scenario, pods):
    sc = load_scenario(scenario).truncated(pods)
    result = benchmark.pedantic(
        lambda: SchedulingEnv(sc, seed=0).run(make_policy("least-loaded", SPEC)), rounds=1, iterations=1
    )
    assert result.decisions == pods
    rate = result.placements_per_second
    sim_share = 1 - result.policy_seconds / result.wall_seconds
    benchmark.extra_info.update(nodes=result.n_nodes, placements_per_s=rate, simulator_share=sim_share)
    print(f"\n{scenario}: {result.n_nodes} nodes, {rate:,.0f} placements/s, simulator {sim_share:.0%} of the time")
