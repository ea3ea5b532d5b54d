"""The simulator's part of a retraining run (drs_prom.retrain.candidate.RetrainSimulator).

Replay experience of the model being trained, and the gate's seeded simulator score.
Built by drs_prom.ops.retrain_job and handed to ``retrain.retrain_run.run_once``, so retraining does
not import the simulator. The scenario (``retrain.sim_scenario`` cut to
``sim_benchmark_pods`` pods unless one is given) is loaded on first use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any

import numpy as np

from drs_prom.agent.dqn import NodeDQN
from drs_prom.agent.model_inputs import candidate_matrix
from drs_prom.agent.numpy_policy import Layers
from drs_prom.agent.replay_buffer import NodeReplay
from drs_prom.config import Settings
from drs_prom.outcomes.objectives import score_episode
from drs_prom.outcomes.paired_stats import best_reference, relative_interval
from drs_prom.policies.contract import DecisionContext, Policy, input_scales
from drs_prom.policies.recent_binds import RecentBinds
from drs_prom.registry import PolicySpec, make_candidate_policy, make_policy
from drs_prom.retrain.rebuild import NodeHistory
from drs_prom.sim.cluster import Nodes
from drs_prom.sim.demos import Demos, teacher_demonstrations
from drs_prom.sim.env import EpisodeResult, SchedulingEnv
from drs_prom.sim.scenario import Scenario, load_scenario
from drs_prom.sim.step_reward import step_reward
from drs_prom.sim.twin import TwinError, twin_scenario
from drs_prom.stores.journal import Decision


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

    @property
    def spec(self) -> PolicySpec:
        """What serving builds its policies from (drs_prom.registry), never a shorter window than the scenario's."""
        return PolicySpec.from_settings(self.settings).with_window_at_least(self.scenario.metric_window_seconds)

    def _episode(self, policy: Policy, seed: int, on_step: Any = None) -> EpisodeResult:
        """One run of ``policy`` on the settings' scales as serving reads them (drs_prom.policies.contract.input_scales)."""
        env = SchedulingEnv(self.scenario, seed=seed, norm=input_scales(policy, self.settings.normalisation))
        return env.run(policy, seed=seed, on_step=on_step)

    def _run(self, layers: Layers, head: dict[str, Any] | None) -> tuple[EpisodeResult, list[float]]:
        """One seeded greedy run of ``layers`` (under its model ``head``, if any, on the scales it serves with);
        the episode and the reward of every decision."""
        settings = self.settings
        rewards: list[float] = []
        result = self._episode(
            make_candidate_policy(layers, head, self.spec),
            settings.retrain.seed,
            lambda info: rewards.append(step_reward(info, settings.reward, settings.objectives)),
        )
        return result, rewards

    def gate_seeds(self) -> list[int]:
        """The paired seeds of the non-inferiority check (apart from the replay's, the teacher's and the gate's run)."""
        base = self.settings.retrain.seed + 1_000_003
        return [base + k for k in range(self.settings.retrain.gate_seeds)]

    def versus_best_heuristic(self, layers: Layers, head: dict[str, Any] | None = None) -> dict[str, Any]:
        """The candidate against the best of ``retrain.gate_heuristics`` on ``retrain.gate_seeds`` paired seeds:
        the heuristic with the lowest mean composite and the paired interval of (candidate - it) / it
        (drs_prom.outcomes.paired_stats.relative_interval, as the bench reports it)."""
        settings, seeds = self.settings, self.gate_seeds()
        composites: dict[str, dict[int, float]] = {}
        for name in settings.retrain.gate_heuristics:
            composites[name] = {
                s: score_episode(self._episode(make_policy(name, self.spec, s), s), settings.objectives) for s in seeds
            }
        mine = {
            s: score_episode(self._episode(make_candidate_policy(layers, head, self.spec), s), settings.objectives)
            for s in seeds
        }
        best = best_reference(composites, seeds)
        interval = relative_interval(mine, composites[best])
        return {"against": best, **interval.to_json()}

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
            make_policy(teacher, self.spec, settings.retrain.seed),
            seeds,
            replay,
            settings.reward,
            settings.prometheus.window_seconds,
            settings.objectives,
        )

    def add_replay(self, learner: NodeDQN, replay: NodeReplay, episodes: int) -> int:
        """Add simulator experience of the model being trained (epsilon-greedy, seeded)."""
        settings = self.settings
        recent = RecentBinds(self.spec.metric_window_seconds)  # as the serving policy sees it
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
