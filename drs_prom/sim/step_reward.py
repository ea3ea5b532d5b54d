"""The reward of one settled simulator step, for training and for retraining's simulator checks."""

from __future__ import annotations

import numpy as np

from drs_prom.agent.features import DRS_SCALE
from drs_prom.config import RewardSettings
from drs_prom.reward import drs_reward, reward
from drs_prom.sim.env import StepInfo


def step_reward(info: StepInfo, policy: str, settings: RewardSettings) -> float:
    """Reward of one settled action, read from the env's StepInfo."""
    if policy == "drs-original":
        return drs_reward(np.nan_to_num(info.load_after)) * DRS_SCALE
    return reward(
        np.nan_to_num(info.load_before),
        np.nan_to_num(info.load_after),
        float(info.util_after),
        float(info.mean_slowdown_after),
        settings,
    )
