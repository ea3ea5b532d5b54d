"""The simulator's part of a retraining run (drs_prom.retrain.candidate.RetrainSimulator).

Replay experience of the model being trained, and the gate's seeded simulator score.
Built by drs_prom.retrain_job and handed to ``retrain.run.run_once``, so retraining does
not import the simulator. The scenario (``retrain.sim_scenario`` cut to
``sim_benchmark_pods`` pods unless one is given) is loaded on first use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any

import numpy as np

from drs_prom.agent.corrector import TopKCorrection
from drs_prom.agent.dqn import NodeDQN
from drs_prom.agent.features import candidate_matrix
from drs_prom.agent.policy import Layers, NodeAgentPolicy
from drs_prom.agent.replay import NodeReplay
from drs_prom.config import Settings
from drs_prom.journal import Decision
from drs_prom.objectives import score_episode
from drs_prom.policy import DecisionContext, Policy
from drs_prom.recent_binds import RecentBinds
from drs_prom.registry import make_policy
from drs_prom.retrain.rebuild import NodeHistory
from drs_prom.sim.cluster import Nodes
from drs_prom.sim.demos import Demos, teacher_demonstrations
from drs_prom.sim.env import EpisodeResult, SchedulingEnv
from drs_prom.sim.scenario import Scenario, load_scenario
from drs_prom.sim.step_reward import step_reward
from drs_prom.sim.twin import TwinError, twin_scenario


def benchmark_scenario(settings: Settings) -> Scenario:
    """The gate's simulator run: the configured scenario cut to ``sim_benchmark_pods`` pods."""
    return load_scenario(settings.retrain.sim_scenario).truncated(settings.retrain.sim_benchmark_pods)


class SimulatorChecks:
    """RetrainSimulator over one scenario (default: ``benchmark_scenario(settings)``, loaded lazily)."""

    def __init__(self, settings: Settings, scenario: Scenario | None = None) -> None:
        self.settings = settings
        self._given = scenario

    @cached_property
    def scenario(self) -> Scenario:
        return self._given if self._given is not None else benchmark_scenario(self.settings)

    @property
    def n_nodes(self) -> int:
        return len(Nodes.from_scenario(self.scenario))

    @property
    def n_pods(self) -> int:
        return self.scenario.n_pods

    def fitted(
        self, decisions: Sequence[Decision], ends: Mapping[str, float], history: NodeHistory
    ) -> tuple[SimulatorChecks | None, str]:
        """Checks on the twin of the cluster the journal describes (drs_prom.sim.twin); None and why if none can be built."""
        settings = self.settings
        try:
            twin = twin_scenario(
                decisions,
                ends,
                settings.normalisation,
                settings.prometheus.window_seconds,
                window_seconds=settings.retrain.twin_window_seconds,
                max_pods=settings.retrain.twin_max_pods,
                history=history,
            )
        except TwinError as exc:
            return None, f"no twin: {exc}"
        return SimulatorChecks(settings, twin), twin.description

    def _run(self, layers: Layers, head: dict[str, Any] | None) -> tuple[EpisodeResult, list[float]]:
        """One seeded greedy run of ``layers`` (the corrected heuristic under a top-k ``head``, on unclipped
        loads as it serves); the episode and the reward of every decision."""
        settings = self.settings
        policy: Policy = NodeAgentPolicy(layers)
        norm = settings.normalisation
        if head:
            policy = TopKCorrection.from_head(layers, head, metric_window_seconds=settings.prometheus.window_seconds)
            norm = norm.model_copy(update={"clip": False})
        env = SchedulingEnv(self.scenario, seed=settings.retrain.seed, norm=norm)
        rewards: list[float] = []
        result = env.run(
            policy,
            seed=settings.retrain.seed,
            on_step=lambda info: rewards.append(step_reward(info, settings.reward, settings.objectives)),
        )
        return result, rewards

    def score(self, layers: Layers, head: dict[str, Any] | None = None) -> float:
        """Mean reward per decision of the greedy policy in one seeded simulator run (higher is better)."""
        rewards = self._run(layers, head)[1]
        return float(np.mean(rewards)) if rewards else float("nan")

    def composite(self, layers: Layers, head: dict[str, Any] | None = None) -> float:
        """Minus the composite objective of the greedy policy in one seeded simulator run (higher is better)."""
        return -score_episode(self._run(layers, head)[0], self.settings.objectives)

    def demonstrations(self, teacher: str, episodes: int, replay: NodeReplay) -> Demos:
        """The heuristic ``teacher``'s episodes (seeds apart from the replay's and the gate's)."""
        settings = self.settings
        seeds = [settings.retrain.seed + 104_729 + k for k in range(episodes)]
        return teacher_demonstrations(
            lambda seed: SchedulingEnv(self.scenario, seed=seed, norm=settings.normalisation),
            make_policy(teacher, settings.retrain.seed),
            seeds,
            replay,
            settings.reward,
            settings.prometheus.window_seconds,
            settings.objectives,
        )

    def add_replay(self, learner: NodeDQN, replay: NodeReplay, episodes: int) -> int:
        """Add simulator experience of the model being trained (epsilon-greedy, seeded)."""
        settings = self.settings
        recent = RecentBinds(settings.prometheus.window_seconds)  # as the serving policy sees it
        rng = np.random.default_rng(settings.retrain.seed)
        env = SchedulingEnv(self.scenario, seed=settings.retrain.seed + 7919, norm=settings.normalisation)
        added = 0
        for _ in range(episodes):
            ctx: DecisionContext | None = env.reset()
            done = False
            while not done and ctx is not None:
                cands = candidate_matrix(ctx, recent.pending(ctx))
                mask = np.asarray(ctx.feasible, bool)
                if rng.random() < 0.1:
                    a = int(rng.choice(np.flatnonzero(mask)))
                else:
                    a = int(np.argmax(np.where(mask, learner.q_values(cands), -np.inf)))
                recent.record(ctx, a)
                nxt, info, done = env.step(a)
                if done or nxt is None:
                    nc, next_mask = None, None
                else:
                    nc, next_mask = candidate_matrix(nxt, recent.pending(nxt)), nxt.feasible
                if len(cands) <= replay.max_nodes and (nc is None or len(nc) <= replay.max_nodes):
                    replay.add(cands[a], step_reward(info, settings.reward, settings.objectives), nc, next_mask, done)
                    added += 1
                ctx = nxt
        return added
