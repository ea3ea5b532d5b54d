"""Throwaway env with the simulator's API, used until drs_prom.sim.env lands."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from drs_prom.policy import DecisionContext
from drs_prom.types import NodeInfo, PodRequest

PROFILES = (
    np.array(
        [[1.0, 0.23, 0.11, 0.02, 0.0, 0.015], [0.54, 0.46, 0.8, 0.71, 0.0, 0.016], [1.0, 0.23, 0.13, 0.03, 0.0, 0.86]]
    )
    * 0.3
)


@dataclass
class Info:
    load_before: np.ndarray
    load_after: np.ndarray
    util_after: float
    mean_slowdown_after: float


class ToyEnv:
    def __init__(self, n_nodes: int = 4, pods: int = 40, seed: int = 0, life: int = 6) -> None:
        self.n, self.pods, self.life = n_nodes, pods, life
        self.rng = np.random.default_rng(seed)

    def _ctx(self) -> DecisionContext:
        kind = int(self.rng.integers(0, 3))
        self.cur = PROFILES[kind]
        nodes = [
            NodeInfo(
                name=f"n{i}", allocatable_cpu_m=4000, allocatable_mem_bytes=8 << 30, pod_count=len(self.running[i])
            )
            for i in range(self.n)
        ]
        return DecisionContext(
            pod=PodRequest(name=f"p{self.t}", cpu_m=500),
            nodes=nodes,
            feasible=np.ones(self.n, bool),
            load=self.load().astype(np.float32),
            pod_load=np.tile(self.cur, (self.n, 1)).astype(np.float32),
        )

    def load(self) -> np.ndarray:
        out = np.zeros((self.n, 6))
        for i, pods in enumerate(self.running):
            for vec, _ in pods:
                out[i] += vec
        return np.clip(out, 0, 1)

    def reset(self) -> DecisionContext:
        self.t = 0
        self.running: list[list[tuple[np.ndarray, int]]] = [[] for _ in range(self.n)]
        return self._ctx()

    def step(self, action: int):
        before = self.load()
        self.running[action].append((self.cur, self.t + self.life))
        self.t += 1
        self.running = [[(v, e) for v, e in pods if e > self.t] for pods in self.running]
        after = self.load()
        done = self.t >= self.pods
        return (None if done else self._ctx()), Info(before, after, float(after.mean()), 1.0), done
