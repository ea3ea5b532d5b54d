"""A simulator run recorded as what a cluster leaves behind: node series, a decision journal and pod ends.

The simulator (drs_prom.sim) integrates load exactly over constant-rate segments; the
recorder hook gives us every segment, so the node_exporter counters we backfill are the
exact integrals of the simulated load, and ``expected_raw`` says what Prometheus must
return for any aligned grid time (rate over [t - window, t]; memory as a gauge).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from drs_prom.agent.model_inputs import CANDIDATE_COLUMNS, candidate_matrix
from drs_prom.features import N_FEATURES
from drs_prom.policies.contract import DecisionContext, choose
from drs_prom.retrain.rebuild import NodeHistory
from drs_prom.sim.backfill import NodeSpec
from drs_prom.sim.env import ESTIMATED, SchedulingEnv
from drs_prom.sim.scenario import Scenario
from drs_prom.stores.journal import JOURNAL_SCHEMA, Decision, node_entries


@dataclass
class SimRun:
    names: list[str]
    cores: np.ndarray  # (n,)
    mem: np.ndarray  # (n,) bytes
    idle: np.ndarray  # (n, N_FEATURES) absolute load of an empty node
    seg_t0: np.ndarray
    seg_t1: np.ndarray
    seg_used: np.ndarray  # (S, n, N_FEATURES) absolute (cores, bytes, B/s)
    # t (sim s), pod, feasible, action, scores, load, nodes (node_entries of ctx.nodes),
    # requests (the request columns of candidate_matrix(ctx): what the policy's model saw)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    epoch: float = 0.0
    finish: dict[str, float] = field(default_factory=dict)  # pod uid -> sim time it completed

    def pod_ends(self) -> dict[str, float]:
        """What the scheduler's journal records as pod ends (Journal.pod_ended), on the wall clock of ``epoch``."""
        return {uid: self.epoch + t for uid, t in self.finish.items()}

    @property
    def duration(self) -> float:
        return float(self.seg_t1[-1])

    def nodes(self) -> list[NodeSpec]:
        return [NodeSpec(n, int(c), float(m)) for n, c, m in zip(self.names, self.cores, self.mem)]

    def _seg(self, t: np.ndarray) -> np.ndarray:
        return np.clip(np.searchsorted(self.seg_t0, t, side="right") - 1, 0, len(self.seg_t0) - 1)

    def cum(self, t: np.ndarray) -> np.ndarray:
        """(T, n, N_FEATURES) integral of used load from 0 to sim time ``t`` (empty nodes idle after the end)."""
        t = np.asarray(t, dtype=np.float64)
        dt = self.seg_t1 - self.seg_t0
        starts = np.concatenate(
            [np.zeros((1, *self.seg_used.shape[1:])), np.cumsum(self.seg_used * dt[:, None, None], axis=0)]
        )
        s = self._seg(t)
        within = np.clip(t - self.seg_t0[s], 0.0, None)
        inside = t <= self.seg_t1[-1]
        out = starts[s] + self.seg_used[s] * np.minimum(within, dt[s])[:, None, None]
        tail = np.where(inside, 0.0, t - self.seg_t1[-1])
        return out + self.idle[None] * tail[:, None, None]

    def used_at(self, t: np.ndarray) -> np.ndarray:
        """(T, n, N_FEATURES) load of the segment with t0 < t <= t1 (what a gauge sampled at t reads)."""
        t = np.asarray(t, dtype=np.float64)
        s = np.clip(np.searchsorted(self.seg_t1, t, side="left"), 0, len(self.seg_t1) - 1)
        out = self.seg_used[s].copy()
        out[t > self.seg_t1[-1]] = self.idle
        return out

    def counters(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(per-cpu busy seconds and byte totals (T, n, N_FEATURES), memory used fraction (T, n)) at sim times."""
        c = self.cum(times)
        c[:, :, 0] /= self.cores[None, :]
        mem = self.used_at(times)[:, :, 1] / self.mem[None, :]
        return c, mem

    def expected_raw(self, t: float, window: float) -> np.ndarray:
        """(n, N_FEATURES) raw features Prometheus reports at sim time ``t`` (grid-aligned): rates over the window, memory now."""
        c = self.cum(np.array([t - window, t]))
        rate = (c[1] - c[0]) / window
        rate[:, 0] /= self.cores
        rate[:, 1] = self.used_at(np.array([t]))[0][:, 1] / self.mem
        return rate

    def history(self, step: float, window: float) -> NodeHistory:
        """What Prometheus returns for the run (rates over ``window`` every ``step`` s, memory now), on the wall clock."""
        times = np.arange(window, self.duration, step)
        values = (
            np.stack([self.expected_raw(float(t), window) for t in times], axis=1)
            if len(times)
            else np.zeros((len(self.names), 0, N_FEATURES))
        )
        return NodeHistory(
            times=self.epoch + times,
            values={name: values[i] for i, name in enumerate(self.names)},
            cores={name: float(c) for name, c in zip(self.names, self.cores)},
            mem_bytes={name: float(m) for name, m in zip(self.names, self.mem)},
        )


REQUEST_COLUMNS = slice(CANDIDATE_COLUMNS.index("cpu_req_after"), CANDIDATE_COLUMNS.index("pods_after") + 1)


def run_sim(
    scenario: Scenario, policy: Any, seed: int = 0, epsilon: float = 0.0, information: str = ESTIMATED
) -> SimRun:
    """One episode with ``policy`` (epsilon-random for variety); every segment and decision recorded. ``information``:
    what the policy is told of each pod's usage (sim.env.INFORMATION), which the journal rows record."""
    env = SchedulingEnv(scenario, seed=seed, information=information)
    rng = np.random.default_rng(seed)
    segs: list[tuple[float, float, np.ndarray]] = []
    ctx: DecisionContext | None = env.reset(seed)
    inner = env.recorder

    def rec(t0: float, t1: float, used: np.ndarray) -> None:
        segs.append((t0, t1, used.copy()))
        inner(t0, t1, used)

    env.recorder = rec
    decisions = []
    index: dict[str, int] = {}
    while ctx is not None:
        index[ctx.pod.uid] = env.current_pod
        idx, scores = choose(policy, ctx)
        if epsilon and rng.random() < epsilon:
            idx = int(rng.choice(np.flatnonzero(ctx.feasible)))
        decisions.append(
            {
                "t": ctx.now,
                "pod": ctx.pod,
                "feasible": ctx.feasible.copy(),
                "action": idx,
                "scores": scores,
                "load": ctx.load.copy(),
                "nodes": node_entries(ctx.nodes),
                "requests": candidate_matrix(ctx)[:, REQUEST_COLUMNS],
            }
        )
        ctx, _, _ = env.step(idx)
    nodes = env.nodes
    t0 = np.array([s[0] for s in segs])
    if len(t0) == 0 or t0[0] > 0:  # the first arrival came after 0: the cluster idled until then
        segs.insert(0, (0.0, float(t0[0]) if len(t0) else 1.0, nodes.idle.copy()))
    return SimRun(
        names=list(nodes.names),
        cores=nodes.capacity[:, 0].copy(),
        mem=nodes.capacity[:, 1].copy(),
        idle=nodes.idle.copy(),
        seg_t0=np.array([s[0] for s in segs]),
        seg_t1=np.array([s[1] for s in segs]),
        seg_used=np.stack([s[2] for s in segs]),
        decisions=decisions,
        finish={uid: float(env.cluster.finish[i]) for uid, i in index.items() if np.isfinite(env.cluster.finish[i])},
    )


def journal_rows(run: SimRun, policy_name: str, schema: int = JOURNAL_SCHEMA) -> list[Decision]:
    """The decisions as the live scheduler would have journalled them (wall-clock ts).

    ``schema=1``: as an older scheduler did, without node and pod requests.
    """
    out = []
    for d in run.decisions:
        pod = d["pod"]
        full = schema >= 2
        out.append(
            Decision(
                pod_uid=pod.uid,
                pod_name=pod.name,
                namespace=pod.namespace,
                pod_features=list(pod.demand),
                candidates=list(run.names),
                feasible=[bool(x) for x in d["feasible"]],
                chosen=run.names[d["action"]],
                scores=[None if not np.isfinite(s) else float(s) for s in d["scores"]],
                policy=policy_name,
                ts=run.epoch + float(d["t"]),
                owner=pod.owner,
                nodes=[dict(e) for e in d["nodes"]] if full else None,
                pod_cpu_m=int(pod.cpu_m) if full else None,
                pod_mem_bytes=int(pod.mem_bytes) if full else None,
                schema=schema,
            )
        )
    return out
