"""The learning steps on literal data: targets, masking, and that learning moves Q the right way."""

import numpy as np
import pytest

from drs_prom.agent.dqn import DRSDQN, LinearSchedule, NodeDQN, NodeDQNConfig
from drs_prom.agent.replay_buffer import FlatReplay, NodeBatch, NodeReplay

F = 5


def test_linear_schedule():
    s = LinearSchedule(1.0, 0.1, 10)
    assert s(0) == 1.0 and s(5) == pytest.approx(0.55) and s(10) == pytest.approx(0.1) and s(99) == pytest.approx(0.1)
    assert "1.0->0.1" in repr(s)


def test_double_dqn_target_ignores_infeasible_next_nodes():
    agent = NodeDQN(F, NodeDQNConfig(hidden=(8,), gamma=0.5), seed=0)
    rng = np.random.default_rng(0)
    cands = rng.uniform(0, 1, (1, 3, F)).astype(np.float32)
    q = agent.q_values(cands[0])
    mask = np.ones((1, 3), bool)
    mask[0, int(np.argmax(q))] = False  # hide the best node
    feasible_best = q[mask[0]].max()
    batch = NodeBatch(cands[:, 0], np.array([1.0], np.float32), cands, mask, np.array([0.0], np.float32))
    # online == target after construction, so the Double DQN target is r + gamma * max over feasible
    assert agent.td_target(batch)[0] == pytest.approx(1.0 + 0.5 * feasible_best, rel=1e-5)
    done = batch._replace(done=np.array([1.0], np.float32))
    assert agent.td_target(done)[0] == pytest.approx(1.0)


def test_learning_ranks_candidates_by_reward():
    """A one-step problem (gamma 0): reward = -x[0]; after training, Q orders nodes by -x[0]."""
    agent = NodeDQN(F, NodeDQNConfig(hidden=(16,), gamma=0.0, lr=5e-3), seed=1)
    rng = np.random.default_rng(1)
    replay = NodeReplay(2000, F, 4, seed=1)
    for _ in range(2000):
        x = rng.uniform(0, 1, F).astype(np.float32)
        replay.add(x, -float(x[0]), None, None, True)
    for _ in range(400):
        agent.learn(replay.sample(64))
    probe = rng.uniform(0, 1, (50, F)).astype(np.float32)
    q = agent.q_values(probe)
    assert np.corrcoef(q, -probe[:, 0])[0, 1] > 0.95


def test_imitation_makes_the_teacher_choice_the_argmax():
    agent = NodeDQN(F, NodeDQNConfig(hidden=(16,)), seed=2)
    rng = np.random.default_rng(2)
    cands = rng.uniform(0, 1, (256, 4, F)).astype(np.float32)
    mask = np.ones((256, 4), bool)
    teacher = np.argmax(cands[:, :, 1], axis=1)  # teacher prefers the largest feature 1
    for _ in range(300):
        idx = rng.integers(0, 256, 64)
        agent.imitate(cands[idx], mask[idx], teacher[idx])
    chosen = np.array([np.argmax(agent.q_values(c)) for c in cands])
    assert np.mean(chosen == teacher) > 0.9


def test_node_replay_pads_and_marks_dead_ends_terminal():
    r = NodeReplay(3, F, 4)
    r.add(np.ones(F), 1.0, np.ones((2, F)), np.array([True, False]), False)
    r.add(np.ones(F), 2.0, np.ones((2, F)), np.array([False, False]), False)  # nothing feasible next
    assert r.next_mask[0].tolist() == [True, False, False, False] and r.done[0] == 0.0
    assert r.done[1] == 1.0
    with pytest.raises(ValueError, match="max_nodes"):
        r.add(np.ones(F), 0.0, np.ones((5, F)), np.ones(5, bool), False)
    for k in range(5):
        r.add(np.full(F, k), float(k), None, None, True)
    assert len(r) == 3  # ring buffer


def test_drs_dqn_learns_which_node_pays():
    """DRS's DQN: action 2 always pays 1, others 0; after training its Q for action 2 is highest."""
    agent = DRSDQN(4, seed=0)
    replay = FlatReplay(100, 30, 4)
    rng = np.random.default_rng(0)
    for _ in range(100):
        a = int(rng.integers(0, 4))
        replay.add(rng.uniform(0, 100, 30).astype(np.float32), a, float(a == 2), None, True)
    for _ in range(200):
        agent.learn(replay.sample(32))
    q = agent.q_values(rng.uniform(0, 100, 30).astype(np.float32))
    assert int(np.argmax(q)) == 2
