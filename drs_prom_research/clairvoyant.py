"""Clairvoyant references: how low imbalance gets on a workload when the future is known.

No scheduler can know future arrivals, work and demand; these read them from the
simulator, to show how much of kube-default's imbalance any policy could remove.

``clairvoyant_run``: at each decision, try every feasible node, play the rest of the
episode with a base policy (``balanced-load``) on a fork of the simulation, and bind
where the episode's composite score (drs_prom.outcomes.objectives, the benchmark's ranking) ends
lowest; ``cost="imbalance"`` minimises DRS's time-averaged imbalance instead.
It is Bertsekas' *fortified* rollout: it keeps the best complete schedule found so far
and follows it whenever no branch beats it, so on this deterministic simulator it is
never worse than its base policy. It finds an achievable schedule, not the optimum.

``migration_floor``: the imbalance left if running pods could even be moved at will.
"""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Callable

import numpy as np

from drs_prom.errors import ConfigError
from drs_prom.policies.contract import DecisionContext, Policy, PolicyBase, choose
from drs_prom.registry import PolicySpec
from drs_prom.sim.cluster import Nodes
from drs_prom.sim.env import EpisodeResult, SchedulingEnv, policy_norm, scaled_load, sim_policy
from drs_prom.sim.scenario import Scenario
from drs_prom.sim.workload import generate

CLAIRVOYANT = "clairvoyant"
"""Not a policy: the rollout below, which reads the future from the simulator. Asking the benchmark for it also
reports the migration floor (free re-placement at every instant), where the scenario allows one."""


def told(policy: Policy, ctx: DecisionContext, node: int) -> Policy:
    """Tell ``policy`` that ``node`` was bound, chosen by it or not (``Policy.bound``)."""
    policy.bound(ctx, node)
    return policy


def fork_env(env: SchedulingEnv) -> SchedulingEnv:
    """An independent copy of ``env`` mid-episode, sharing only the read-only scenario, nodes and workload."""
    memo = {
        id(env.scenario): env.scenario,
        id(env.nodes): env.nodes,
        id(env.workload): env.workload,
        id(env.norm): env.norm,
    }
    return copy.deepcopy(env, memo)


def play_out(env: SchedulingEnv, policy: Policy, cost: str = "composite") -> tuple[float, list[int]]:
    """Bind the rest of the episode with ``policy``; the episode's cost (composite or imbalance) and the nodes chosen."""
    actions: list[int] = []
    ctx = env.ctx
    while ctx is not None:
        idx = choose(policy, ctx)[0]
        actions.append(idx)
        ctx, _, _ = env.step(idx)
    if cost == "imbalance":
        return env.result("rollout").imbalance, actions
    return env.result("rollout").composite, actions


def branch_nodes(ctx: DecisionContext, base: Policy, top_k: int | None, choice_first: bool = False) -> np.ndarray:
    """Every feasible node, or only the ``top_k`` the base policy scores highest (scored on a copy: its memory is
    told of a decision only once it is taken).

    Every feasible node comes in index order; with ``choice_first`` the base's own choice leads them (the
    look-ahead's gate compares every candidate with it). The ``top_k`` best come best first either way.
    """
    feasible = np.flatnonzero(ctx.feasible)
    every = top_k is None or len(feasible) <= top_k
    if every and (not choice_first or len(feasible) <= 1):
        return feasible
    scores = np.nan_to_num(np.asarray(copy.deepcopy(base).score(ctx), dtype=np.float64)[feasible], nan=-np.inf)
    order = np.argsort(-scores, kind="stable")  # ties towards the lowest index, as in choose
    if every:
        return np.concatenate([feasible[order[:1]], np.delete(feasible, order[0])])
    return feasible[order[:top_k]]


def clairvoyant_actions(
    env: SchedulingEnv, seed: int, base: Policy, cost: str = "composite", top_k: int | None = None
) -> list[int]:
    """The fortified rollout's node index for every decision of the episode of ``seed`` (``env`` ends at its end).

    ``base`` is the base policy at the episode start; every branch gets its own deep copy,
    whose memory has been told the decisions taken so far. ``top_k`` branches only on the
    base's best ``top_k`` nodes per decision, which makes large clusters affordable
    (decisions x top_k play-outs); the result is still never worse than the base.
    """
    env.reset(seed)
    if cost not in ("composite", "imbalance"):
        raise ConfigError(f"unknown clairvoyant cost {cost!r}; use composite or imbalance")
    if top_k is not None and top_k < 1:
        raise ConfigError(f"clairvoyant top_k must be at least 1, got {top_k}")
    best_cost, best = play_out(fork_env(env), copy.deepcopy(base), cost)
    taken: list[int] = []
    while env.ctx is not None:
        ctx = env.ctx
        for candidate in branch_nodes(ctx, base, top_k):
            fork = fork_env(env)
            fork.step(int(candidate))
            value, tail = play_out(fork, told(copy.deepcopy(base), ctx, int(candidate)), cost)
            if value < best_cost - 1e-12:
                best_cost, best = value, [*taken, int(candidate), *tail]
        node = best[len(taken)]
        taken.append(node)
        told(base, ctx, node)
        env.step(node)
    return taken


class FixedSchedule(PolicyBase):
    """Binds a fixed sequence of node indices, one per decision (a schedule found beforehand)."""

    def __init__(self, actions: list[int], name: str = CLAIRVOYANT) -> None:
        self.actions = actions
        self.name = name
        self.k = 0

    def score(self, ctx: DecisionContext) -> np.ndarray:
        scores = np.full(len(ctx.nodes), -np.inf)
        scores[self.actions[self.k]] = 0.0
        self.k += 1
        return scores


def clairvoyant_run(
    scenario: Scenario,
    seed: int,
    base: str = "balanced-load",
    cost: str = "composite",
    top_k: int | None = None,
    spec: PolicySpec | None = None,
) -> EpisodeResult:
    """The episode of ``seed`` under the clairvoyant rollout over ``base`` (built from ``spec``, default the
    configured one), summarised like any benchmark run."""
    wall0 = time.perf_counter()
    policy = sim_policy(base, scenario, seed, spec)
    env = SchedulingEnv(scenario, seed=seed, norm=policy_norm(policy, scenario))  # the base sees what bench shows it
    actions = clairvoyant_actions(env, seed, policy, cost, top_k)
    result = env.run(FixedSchedule(actions), seed=seed)
    result.wall_seconds = result.policy_seconds = time.perf_counter() - wall0  # the search is the policy's time
    return result


def _compositions(count: int, parts: int) -> np.ndarray:
    """Every way to put ``count`` identical pods on ``parts`` nodes: (m, parts) int rows summing to ``count``."""
    if parts == 1:
        return np.array([[count]])
    rows = [
        np.column_stack([np.full(len(rest), k), rest])
        for k in range(count + 1)
        for rest in [_compositions(count - k, parts - 1)]
    ]
    return np.concatenate(rows)


def _best_spread(
    counts: tuple[int, ...], demand: np.ndarray, idle: np.ndarray, to_features: Callable[[np.ndarray], np.ndarray]
) -> float:
    """Lowest imbalance over every placement of ``counts[j]`` pods of demand row ``demand[j]`` on the nodes.

    Nodes are identical, so the first kind's placements are taken up to node order (sorted).
    """
    n = len(idle)
    best = np.inf
    kinds = [j for j, c in enumerate(counts) if c > 0]
    if not kinds:
        return float(to_features(idle[None])[0].std(axis=0).sum())
    first = _compositions(counts[kinds[0]], n)
    first = first[np.all(np.diff(first, axis=1) <= 0, axis=1)]
    rest = np.zeros((1, n, demand.shape[1]))
    for j in kinds[1:]:
        comp = _compositions(counts[j], n)
        rest = (rest[:, None] + comp[None, :, :, None] * demand[j]).reshape(-1, n, demand.shape[1])
    for row in first:
        load = idle + row[:, None] * demand[kinds[0]] + rest
        best = min(best, float(to_features(load).std(axis=1).sum(axis=1).min()))
    return best


def migration_floor(scenario: Scenario, seed: int) -> float:
    """Time-averaged imbalance if every running pod could be moved to its best node at every instant.

    The running set is the contention-free one (each pod runs from its arrival for its
    work). A schedule that slows no pod has exactly this running set, so no placement,
    clairvoyant or not, goes below the floor at any instant: it may not move a pod once
    bound. Contention stretches pods and so changes the running set (of the clairvoyant
    runs on drs-paper seeds 0-4, one ends 1.2% below the floor, the others 6-20% above),
    so under contention it is a close reference, not a strict bound. Needs identical
    nodes and exact profile demands (no ``demand_jitter``), so that pods of a profile
    are interchangeable.
    """
    nodes = Nodes.from_scenario(scenario)
    if len(scenario.nodes) != 1 or any(p.demand_jitter for p in scenario.profiles.values()) or scenario.background:
        raise ConfigError("migration_floor needs one node type, profiles without demand_jitter and no background load")
    wl = generate(scenario, seed)
    kinds = sorted(set(wl.profiles))
    kind = np.array([kinds.index(p) for p in wl.profiles])
    demand = np.array([wl.demand[kind == k][0] for k in range(len(kinds))])
    cap, norm = nodes.capacity[0], scenario.norm

    def to_features(used: np.ndarray) -> np.ndarray:
        return scaled_load(np.minimum(used, cap), cap, norm)  # what the recorder sees: rates capped at capacity

    start, finish = wl.arrival, wl.arrival + wl.work
    events = np.unique(np.concatenate([start, finish]))
    cache: dict[tuple[int, ...], float] = {}
    total = 0.0
    for t0, t1 in itertools.pairwise(events):
        running = (start <= t0) & (finish > t0)
        counts = tuple(int(c) for c in np.bincount(kind[running], minlength=len(kinds)))
        if counts not in cache:
            cache[counts] = _best_spread(counts, demand, nodes.idle, to_features)
        total += cache[counts] * (t1 - t0)
    return total / (events[-1] - events[0])
