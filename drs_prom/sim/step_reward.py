"""The reward of one settled simulator step: training, the twin and retraining's simulator checks read it here.

The step becomes the same ``Outcome`` that retraining rebuilds from the journal and Prometheus
history (drs_prom.retrain.rebuild), and both go through ``drs_prom.outcomes.reward.settled_reward``.
"""

from __future__ import annotations

from drs_prom.config import ObjectiveSettings, RewardSettings
from drs_prom.outcomes.reward import Outcome, settled_reward
from drs_prom.sim.env import StepInfo


def step_outcome(info: StepInfo) -> Outcome:
    """What the step led to: loads and utilisation from the settle look-ahead, the slowdowns of the pods that
    finished before the next decision, and the objectives' integrals over the step."""
    return Outcome(
        load_before=info.load_before,
        load_after=info.load_after,
        utilisation_after=info.util_after,
        finished_slowdowns=tuple(p.slowdown for p in info.finished),
        span=info.span,
        n_pods=info.n_pods,
        horizon=info.horizon,
    )


def step_reward(info: StepInfo, settings: RewardSettings, objectives: ObjectiveSettings | None = None) -> float:
    """Reward of one settled action (``settings.kind``; ``objectives`` weigh the composite kind)."""
    return settled_reward(step_outcome(info), settings, objectives)
