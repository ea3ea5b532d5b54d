"""The rebalancer in the simulator: drs_prom.moves on the simulated series, evictions, and the bench's pairs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from drs_prom.errors import ConfigError
from drs_prom.policies.contract import DecisionContext, PolicyBase
from drs_prom.sim.bench import format_table, parse_policies, run_bench
from drs_prom.sim.env import SchedulingEnv
from drs_prom.sim.rebalance_report import pair_stats
from drs_prom.sim.rebalancer import SimRebalancer, Surge, rebalance_settings
from drs_prom.sim.scenario import parse_scenario

SCENARIO = """
name: hot-later
metric_window_seconds: 0
sample_interval_seconds: 10
nodes:
  - {name: n, count: 2, cpu_cores: 4, mem_bytes: 8Gi, net_rx_bytes: 1e8, net_tx_bytes: 1e8, disk_read_bytes: 1e8,
     disk_write_bytes: 1e8, idle: {cpu: 0, mem: 0}}
profiles:
  svc:
    demand: {cpu_cores: 0.5, mem_bytes: 256Mi}
    requests: {cpu_m: 500, mem_bytes: 256Mi}
    work_seconds: 1000
    work_jitter: 0
    owners: {count: 4}
    drift:
      steps: [{at_seconds: 200, factor: 2.0, signals: [cpu]}]
    restart: {penalty_seconds: 25, state: kept}
arrivals:
  - {pods: 4, rate_per_second: 10, process: uniform}
rebalance: {interval_seconds: 10, window: 60s, step: 10s, min_age_seconds: 30, cooldown_seconds: 100, %s}
"""


class EarlyPacker(PolicyBase):
    """Packs every pod on the first node for its first 100 s, then places by load (least loaded)."""

    name = "early-packer"

    def score(self, ctx: DecisionContext) -> np.ndarray:
        if ctx.now < 100:
            return -np.arange(len(ctx.nodes), dtype=float)
        return -np.nan_to_num(ctx.load, nan=1.0).max(axis=1)


def episode(extra: str = "mode: evict, surge: false", rebalance: bool = True):
    sc = parse_scenario(SCENARIO % extra)
    env = SchedulingEnv(sc, seed=0, rebalancer=SimRebalancer(rebalance_settings(sc), sc) if rebalance else None)
    return env, env.run(EarlyPacker(), seed=0)


def test_the_hot_node_is_relieved_by_moving_its_pods_to_the_cool_one():
    env, res = episode()
    _, calm = episode(rebalance=False)
    assert res.rebalance is not None and calm.rebalance is None
    assert res.rebalance["evictions"] == 2  # 100 % -> 75 % (still hot: hysteresis) -> 50 %
    assert [node for _, _, node in env.evictions] == [0, 0] and [went for _, _, went in env.landed] == [1, 1]
    assert res.rebalance["landed_back_share"] == 0.0
    assert res.objective_dict()["hot_time"] < calm.objective_dict()["hot_time"]
    first = env.evictions[0][0]
    assert 200 + 30 <= first <= 200 + 60  # hot for more than half the window (the median): not at once
    moved = [p for _, p, _ in env.evictions]
    wl, c = env.workload, env.cluster
    slow = (c.finish - wl.arrival) / wl.work
    assert np.all(slow[moved] >= (1000 + 25) / 1000 - 1e-9)  # the start penalty is paid


def test_young_pods_jobs_and_a_cooldown_keep_pods_in_place():
    _, res = episode("mode: evict, surge: false, min_age_seconds: 5000")
    assert res.rebalance["evictions"] == 0
    _, res = episode("mode: evict, surge: false, cooldown_seconds: 10000, max_per_node: 5")
    assert 1 <= res.rebalance["evictions"] <= 4  # one per owner at most


def test_the_bench_ranks_a_policy_with_and_without_the_rebalancer():
    sc = parse_scenario(SCENARIO % "mode: evict")
    assert parse_policies("kube-default,drs+rebalance") == ["kube-default", "drs+rebalance"]
    with pytest.raises(ConfigError, match="unknown policy 'nope\\+rebalance'"):
        parse_policies("nope+rebalance")
    report = run_bench(sc, [0, 1], ["kube-default", "kube-default+rebalance"], progress=False)
    row = report.row("kube-default+rebalance")
    assert row is not None and [r.policy for r in row.runs] == ["kube-default+rebalance"] * 2
    stats = pair_stats(report, "kube-default")
    assert stats is not None and stats["seeds"] == 2
    assert "kube-default+rebalance vs kube-default (2 paired seeds): hot-node time" in format_table(report)
    data = report.to_json()["policies"]
    assert "rebalance" in data["kube-default+rebalance"]["runs"][0]
    assert "rebalance" not in data["kube-default"]["runs"][0]  # runs without it write what they always wrote


def test_the_pairs_read_float_noise_in_the_p95_slowdown_as_no_change():
    """A pod the rebalancer never touched may end 1e-16 off (its progress integrated in other float steps); the
    p95 comparison does not call that worse, and a real change still shows."""
    sc = parse_scenario(SCENARIO % "mode: evict")
    report = run_bench(sc, [0, 1, 2], ["kube-default", "kube-default+rebalance"], progress=False)
    base, with_ = report.row("kube-default"), report.row("kube-default+rebalance")
    assert base is not None and with_ is not None
    for a, b, shift in zip(base.runs, with_.runs, (2e-16, -1e-16, 4e-16)):
        b.objectives = dataclasses.replace(a.objectives, slowdown_p95=a.objective_dict()["slowdown_p95"] + shift)
    stats = pair_stats(report, "kube-default")
    assert stats is not None
    assert (stats["slowdown_p95_diff_low"], stats["slowdown_p95_diff_high"]) == (0.0, 0.0)
    assert stats["slowdown_p95_seeds_worse"] == 0
    b = with_.runs[0]
    b.objectives = dataclasses.replace(b.objectives, slowdown_p95=b.objective_dict()["slowdown_p95"] + 0.01)
    stats = pair_stats(report, "kube-default")
    assert stats is not None and stats["slowdown_p95_seeds_worse"] == 1 and stats["slowdown_p95_diff_high"] > 0


def watched(extra: str, look) -> tuple[SimRebalancer, list]:
    """An episode whose rebalancer's every tick appends ``look(env, rebalancer)`` to the list returned."""
    sc = parse_scenario(SCENARIO % extra)
    rebalancer = SimRebalancer(rebalance_settings(sc), sc)
    env = SchedulingEnv(sc, seed=0, rebalancer=rebalancer)
    seen = []
    tick = rebalancer.tick

    def watch(e):
        tick(e)
        seen.append(look(e, rebalancer))

    rebalancer.tick = watch
    env.run(EarlyPacker(), seed=0)
    return rebalancer, seen


@pytest.mark.parametrize("other", ["early-packer", "kube-default"])
def test_the_prefer_no_schedule_taint_follows_the_hot_set_whichever_scheduler_places(other):
    """The taint is on the nodes for every policy (kube-scheduler's stand-in or drs-prom's own: both score it)."""
    extra = f"mode: evict, taint_hot_nodes: true, other_policy: {other}"
    _, seen = watched(extra, lambda e, _: None if e.prefer_not is None else e.prefer_not.tolist())
    assert [True, False] in seen  # the hot first node carried the taint while it was hot
    assert seen[-1] is None  # and lost it once it cooled
    assert parse_policies("kube-default+rebalance-taint") == ["kube-default", "kube-default+rebalance-taint"]


def test_a_surge_starts_the_replica_first_and_the_pod_hands_over_its_work_without_a_restart():
    env, res = episode("mode: evict")
    _, evicted = episode()
    moved = [p for _, p, _ in env.evictions]
    assert len(moved) == 2 and [went for _, _, went in env.landed] == [1, 1]
    assert res.objective_dict()["hot_time"] < episode(rebalance=False)[1].objective_dict()["hot_time"]
    wl, c = env.workload, env.cluster
    slow = (c.finish - wl.arrival) / wl.work
    assert np.allclose(slow[moved], 1.0)  # no start penalty on the pod's path: its replica started beside it
    assert slow[moved].max() < min((1000 + 25) / 1000, evicted.slowdown_mean * 2)


def test_a_surges_replica_holds_its_requests_on_the_target_until_it_takes_over():
    def look(e, rebalancer):
        c = e.cluster
        return c.t, dict(rebalancer.surging), c.req_cpu_m.copy(), c.node_of[:4].copy()

    _, seen = watched("mode: evict", look)
    started = [(t, s, req, where) for t, s, req, where in seen if s]
    assert started, "no surge was started"
    t0, surging, req, where = started[0]
    assert all(where[pod] == 0 and surge.node == 1 for pod, surge in surging.items())  # replicas beside the pods
    assert req.tolist() == [2000, 500 * len(surging)]  # four pods of 500m on the first, the replicas' on the second
    pod, surge = next(iter(surging.items()))
    assert surge.ready_at == t0 + 25  # the profile's start penalty
    after = next(where for t, s, _, where in seen if t >= surge.ready_at and pod not in s)
    assert after[pod] == 1


def test_a_replica_given_up_takes_its_requests_with_it():
    sc = parse_scenario(SCENARIO % "mode: evict")
    env = SchedulingEnv(sc, seed=0)
    env.reset(0)
    env.step(0)
    before = env.cluster.req_cpu_m.copy()
    env.surge(0, 1)
    assert (env.cluster.req_cpu_m - before).tolist() == [0, 500]
    env.abandon_surge(0, 1)
    assert env.cluster.req_cpu_m.tolist() == before.tolist()


def test_a_replica_placed_on_its_pods_own_node_is_taken_back_not_switched():
    sc = parse_scenario(SCENARIO % "mode: evict")
    rebalancer = SimRebalancer(rebalance_settings(sc), sc)
    env = SchedulingEnv(sc, seed=0, rebalancer=rebalancer)
    env.reset(0)
    env.step(0)
    before = env.cluster.req_cpu_m.copy()
    env.surge(0, 0)
    rebalancer.surging[0] = Surge(0, env.cluster.t, np.zeros(6), False, np.zeros(6))
    rebalancer._hand_over(env)
    assert env.cluster.req_cpu_m.tolist() == before.tolist() and env.cluster.node_of[0] == 0
    assert not rebalancer.surging and not env.evictions  # no move made
