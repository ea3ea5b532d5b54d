"""Train a candidate: a copy of the current model on the older transitions, plus simulator replay if given."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from drs_prom.agent.dqn import NodeDQN, NodeDQNConfig
from drs_prom.agent.model_inputs import N_CANDIDATE
from drs_prom.agent.networks import configure_tf, export_dense
from drs_prom.agent.numpy_policy import Layers
from drs_prom.agent.replay_buffer import NodeReplay
from drs_prom.config import Settings
from drs_prom.retrain.batch import max_nodes, node_batch
from drs_prom.retrain.rebuild import NodeHistory, Transition
from drs_prom.stores.journal import Decision


class RetrainSimulator(Protocol):
    """The simulator's part of a run: replay experience for training and a seeded score for the gate.

    Implemented by drs_prom.sim.retrain_checks.SimulatorChecks and injected by the caller
    (drs_prom.ops.retrain_job), so retraining itself never imports the simulator.
    """

    @property
    def n_nodes(self) -> int: ...

    @property
    def n_pods(self) -> int: ...

    def add_replay(self, learner: NodeDQN, replay: NodeReplay, episodes: int) -> int:
        """Add ``episodes`` epsilon-greedy episodes of ``learner`` to ``replay``; the transitions added."""
        ...

    def fitted(
        self, decisions: Sequence[Decision], ends: Mapping[str, float], history: NodeHistory
    ) -> tuple[RetrainSimulator | None, str]:
        """The simulator of this cluster's twin built from the run's journal and history (``retrain.twin``)
        and one line saying what it is; None and why when no twin can be built."""
        ...

    def demonstrations(
        self, teacher: str, episodes: int, replay: NodeReplay
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``episodes`` episodes of the heuristic ``teacher`` (registry name): their transitions go into
        ``replay``; returns (padded candidates, masks, the teacher's actions) for the large-margin loss."""
        ...

    def composite(self, layers: Layers, head: dict[str, Any] | None = None) -> float:
        """Minus the composite objective (drs_prom.outcomes.objectives) of the greedy policy in one seeded run."""
        ...

    def versus_best_heuristic(self, layers: Layers, head: dict[str, Any] | None = None) -> dict[str, Any]:
        """The greedy policy against the best heuristic on paired seeds (``retrain.gate_seeds``): ``against``
        (that heuristic) and the paired interval of the composite, relative (mean, low, high, seeds)."""
        ...

    def score(self, layers: Layers, head: dict[str, Any] | None = None) -> float:
        """Mean reward per decision of the greedy policy ``layers`` (under its ``head``, if the model has one)
        in one seeded run (higher is better)."""
        ...


def _hidden_of(layers: Layers) -> tuple[int, ...]:
    return tuple(int(k.shape[1]) for k, _, _ in layers[:-1])


@dataclass
class Trained:
    model: Any  # the Keras online network
    layers: list
    steps: int
    seconds: float
    sim_transitions: int
    gamma: float
    hidden: tuple[int, ...]


def train_candidate(
    start_layers: Layers | None,
    train: Sequence[Transition],
    settings: Settings,
    simulator: RetrainSimulator | None = None,
    teach: bool = False,
) -> Trained:
    """A copy of the starting model trained on ``train`` (+ simulator replay) for ``epochs`` passes.

    ``teach`` (the twin): DQfD from ``retrain.twin_teacher``: its episodes in the simulator join the
    replay, ``twin_imitate_steps`` large-margin steps rank its choices first, and, as in DQfD, a
    large-margin step on its decisions follows every TD step, so RL departs from the teacher only
    where the TD targets say it pays more than the margin.
    """
    configure_tf()
    import keras  # after configure_tf: TensorFlow reads its thread settings at import

    t0 = time.perf_counter()
    rs = settings.retrain
    keras.utils.set_random_seed(rs.seed)
    hidden = _hidden_of(start_layers) if start_layers else NodeDQNConfig().hidden
    cfg = NodeDQNConfig(hidden=hidden)
    agent = NodeDQN(N_CANDIDATE, cfg, seed=rs.seed)
    if start_layers:
        weights = [w for k, b, _ in start_layers for w in (k, b)]
        agent.online.set_weights(weights)
        agent.sync_target()
    width = max_nodes(train)
    sim = simulator if rs.sim_replay_episodes or teach else None
    if sim is not None:
        width = max(width, sim.n_nodes)
    teach = teach and sim is not None and bool(rs.twin_teacher) and rs.twin_teacher_episodes > 0
    episodes = rs.sim_replay_episodes + (rs.twin_teacher_episodes if teach else 0)
    cap = len(train) + (episodes * max(sim.n_pods, 1) if sim is not None else 0)
    replay = NodeReplay(cap, N_CANDIDATE, width, seed=rs.seed)
    replay.fill(*node_batch(train, width, settings.prometheus.window_seconds))
    demos = None
    if teach and sim is not None:
        demos = sim.demonstrations(rs.twin_teacher, rs.twin_teacher_episodes, replay)
        agent.imitate_batches(demos, rs.twin_imitate_steps, rs.batch_size, np.random.default_rng(rs.seed))
        agent.sync_target()
    sim_n = sim.add_replay(agent, replay, rs.sim_replay_episodes) if sim is not None else 0
    steps = rs.epochs * max(1, int(np.ceil(len(replay) / rs.batch_size)))
    rng = np.random.default_rng(rs.seed)
    for _ in range(steps):
        agent.learn(replay.sample(rs.batch_size))
        if demos is not None:
            agent.imitate_batches(demos, 1, rs.batch_size, rng)
    agent.sync_target()
    return Trained(agent.online, export_dense(agent.online), steps, time.perf_counter() - t0, sim_n, cfg.gamma, hidden)
