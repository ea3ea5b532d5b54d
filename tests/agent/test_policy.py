import numpy as np
import pytest

from drs_prom.agent.model_inputs import N_CANDIDATE
from drs_prom.agent.numpy_policy import DRSOriginalPolicy, NodeAgentPolicy
from drs_prom.errors import ModelError
from drs_prom.policies.contract import DecisionContext, choose
from drs_prom.types import NodeInfo, PodRequest
from tests.specs import WINDOW


def layers(n_in, n_out, seed=0):
    rng = np.random.default_rng(seed)
    return [
        (rng.normal(0, 0.3, (n_in, 8)).astype(np.float32), np.zeros(8, np.float32), "relu"),
        (rng.normal(0, 0.3, (8, n_out)).astype(np.float32), np.zeros(n_out, np.float32), "linear"),
    ]


def ctx(n, feasible):
    rng = np.random.default_rng(n)
    return DecisionContext(
        pod=PodRequest("p", cpu_m=500),
        nodes=[NodeInfo(f"n{i}", 4000, 8 << 30) for i in range(n)],
        feasible=np.asarray(feasible, bool),
        load=rng.uniform(0, 1, (n, 6)).astype(np.float32),
        pod_load=np.full((n, 6), 0.1, np.float32),
    )


@pytest.mark.parametrize("n", [1, 4, 50])
def test_node_policy_scores_any_size_and_never_picks_infeasible(n):
    pol = NodeAgentPolicy(layers(N_CANDIDATE, 1), WINDOW)
    for seed in range(20):
        feasible = np.random.default_rng(seed).random(n) < 0.4
        feasible[seed % n] = True
        c = ctx(n, feasible)
        scores = pol.score(c)
        assert scores.shape == (n,)
        assert np.all(np.isneginf(scores[~feasible])) and np.all(np.isfinite(scores[feasible]))
        idx, _ = choose(pol, c)
        assert feasible[idx]


def test_drs_original_masks_and_refuses_other_node_counts():
    pol = DRSOriginalPolicy(layers(30, 4), n_nodes=4)
    for k in range(4):
        feasible = np.ones(4, bool)
        feasible[k] = False
        idx, _ = choose(pol, ctx(4, feasible))
        assert idx != k
    with pytest.raises(ModelError, match="trained for 4 nodes"):
        pol.score(ctx(5, np.ones(5, bool)))


def test_node_policy_remembers_its_binds_for_one_rate_window():
    pol = NodeAgentPolicy(layers(N_CANDIDATE, 1), metric_window_seconds=30.0)
    c = ctx(4, np.ones(4, bool))
    idx, _ = choose(pol, c)
    pending = pol.recent.pending(c)
    assert pending[idx].sum() > 0 and pending[np.arange(4) != idx].sum() == 0
    later = DecisionContext(c.pod, c.nodes, c.feasible, c.load, c.pod_load, now=c.now + 31.0)
    assert pol.recent.pending(later).sum() == 0
