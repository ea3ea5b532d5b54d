"""Training targets for the top-k correction: what each of the heuristic's k best nodes really costs.

At a few decisions of an episode scheduled by the base heuristic, each of its top-k nodes is
tried on a fork of the simulation and the rest of the episode is played by the base
heuristic (its memory told the bind), so every candidate's cost is the episode's final
composite score (drs_prom.outcomes.objectives, the benchmark's ranking) under the same future
arrivals, work and demand: common random numbers, so the difference between two candidates
is exact for that future and not buried in workload noise. Their mean over many futures is
the base policy's Q-value difference, which the network learns; choosing its argmax is
one step of policy iteration on the heuristic (Bertsekas' rollout), learned so that it runs
without a simulator.

The first candidate is the base heuristic's own choice, which is what the episode then
binds, so its cost is the unforked episode's final score (no fork needed).
"""

from __future__ import annotations

import copy
import multiprocessing as mp
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from drs_prom.agent.model_inputs import N_CANDIDATE, candidate_matrix
from drs_prom.policies.contract import DecisionContext, choose
from drs_prom.sim.env import SchedulingEnv, scenario_spec, unclipped_env
from drs_prom.sim.generator import GeneratorParams, training_scenario
from drs_prom.sim.scenario import Scenario
from drs_prom_research.clairvoyant import fork_env, play_out
from drs_prom_research.corrector import BASES, top_k


@dataclass(frozen=True)
class Samples:
    """Labelled decisions: for each, the top-k candidates' input rows and final composite scores."""

    rows: np.ndarray  # (D, k, F) float32, zero rows where a decision had fewer candidates
    mask: np.ndarray  # (D, k) bool: real candidates
    cost: np.ndarray  # (D, k) float64: the episode's composite if this candidate was bound (lower is better)
    cluster: np.ndarray  # (D,) int: the training seed the decision came from
    decision: np.ndarray  # (D,) int: the decision's index in its episode (rows can be rebuilt by replaying it)

    def __len__(self) -> int:
        return len(self.cost)

    @staticmethod
    def concat(parts: Sequence[Samples], k: int) -> Samples:
        parts = [p for p in parts if len(p)]
        if not parts:
            return Samples(
                np.zeros((0, k, N_CANDIDATE), np.float32),
                np.zeros((0, k), bool),
                np.zeros((0, k)),
                np.zeros(0, int),
                np.zeros(0, int),
            )
        return Samples(*(np.concatenate([getattr(p, f) for p in parts]) for f in FIELDS))


FIELDS = ("rows", "mask", "cost", "cluster", "decision")


def save_samples(samples: Samples, path: str) -> None:
    """npz (no pickle): labelling is the expensive part, fitting is re-run."""
    np.savez_compressed(path, **{f: getattr(samples, f) for f in FIELDS})


def load_samples(path: str) -> Samples:
    with np.load(path, allow_pickle=False) as data:
        return Samples(*(data[f] for f in FIELDS))


def _window_cost(env: SchedulingEnv, policy: object, until: float) -> float:
    """Minus the composite reward the rest of the episode collects from now until simulated time ``until``."""
    cost = 0.0
    ctx = env.ctx
    while ctx is not None:
        ctx, info, _ = env.step(choose(policy, ctx)[0])  # type: ignore[arg-type]
        cost -= info.composite_reward(env.objective_settings)
        if info.t >= until:
            break
    return cost


def label_episode(
    scenario: Scenario,
    seed: int,
    base: str,
    k: int,
    decisions: int,
    cluster_id: int = 0,
    horizon: float | None = None,
) -> Samples:
    """Schedule one episode with ``base``; at ``decisions`` random decisions label the top-k candidates.

    ``horizon``: None labels each candidate with the episode's final composite; a number H labels it
    with the composite the next H x (mean pod work) simulated seconds collect, which ignores effects
    further out but not the far future's chaos (one different bind reshuffles every later one).
    """
    env = unclipped_env(scenario, seed)
    policy = BASES[base](seed, scenario_spec(scenario).metric_window_seconds)  # as sim_policy builds it
    ctx: DecisionContext | None = env.reset(seed)
    n_total = len(env.workload.arrival)
    window = None if horizon is None else horizon * float(np.mean(env.workload.work))
    rng = np.random.default_rng([seed, 7])
    picked = set(rng.choice(n_total, size=min(decisions, n_total), replace=False).tolist()) if n_total else set()
    rows: list[np.ndarray] = []
    costs: list[np.ndarray] = []
    masks: list[np.ndarray] = []
    when: list[int] = []
    own: list[int] = []  # rows whose first candidate's cost is the unforked episode's
    t = 0
    while ctx is not None:
        if t in picked and int(np.count_nonzero(ctx.feasible)) >= 2:
            top = top_k(policy.node_scores(ctx), ctx.feasible, k)
            r = np.zeros((k, N_CANDIDATE), np.float32)
            r[: len(top)] = candidate_matrix(ctx, policy.recent.pending(ctx))[top]
            c = np.full(k, np.nan)
            for j in range(0 if window is not None else 1, len(top)):
                fork = fork_env(env)
                branch = copy.deepcopy(policy)
                branch.bound(ctx, int(top[j]))
                if window is None:
                    fork.step(int(top[j]))
                    c[j] = play_out(fork, branch)[0]
                else:
                    _, info, _ = fork.step(int(top[j]))
                    c[j] = -info.composite_reward(fork.objective_settings)
                    if info.t < ctx.now + window:
                        c[j] += _window_cost(fork, branch, ctx.now + window)
            m = np.zeros(k, bool)
            m[: len(top)] = True
            rows.append(r)
            costs.append(c)
            masks.append(m)
            when.append(t)
            if window is None:
                own.append(len(costs) - 1)
        idx, _ = choose(policy, ctx)
        ctx, _, _ = env.step(idx)
        t += 1
    final = env.result(policy.name).composite
    for i in own:
        costs[i][0] = final
    if not rows:
        return Samples.concat([], k)
    return Samples(
        np.stack(rows), np.stack(masks), np.stack(costs), np.full(len(rows), cluster_id, dtype=int), np.asarray(when)
    )


def _label_training_cluster(args: tuple[int, str, int, int, GeneratorParams | None, float | None]) -> Samples:
    seed, base, k, decisions, params, horizon = args
    return label_episode(training_scenario(seed, params), seed, base, k, decisions, cluster_id=seed, horizon=horizon)


def label_training_clusters(
    seeds: Sequence[int],
    base: str = "capacity-balanced-overload",
    k: int = 3,
    decisions: int = 8,
    params: GeneratorParams | None = None,
    workers: int = 2,
    progress: bool = True,
    horizon: float | None = None,
) -> Samples:
    """Label ``decisions`` decisions on each generated training cluster (one episode each), in ``workers`` processes.

    Each training seed is its own cluster *and* its own workload, so no two samples share a future.
    Processes are forked before TensorFlow is imported (the caller fits afterwards).
    """
    from tqdm import tqdm

    jobs = [(int(s), base, k, decisions, params, horizon) for s in seeds]
    parts: list[Samples] = []
    bar = tqdm(total=len(jobs), desc="label rollouts", unit="cluster", disable=not progress, leave=False)
    if workers <= 1:
        for job in jobs:
            parts.append(_label_training_cluster(job))
            bar.update(1)
    else:
        ctx = mp.get_context("fork" if os.name == "posix" else "spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            for part in pool.map(_label_training_cluster, jobs, chunksize=1):
                parts.append(part)
                bar.update(1)
    bar.close()
    return Samples.concat(parts, k)
