"""A seeded generator of clusters and workloads: a training *distribution*, not one scenario.

Over 400 lines because every generated dimension (fleet, background, taints, mixes, arrivals, lag) and the eval set are documented parameters.

``generate_scenario(seed)`` returns an ordinary ``Scenario`` (so everything that takes a
scenario takes a generated one, and ``scenario_yaml`` writes it out for a user to read or
edit). Each seed draws, with ``GeneratorParams`` (all ranges documented and validated):

- **nodes**: 3-100 nodes (log-uniform, so small clusters are as common as large ones) of
  1-4 hardware *generations*; each generation has its own core count, memory per core,
  network link and disk class, and its own constant system/background load (idle cpu and
  memory fractions);
- **noisy neighbours**: on some clusters, a few nodes carry a stream of pinned background
  pods (``BackgroundLoad``) that hammer one resource (cpu, network or disk) in on/off
  bursts; policies see them only through the metrics;
- **taints and selectors**: sometimes one generation is tainted ``dedicated=<name>:NoSchedule``
  and one profile tolerates it (and may select it); sometimes a profile needs ``disk=ssd``;
- **profiles**: 2-5 of the archetypes below, demand scaled per cluster, per-pod work and
  demand jitter, and on some profiles *requests that say little about usage* (a request
  drawn independently of the real demand, as copy-pasted manifests do);
- **arrivals**: ``poisson``, ``burst`` (quiet/burst phases), ``diurnal`` (a sinusoidal rate
  in steps) or ``phase-shift`` (the profile mix changes between phases), at a rate aimed
  at a bottleneck utilisation drawn from ``load``;
- **metric lag**: the metrics' averaging window, from ``metric_windows``;
- **owners** (training clusters): with ``owner_probability`` a profile's pods belong to several owners, each with
  its own usage and requests around the profile's, some appearing mid-episode, some drifting or following a day
  (``Owners``): what the usage estimator must learn from. Drawn from a stream of their own, so with the default
  probability 0 (the evaluation clusters) every cluster is as before.

Episode length: ``pods`` is raised to ``pods_per_load`` x the steady-state number of
running pods so a large cluster reaches its load, but capped at ``max_pods`` (400) to
keep simulation affordable; so the largest clusters (roughly 60+ nodes at high load) are
still warming up when arrivals end and run below the drawn load. Hardware generations
differ in size and in resource ratios (cores, memory per core, link, disk class), not in
per-core speed: a pod's work at full speed is the same on every node.

Every profile's full-speed demand, jitter included, fits within 90 % of every node it may
run on, so a pod's work at full speed is its run time alone on an idle node and slowdown
measures contention and queueing only.

Seeds: training uses ``TRAIN_SEEDS`` (0 .. 999_999). The evaluation set is the 20 named
clusters of ``EVAL_CLUSTERS``, seeds 9_000_000 + k (disjoint from training by
construction, ``training_scenario`` refuses them); 12 are drawn like training clusters
(three of each arrival pattern) and 8 are *shifts* outside the training ranges (heavier
load, sharper bursts and diurnal swings, mix shifts, longer metric lag, larger clusters).
The packaged named scenarios (drs-paper, heterogeneous, ...) are evaluation only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from drs_prom.errors import ConfigError
from drs_prom.features import N_FEATURES
from drs_prom.sim.scenario import QUANTITY_KEYS, Scenario, load_scenario

GIB = 2.0**30
MB = 1e6

Pattern = Literal["poisson", "burst", "diurnal", "phase-shift"]
PATTERNS: tuple[Pattern, ...] = ("poisson", "burst", "diurnal", "phase-shift")

# Archetypes: full-speed demand (cores, GiB, MB/s rx, tx, disk read, write) and work seconds.
# Every one reads the disk a little at least (images, logs, spills), so disk_read varies.
ARCHETYPES: dict[str, tuple[tuple[float, float, float, float, float, float], float]] = {
    "web": ((0.5, 0.5, 6.0, 20.0, 1.0, 1.0), 40.0),
    "transcode": ((2.0, 2.0, 2.0, 2.0, 12.0, 10.0), 90.0),
    "etl": ((0.5, 1.0, 2.0, 2.0, 90.0, 60.0), 60.0),
    "stream": ((0.5, 1.0, 40.0, 40.0, 3.0, 1.0), 50.0),
    "cache": ((0.25, 6.0, 12.0, 12.0, 6.0, 2.0), 120.0),
    "inference": ((3.0, 4.0, 8.0, 4.0, 20.0, 0.5), 30.0),
    "backup": ((0.25, 0.5, 1.0, 30.0, 80.0, 1.0), 80.0),
}

CORES = (2, 4, 8, 16, 32)
MEM_PER_CORE_GIB = (2, 4, 8)
LINKS = (125 * MB, 312.5 * MB, 1250 * MB)  # 1, 2.5 and 10 GbE
DISKS = (150 * MB, 500 * MB, 2000 * MB)  # HDD-class, SATA SSD, NVMe
REQUEST_CPU_M = (100, 250, 500, 1000, 2000)

TRAIN_SEEDS = range(1_000_000)
TRAINING_OWNER_PROBABILITY = 0.7
"""``owner_probability`` of the training and selection clusters (the shipped model's and usage model's): most
profiles are run by several owners, as in a cluster shared by teams."""
EVAL_SEED_BASE = 9_000_000


class GeneratorParams(BaseModel):
    """Ranges the generator draws from; (lo, hi) pairs are inclusive."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    nodes: tuple[int, int] = Field((3, 100), description="Node count, drawn log-uniformly.")
    generations: tuple[int, int] = Field((1, 4), description="Hardware generations in the cluster.")
    pods: tuple[int, int] = Field(
        (80, 250), description="Scheduled pods per episode, before raising it to cover the warm-up (pods_per_load)."
    )
    pods_per_load: float = Field(
        2.0,
        ge=0,
        description="At least this many times the steady-state number of running pods (rate x mean work), so a "
        "large cluster reaches its load before the episode ends; capped by max_pods.",
    )
    max_pods: int = Field(400, ge=1, description="Cap on scheduled pods per episode (simulation cost).")
    load: tuple[float, float] = Field(
        (0.4, 0.9),
        description="Bottleneck utilisation the mean arrival rate aims at (demand x work / capacity); near 1 and "
        "above, contention feeds on itself (slowed pods stay longer), so shift-overload tests 1.0-1.3.",
    )
    patterns: tuple[Pattern, ...] = Field(PATTERNS, min_length=1, description="Arrival patterns drawn uniformly.")
    burst_factor: tuple[float, float] = Field((2.0, 4.0), description="Burst rate over the mean rate.")
    diurnal_amplitude: tuple[float, float] = Field((0.3, 0.8), description="Relative swing of the diurnal rate.")
    profiles: tuple[int, int] = Field((2, 5), description="Archetypes per cluster.")
    demand_scale: tuple[float, float] = Field((0.5, 1.5), description="Per-profile factor on the archetype demand.")
    work_jitter: tuple[float, float] = Field((0.1, 0.6), description="Per-pod work spread (+-) per profile.")
    demand_jitter: tuple[float, float] = Field((0.0, 0.5), description="Per-pod demand spread (+-) per profile.")
    misleading_requests: float = Field(
        0.4, ge=0, le=1, description="Chance that a profile's requests are drawn independently of its demand."
    )
    idle_cpu: tuple[float, float] = Field((0.01, 0.15), description="Constant background cpu per generation.")
    idle_mem: tuple[float, float] = Field((0.03, 0.2), description="Constant background memory per generation.")
    noisy_probability: float = Field(0.5, ge=0, le=1, description="Chance that a cluster has noisy neighbours.")
    noisy_share: tuple[float, float] = Field((0.05, 0.3), description="Share of nodes that are noisy, when noisy.")
    taint_probability: float = Field(0.3, ge=0, le=1, description="Chance of a tainted, dedicated generation.")
    selector_probability: float = Field(0.3, ge=0, le=1, description="Chance that one profile needs disk=ssd.")
    metric_windows: tuple[float, ...] = Field((1.0, 5.0, 15.0, 30.0), min_length=1, description="Metric lag (s).")
    owner_probability: float = Field(
        0.0, ge=0, le=1, description="Chance that a profile's pods belong to several owners (sim.scenario.Owners)."
    )
    owners: tuple[int, int] = Field((2, 6), description="Owners of such a profile.")
    owner_usage_spread: tuple[float, float] = Field((0.1, 0.6), description="Sigma of an owner's usage factor.")
    owner_request_spread: tuple[float, float] = Field((0.0, 0.6), description="Sigma of an owner's requests factor.")
    owner_new_share: tuple[float, float] = Field((0.0, 0.5), description="Share of owners that start mid-episode.")
    owner_drift: tuple[float, float] = Field((0.1, 0.5), description="Drift of an owner's usage over the episode.")
    owner_daily: tuple[float, float] = Field((0.1, 0.5), description="Amplitude of an owner's daily usage cycle.")
    owner_moving: float = Field(
        0.3, ge=0, le=1, description="Chance that such a profile's owners drift, and (apart) that they follow a day."
    )

    @model_validator(mode="after")
    def _ranges(self) -> GeneratorParams:
        for name in (
            "nodes",
            "generations",
            "pods",
            "load",
            "burst_factor",
            "diurnal_amplitude",
            "profiles",
            "demand_scale",
            "work_jitter",
            "demand_jitter",
            "idle_cpu",
            "idle_mem",
            "noisy_share",
            "owners",
            "owner_usage_spread",
            "owner_request_spread",
            "owner_new_share",
            "owner_drift",
            "owner_daily",
        ):
            lo, hi = getattr(self, name)
            if not 0 <= lo <= hi:
                raise ValueError(f"{name}: need 0 <= lo <= hi, got ({lo}, {hi})")
        if self.nodes[0] < 1 or self.generations[0] < 1 or self.pods[0] < 1 or self.profiles[0] < 1:
            raise ValueError("nodes, generations, pods and profiles need at least 1")
        if self.generations[1] > 4 or self.profiles[1] > len(ARCHETYPES):
            raise ValueError(f"at most 4 generations and {len(ARCHETYPES)} profiles")
        if self.load[0] <= 0 or self.work_jitter[1] >= 1 or self.demand_jitter[1] >= 1:
            raise ValueError("load must be > 0 and jitters < 1")
        if self.diurnal_amplitude[1] >= 1 or self.idle_cpu[1] >= 0.5 or self.idle_mem[1] >= 0.5:
            raise ValueError("diurnal amplitude < 1 and idle fractions < 0.5")
        if any(w < 0 for w in self.metric_windows):
            raise ValueError("metric windows must be >= 0")
        return self


def _uniform(rng: np.random.Generator, pair: tuple[float, float]) -> float:
    return float(rng.uniform(pair[0], pair[1])) if pair[1] > pair[0] else float(pair[0])


def _int(rng: np.random.Generator, pair: tuple[int, int]) -> int:
    return int(rng.integers(pair[0], pair[1] + 1))


def _node_count(rng: np.random.Generator, pair: tuple[int, int]) -> int:
    lo, hi = pair
    return min(hi, max(lo, round(math.exp(rng.uniform(math.log(lo - 0.5), math.log(hi + 0.5))))))


@dataclass
class _Gen:
    name: str
    count: int
    cap: np.ndarray  # (N_FEATURES,) cores, bytes, B/s x4
    idle_cpu: float
    idle_mem: float
    labels: dict[str, str]
    taint: str | None = None


def _generations(rng: np.random.Generator, p: GeneratorParams, n_nodes: int) -> list[_Gen]:
    k = min(_int(rng, p.generations), n_nodes)
    counts = np.ones(k, dtype=int) + rng.multinomial(n_nodes - k, np.ones(k) / k)
    gens = []
    for g in range(k):
        cores = float(rng.choice(CORES))
        mem = cores * float(rng.choice(MEM_PER_CORE_GIB)) * GIB
        # big machines carry more NICs and disks: the class sets the per-8-core rate
        link = float(rng.choice(LINKS)) * max(1.0, cores / 16)
        disk = float(rng.choice(DISKS)) * max(1.0, cores / 8)
        cap = np.array([cores, mem, link, link, disk, disk * 0.8])
        labels = {"generation": f"g{g + 1}", "disk": "ssd" if disk >= DISKS[1] * max(1.0, cores / 8) else "hdd"}
        gens.append(
            _Gen(f"g{g + 1}", int(counts[g]), cap, _uniform(rng, p.idle_cpu), _uniform(rng, p.idle_mem), labels)
        )
    return gens


def _profiles(rng: np.random.Generator, p: GeneratorParams, gens: list[_Gen]) -> dict[str, dict[str, Any]]:
    names = list(ARCHETYPES)
    chosen = sorted(rng.choice(len(names), size=min(_int(rng, p.profiles), len(names)), replace=False))
    taint_gen = next((g for g in gens if g.taint), None)
    ssd = [g for g in gens if g.labels["disk"] == "ssd" and not g.taint]
    selector_idx = int(rng.integers(len(chosen))) if ssd and rng.random() < p.selector_probability else -1
    tolerate_idx = int(rng.integers(len(chosen))) if taint_gen else -1
    out: dict[str, dict[str, Any]] = {}
    for j, idx in enumerate(chosen):
        base, work = ARCHETYPES[names[idx]]
        demand = np.array(base) * _uniform(rng, p.demand_scale)
        demand[1] *= GIB
        demand[2:] *= MB
        djit = _uniform(rng, p.demand_jitter)
        prof: dict[str, Any] = {"weight": float(rng.uniform(0.5, 2.0))}
        eligible = [g for g in gens if not g.taint]
        if j == selector_idx:
            prof["node_selector"] = {"disk": "ssd"}
            eligible = ssd
        if j == tolerate_idx and taint_gen is not None:
            prof["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": taint_gen.name}]
            if rng.random() < 0.5:
                prof["node_selector"] = {"generation": taint_gen.name}
                eligible = [taint_gen]
            else:
                eligible = [*eligible, taint_gen]
        # fit: even the largest jittered pod runs at full speed alone on the smallest eligible node
        smallest = np.min([g.cap * (1 - np.array([g.idle_cpu, g.idle_mem, 0, 0, 0, 0])) for g in eligible], axis=0)
        demand = np.minimum(demand, 0.9 * smallest / (1 + djit))
        if rng.random() < p.misleading_requests:
            cpu_m = int(rng.choice(REQUEST_CPU_M))
            mem_req = float(rng.choice((128, 256, 512, 1024, 2048))) * 2**20
        else:
            cpu_m = max(50, int(round(demand[0] * 1000 * rng.uniform(0.8, 1.2), -1)))
            mem_req = demand[1] * rng.uniform(0.8, 1.2)
        alloc_cpu = min(g.cap[0] * 1000 for g in eligible)
        alloc_mem = min(g.cap[1] for g in eligible)
        prof["requests"] = {"cpu_m": min(cpu_m, int(alloc_cpu * 0.9)), "mem_bytes": int(min(mem_req, alloc_mem * 0.9))}
        prof["demand"] = dict(
            zip(
                QUANTITY_KEYS,
                (float(x) for x in demand),
            )
        )
        prof["work_seconds"] = float(work * rng.uniform(0.6, 1.5))
        prof["work_jitter"] = _uniform(rng, p.work_jitter)
        prof["demand_jitter"] = djit
        out[names[idx]] = prof
    return out


def _rate(profiles: dict[str, dict[str, Any]], gens: list[_Gen], load: float) -> float:
    """Arrival rate at which the bottleneck resource's demand x work equals ``load`` x free capacity."""
    w = np.array([pr["weight"] for pr in profiles.values()])
    w = w / w.sum()
    per_pod = sum(
        wi * np.array(list(pr["demand"].values())) * pr["work_seconds"] for wi, pr in zip(w, profiles.values())
    )
    free = sum(g.count * g.cap * (1 - np.array([g.idle_cpu, g.idle_mem, 0, 0, 0, 0])) for g in gens)
    # memory is held, not a rate: it bounds concurrency like the rates do
    return float(load / np.max(per_pod / free))


def _arrivals(
    rng: np.random.Generator, p: GeneratorParams, pattern: str, pods: int, rate: float, mix_names: list[str]
) -> list[dict[str, Any]]:
    if pattern == "poisson":
        return [{"pods": pods, "rate_per_second": rate, "process": "poisson"}]
    if pattern == "burst":
        factor = _uniform(rng, p.burst_factor)
        phases, left = [], pods
        while left > 0:
            quiet = min(left, max(1, int(pods * rng.uniform(0.1, 0.2))))
            left -= quiet
            phases.append({"pods": quiet, "rate_per_second": rate * 0.5, "process": "poisson"})
            if left <= 0:
                break
            burst = min(left, max(1, int(pods * rng.uniform(0.1, 0.2))))
            left -= burst
            phases.append({"pods": burst, "rate_per_second": rate * factor, "process": "poisson"})
        return phases
    if pattern == "diurnal":
        amp, steps = _uniform(rng, p.diurnal_amplitude), 8
        phase0 = rng.uniform(0, 2 * math.pi)
        rates = [rate * (1 + amp * math.sin(phase0 + 2 * math.pi * k / steps)) for k in range(steps)]
        # pods per step in proportion to its rate, so each step lasts about the same time
        share = np.array(rates) / sum(rates)
        counts = np.maximum(1, np.round(share * pods).astype(int))
        counts[-1] = max(1, pods - int(counts[:-1].sum()))
        return [{"pods": int(c), "rate_per_second": r, "process": "poisson"} for c, r in zip(counts, rates)]
    # phase-shift: the mix changes between 2-3 phases (and the rate a little)
    n = int(rng.integers(2, 4))
    counts = rng.multinomial(pods - n, np.ones(n) / n) + 1
    phases = []
    for c in counts:
        mix = rng.dirichlet(np.full(len(mix_names), 0.5))
        phases.append(
            {
                "pods": int(c),
                "rate_per_second": rate * rng.uniform(0.7, 1.3),
                "process": "poisson",
                "mix": {name: float(max(m, 1e-3)) for name, m in zip(mix_names, mix)},
            }
        )
    return phases


def _noisy(rng: np.random.Generator, p: GeneratorParams, gens: list[_Gen]) -> list[dict[str, Any]]:
    if rng.random() >= p.noisy_probability:
        return []
    hosts = [(f"{g.name}-{i + 1}", g) for g in gens for i in range(g.count)]
    k = max(1, round(len(hosts) * _uniform(rng, p.noisy_share)))
    out = []
    for idx in rng.choice(len(hosts), size=min(k, len(hosts)), replace=False):
        host, g = hosts[int(idx)]
        kind = int(rng.integers(3))  # 0 cpu hog, 1 network hog, 2 disk hog
        demand = np.zeros(N_FEATURES)
        demand[0] = g.cap[0] * rng.uniform(0.1, 0.3)
        demand[1] = g.cap[1] * rng.uniform(0.02, 0.1)
        if kind == 0:
            demand[0] = g.cap[0] * rng.uniform(0.4, 0.8)
        elif kind == 1:
            demand[2:4] = g.cap[2:4] * rng.uniform(0.3, 0.7)
        else:
            demand[4:6] = g.cap[4:6] * rng.uniform(0.3, 0.7)
        work = float(rng.uniform(20, 120))
        duty = float(rng.uniform(0.3, 0.8))  # share of the time it is on, on average
        out.append(
            {
                "node": host,
                "demand": dict(
                    zip(
                        QUANTITY_KEYS,
                        (float(x) for x in demand),
                    )
                ),
                "rate_per_second": duty / work,
                "work_seconds": work,
                "work_jitter": 0.3,
                "demand_jitter": 0.2,
            }
        )
    return out


def _owners(rng: np.random.Generator, p: GeneratorParams, profiles: dict[str, dict[str, Any]], span: float) -> None:
    """Give some profiles several owners (in place); a day is about the episode's length."""
    for prof in profiles.values():
        if rng.random() >= p.owner_probability:
            continue
        prof["owners"] = {
            "count": _int(rng, p.owners),
            "usage_spread": _uniform(rng, p.owner_usage_spread),
            "request_spread": _uniform(rng, p.owner_request_spread),
            "new_share": min(_uniform(rng, p.owner_new_share), 0.9),
            "drift": min(_uniform(rng, p.owner_drift), 0.9) if rng.random() < p.owner_moving else 0.0,
            "daily_amplitude": min(_uniform(rng, p.owner_daily), 0.9) if rng.random() < p.owner_moving else 0.0,
            "day_seconds": max(span, 1.0),
        }


def generate_scenario(
    seed: int, params: GeneratorParams | None = None, name: str | None = None, pattern: str | None = None
) -> Scenario:
    """The cluster and workload of ``seed`` (same seed and params, same scenario). ``pattern`` forces the arrivals."""
    p = params or GeneratorParams()
    if pattern is not None and pattern not in PATTERNS:
        raise ConfigError(f"unknown arrival pattern {pattern!r}; known: {', '.join(PATTERNS)}")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x6E7]))
    n_nodes = _node_count(rng, p.nodes)
    gens = _generations(rng, p, n_nodes)
    if len(gens) >= 2 and rng.random() < p.taint_probability:
        gens[-1].taint = gens[-1].name
    profiles = _profiles(rng, p, gens)
    pat = pattern or str(rng.choice(list(p.patterns)))
    draw = _int(rng, p.pods)
    rate = _rate(profiles, gens, _uniform(rng, p.load))
    mean_work = float(np.mean([pr["work_seconds"] for pr in profiles.values()]))
    pods = min(p.max_pods, max(draw, math.ceil(p.pods_per_load * rate * mean_work)))
    arrivals = _arrivals(rng, p, pat, pods, rate, list(profiles))
    background = _noisy(rng, p, gens)
    window = float(rng.choice(list(p.metric_windows)))
    if p.owner_probability > 0:
        _owners(np.random.default_rng(np.random.SeedSequence([int(seed), 0x0E5])), p, profiles, pods / rate)
    med = np.median(np.concatenate([np.repeat(g.cap[None, :], g.count, axis=0) for g in gens]), axis=0)
    data = {
        "name": name or f"gen-{seed}",
        "description": (
            f"generated (seed {seed}): {n_nodes} nodes of {len(gens)} generation(s), {len(profiles)} profiles, "
            f"{pat} arrivals, metric lag {window:g} s{', noisy neighbours' if background else ''}"
            f"{', tainted generation' if any(g.taint for g in gens) else ''}"
        ),
        "normalisation": {
            "cpu_full": 1.0,
            "mem_full": 1.0,
            "net_rx_full_bytes": float(med[2]),
            "net_tx_full_bytes": float(med[3]),
            "disk_read_full_bytes": float(med[4]),
            "disk_write_full_bytes": float(med[5]),
        },
        "metric_window_seconds": window,
        "settle_seconds": 5.0,
        "sample_interval_seconds": 5.0,
        "nodes": [
            {
                "name": g.name,
                "count": g.count,
                "cpu_cores": float(g.cap[0]),
                "mem_bytes": float(g.cap[1]),
                "net_rx_bytes": float(g.cap[2]),
                "net_tx_bytes": float(g.cap[3]),
                "disk_read_bytes": float(g.cap[4]),
                "disk_write_bytes": float(g.cap[5]),
                "idle": {"cpu": g.idle_cpu, "mem": g.idle_mem},
                "labels": g.labels,
                "taints": [{"key": "dedicated", "value": g.taint, "effect": "NoSchedule"}] if g.taint else [],
            }
            for g in gens
        ],
        "profiles": profiles,
        "arrivals": arrivals,
        "background": background,
    }
    return Scenario.model_validate(data)


def training_scenario(seed: int, params: GeneratorParams | None = None) -> Scenario:
    """A training cluster; ConfigError for a seed outside TRAIN_SEEDS (evaluation clusters are never trained on)."""
    if int(seed) not in TRAIN_SEEDS:
        raise ConfigError(f"training seed {seed} is outside {TRAIN_SEEDS.start}..{TRAIN_SEEDS.stop - 1}")
    return generate_scenario(int(seed), params)


@dataclass(frozen=True)
class EvalCluster:
    """One named evaluation cluster: a seed outside TRAIN_SEEDS, a forced pattern and parameter overrides."""

    seed: int
    pattern: str
    overrides: tuple[tuple[str, Any], ...] = ()

    def params(self) -> GeneratorParams:
        return GeneratorParams(**dict(self.overrides)) if self.overrides else GeneratorParams()


def _eval_clusters() -> dict[str, EvalCluster]:
    out: dict[str, EvalCluster] = {}
    k = 0
    for pattern in PATTERNS:  # 12 drawn like training clusters, 3 per pattern
        for i in range(3):
            out[f"eval-{pattern}-{i + 1}"] = EvalCluster(EVAL_SEED_BASE + k, pattern)
            k += 1
    shifts: list[tuple[str, Pattern, tuple[tuple[str, Any], ...]]] = [
        ("shift-overload", "poisson", (("load", (1.0, 1.3)),)),
        ("shift-sharp-bursts", "burst", (("burst_factor", (5.0, 8.0)), ("load", (0.7, 0.9)))),
        ("shift-deep-diurnal", "diurnal", (("diurnal_amplitude", (0.85, 0.95)),)),
        ("shift-mix-swap", "phase-shift", (("profiles", (4, 5)), ("load", (0.7, 0.9)))),
        ("shift-stale-metrics", "poisson", (("metric_windows", (60.0,)),)),
        ("shift-noisy-fleet", "burst", (("noisy_probability", 1.0), ("noisy_share", (0.3, 0.5)))),
        ("shift-liars", "poisson", (("misleading_requests", 1.0), ("demand_jitter", (0.5, 0.7)))),
        ("shift-big-mixed", "diurnal", (("nodes", (80, 100)), ("generations", (4, 4)), ("pods", (300, 400)))),
    ]
    for name, pattern, overrides in shifts:
        out[name] = EvalCluster(EVAL_SEED_BASE + k, pattern, overrides)
        k += 1
    return out


EVAL_CLUSTERS: dict[str, EvalCluster] = _eval_clusters()
"""The 20 evaluation clusters by name; neither training nor checkpoint selection may use them."""


def eval_scenario(name: str) -> Scenario:
    """A named evaluation cluster; ConfigError (one line) for an unknown name."""
    spec = EVAL_CLUSTERS.get(name)
    if spec is None:
        raise ConfigError(f"unknown evaluation cluster {name!r}; known: {', '.join(EVAL_CLUSTERS)}")
    return generate_scenario(spec.seed, spec.params(), name=name, pattern=spec.pattern)


def resolve_scenario(name_or_path: str) -> Scenario:
    """A generated evaluation cluster by name (e.g. eval-diurnal-2), else load_scenario (packaged name or any
    YAML path): how ``drs-prom bench`` and ``drs-prom testbed`` read ``--scenario``."""
    if name_or_path in EVAL_CLUSTERS or (name_or_path.startswith("eval-") and not Path(name_or_path).exists()):
        return eval_scenario(name_or_path)  # an unknown eval- name: ConfigError listing the evaluation clusters
    return load_scenario(name_or_path)


def eval_scenarios() -> list[Scenario]:
    """All 20 evaluation clusters, in EVAL_CLUSTERS order."""
    return [eval_scenario(name) for name in EVAL_CLUSTERS]


def scenario_yaml(scenario: Scenario) -> str:
    """The scenario as YAML that load_scenario reads back to the same Scenario."""
    return yaml.safe_dump(scenario.model_dump(mode="json", exclude_defaults=True), sort_keys=False)
