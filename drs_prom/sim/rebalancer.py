"""The rebalancer in the simulator: drs_prom.moves on the simulated cluster's stored series, as the live one runs it.

Every ``step`` of simulated time it samples what a Prometheus would store of each node (the metrics' window mean,
``Cluster.observed``, as shares of the node's own capacity) and of each pod (its usage integral); every
``interval_seconds`` it takes each signal's quantile over the last ``window`` of samples, updates the hot set
(drs_prom.moves.hot), and plans this round's moves (drs_prom.moves.plan) with the policy under test as the placer:
the replacement of a pod goes where that policy would put it, as it does under the scheduler that owns the pod (a
policy that stands for kube-scheduler, ``other_policy``, places by requests: drs_prom.moves.refill applies to its
pods). The pods the plan moves are evicted (``SchedulingEnv.evict``): a replacement redoes the work left, or all of
it for a profile whose state is lost, plus the profile's start penalty (drs_prom.sim.drift_spec.Restart), and is
placed by the policy like any pending pod, wherever it then chooses. With ``surge`` (the default) a Deployment's pod
is moved as the live rebalancer moves it, replacement first (drs_prom.rebalance.surge): the policy places a replica
with the pod still running, the replica holds its requests there for the profile's start penalty, and at the first
round after it the pod hands its work left over to it (``SchedulingEnv.switch``) and goes; a pod that ends first
takes its replica with it, and a replica placed on the pod's own node is taken back (``landed_back`` live). The
replica's own use while it starts is not modelled.

With ``taint_hot_nodes`` the hot nodes carry a PreferNoSchedule taint: every decision while they are hot, whichever
policy makes it, gets TaintToleration's preference for the other nodes (``SchedulingEnv.prefer_not``), as
kube-scheduler and drs-prom's scheduler both give it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from drs_prom.config import RebalanceSettings, load_settings
from drs_prom.moves.eligibility import PodFacts
from drs_prom.moves.hot import capacity_shares, hot_nodes, quantiles
from drs_prom.moves.plan import Candidate, Cooldowns, Move, Placement, plan
from drs_prom.moves.refill import request_units
from drs_prom.moves.under_way import Recent, remembered, under_way
from drs_prom.policies.contract import choose
from drs_prom.sim.drift_spec import Restart
from drs_prom.sim.env import SchedulingEnv
from drs_prom.sim.scenario import Scenario

CONTROLLER_OF = {"Deployment": "ReplicaSet", "ReplicaSet": "ReplicaSet", "StatefulSet": "StatefulSet", "Job": "Job"}
"""The controller kind of a simulated pod, from its top owner's kind (a Deployment's pods belong to a ReplicaSet);
any other kind (``Pod/...``: the pinned background pods) has none."""

NAMESPACE = "default"
UNPLACED_SURGE = "surge_unplaced"
"""Why a planned move was not made: no node would take the pod's replica beside it (``skipped``)."""


@dataclass(frozen=True)
class Surge:
    """A replica started for a move and not yet in charge."""

    node: int
    ready_at: float
    """When it has started (the start penalty after it was placed)."""
    pod_load: np.ndarray
    """The load its scheduler expected of it there (what drs's memory of its binds keeps)."""
    lose_progress: bool
    usage: np.ndarray
    """The pod's stored usage when the move was planned (absolute units)."""


def rebalance_settings(scenario: Scenario, configured: RebalanceSettings | None = None) -> RebalanceSettings:
    """The rebalancer's settings on ``scenario``: its own ``rebalance`` section (its time scale), else ``configured``,
    else the configuration's (``DRS_PROM_REBALANCE_*`` environment, then the defaults)."""
    if scenario.rebalance is not None:
        return scenario.rebalance
    return configured or load_settings().rebalance


def restart_of(scenario: Scenario, profile: str) -> Restart:
    """What an eviction costs a pod of ``profile``: its ``restart`` section, else the defaults (kept state, 30 s)."""
    prof = scenario.profiles.get(profile)
    return prof.restart if prof is not None and prof.restart is not None else Restart()


class SimRebalancer:
    """A ``Rebalancing`` for SchedulingEnv (module docstring)."""

    def __init__(self, settings: RebalanceSettings, scenario: Scenario) -> None:
        self.settings = settings
        self.scenario = scenario
        self.step_seconds = settings.step_seconds
        self.every = max(1, round(settings.interval_seconds / self.step_seconds))
        self.reset_state()

    def reset_state(self) -> None:
        k = max(1, round(self.settings.window_seconds / self.step_seconds))
        self.samples: deque[np.ndarray] = deque(maxlen=k)
        self.pod_cum: deque[tuple[float, np.ndarray]] = deque(maxlen=k + 1)
        self.hot: frozenset[str] = frozenset()
        self.cooldowns = Cooldowns()
        self.ticks = 0
        self.rounds = 0
        self.skipped: dict[str, int] = {}
        self.surging: dict[int, Surge] = {}
        self.recent: list[Recent] = []
        """Moves the window still reads from before them (drs_prom.moves.under_way)."""

    def reset(self, env: SchedulingEnv) -> None:
        self.reset_state()

    def tick(self, env: SchedulingEnv) -> None:
        c = env.cluster
        cap = env.nodes.capacity
        self.samples.append(capacity_shares(c.observed(), cap[:, 2:]))
        self.pod_cum.append((c.t, c.pod_cum.copy()))
        self.ticks += 1
        if self.ticks % self.every or len(self.samples) < (self.samples.maxlen or 1):
            return  # not a round yet, or not a whole window seen
        self.rounds += 1
        self._hand_over(env)
        s = self.settings
        window = np.stack(list(self.samples))
        shares = quantiles(window, s.quantile)
        peaks = None if s.target_quantile is None else quantiles(window, s.target_quantile)
        self.hot = hot_nodes(env.node_names, shares, self.hot, s.hot_above, s.cool_below)
        policy = env.deciding
        if s.taint_hot_nodes and policy is not None:
            env.prefer_not = np.array([n in self.hot for n in env.node_names]) if self.hot else None
        if not self.hot or policy is None:
            return
        decided = policy

        index = {n: i for i, n in enumerate(env.node_names)}

        def place(candidate: Candidate, _shares: np.ndarray, planned: Sequence[Move]) -> Placement:
            before = [(int(m.pod.key), index[m.target]) for m in planned]
            ctx = env.what_if_evicted(int(candidate.facts.key), before)
            if ctx is None:
                return Placement(-1, np.zeros(env.n_nodes, dtype=bool))
            node, _ = choose(decided, ctx, bind=False)
            return Placement(node, ctx.feasible)

        now = c.t
        self.cooldowns.forget(now, s.cooldown_seconds)
        by_requests = policy.name == s.other_policy
        names = env.node_names
        candidates, moving = [], list(self.recent)
        for cand in self._candidates(env, by_requests):
            surge = self.surging.get(int(cand.facts.key))
            if surge is None:
                candidates.append(cand)
            else:
                moving.append(Recent(now, names[cand.node], names[surge.node], cand.usage))
        got = plan(
            env.node_names,
            shares,
            cap,
            self.hot,
            candidates,
            s,
            self.cooldowns,
            now,
            place,
            under_way(moving, index),
            peaks,
        )
        for reason, n in got.skipped.items():
            self.skipped[reason] = self.skipped.get(reason, 0) + n
        for move in got.moves:
            pod = int(move.pod.key)
            restart = restart_of(self.scenario, env.workload.profiles[pod])
            self.cooldowns.record(move.pod.owner, now)
            usage = np.array(move.usage)
            if not (s.surge and move.pod.owner_kind == "ReplicaSet"):
                left = env.evict(pod, restart.penalty_seconds, restart.state == "lost")
                self.recent.append(Recent(now, names[left], "", usage))
                continue
            ctx = env.surge_context(pod)
            node = -1 if ctx is None else choose(decided, ctx)[0]
            if ctx is None or node < 0:  # the replica would wait: the live rebalancer takes it back after a time
                self.skipped[UNPLACED_SURGE] = self.skipped.get(UNPLACED_SURGE, 0) + 1
                continue
            env.surge(pod, node)
            self.surging[pod] = Surge(
                node, now + restart.penalty_seconds, ctx.pod_load[node], restart.state == "lost", usage
            )

    def _hand_over(self, env: SchedulingEnv) -> None:
        """This round's end of the surges: a replica started long enough ago takes over from its pod, unless it was
        placed on the pod's own node (then it is taken back); a pod that ended takes its replica with it."""
        c = env.cluster
        self.recent = remembered(self.recent, c.t, self.settings)
        running = set(c.running.tolist())
        for pod, surge in list(self.surging.items()):
            if pod not in running or (surge.ready_at <= c.t and surge.node == c.node_of[pod]):
                env.abandon_surge(pod, surge.node)  # ended first, or its replica landed back: taken back
            elif surge.ready_at <= c.t:
                left = env.switch(pod, surge.node, surge.pod_load, surge.lose_progress)
                self.recent.append(Recent(c.t, env.node_names[left], env.node_names[surge.node], surge.usage))
            else:
                continue
            del self.surging[pod]

    def _candidates(self, env: SchedulingEnv, by_requests: bool) -> list[Candidate]:
        """The running pods placed by the policy, with their usage over the window from the per-pod integrals and
        their requests; ``by_requests``: the policy stands for kube-scheduler (``other_policy``), which places by
        requests."""
        c, wl = env.cluster, env.workload
        t0, cum0 = self.pod_cum[0]
        index, owners, _ = wl.owners
        out = []
        for pod in c.running.tolist():
            if not env.scheduled[pod]:
                continue
            start = float(c.start[pod])
            owner = owners[int(index[pod])]
            kind = owner.split("/", 1)[0]
            if start > t0:  # started within the window: its whole life so far
                seen, used = c.t - start, c.pod_cum[pod]
            else:
                seen, used = c.t - t0, c.pod_cum[pod] - cum0[pod]
            usage = used / seen if seen > 0 else np.full(len(used), np.nan)
            facts = PodFacts(
                key=str(pod),
                namespace=NAMESPACE,
                node=env.node_names[int(c.node_of[pod])],
                owner_kind=CONTROLLER_OF.get(kind, ""),
                owner=owner,
                age_seconds=c.t - start,
            )
            units = request_units(wl.cpu_m[pod] / 1000.0, float(wl.mem_bytes[pod]))
            out.append(Candidate(facts, int(c.node_of[pod]), usage, units, by_requests))
        return out
