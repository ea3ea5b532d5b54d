"""The clairvoyant reference and the migration floor: the yardsticks the benchmark puts beside the policies."""

import pytest

from drs_prom.errors import ConfigError
from drs_prom.registry import make_policy
from drs_prom.sim.bench import format_table, parse_policies, run_bench
from drs_prom.sim.env import SchedulingEnv, fit_to_scenario, policy_norm
from drs_prom.sim.scenario import load_scenario
from drs_prom_research.clairvoyant import clairvoyant_run, migration_floor
from tests.sim.helpers import tiny
from tests.specs import SPEC


def _run(name, scenario, seed):
    """The policy's episode as bench runs it (on the scales it reads)."""
    policy = fit_to_scenario(make_policy(name, SPEC, seed), scenario)
    return SchedulingEnv(scenario, seed=seed, norm=policy_norm(policy, scenario)).run(policy, seed=seed)


def test_rollout_is_never_worse_than_its_base_and_places_every_pod():
    sc = load_scenario("drs-paper").truncated(16)
    gains, drs_gains = [], []
    for seed in (0, 1):
        base = _run("balanced-load", sc, seed)
        seer = clairvoyant_run(sc, seed)  # minimises the composite score, like the benchmark ranks
        assert seer.decisions == 16 and seer.policy == "clairvoyant"
        assert seer.composite <= base.composite + 1e-12
        gains.append(base.composite - seer.composite)
        on_imbalance = clairvoyant_run(sc, seed, cost="imbalance")
        assert on_imbalance.imbalance <= base.imbalance + 1e-12
        drs_gains.append(base.imbalance - on_imbalance.imbalance)
    assert max(gains) > 0.001 and max(drs_gains) > 0.01  # it finds better schedules, not only the base's


def test_floor_of_a_hand_computed_timeline():
    # two 4-core nodes, two pods (1 core, 64Mi of 1Gi) arriving at 0 s and 10 s, 30 s of work each:
    # [0,10) and [30,40) one pod runs: std over two nodes = 0.25/2 (cpu) + 0.0625/2 (mem); [10,30) one each: 0
    sc = tiny(nodes=2, cores=4, pods=2, rate=0.1, work=30.0)
    one_pod = 0.25 / 2 + 0.0625 / 2
    assert migration_floor(sc, 0) == pytest.approx(one_pod * 20 / 40)
    # the floor is reachable here, and the benchmark's recorder measures the same thing
    assert _run("balanced-load", sc, 0).imbalance == pytest.approx(one_pod * 20 / 40)
    assert _run("kube-default", sc, 0).imbalance == pytest.approx(one_pod * 20 / 40)


def test_floor_is_below_every_policy_without_contention():
    # drs-paper truncated so that at most a handful run at once: no node is ever overcommitted
    sc = load_scenario("drs-paper").truncated(6)
    floor = migration_floor(sc, 0)
    for name in ("kube-default", "balanced-load", "round-robin", "random"):
        run = _run(name, sc, 0)
        assert run.slowdown_mean == pytest.approx(1.0)
        assert floor <= run.imbalance + 1e-9, name


def test_floor_refuses_interchangeability_it_cannot_assume():
    with pytest.raises(ConfigError, match="demand_jitter"):
        migration_floor(load_scenario("heterogeneous"), 0)


def test_bench_runs_the_clairvoyant_row_and_reports_the_floor():
    assert parse_policies("clairvoyant") == ["kube-default", "clairvoyant"]
    sc = load_scenario("drs-paper").truncated(10)
    report = run_bench(sc, [0], parse_policies("balanced-load,clairvoyant"), progress=False)
    row = report.row("clairvoyant")
    assert row is not None and not row.skipped and row.runs[0].decisions == 10
    assert report.migration_floor == pytest.approx(migration_floor(sc, 0))
    assert report.to_json()["migration_floor"] == report.migration_floor
    floor_line = format_table(report).splitlines()[-1]
    assert floor_line.startswith("migration floor") and f"{report.migration_floor:.3f}" in floor_line


def test_top_k_rollout_over_the_strongest_heuristic_is_never_worse_and_branches_only_where_asked():
    # cluster-50's 50 nodes, cut to 30 pods: branching on 3 nodes per decision instead of 50
    sc = load_scenario("cluster-50").truncated(30)
    base = _run("capacity-balanced-overload", sc, 0)
    seer = clairvoyant_run(sc, 0, base="capacity-balanced-overload", top_k=3)
    assert seer.decisions == 30
    assert seer.composite <= base.composite + 1e-12
    single = clairvoyant_run(sc, 0, base="capacity-balanced-overload", top_k=1)
    # one branch per decision is the base's own choice: nothing to find beyond the base's schedule
    assert single.composite == pytest.approx(base.composite, abs=1e-12)
    with pytest.raises(ConfigError, match="top_k"):
        clairvoyant_run(sc, 0, top_k=0)
