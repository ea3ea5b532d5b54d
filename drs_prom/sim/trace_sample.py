"""Turn a trace and a sampling seed into a concrete scenario: sampled nodes, a window of pods, drawn gaps.

``materialise(scenario, seed)`` reads ``scenario.trace`` (drs_prom.sim.trace_spec) and
returns a scenario whose nodes are the sampled ones (identical nodes grouped into one
type) and whose ``replay`` holds every pod to replay, so the simulator, the benchmark and
the testbed run it like any other scenario. Every choice is documented in docs/traces.md:

- nodes: ``spec.nodes`` of them, stratified by node kind (CPU, memory, GPUs, GPU model,
  labels, taints): each kind gets its share by largest remainder, members drawn without
  replacement;
- pods: those arriving in the window (fractions of the pod list in arrival order), plus,
  with ``carry_over``, those started before it and still running at its start (arriving
  at time 0 with the rest of their run); never-scheduled (Pending) pods are dropped, since
  they never used the cluster; Failed pods keep their observed lifetime;
- pods still running at the window's end stop there (``cut_at_window_end``), so the
  episode measures the window rather than months of a few long-running pods after it;
- a pod still running when the trace ends gets a run time drawn from the run times of
  the trace's finished pods that exceed its observed age (its age when none does);
- times are divided by ``compression`` (arrival times also by ``load_factor``);
- GPU fractions round up to one whole GPU, or the trace is refused (``gpu_sharing``);
- pods that fit no sampled node even when it is empty are dropped and counted;
- a pod's usage is its usage series' time-weighted mean over the part of its run that is
  replayed, else its mean usage column, else the usage model's draw (the simulator gives a
  pod one demand for its whole run).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from drs_prom.errors import ConfigError
from drs_prom.sim.scenario import GPU_MODEL_LABEL, GPU_RESOURCE, Scenario
from drs_prom.sim.trace_formats import TraceNode, TracePod, TraceTable, read_trace
from drs_prom.sim.trace_spec import ReplayPods, TraceSpec, UsageModel

NET_BYTES = 1.25e9
"""Network capacity given to trace nodes (10 Gbit/s each way): traces carry no network or disk figures."""
DISK_BYTES = 5e8
MIN_WORK_SECONDS = 1.0
"""Pods the trace shows deleted the second they started still run this long (the simulator needs work > 0)."""


@dataclass(frozen=True)
class ReplayStats:
    """What the sampling kept and dropped, for the report and the docs."""

    nodes: int
    pods: int
    carried: int  # started before the window, still running at its start
    pending_dropped: int
    unfit_dropped: int
    drawn_durations: int  # still running at the trace's end


@lru_cache(maxsize=4)
def _cached_read(path: str, fmt: str, pod_list: str) -> TraceTable:
    return read_trace(path, fmt, pod_list)


def sample_nodes(nodes: tuple[TraceNode, ...], m: int | None, rng: np.random.Generator) -> list[TraceNode]:
    """``m`` nodes stratified by kind (largest-remainder shares), in kind order; every node when m is None."""
    if m is None or m >= len(nodes):
        return list(nodes)
    strata: dict[tuple[object, ...], list[TraceNode]] = defaultdict(list)
    for node in nodes:
        strata[node.kind].append(node)
    kinds = sorted(strata, key=repr)
    share = np.array([len(strata[k]) for k in kinds], dtype=np.float64) * m / len(nodes)
    take = np.floor(share).astype(int)
    order = np.lexsort((rng.random(len(kinds)), -(share - take)))  # largest remainder, ties at random
    take[order[: m - int(take.sum())]] += 1
    out: list[TraceNode] = []
    for kind, k in zip(kinds, take, strict=True):
        members = strata[kind]
        out.extend(members[i] for i in sorted(rng.choice(len(members), size=int(k), replace=False)))
    return out


def draw_durations(ages: np.ndarray, finished: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Run times of pods still running at the trace's end: a finished pod's run time drawn among those longer than
    the pod's observed age (uniformly), or the age itself when no finished pod ran that long."""
    done = np.sort(finished)
    out = ages.astype(np.float64).copy()
    for i, age in enumerate(ages):
        k = int(np.searchsorted(done, age, side="right"))
        if k < len(done):
            out[i] = float(done[rng.integers(k, len(done))])
    return out


def usage_ratios(model: UsageModel, mean: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` used/requested ratios with the model's mean and spread (log-normal; all at the mean with no spread)."""
    mu, sigma = model.lognormal(mean)
    return np.exp(rng.normal(mu, sigma, size=n)) if sigma > 0 else np.full(n, mean)


def series_mean(series: tuple[tuple[float, float], ...], start: float, end: float) -> float:
    """Time-weighted mean over [start, end] of a step function given as (offset, value) samples: each value holds
    from its offset to the next one (the first also before it, the last until the end); nan without samples."""
    if not series:
        return math.nan
    t = np.array([s[0] for s in series])
    v = np.array([s[1] for s in series])
    if end <= start:
        return float(v[max(0, int(np.searchsorted(t, start, side="right")) - 1)])
    edges = np.clip(np.concatenate([[start], t[1:], [end]]), start, end)
    return float(np.dot(np.diff(edges), v) / (end - start))


def _whole_gpus(pod: TracePod, spec: TraceSpec, source: str) -> int:
    if pod.gpus == int(pod.gpus):
        return int(pod.gpus)
    if spec.gpu_sharing == "refuse":
        raise ConfigError(
            f"trace {source}: pod {pod.name} asks for {pod.gpus:g} of a GPU; GPU sharing is not modelled "
            "(use gpu_sharing: round-up to give it a whole GPU)"
        )
    return math.ceil(pod.gpus)


def _fits_some(pod: TracePod, gpus: int, nodes: list[TraceNode]) -> bool:
    for node in nodes:
        labels = dict(node.labels)
        if pod.cpu_m > node.cpu_m or pod.mem_bytes > node.mem_bytes or gpus > node.gpus:
            continue
        if pod.gpu_models and labels.get(GPU_MODEL_LABEL) not in pod.gpu_models:
            continue
        if any(labels.get(k) != v for k, v in pod.node_selector):
            continue
        if any(eff != "PreferNoSchedule" and not _tolerated(pod, key, val, eff) for key, val, eff in node.taints):
            continue
        return True
    return False


def _tolerated(pod: TracePod, key: str, value: str, effect: str) -> bool:
    for tkey, op, tval, teff in pod.tolerations:
        if teff and teff != effect:
            continue
        if op == "Exists" and (not tkey or tkey == key):
            return True
        if op == "Equal" and tkey == key and tval == value:
            return True
    return False


def _window(pods: list[TracePod], spec: TraceSpec) -> tuple[float, float]:
    times = np.sort([p.arrival for p in pods])
    a, b = spec.window
    lo = float(times[min(int(a * len(times)), len(times) - 1)])
    hi = float(times[int(b * len(times))]) if b < 1.0 else math.inf
    return lo, hi


def replay_pods(
    table: TraceTable, spec: TraceSpec, nodes: list[TraceNode], rng: np.random.Generator
) -> tuple[ReplayPods, ReplayStats]:
    """The window's pods on these nodes, as columns in arrival order (see the module docstring for each rule)."""
    placed = [p for p in table.pods if p.outcome != "pending"]
    pending = len(table.pods) - len(placed)
    if not placed:
        raise ConfigError(f"trace {table.source}: no pod ever ran (all Pending)")
    lo, hi = _window(placed, spec)
    finished = np.array([p.end - p.start for p in placed if p.outcome != "running"], dtype=np.float64)
    rows: list[tuple[float, float, TracePod]] = []  # (arrival, run time, pod)
    carried = unfit = 0
    running = [p for p in placed if p.outcome == "running"]
    ages = np.array([table.end - p.start for p in running])
    lives = dict(zip((id(p) for p in running), draw_durations(ages, finished, rng), strict=True))
    for pod in sorted(placed, key=lambda p: (p.arrival, p.name)):
        life = lives.get(id(pod), pod.end - pod.start)
        if pod.arrival < lo:
            if not (spec.carry_over and pod.start + life > lo):
                continue
            rows.append((lo, pod.start + life - lo, pod))
            carried += 1
        elif pod.arrival < hi:
            rows.append((pod.arrival, life, pod))
    drawn = sum(id(p) in lives for _, _, p in rows)
    kept: list[tuple[float, float, TracePod, int]] = []  # (arrival, run time, pod, GPUs)
    for arrival, life, pod in rows:
        gpus = _whole_gpus(pod, spec, table.source)
        if not _fits_some(pod, gpus, nodes):
            unfit += 1
            continue
        kept.append((arrival, life, pod, gpus))
    if spec.max_pods is not None:
        kept = kept[: spec.max_pods]
    if not kept:
        raise ConfigError(f"trace {table.source}: no pod of the window fits the sampled nodes")
    stop = min(hi, table.end) if spec.cut_at_window_end else math.inf
    speed = spec.compression * spec.load_factor
    arr = np.array([(a - lo) / speed for a, _, _, _ in kept])
    # a cut pod stops at the window's end on the replay's clock (arrivals run load_factor times faster)
    ends = (stop - lo) / speed - arr
    work = np.array([max(life, MIN_WORK_SECONDS) / spec.compression for _, life, _, _ in kept])
    work = np.maximum(np.minimum(work, ends), MIN_WORK_SECONDS / spec.compression)
    pods = [p for _, _, p, _ in kept]
    cpu_ratio = usage_ratios(spec.usage, spec.usage.cpu_ratio, len(pods), rng)
    mem_ratio = usage_ratios(spec.usage, spec.usage.mem_ratio, len(pods), rng)
    use_trace = spec.usage.from_trace
    # the replayed part of each pod's run, in seconds since it started (a carried-over pod joins midway)
    skip = [max(0.0, lo - p.start) if p.arrival < lo else 0.0 for p in pods]
    spans = [(a, a + w * spec.compression) for a, w in zip(skip, work.tolist(), strict=True)]
    cpu_used = [
        _used(p.cpu_series, p.cpu_used, span, r * p.cpu_m / 1000, use_trace)
        for p, r, span in zip(pods, cpu_ratio, spans, strict=True)
    ]
    mem_used = [
        _used(p.mem_series, p.mem_used, span, r * p.mem_bytes, use_trace)
        for p, r, span in zip(pods, mem_ratio, spans, strict=True)
    ]
    out = ReplayPods(
        names=tuple(_dns(p.name) for p in pods),
        arrival=tuple(arr.tolist()),
        work=tuple(work.tolist()),
        cpu_m=tuple(p.cpu_m for p in pods),
        mem_bytes=tuple(p.mem_bytes for p in pods),
        gpus=tuple(g for _, _, _, g in kept),
        cpu_used=tuple(float(x) for x in cpu_used),
        mem_used=tuple(float(x) for x in mem_used),
        gpu_models=tuple(p.gpu_models for p in pods),
        node_selector=tuple(p.node_selector for p in pods),
        tolerations=tuple(p.tolerations for p in pods),
    )
    stats = ReplayStats(len(nodes), len(out), carried, pending, unfit, drawn)
    return out, stats


def _used(
    series: tuple[tuple[float, float], ...], mean: float, span: tuple[float, float], modelled: float, use_trace: bool
) -> float:
    """A pod's usage: its series over the replayed span, else its mean column, else the usage model's draw."""
    if use_trace and series:
        return series_mean(series, *span)
    return mean if use_trace and not math.isnan(mean) else modelled


def _dns(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "-" for c in name.lower()).strip("-.") or "pod"


def _type_name(node: TraceNode) -> str:
    labels = dict(node.labels)
    model = labels.get(GPU_MODEL_LABEL, "")
    head = f"{_dns(model)}x{node.gpus}" if node.gpus else "cpu"
    return f"{head}-{node.cpu_m // 1000}c-{node.mem_bytes // 2**30}g"


def node_types(nodes: list[TraceNode]) -> list[dict[str, object]]:
    """Identical nodes grouped into one scenario node type (count = how many were sampled)."""
    groups: dict[tuple[object, ...], list[TraceNode]] = defaultdict(list)
    for node in nodes:
        groups[node.kind].append(node)
    out: list[dict[str, object]] = []
    seen: dict[str, int] = {}
    for kind in sorted(groups, key=repr):
        first = groups[kind][0]
        name = _type_name(first)
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:  # same shape, other labels or taints
            name = f"{name}-{seen[name]}"
        out.append(
            {
                "name": name,
                "count": len(groups[kind]),
                "cpu_cores": first.cpu_m / 1000,
                "mem_bytes": first.mem_bytes,
                "net_rx_bytes": NET_BYTES,
                "net_tx_bytes": NET_BYTES,
                "disk_read_bytes": DISK_BYTES,
                "disk_write_bytes": DISK_BYTES,
                "extended": {GPU_RESOURCE: first.gpus} if first.gpus else {},
                "idle": {"cpu": 0.0, "mem": 0.0},
                "labels": dict(first.labels),
                "taints": [{"key": k, "value": v, "effect": e} for k, v, e in first.taints],
            }
        )
    return out


_PLACEHOLDER = {
    "demand": {"cpu_cores": 0, "mem_bytes": 0},
    "requests": {"cpu_m": 0, "mem_bytes": 0},
    "work_seconds": 1,
    "tolerations": [{"operator": "Exists"}],
}
"""The one profile a replayed scenario names (validation wants one); the pods themselves are in ``replay``."""


def materialise(scenario: Scenario, seed: int) -> tuple[Scenario, ReplayStats]:
    """The concrete scenario of ``scenario.trace`` for one sampling seed (the same seed gives the same replay)."""
    spec = scenario.trace
    if spec is None:
        raise ConfigError(f"scenario {scenario.name} has no trace: section")
    table = _cached_read(spec.path, spec.format, spec.pod_list)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x7ACE]))
    nodes = sample_nodes(table.nodes, spec.nodes, rng)
    pods, stats = replay_pods(table, spec, nodes, rng)
    concrete = scenario.with_changes(
        nodes=node_types(nodes),
        profiles={"trace": _PLACEHOLDER},
        arrivals=[{"pods": len(pods), "rate_per_second": 1.0}],
        replay=pods.model_dump(),
    )
    return concrete, stats
