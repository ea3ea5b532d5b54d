"""Fixed-size numpy replay buffers with NamedTuple batches (no TensorFlow here).

Node counts vary between decisions (and clusters), so the per-node buffer stores the
next decision's candidate matrix padded to ``max_nodes`` with a mask; the chosen
candidate's row is all the online Q(s, a) needs.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class NodeBatch(NamedTuple):
    chosen: np.ndarray  # (B, F) candidate row of the action taken
    reward: np.ndarray  # (B,)
    next_cands: np.ndarray  # (B, max_nodes, F), zero padded
    next_mask: np.ndarray  # (B, max_nodes) bool: feasible next actions
    done: np.ndarray  # (B,) float 1.0 at episode end (no bootstrap)


class FlatBatch(NamedTuple):
    state: np.ndarray  # (B, D)
    action: np.ndarray  # (B,) int
    reward: np.ndarray
    next_state: np.ndarray
    next_mask: np.ndarray  # (B, N) bool
    done: np.ndarray


class _Ring:
    """Slot bookkeeping shared by both buffers: the oldest transition is overwritten when full."""

    def __init__(self, capacity: int, seed: int) -> None:
        self.capacity = capacity
        self.size = 0
        self._pos = 0
        self._rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.size

    def _next_slot(self) -> int:
        i = self._pos
        self._pos = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)
        return i

    def _sample_slots(self, batch: int) -> np.ndarray:
        return self._rng.integers(0, self.size, size=batch)


class NodeReplay(_Ring):
    """Ring buffer of per-node transitions for the shared-network agent."""

    def __init__(self, capacity: int, n_features: int, max_nodes: int, seed: int = 0) -> None:
        if capacity < 1 or max_nodes < 1:
            raise ValueError("capacity and max_nodes must be positive")
        super().__init__(capacity, seed)
        self.max_nodes = max_nodes
        self.chosen = np.zeros((capacity, n_features), np.float32)
        self.reward = np.zeros(capacity, np.float32)
        self.next_cands = np.zeros((capacity, max_nodes, n_features), np.float32)
        self.next_mask = np.zeros((capacity, max_nodes), bool)
        self.done = np.zeros(capacity, np.float32)

    def add(
        self, chosen: np.ndarray, reward: float, next_cands: np.ndarray | None, next_mask: np.ndarray | None, done: bool
    ) -> None:
        i = self._next_slot()
        self.chosen[i] = chosen
        self.reward[i] = reward
        self.next_cands[i] = 0.0
        self.next_mask[i] = False
        if next_cands is not None and next_mask is not None and not done:
            n = len(next_cands)
            if n > self.max_nodes:
                raise ValueError(f"{n} nodes exceed the buffer's max_nodes={self.max_nodes}")
            self.next_cands[i, :n] = next_cands
            self.next_mask[i, :n] = next_mask
        # No feasible next action means nothing to bootstrap from: treat as terminal.
        self.done[i] = float(done or not self.next_mask[i].any())

    def fill(
        self, chosen: np.ndarray, reward: np.ndarray, next_cands: np.ndarray, next_mask: np.ndarray, done: np.ndarray
    ) -> None:
        """Load ``len(reward)`` ready-made transitions (retraining's rebuilt batch) into slots 0..n-1 at once.

        The arrays are taken as given (``next_cands`` already padded to ``max_nodes``, ``done`` already set).
        """
        n = len(reward)
        if n > self.capacity:
            raise ValueError(f"{n} transitions exceed the buffer's capacity={self.capacity}")
        self.chosen[:n], self.reward[:n], self.next_cands[:n], self.next_mask[:n], self.done[:n] = (
            chosen,
            reward,
            next_cands,
            next_mask,
            done,
        )
        self.size, self._pos = n, n % self.capacity

    def sample(self, batch: int) -> NodeBatch:
        idx = self._sample_slots(batch)
        return NodeBatch(self.chosen[idx], self.reward[idx], self.next_cands[idx], self.next_mask[idx], self.done[idx])


class FlatReplay(_Ring):
    """DRS's buffer: flat states and node-index actions (DRS kept only 100)."""

    def __init__(self, capacity: int, state_dim: int, n_actions: int, seed: int = 0) -> None:
        super().__init__(capacity, seed)
        self.state = np.zeros((capacity, state_dim), np.float32)
        self.action = np.zeros(capacity, np.int32)
        self.reward = np.zeros(capacity, np.float32)
        self.next_state = np.zeros((capacity, state_dim), np.float32)
        self.next_mask = np.ones((capacity, n_actions), bool)
        self.done = np.zeros(capacity, np.float32)

    def add(self, state: np.ndarray, action: int, reward: float, next_state: np.ndarray | None, done: bool) -> None:
        i = self._next_slot()
        self.state[i], self.action[i], self.reward[i] = state, action, reward
        self.next_state[i] = 0.0 if next_state is None else next_state
        self.done[i] = float(done or next_state is None)

    def sample(self, batch: int) -> FlatBatch:
        idx = self._sample_slots(batch)
        return FlatBatch(
            self.state[idx],
            self.action[idx],
            self.reward[idx],
            self.next_state[idx],
            self.next_mask[idx],
            self.done[idx],
        )
