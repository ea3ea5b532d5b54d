"""The learning steps: Double DQN for the per-node network, DRS's plain DQN, and schedules.

Each learner owns an online and a target network and one compiled ``learn`` step;
the training loop (train.py) only feeds batches and asks for Q values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from drs_prom.agent.networks import configure_tf, drs_network, node_scorer
from drs_prom.agent.replay_buffer import FlatBatch, NodeBatch


@dataclass(frozen=True)
class LinearSchedule:
    """Epsilon from ``start`` to ``end`` over ``steps`` calls, then flat (cleanrl style)."""

    start: float
    end: float
    steps: int

    def __call__(self, t: int) -> float:
        if self.steps <= 0:
            return self.end
        frac = min(1.0, t / self.steps)
        return self.start + frac * (self.end - self.start)

    def __repr__(self) -> str:
        return f"LinearSchedule({self.start}->{self.end} over {self.steps} steps)"


@dataclass(frozen=True)
class NodeDQNConfig:
    """Hyperparameters of ``drs``; each field's default is what the shipped model used."""

    hidden: tuple[int, ...] = (64, 64)
    lr: float = 1e-3
    gamma: float = 0.5
    """Placements keep loading a node while their pods run, so the future matters, but
    arrivals are exogenous; a short horizon learns faster and steadier than DRS's 0.9."""
    huber_delta: float = 1.0
    clip_norm: float = 10.0
    target_sync: int = 250
    """Learn steps between hard copies of the online weights into the target network."""


class NodeDQN:
    """Double DQN over a shared per-node scorer; next-state max only over feasible nodes."""

    def __init__(self, n_inputs: int, cfg: NodeDQNConfig = NodeDQNConfig(), seed: int = 0) -> None:
        tf = configure_tf()
        import keras

        self.cfg = cfg
        self.online = node_scorer(n_inputs, cfg.hidden, seed)
        self.target = node_scorer(n_inputs, cfg.hidden, seed)
        self.target.set_weights(self.online.get_weights())
        self.opt = keras.optimizers.Adam(learning_rate=cfg.lr, global_clipnorm=cfg.clip_norm)
        self.learn_steps = 0
        gamma, delta = cfg.gamma, cfg.huber_delta
        huber = keras.losses.Huber(delta=delta)
        online, target, opt = self.online, self.target, self.opt

        @tf.function(reduce_retracing=True)
        def q_values(x: Any) -> Any:
            return online(x, training=False)[:, 0]

        def td_target(reward: Any, next_cands: Any, next_mask: Any, done: Any) -> Any:
            b = tf.shape(next_cands)[0]
            m = tf.shape(next_cands)[1]
            flat = tf.reshape(next_cands, (-1, n_inputs))
            # Double DQN: the online net picks the next node among the feasible ones ...
            q_next_online = tf.reshape(online(flat, training=False)[:, 0], (b, m))
            q_next_online = tf.where(next_mask, q_next_online, tf.fill(tf.shape(q_next_online), -1e9))
            best = tf.argmax(q_next_online, axis=1, output_type=tf.int32)
            # ... and the target net values it, which removes max-operator overestimation.
            q_next_target = tf.reshape(target(flat, training=False)[:, 0], (b, m))
            q_next = tf.gather(q_next_target, best, axis=1, batch_dims=1)
            # TD target; no bootstrap past the end of an episode (done = 1).
            return tf.stop_gradient(reward + gamma * (1.0 - done) * q_next)

        @tf.function(reduce_retracing=True)
        def learn(chosen: Any, reward: Any, next_cands: Any, next_mask: Any, done: Any) -> Any:
            y = td_target(reward, next_cands, next_mask, done)
            with tf.GradientTape() as tape:
                q = online(chosen, training=True)[:, 0]
                loss = huber(y, q)
            grads = tape.gradient(loss, online.trainable_variables)
            opt.apply_gradients(zip(grads, online.trainable_variables))
            return loss

        @tf.function(reduce_retracing=True)
        def imitate(cands: Any, mask: Any, teacher: Any, margin: Any) -> Any:
            """Large-margin loss (DQfD): the teacher's node must score ``margin`` above the rest."""
            b = tf.shape(cands)[0]
            m = tf.shape(cands)[1]
            flat = tf.reshape(cands, (-1, n_inputs))
            with tf.GradientTape() as tape:
                q = tf.reshape(online(flat, training=True)[:, 0], (b, m))
                onehot = tf.one_hot(teacher, m)
                q_margin = tf.where(mask, q + margin * (1.0 - onehot), tf.fill(tf.shape(q), -1e9))
                q_teacher = tf.reduce_sum(q * onehot, axis=1)
                loss = tf.reduce_mean(tf.reduce_max(q_margin, axis=1) - q_teacher)
            grads = tape.gradient(loss, online.trainable_variables)
            opt.apply_gradients(zip(grads, online.trainable_variables))
            return loss

        self._q_values, self._learn, self._imitate = q_values, learn, imitate
        self._td_target = tf.function(td_target, reduce_retracing=True)

    def td_target(self, batch: NodeBatch) -> np.ndarray:
        """The TD targets the next learn step would regress on (for inspection and tests)."""
        return self._td_target(batch.reward, batch.next_cands, batch.next_mask, batch.done).numpy()

    def q_values(self, cands: np.ndarray) -> np.ndarray:
        return self._q_values(cands).numpy()

    def learn(self, batch: NodeBatch) -> float:
        loss = float(self._learn(*batch))
        self.learn_steps += 1
        if self.learn_steps % self.cfg.target_sync == 0:
            self.sync_target()
        return loss

    def imitate(self, cands: np.ndarray, mask: np.ndarray, teacher: np.ndarray, margin: float = 0.1) -> float:
        return float(self._imitate(cands, mask, teacher.astype(np.int32), np.float32(margin)))

    def imitate_batches(
        self, demos: tuple[np.ndarray, np.ndarray, np.ndarray], steps: int, batch: int, rng: np.random.Generator
    ) -> list[float]:
        """``steps`` large-margin steps, each on ``batch`` demonstrations (candidates, masks, the teacher's
        actions) drawn with ``rng``; the losses. No steps without demonstrations."""
        cands, masks, actions = demos
        if not len(actions):
            return []
        losses = []
        for _ in range(steps):
            idx = rng.integers(0, len(actions), size=batch)
            losses.append(self.imitate(cands[idx], masks[idx], actions[idx]))
        return losses

    def sync_target(self) -> None:
        self.target.set_weights(self.online.get_weights())


@dataclass(frozen=True)
class DRSConfig:
    """DRS's published hyperparameters (paper and prototype)."""

    hidden: int = 50
    lr: float = 0.01
    gamma: float = 0.9
    greedy: float = 0.9
    """Probability of the greedy action during training (DRS's 'epsilon' 0.9)."""
    replay: int = 100
    batch: int = 32
    target_sync: int = 100


class DRSDQN:
    """DRS's DQN: MSE on r + gamma * max_a' Q_target(s', a'), Adam lr 0.01, hard target copy."""

    def __init__(self, n_nodes: int, cfg: DRSConfig = DRSConfig(), seed: int = 0) -> None:
        tf = configure_tf()
        import keras

        self.cfg, self.n_nodes = cfg, n_nodes
        self.online = drs_network(n_nodes, cfg.hidden, seed)
        self.target = drs_network(n_nodes, cfg.hidden, seed)
        self.target.set_weights(self.online.get_weights())
        self.opt = keras.optimizers.Adam(learning_rate=cfg.lr)
        self.learn_steps = 0
        online, target, opt, gamma = self.online, self.target, self.opt, cfg.gamma

        @tf.function(reduce_retracing=True)
        def q_values(x: Any) -> Any:
            return online(x, training=False)

        @tf.function(reduce_retracing=True)
        def learn(state: Any, action: Any, reward: Any, next_state: Any, next_mask: Any, done: Any) -> Any:
            q_next = tf.reduce_max(target(next_state, training=False), axis=1)  # DRS: no mask
            y = tf.stop_gradient(reward + gamma * (1.0 - done) * q_next)
            with tf.GradientTape() as tape:
                q_all = online(state, training=True)
                q = tf.gather(q_all, action, axis=1, batch_dims=1)
                loss = tf.reduce_mean(tf.square(y - q))
            grads = tape.gradient(loss, online.trainable_variables)
            opt.apply_gradients(zip(grads, online.trainable_variables))
            return loss

        self._q_values, self._learn = q_values, learn

    def q_values(self, state: np.ndarray) -> np.ndarray:
        return self._q_values(state[None, :]).numpy()[0]

    def learn(self, batch: FlatBatch) -> float:
        loss = float(self._learn(*batch))
        self.learn_steps += 1
        if self.learn_steps % self.cfg.target_sync == 0:
            self.target.set_weights(self.online.get_weights())
        return loss
