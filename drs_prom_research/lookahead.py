"""A rollout that plans on *sampled* futures: how much of the clairvoyant headroom is open to a policy that
cannot see the future.

The clairvoyant rollout (drs_prom_research.clairvoyant) reads the episode's true future. This
one replaces every pod that has not arrived yet with pods drawn from the scenario's own
workload generator under other seeds (so it knows the *distribution* of arrivals, kinds,
work and demand exactly, but not the draw), plays each candidate node out with the base
policy on every sampled future (the same samples for every candidate), and binds where
the mean composite is lowest (with ``gate``, only where the saving is beyond the samples'
noise). Without ``veil`` it also reads the true remaining work of the pods present and the
demand of the pod being placed; with it, those are drawn from their profiles as well, and
only running pods' usage (measurable per pod) and the pinned background stay true. So its
gain over the base is what foresight available to a real scheduler could buy, at most
optimistic by the background; if even it gains little where the clairvoyant gains much,
that headroom comes from knowing the draw, which no policy, learned or not, can have.
"""

from __future__ import annotations

import copy
import dataclasses
import time

import numpy as np

from drs_prom.errors import ConfigError
from drs_prom.policies.contract import DecisionContext, Policy
from drs_prom.sim.env import EpisodeResult, SchedulingEnv, policy_norm, sim_policy
from drs_prom.sim.scenario import Scenario
from drs_prom.sim.workload import Workload, generate
from drs_prom_research.clairvoyant import FixedSchedule, branch_nodes, fork_env, play_out, told

LOOKAHEAD = "lookahead"
"""Not a policy either: the sampled-future rollout below (its results carry this name)."""

SAMPLE_SEED_BASE = 7_000_000
"""Workload seeds of the sampled futures: 7,000,000+, apart from training (0..999,999) and evaluation seeds."""


def _columns(wl: Workload) -> dict[str, list | np.ndarray]:
    """Every per-pod column of ``wl`` with the optional ones filled in, for re-indexing."""
    return {
        "names": list(wl.names),
        "profiles": list(wl.profiles),
        "arrival": wl.arrival,
        "work": wl.work,
        "demand": wl.demand,
        "cpu_m": wl.cpu_m,
        "mem_bytes": wl.mem_bytes,
        "node_selector": list(wl.node_selector),
        "estimate": wl.demand if wl.estimate is None else wl.estimate,
        "tolerations": list(wl.tolerations) if wl.tolerations is not None else [()] * len(wl),
        "pinned": np.full(len(wl), -1, dtype=np.int64) if wl.pinned is None else wl.pinned,
        "scalar": list(wl.scalar) if wl.scalar is not None else [()] * len(wl),
    }


def _stack(parts: list[tuple[Workload, np.ndarray]]) -> Workload:
    """The rows ``idx`` of each workload, in order."""
    cols = [_columns(wl) for wl, _ in parts]
    out: dict[str, list | np.ndarray] = {}
    for key in cols[0]:
        pieces = [c[key] for c in cols]
        if isinstance(pieces[0], np.ndarray):
            out[key] = np.concatenate([np.asarray(p)[idx] for p, (_, idx) in zip(pieces, parts, strict=True)])
        else:
            out[key] = [p[i] for p, (_, idx) in zip(pieces, parts, strict=True) for i in idx]
    return Workload(
        names=tuple(out["names"]),
        profiles=tuple(out["profiles"]),
        arrival=np.asarray(out["arrival"], dtype=np.float64),
        work=np.asarray(out["work"], dtype=np.float64),
        demand=np.asarray(out["demand"], dtype=np.float64),
        cpu_m=np.asarray(out["cpu_m"], dtype=np.int64),
        mem_bytes=np.asarray(out["mem_bytes"], dtype=np.int64),
        node_selector=tuple(out["node_selector"]),
        estimate=np.asarray(out["estimate"], dtype=np.float64),
        tolerations=tuple(out["tolerations"]),
        pinned=np.asarray(out["pinned"], dtype=np.int64),
        scalar=tuple(out["scalar"]) if any(out["scalar"]) else None,
    )


def splice_future(true: Workload, arrived: int, now: float, sample: Workload) -> Workload:
    """``true``'s first ``arrived`` pods, then the future: ``true``'s pinned background pods and, in place of its
    scheduled pods still to come, ``sample``'s scheduled pods of the same ranks, in arrival order.

    The sample's pods keep their *gaps*, anchored at the true last arrival: rank r arrives at the true arrival of
    rank ``rank``-1 plus the sample's time from its own rank ``rank``-1 to r (no earlier than ``now``). For the
    generator's Poisson phases that is the law of the future given the past (gaps are memoryless and the phases
    are counted in pods), whereas keeping the sample's absolute times, as a first version did, turned a sample
    that ran ahead of the truth into a burst at ``now`` and one that ran behind into a lull."""
    idx = np.arange(len(true))
    past, future = idx[:arrived], idx[arrived:]
    sched_true = true.scheduled
    rank = int(sched_true[:arrived].sum())
    todo = int(sched_true[arrived:].sum())
    sched_sample = np.flatnonzero(sample.scheduled)
    drawn = sched_sample[rank : rank + todo]
    keep = future[~sched_true[arrived:]]
    if len(drawn) < todo:  # the sample has fewer pods: the rest of the true ones stay
        keep = np.concatenate([keep, future[sched_true[arrived:]][len(drawn) :]])
    if rank > 0 and len(drawn):
        anchor = float(true.arrival[np.flatnonzero(sched_true)[rank - 1]])
        shifted = anchor + (sample.arrival[drawn] - sample.arrival[sched_sample[rank - 1]])
        sample = dataclasses.replace(sample, arrival=sample.arrival.copy())
        sample.arrival[drawn] = shifted
    tail = _stack([(true, np.sort(keep)), (sample, drawn)])
    # true pods still to come arrive after now already; the sample's are raised to it
    tail = dataclasses.replace(tail, arrival=np.maximum(tail.arrival, now))
    return _stack([(true, past), (tail, np.argsort(tail.arrival, kind="stable"))])


def with_future(env: SchedulingEnv, sample: Workload, veil_seed: int | None = None) -> SchedulingEnv:
    """A fork of ``env`` whose pods that have not arrived yet come from ``sample`` (see splice_future); with
    ``veil_seed``, what a scheduler cannot know of the present is drawn too (see veil_present)."""
    fork = fork_env(env)
    fork.replace_future(splice_future(fork.workload, fork.arrived, fork.cluster.t, sample))
    if veil_seed is not None:
        veil_present(fork, np.random.default_rng(veil_seed))
    return fork


def veil_present(fork: SchedulingEnv, rng: np.random.Generator) -> None:
    """Draw, in place on ``fork`` (whose workload arrays are its own after replace_future), what a scheduler cannot
    know of the present, from the scenario's profiles.

    - The total work of every scheduled pod that has arrived and not finished (running, waiting for room, or being
      placed now): uniform on the profile's mean x (1 +- jitter) above the work already done, which is the
      generator's law given that the pod has not finished.
    - The demand of those that have not started (the pod being placed, pods waiting): the profile's times
      (1 +- demand jitter) per feature. A running pod's usage is measurable per pod, so it stays true.
    - Background pods stay true.

    Without this the look-ahead reads each present pod's true run time, which no scheduler has.
    """
    wl, cluster, profiles = fork.workload, fork.cluster, fork.scenario.profiles
    arrived = np.arange(fork.arrived)
    for i in arrived[wl.scheduled[arrived] & np.isnan(cluster.finish[arrived])].tolist():
        prof = profiles.get(wl.profiles[i])
        if prof is None:
            continue
        done = float(wl.work[i] - cluster.remaining[i])
        lo = prof.work_seconds * (1.0 - prof.work_jitter)
        hi = prof.work_seconds * (1.0 + prof.work_jitter)
        total = float(rng.uniform(max(lo, done), hi)) if done < hi else done * (1.0 + 1e-6) + 1e-6
        wl.work[i] = total
        cluster.remaining[i] = total - done
        if np.isnan(cluster.start[i]):
            estimate = np.asarray(prof.demand.vector(), dtype=np.float64)
            wl.demand[i] = estimate * (1.0 + prof.demand_jitter * rng.uniform(-1.0, 1.0, size=estimate.shape))


def lookahead_actions(
    env: SchedulingEnv,
    seed: int,
    base: Policy,
    samples: int = 3,
    top_k: int | None = 3,
    cost: str = "composite",
    gate: float = 0.0,
    veil: bool = False,
) -> list[int]:
    """The node index of every decision of the episode of ``seed``: the candidate (of the base's ``top_k``) whose
    mean play-out cost over ``samples`` sampled futures is lowest (ties to the base's order).

    ``gate`` > 0 leaves the base's first choice only for a candidate whose paired saving over it (same sampled
    futures for every candidate) exceeds ``gate`` standard errors: with a few samples per decision the plain mean
    often picks a node that merely drew a lucky future, so the gated rollout asks how much of the look-ahead's
    gain survives when only confident departures from the heuristic are made, as a learned correction with a
    margin would make them. ``gate`` = 0 is the plain argmin.

    ``veil`` also draws, per sampled future, the run time of the present pods and the demand of those not started
    (veil_present), the same draw for every candidate: then the rollout knows no more than a scheduler that knows
    the workload's law exactly.
    """
    env.reset(seed)
    taken: list[int] = []
    while env.ctx is not None:
        ctx: DecisionContext = env.ctx
        candidates = branch_nodes(ctx, base, top_k, choice_first=True)
        if len(candidates) == 1:
            node = int(candidates[0])
        else:
            seeds = [SAMPLE_SEED_BASE + 1000 * seed + 17 * len(taken) + m for m in range(samples)]
            draws = [generate(env.scenario, s) for s in seeds]
            costs = np.empty((len(candidates), len(draws)))
            for i, candidate in enumerate(candidates):
                for j, draw in enumerate(draws):
                    fork = with_future(env, draw, seeds[j] if veil else None)
                    fork.step(int(candidate))
                    costs[i, j] = play_out(fork, told(copy.deepcopy(base), ctx, int(candidate)), cost)[0]
            node = int(candidates[confident_choice(costs, gate)])
        taken.append(node)
        told(base, ctx, node)
        env.step(node)
    return taken


def confident_choice(costs: np.ndarray, gate: float = 0.0) -> int:
    """Row of ``costs`` (candidates x paired samples, row 0 the base's choice) to bind: the lowest mean among the
    rows whose mean saving over row 0 exceeds ``gate`` standard errors of the paired difference; row 0 if none
    (always row 0 for an infinite gate)."""
    if gate == np.inf:
        return 0
    costs = np.asarray(costs, dtype=np.float64)
    means = costs.mean(axis=1)
    diff = costs - costs[0]
    n = costs.shape[1]
    se = diff.std(axis=1, ddof=1) / np.sqrt(n) if n > 1 else np.zeros(len(costs))
    ok = -diff.mean(axis=1) > gate * se
    ok[0] = True
    return int(np.argmin(np.where(ok, means, np.inf)))


def lookahead_run(
    scenario: Scenario,
    seed: int,
    base: str,
    samples: int = 3,
    top_k: int | None = 3,
    gate: float = 0.0,
    veil: bool = False,
) -> EpisodeResult:
    """The episode of ``seed`` under the sampled-future rollout over ``base``, summarised like any benchmark run.

    A replayed trace has one future only (every seed replays the same pods), so sampling it would read the true
    future: refused."""
    if scenario.replay is not None:
        raise ConfigError(f"scenario {scenario.name} replays a trace: its futures cannot be sampled")
    wall0 = time.perf_counter()
    policy = sim_policy(base, scenario, seed)
    env = SchedulingEnv(scenario, seed=seed, norm=policy_norm(policy, scenario))
    actions = lookahead_actions(env, seed, policy, samples, top_k, gate=gate, veil=veil)
    result = env.run(FixedSchedule(actions, LOOKAHEAD), seed=seed)
    result.wall_seconds = result.policy_seconds = time.perf_counter() - wall0
    return result
