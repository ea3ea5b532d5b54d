import numpy as np
import pytest
from pydantic import ValidationError

from drs_prom.config import RewardSettings
from drs_prom.reward import drs_reward, imbalance_term, reward

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
    assert reward(BALANCED, BALANCED, 0.4, 1.0, s) == pytest.approx(0.4)
    assert reward(BALANCED, BALANCED, 0.4, 1.5, s) == pytest.approx(0.4 - 1.0)
    # a slowdown below 1 (cannot happen) is never rewarded
    assert reward(BALANCED, BALANCED, 0.0, 0.5, s) == 0.0


def test_invalid_mode_is_rejected_by_settings():
    with pytest.raises(ValidationError):
        RewardSettings(imbalance_mode="bogus")
