"""The FGD paper's protocol: fill a cluster with a trace's pods, never ending, until their requests of one resource
reach a share of its capacity, and follow how much of it each policy could allocate.

Weng et al. ("Beware of Fragmentation", USENIX ATC 2023; hkust-adsl/kubernetes-scheduler-simulator, the workload
tuning of pkg/simulator/simulator.go) fill openb's 1,523 nodes with openb's pods until the GPUs they ask for reach
130 % of the cluster's and report the share of GPUs allocated. The cluster and the pod sequence of a sampling seed
are drs_prom.sim.fill_sequence's; here each pod in turn is checked by the scheduler's filter chain
(drs_prom.constraints.chain) against what the pods placed before it hold, and placed by the policy (``choose``), or
fails and is not retried (the paper's simulator does the same). There is no event simulation: no time, no
contention, no departures.

Load-aware policies still get a consistent DecisionContext: ``load`` is what the placed pods use (their usage drawn by
the trace's usage model, capped at capacity, on the policy's scales), the pod's ``pod_load`` is its estimate from its
requests as the simulator gives it (or its drawn usage with ``told``), ``resident`` is the estimate of every pod
placed, and each decision comes one metric window after the last, so that every earlier bind is in ``load`` and no
memory of recent binds counts it twice.

drs_prom.sim.fill_report summarises the runs; ``drs-prom bench --trace DIR --fill 1.3`` runs it (docs/traces.md).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np

from drs_prom.constraints import chain
from drs_prom.constraints.framework import NodeArrays
from drs_prom.errors import DrsError
from drs_prom.features import N_FEATURES
from drs_prom.policies.contract import NODE_REQUEST_COLUMNS, DecisionContext, Policy, choose
from drs_prom.policies.fragmentation import Free, fragmentation
from drs_prom.signals.link_capacity import full_matrix
from drs_prom.signals.state import pod_matrix, scales
from drs_prom.sim.bench import PolicyBuilder, default_builder
from drs_prom.sim.env import ESTIMATED, TOLD, policy_norm, scenario_spec
from drs_prom.sim.fill_sequence import FillPods, FillSpec, FillStats, describe, fill_pods
from drs_prom.sim.scenario import GPU_RESOURCE, Scenario
from drs_prom.usage.estimator import UsageModel, request_prior, shipped_usage_model


@dataclass
class FillRun:
    """One policy on one seed's sequence."""

    policy: str
    seed: int
    curve: list[tuple[float, float, float]] = field(default_factory=list)
    """(arrived share, allocated share, GPU fragmentation rate) at each checkpoint, in order."""
    placed: int = 0
    failed: int = 0
    failed_before_full: dict[int, int] = field(default_factory=dict)
    """Pods that found no node while the arrived requests were still below 100 % of capacity, by GPUs asked for."""
    wall_seconds: float = 0.0
    policy_seconds: float = 0.0

    def at(self, share: float) -> tuple[float, float, float]:
        """The curve's point at the checkpoint ``share``."""
        return min(self.curve, key=lambda p: abs(p[0] - share))


@lru_cache(maxsize=1)
def _usage_model() -> UsageModel:
    return shipped_usage_model()


def fragmentation_rate(pods: FillPods, requested_gpus: np.ndarray, req: np.ndarray) -> float:
    """The share of the unallocated GPUs that the list's typical pod could not use where they are (the paper's
    fragmentation rate; NaN with no GPU unallocated). ``req``: the node table (NODE_REQUEST_COLUMNS)."""
    alloc = pods.nodes.alloc_scalar.get(GPU_RESOURCE)
    if alloc is None:
        return math.nan
    free = Free(
        (alloc - requested_gpus).astype(np.float64), req[:, 1] - req[:, 0], req[:, 3] - req[:, 2], req[:, 5] - req[:, 4]
    )
    idle = float(free.gpus.sum())
    return float(fragmentation(free, pods.typical).sum() / idle) if idle > 0 else math.nan


def run_fill(
    pods: FillPods,
    policy: Policy,
    seed: int,
    information: str = ESTIMATED,
    on_bind: Callable[[int, int], None] | None = None,
) -> FillRun:
    """``policy`` places ``pods``' sequence in order; the curve at every checkpoint of ``pods.spec``. ``on_bind(k,
    node)`` is told every placement: the ``k``-th pod of the sequence went to node index ``node``."""
    t0 = time.perf_counter()
    nodes, spec = pods.nodes, pods.spec
    n = len(nodes)
    norm = policy_norm(policy, pods.scenario)
    sc = scales(norm)
    full = full_matrix(nodes.capacity[:, 2:], sc)
    cap_cpu, cap_mem = nodes.capacity[:, 0], nodes.capacity[:, 1]
    static = chain.StaticMasks(nodes.infos)
    req_cpu, req_mem, count = (np.zeros(n, dtype=np.int64) for _ in range(3))
    req_scalar = {k: np.zeros(n, dtype=np.int64) for k in nodes.alloc_scalar}
    arrays = NodeArrays(
        nodes.alloc_cpu_m, nodes.alloc_mem, nodes.alloc_pods, req_cpu, req_mem, count, nodes.alloc_scalar, req_scalar
    )
    table = np.zeros((n, len(NODE_REQUEST_COLUMNS)))
    table[:, 1], table[:, 3], table[:, 5] = nodes.alloc_cpu_m, nodes.alloc_mem, nodes.alloc_pods
    infos = list(nodes.infos)
    used = np.zeros((n, N_FEATURES))
    resident = np.zeros((n, N_FEATURES))
    no_ended = np.zeros((n, N_FEATURES))
    step = policy.metric_window_seconds + 1.0  # every earlier bind is fully in ``load``
    model = _usage_model()
    run = FillRun(policy.name, seed)
    points = list(spec.checkpoints())
    capacity = pods.stats.capacity
    arrived = allocated = 0.0
    gpus = req_scalar.get(GPU_RESOURCE, np.zeros(n, dtype=np.int64))
    for k, i in enumerate(pods.order.tolist()):
        base = pods.requests[i]
        if information == TOLD:
            req = replace(base, demand=tuple(float(x) for x in pods.used[k]), demand_source=TOLD)
        else:
            prior = request_prior(base.cpu_m, base.mem_bytes, model)
            req = replace(base, demand=prior.demand, demand_source=prior.source)
        arrived += float(pods.amount[i])
        mask = chain.feasible(req, static, arrays)
        if mask.any():
            now = k * step
            raw = np.minimum(used, nodes.capacity)
            raw[:, 0] /= cap_cpu
            raw[:, 1] /= cap_mem
            load = raw / sc
            load = np.clip(load, 0.0, 1.0) if norm.clip else load
            assert req.demand is not None
            pod_load = pod_matrix(req.demand, cap_cpu, cap_mem, norm)
            ctx = DecisionContext(
                pod=req,
                nodes=list(infos),
                feasible=mask,
                load=load.astype(np.float32),
                pod_load=pod_load,
                now=now,
                full=full,
                node_requests=table.copy(),
                resident=resident.astype(np.float32),
                ended=no_ended,
                measured_at=now,
            )
            p0 = time.perf_counter()
            node, _ = choose(policy, ctx)
            run.policy_seconds += time.perf_counter() - p0
            if not mask[node]:  # pragma: no cover - choose never picks an infeasible node
                raise RuntimeError(f"{policy.name} chose an infeasible node for {req.name}")
            req_cpu[node] += req.cpu_m
            req_mem[node] += req.mem_bytes
            count[node] += 1
            for name, amount in req.scalar:
                req_scalar[name][node] += amount
            table[node, 0], table[node, 2], table[node, 4] = req_cpu[node], req_mem[node], count[node]
            infos[node] = replace(
                infos[node],
                requested_cpu_m=int(req_cpu[node]),
                requested_mem_bytes=int(req_mem[node]),
                pod_count=int(count[node]),
                requested_scalar={name: int(v[node]) for name, v in req_scalar.items() if v[node]},
            )
            used[node] += pods.used[k]
            resident[node] += pod_load[node]
            allocated += float(pods.amount[i])
            run.placed += 1
            if on_bind is not None:
                on_bind(k, node)
        else:
            run.failed += 1
            if arrived - float(pods.amount[i]) < capacity:
                asked = dict(req.scalar).get(GPU_RESOURCE, 0)
                run.failed_before_full[asked] = run.failed_before_full.get(asked, 0) + 1
        while points and (arrived >= points[0] * capacity - 1e-9 or k == len(pods.order) - 1):
            points.pop(0)
            run.curve.append((arrived / capacity, allocated / capacity, fragmentation_rate(pods, gpus, table)))
    run.wall_seconds = time.perf_counter() - t0
    return run


def run_fills(
    scenario: Scenario,
    seeds: Sequence[int],
    policies: Sequence[str],
    spec: FillSpec,
    builder: PolicyBuilder = default_builder,
    information: str = ESTIMATED,
    echo: Callable[[str], None] | None = None,
    progress: bool = False,
) -> tuple[dict[int, FillStats], dict[str, list[FillRun]], dict[str, str]]:
    """Every policy on every seed's sequence: the seeds' stats, the runs per policy, the skipped policies and why.
    ``echo`` is told each seed's sequence and, with ``progress``, each run's outcome."""
    pspec = scenario_spec(scenario)
    stats: dict[int, FillStats] = {}
    runs: dict[str, list[FillRun]] = {p: [] for p in policies}
    skipped: dict[str, str] = {}
    for seed in seeds:
        pods = fill_pods(scenario, seed, spec)
        stats[seed] = pods.stats
        if echo is not None:
            echo(describe(seed, pods.stats, spec))
        for name in policies:
            if name in skipped:
                continue
            try:
                run = replace(run_fill(pods, builder(name, seed, pspec), seed, information), policy=name)
            except DrsError as exc:
                skipped[name] = str(exc)
                runs[name].clear()
                continue
            runs[name].append(run)
            if echo is not None and progress:
                end = run.curve[-1]
                echo(
                    f"  {name}: {100 * run.at(1.0)[1] if spec.target >= 1.0 else math.nan:.1f} % allocated at 100 %, "
                    f"{100 * end[1]:.1f} % at {100 * end[0]:.1f} %; {run.failed} pods failed ({run.wall_seconds:.0f} s)"
                )
    return stats, runs, skipped
