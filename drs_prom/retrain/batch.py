"""Transitions -> the learner's arrays (chosen candidate rows, rewards, padded next candidates, masks, done)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from drs_prom.agent.model_inputs import N_CANDIDATE, candidate_matrix
from drs_prom.policies.recent_binds import RecentBinds
from drs_prom.retrain.rebuild import Transition


def max_nodes(trans: Sequence[Transition]) -> int:
    """The most candidate nodes in any state or next state of ``trans`` (the padding width)."""
    widths = [len(t.ctx.nodes) for t in trans] + [len(t.next_ctx.nodes) for t in trans if t.next_ctx is not None]
    return max(widths, default=0)


def node_batch(trans: Sequence[Transition], max_nodes: int, window_seconds: float) -> tuple[np.ndarray, ...]:
    """Arrays for NodeReplay/holdout: chosen rows, rewards, padded next candidates, masks, done.

    The serving policy adds the load of its own binds of the last ``window_seconds`` to
    each node's inputs (RecentBinds); replaying the journal's binds in time order gives
    the model those same inputs here, so training never sees what serving does not.
    """
    trans = sorted(trans, key=lambda t: t.ctx.now)
    recent = RecentBinds(window_seconds)
    n = len(trans)
    chosen = np.zeros((n, N_CANDIDATE), np.float32)
    reward = np.zeros(n, np.float32)
    nxt = np.zeros((n, max_nodes, N_CANDIDATE), np.float32)
    mask = np.zeros((n, max_nodes), bool)
    done = np.zeros(n, np.float32)
    for i, t in enumerate(trans):
        chosen[i] = candidate_matrix(t.ctx, recent.pending(t.ctx))[t.action]
        recent.record(t.ctx, t.action)
        reward[i] = t.reward
        if t.next_ctx is not None:
            c = candidate_matrix(t.next_ctx, recent.pending(t.next_ctx))
            nxt[i, : len(c)] = c
            mask[i, : len(c)] = t.next_ctx.feasible
        done[i] = float(not mask[i].any())
    return chosen, reward, nxt, mask, done
