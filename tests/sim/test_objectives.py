"""Objectives and the composite score on hand-computed timelines; the composite reward sums to the score."""

from __future__ import annotations

import numpy as np
import pytest

from drs_prom.config import ObjectiveSettings, load_settings
from drs_prom.errors import ConfigError
from drs_prom.outcomes.objectives import (
    EpisodeObjectives,
    Integrals,
    composite,
    composite_terms,
    episode_objectives,
    horizon,
    instant,
    score_episode,
)
from drs_prom.outcomes.reward import composite_reward
from drs_prom.policies.contract import DecisionContext, PolicyBase, choose
from drs_prom.sim.env import SchedulingEnv
from tests.sim.helpers import tiny


class _First(PolicyBase):
    """Always node 0: a fixed schedule, so the timeline can be computed by hand."""

    name = "first"

    def score(self, ctx: DecisionContext) -> np.ndarray:
        return -np.arange(len(ctx.nodes), dtype=np.float64)


def test_instant_objectives_of_literal_demand() -> None:
    frac = np.array([[0.5, 0.2, 0, 0, 0, 0], [1.5, 0.4, 0, 0, 0, 0]])
    overload, hot, dimb = instant(frac, hot_fraction=0.8)
    assert overload == pytest.approx(0.25)  # node 2's bottleneck is 0.5 over capacity, node 1 none
    assert hot == pytest.approx(0.5)
    assert dimb == pytest.approx(0.5 + 0.1)  # |a - b| / 2 per feature, summed
    assert instant(frac, hot_fraction=0.4) == (pytest.approx(0.25), 1.0, pytest.approx(0.6))


def test_hand_computed_episode() -> None:
    # two 1-core pods of 10 s on one 1-core node (of 2), arriving at t=0 and t=1:
    # t 0..1 one pod at full speed; t 1..19 both at half speed (pod A finishes at 19);
    # t 19..20 pod B alone. Slowdowns 19/10 and (20-1)/10. Horizon = 1 + 10 = 11 s.
    env = SchedulingEnv(tiny(nodes=2, pods=2, rate=1.0, work=10.0, cpu=1.0), seed=0)
    res = env.run(_First())
    o = res.objectives
    assert o is not None
    assert env.horizon == pytest.approx(11.0)
    assert o.slowdown_mean == pytest.approx(1.9)
    assert o.slowdown_p95 == pytest.approx(1.9)
    assert o.slo_miss == 1.0
    mem = 64 / 1024  # 64Mi of 1Gi per pod
    assert o.overload == pytest.approx(0.5 * 1.0 * 18 / 11)  # node 0 at 2x for 18 s, node 1 idle
    assert o.hot_time == pytest.approx(0.5 * 20 / 11)
    dimb = (0.5 + mem / 2) * 1 + (1.0 + mem) * 18 + (0.5 + mem / 2) * 1
    assert o.demand_imbalance == pytest.approx(dimb / 11)
    expected = 1.9 + 0.5 * 1.9 + 1.0 + 9 / 11 + 0.25 * 10 / 11 + 0.25 * dimb / 11
    assert res.composite == pytest.approx(expected)
    assert score_episode(res) == pytest.approx(expected)
    assert sum(composite_terms(o).values()) == pytest.approx(expected)


def test_composite_reward_sums_to_the_score_with_the_p95_bound() -> None:
    env = SchedulingEnv(tiny(nodes=2, pods=2, rate=1.0, work=10.0, cpu=1.0), seed=0)
    ctx, total, policy = env.reset(0), 0.0, _First()
    while ctx is not None:
        ctx, info, _ = env.step(choose(policy, ctx)[0])
        total += info.composite_reward()
    res = env.result("first")
    s = ObjectiveSettings()
    # p95 (1.9) is replaced by the CVaR bound slo + sum (s - slo)+ / (0.05 P), minus its constant slo
    bound_minus_slo = (0.4 + 0.4) / (0.05 * 2)
    assert total == pytest.approx(-(res.composite - s.slowdown_p95_weight * (1.9 - bound_minus_slo)))


def test_reward_is_per_pod_and_per_time() -> None:
    s = ObjectiveSettings()
    span = Integrals(seconds=2.0, overload=1.0, hot=2.0, demand_imbalance=4.0)
    r = composite_reward([1.0, 2.0], span, n_pods=4, horizon=10.0, settings=s)
    per_pod = (1.0 + 2.0) + 1 * 1.0 + 0.5 * (0.5 / 0.05)
    assert r == pytest.approx(-(per_pod / 4 + (1.0 + 0.25 * 2.0 + 0.25 * 4.0) / 10.0))
    assert composite_reward([], Integrals(), n_pods=4, horizon=10.0) == 0.0


def test_more_contention_scores_worse() -> None:
    sc = tiny(nodes=2, pods=2, rate=1.0, work=10.0, cpu=1.0)
    piled = SchedulingEnv(sc, seed=0).run(_First())
    spread = SchedulingEnv(sc, seed=0).run(_RoundRobin())
    assert spread.objectives.slowdown_mean == pytest.approx(1.0)
    assert spread.composite < piled.composite


class _RoundRobin(PolicyBase):
    name = "rr"

    def __init__(self) -> None:
        self.k = 0

    def score(self, ctx: DecisionContext) -> np.ndarray:
        s = np.zeros(len(ctx.nodes))
        s[self.k % len(s)] = 1.0
        self.k += 1
        return s


def test_episode_objectives_and_weights() -> None:
    totals = Integrals(seconds=10, overload=2.0, hot=5.0, demand_imbalance=3.0, drs_imbalance=1.0, utilisation=4.0)
    o = episode_objectives([1.0, 1.0, 3.0, np.nan], totals, span=10.0)
    assert o.slowdown_mean == pytest.approx(5 / 3)
    assert o.slo_miss == pytest.approx(1 / 3)
    assert (o.overload, o.hot_time, o.demand_imbalance, o.drs_imbalance, o.utilisation) == pytest.approx(
        (0.2, 0.5, 0.3, 0.1, 0.4)
    )
    only_util = ObjectiveSettings(
        slowdown_mean_weight=0,
        slowdown_p95_weight=0,
        slo_miss_weight=0,
        overload_weight=0,
        hot_weight=0,
        demand_imbalance_weight=0,
        utilisation_weight=2.0,
    )
    assert composite(o, only_util) == pytest.approx(-0.8)
    assert horizon(np.array([5.0, 6.0]), np.array([10.0, 1.0])) == pytest.approx(10.0)
    with pytest.raises(TypeError):
        score_episode(object())
    assert isinstance(o, EpisodeObjectives)


def test_objective_settings_are_validated(tmp_path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("objectives: {slo_slowdown: 2.0, hot_weight: 1.5}\n")
    s = load_settings(cfg).objectives
    assert (s.slo_slowdown, s.weights["hot_time"]) == (2.0, 1.5)
    cfg.write_text("objectives: {slo_slowdown: 0.9}\n")
    with pytest.raises(ConfigError, match=r"objectives\.slo_slowdown"):
        load_settings(cfg)
    cfg.write_text("objectives: {overload_weight: -1}\n")
    with pytest.raises(ConfigError, match="overload_weight"):
        load_settings(cfg)
