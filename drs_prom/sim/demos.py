"""A heuristic teacher's episodes as demonstrations for a DQfD warm start (training and retraining share them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from drs_prom.agent.model_inputs import N_CANDIDATE, candidate_matrix
from drs_prom.agent.replay_buffer import NodeReplay
from drs_prom.config import ObjectiveSettings, RewardSettings
from drs_prom.policies.contract import Policy, choose
from drs_prom.policies.recent_binds import RecentBinds
from drs_prom.sim.step_reward import step_reward

Demos = tuple[np.ndarray, np.ndarray, np.ndarray]
"""(candidates padded to the replay's width, feasibility masks, the teacher's actions)."""


def teacher_demonstrations(
    make_env: Callable[[int], Any],
    teacher: Policy,
    seeds: list[int],
    replay: NodeReplay,
    reward: RewardSettings,
    window_seconds: float,
    objectives: ObjectiveSettings | None = None,
) -> Demos:
    """Roll ``teacher`` out on one env per seed; its transitions go into ``replay`` (so TD learns its
    returns too, rewarded by ``reward`` with the composite kind's ``objectives``) and its choices come back
    for the large-margin loss. Decisions with more candidates than the replay is wide are skipped."""
    width = replay.max_nodes
    all_c, all_m, all_a = [], [], []
    for seed in seeds:
        env = make_env(seed)
        ctx = env.reset()
        recent = RecentBinds(window_seconds)
        done = False
        while not done and ctx is not None:
            cands = candidate_matrix(ctx, recent.pending(ctx))
            a, _ = choose(teacher, ctx)
            recent.record(ctx, a)
            ctx_next, info, done = env.step(a)
            nc = None if done or ctx_next is None else candidate_matrix(ctx_next, recent.pending(ctx_next))
            if len(cands) <= width and (nc is None or len(nc) <= width):
                padded = np.zeros((width, N_CANDIDATE), np.float32)
                padded[: len(cands)] = cands
                m = np.zeros(width, bool)
                m[: len(cands)] = ctx.feasible
                all_c.append(padded)
                all_m.append(m)
                all_a.append(a)
                replay.add(
                    cands[a], step_reward(info, reward, objectives), nc, None if nc is None else ctx_next.feasible, done
                )
            ctx = ctx_next
    if not all_a:
        return np.zeros((0, width, N_CANDIDATE), np.float32), np.zeros((0, width), bool), np.zeros(0, np.int64)
    return np.stack(all_c), np.stack(all_m), np.asarray(all_a)
