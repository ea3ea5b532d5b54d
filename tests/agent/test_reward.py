import numpy as np
import pytest

from drs_prom.config import ObjectiveSettings, RewardSettings, load_settings
from drs_prom.errors import ConfigError
from drs_prom.outcomes.objectives import Integrals
from drs_prom.outcomes.reward import (
    Outcome,
    composite_reward,
    cpu_mem_utilisation,
    drs_reward,
    imbalance_term,
    settled_reward,
    shaped_reward,
)

BALANCED = np.full((4, 6), 0.5)
SKEWED = np.array([[1.0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]])


def test_drs_reward_is_minus_sum_of_stds():
    assert drs_reward(BALANCED) == 0.0
    # one node at 1.0 on cpu, three at 0: std = sqrt(3)/4
    assert drs_reward(SKEWED) == pytest.approx(-np.sqrt(3) / 4)


def test_delta_mode_credits_improvement_absolute_mode_is_drs():
    assert imbalance_term(SKEWED, BALANCED, "delta") == pytest.approx(np.sqrt(3) / 4)
    assert imbalance_term(BALANCED, SKEWED, "absolute") == pytest.approx(drs_reward(SKEWED))
    with pytest.raises(ValueError):
        imbalance_term(SKEWED, BALANCED, "other")


def test_slowdown_and_utilisation_terms():
    s = RewardSettings(imbalance_weight=0.0, utilisation_weight=1.0, slowdown_weight=2.0)
    assert shaped_reward(BALANCED, BALANCED, 0.4, (), s) == pytest.approx(0.4)  # nothing finished
    assert shaped_reward(BALANCED, BALANCED, 0.4, (1.0, 2.0), s) == pytest.approx(0.4 - 1.0)  # mean 1.5
    # a slowdown below 1 (cannot happen) is never rewarded
    assert shaped_reward(BALANCED, BALANCED, 0.0, (0.5,), s) == 0.0


def test_the_kind_in_the_settings_picks_the_reward():
    raw_after = np.array([[0.6, 0.2, 0, 0, 0, 0], [0.2, 0.4, 0, 0, 0, 0]])
    span = Integrals(seconds=5.0, overload=1.0, hot=2.0)
    outcome = Outcome(SKEWED[:2], raw_after, cpu_mem_utilisation(raw_after), (1.0, 3.0), span, n_pods=10, horizon=50)
    assert outcome.utilisation_after == pytest.approx(0.35)
    shaped = RewardSettings()
    assert settled_reward(outcome, shaped) == pytest.approx(
        shaped_reward(SKEWED[:2], raw_after, 0.35, (1.0, 3.0), shaped)
    )
    assert settled_reward(outcome, RewardSettings(kind="drs")) == pytest.approx(drs_reward(raw_after) * 100)
    weights = ObjectiveSettings(hot_weight=1.0)
    assert settled_reward(outcome, RewardSettings(kind="composite"), weights) == pytest.approx(
        composite_reward((1.0, 3.0), span, 10, 50, weights)
    )
    # the three kinds are three different numbers for the same outcome
    assert len({settled_reward(outcome, RewardSettings(kind=k)) for k in ("shaped", "composite", "drs")}) == 3


def test_stale_nodes_read_as_zero_load():
    with_nan = SKEWED.copy()
    with_nan[1, :] = np.nan
    outcome = Outcome(BALANCED, with_nan, 0.0)
    assert settled_reward(outcome, RewardSettings(kind="drs")) == pytest.approx(drs_reward(SKEWED) * 100)


def test_settings_are_validated_at_load():
    with pytest.raises(ConfigError, match=r"reward\.kind"):
        load_settings(overrides={"reward.kind": "bogus"})
    with pytest.raises(ConfigError, match=r"reward\.imbalance_mode"):
        load_settings(overrides={"reward.imbalance_mode": "bogus"})
    assert load_settings(overrides={"reward.kind": "composite"}).reward.kind == "composite"


def test_a_config_that_still_sets_online_learning_is_told_to_drop_it():
    with pytest.raises(ConfigError, match="online_learning was removed"):
        load_settings(overrides={"scheduler.online_learning": "false"})
