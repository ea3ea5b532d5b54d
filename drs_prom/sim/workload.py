"""The seeded arrival sequence of one episode: which pods come when, with what demand.

Generated once per (scenario, seed) and shared read-only by every policy run, so every
scheduler in a benchmark faces the identical workload.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np

from drs_prom.features import N_FEATURES
from drs_prom.sim.drift import factor_at, usage_profile
from drs_prom.sim.placement import Placement, claim_name
from drs_prom.sim.scenario import GPU_MODEL_LABEL, GPU_RESOURCE, Profile, Scenario
from drs_prom.sim.trace_spec import ReplayPods
from drs_prom.types import (
    HostPort,
    LabelSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodAffinityTerm,
    PodRequest,
    SpreadConstraint,
    Toleration,
)

PROFILE_LABEL = "app"
"""The label a pod carries with its profile's name; a Placement's terms select their replicas by it."""

BACKGROUND_PROFILE = "background"
"""Profile name of pinned background pods (BackgroundLoad); never a scheduling decision."""


@dataclass(frozen=True)
class Workload:
    """Column arrays over the P pods of an episode, in arrival order."""

    names: tuple[str, ...]
    profiles: tuple[str, ...]
    arrival: np.ndarray  # (P,) seconds from episode start, non-decreasing
    work: np.ndarray  # (P,) seconds of work at full speed
    demand: np.ndarray  # (P, N_FEATURES) actual load at full speed, absolute units, FEATURES order
    cpu_m: np.ndarray  # (P,) int64 request
    mem_bytes: np.ndarray  # (P,) int64 request
    node_selector: tuple[dict[str, str], ...]
    estimate: np.ndarray | None = None  # (P, N_FEATURES) what policies are told (PodRequest.demand); None = demand
    tolerations: tuple[tuple[Toleration, ...], ...] | None = None  # per pod; None = none
    pinned: np.ndarray | None = None  # (P,) node index of background pods, -1 for pods a policy places
    scalar: tuple[tuple[tuple[str, int], ...], ...] | None = None  # per pod extended requests; None = none
    affinity: tuple[tuple[NodeSelectorTerm, ...], ...] | None = None  # per pod required node affinity; None = none
    placement: tuple[Placement, ...] | None = None  # per pod anti-affinity / spread / host port; None = none
    volume_zone: tuple[str, ...] | None = None  # per pod zone of its bound volume ("" = no volume); None = none
    owner: np.ndarray | None = None  # (P,) index into owner_names; None = one owner per profile (Job/<profile>)
    owner_names: tuple[str, ...] = ()  # ``Kind/name`` of each owner
    owner_images: tuple[str, ...] = ()  # the image each owner runs (its profile's: the application)
    usage_times: np.ndarray | None = None  # (K,) when the pods' usage changes (sim.drift); None = it never does
    usage_factor: np.ndarray | None = None  # (P, K + 1, N_FEATURES) each pod's factor on demand between the changes

    def __len__(self) -> int:
        return len(self.names)

    @cached_property
    def owners(self) -> tuple[np.ndarray, tuple[str, ...], tuple[str, ...]]:
        """(owner index of every pod, owner names, owner images): ``owner`` and its names where given, else one
        owner per profile (``Job/<profile>``, running image ``<profile>``)."""
        if self.owner is not None:
            return self.owner, self.owner_names, self.owner_images
        names = tuple(dict.fromkeys(self.profiles))
        index = {p: i for i, p in enumerate(names)}
        return (
            np.array([index[p] for p in self.profiles], dtype=np.int64),
            tuple(f"Job/{p}" for p in names),
            names,
        )

    @property
    def scheduled(self) -> np.ndarray:
        """(P,) True for the pods a policy places (not pinned background pods)."""
        return np.ones(len(self), dtype=bool) if self.pinned is None else self.pinned < 0

    @property
    def n_scheduled(self) -> int:
        """How many pods a policy places (the pinned background pods aside)."""
        return len(self) if self.pinned is None else int((self.pinned < 0).sum())

    def pod_request(self, i: int) -> PodRequest:
        d = (self.demand if self.estimate is None else self.estimate)[i]
        return PodRequest(
            name=self.names[i],
            uid=f"sim-{i}",
            cpu_m=int(self.cpu_m[i]),
            mem_bytes=int(self.mem_bytes[i]),
            node_selector=dict(self.node_selector[i]),
            demand=(float(d[0]), float(d[1]), float(d[2]), float(d[3]), float(d[4]), float(d[5])),
            profile=self.profiles[i],
            owner=self.owners[1][int(self.owners[0][i])],
            image=self.owners[2][int(self.owners[0][i])],
            tolerations=() if self.tolerations is None else self.tolerations[i],
            scalar=() if self.scalar is None else self.scalar[i],
            affinity_terms=() if self.affinity is None else self.affinity[i],
            claims=(claim_name(self.names[i]),) if self.volume_zone is not None and self.volume_zone[i] else (),
            **placement_fields(self.profiles[i], self.placement[i] if self.placement is not None else Placement()),
        )

    @property
    def constrained(self) -> bool:
        """True when some pod has a node selector or a required node affinity (tolerations matter only where a
        node has taints, which the env checks on its own)."""
        return any(self.node_selector) or (self.affinity is not None and any(self.affinity))


def placement_fields(profile: str, placement: Placement, namespace: str = "default") -> dict[str, Any]:
    """The PodRequest fields a profile's Placement gives a pod (its label, anti-affinity, spread, host port), as
    kube.to_pod_request reads them from the manifest the testbed's driver writes."""
    if not placement:
        return {}
    own = LabelSelector(match_labels=((PROFILE_LABEL, profile),))
    out: dict[str, Any] = {"labels": {PROFILE_LABEL: profile}}
    if placement.anti_affinity:
        out["pod_anti_affinity"] = (PodAffinityTerm(own, placement.anti_affinity, frozenset({namespace})),)
    if placement.spread:
        out["spread"] = (SpreadConstraint(placement.max_skew, placement.spread, own),)
    if placement.host_port:
        out["ports"] = (HostPort(placement.host_port),)
    return out


def generate(scenario: Scenario, seed: int) -> Workload:
    """Draw arrivals phase by phase: Poisson (exponential gaps) or uniform (fixed gaps) at the phase rate.

    A replayed trace (``scenario.replay``) is already drawn: its pods come back as they are, whatever the seed.
    """
    if scenario.replay is not None:
        return replayed(scenario.replay)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x5C3]))
    pnames = list(scenario.profiles)
    base_w = np.array([scenario.profiles[p].weight for p in pnames], dtype=np.float64)
    times: list[np.ndarray] = []
    kinds: list[np.ndarray] = []
    t = 0.0
    for phase in scenario.arrivals:
        t += phase.gap_seconds
        gap = 1.0 / phase.rate_per_second
        if phase.process == "poisson":
            gaps = rng.exponential(gap, size=phase.pods)
            gaps[0] = 0.0 if not times else gaps[0]
        else:
            gaps = np.full(phase.pods, gap)
            gaps[0] = 0.0 if not times else gap
        arr = t + np.cumsum(gaps)
        t = float(arr[-1])
        w = base_w if phase.mix is None else np.array([phase.mix.get(p, 0.0) for p in pnames])
        kinds.append(rng.choice(len(pnames), size=phase.pods, p=w / w.sum()))
        times.append(arr)
    arrival = np.concatenate(times)
    kind = np.concatenate(kinds)
    n = len(arrival)
    profs = [scenario.profiles[p] for p in pnames]
    work_mean = np.array([p.work_seconds for p in profs])[kind]
    jitter = np.array([p.work_jitter for p in profs])[kind]
    work = work_mean * (1.0 + jitter * rng.uniform(-1.0, 1.0, size=n))
    estimate = np.array([p.demand.vector() for p in profs], dtype=np.float64)[kind]
    djit = np.array([p.demand_jitter for p in profs])[kind]
    demand = estimate * (1.0 + djit[:, None] * rng.uniform(-1.0, 1.0, size=estimate.shape))
    counters: dict[str, int] = {}
    names = []
    for k in kind:
        p = pnames[k]
        counters[p] = counters.get(p, 0) + 1
        names.append(f"{p}-{counters[p]:05d}")
    tols = [tuple(Toleration(t.key, t.operator, t.value, t.effect) for t in p.tolerations) for p in profs]
    scalars = [p.requests.scalar() for p in profs]
    placements = [p.placement for p in profs]
    wl = Workload(
        names=tuple(names),
        profiles=tuple(pnames[k] for k in kind),
        arrival=arrival,
        work=work,
        demand=demand,
        cpu_m=np.array([int(p.requests.cpu_m) for p in profs], dtype=np.int64)[kind],
        mem_bytes=np.array([int(p.requests.mem_bytes) for p in profs], dtype=np.int64)[kind],
        node_selector=tuple(dict(profs[k].node_selector) for k in kind),
        estimate=estimate,
        tolerations=tuple(tols[k] for k in kind) if any(tols) else None,
        scalar=tuple(scalars[k] for k in kind) if any(scalars) else None,
        placement=tuple(placements[k] for k in kind) if any(placements) else None,
        volume_zone=_volume_zones([p.placement.volume_zones for p in profs], kind, seed),
    )
    if any(p.owners is not None for p in profs):
        wl = _with_owners(wl, scenario, seed)
    if any(p.drift is not None for p in profs):
        wl = _with_drift(wl, scenario, seed)
    return _with_background(wl, scenario, seed) if scenario.background else wl


def _with_drift(wl: Workload, scenario: Scenario, seed: int) -> Workload:
    """Give the pods of the profiles that declare ``drift`` their usage profile over time (sim.drift); what a policy
    is told of a pod (``estimate``) is its usage at its arrival."""
    drawn = usage_profile(scenario, wl.profiles, wl.arrival, wl.work, seed)
    if drawn is None:
        return wl
    times, factor = drawn
    estimate = wl.estimate if wl.estimate is not None else wl.demand
    return replace(wl, estimate=estimate * factor_at(times, factor, wl.arrival), usage_times=times, usage_factor=factor)


def _fits_at_most(scenario: Scenario, profile: Profile) -> tuple[np.ndarray, int, int]:
    """The largest capacity (per signal, 90 %: demand that fits the node at full speed) and allocatable cpu and
    memory among the node types the profile may use (so an owner's factors never make a pod that fits nowhere)."""
    fit = [t for t in scenario.nodes if all(t.labels.get(k) == v for k, v in profile.node_selector.items())]
    fit = fit or list(scenario.nodes)
    cap = 0.9 * np.max(np.array([t.capacity for t in fit], dtype=np.float64), axis=0)
    return cap, max(t.alloc_cpu_m for t in fit), max(t.alloc_mem for t in fit)


def _with_owners(wl: Workload, scenario: Scenario, seed: int) -> Workload:
    """Give the pods of the profiles that declare ``owners`` their owner, and the owner's usage and requests.

    From a random stream of its own: the arrivals, work and per-pod jitter stay those of ``generate``. The told
    usage (``estimate``) follows the owner's factors too: it is the pod's expected usage, its jitter aside.
    """
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x0A1]))
    n = len(wl)
    span = float(wl.arrival[-1] - wl.arrival[0]) if n else 0.0
    t0 = float(wl.arrival[0]) if n else 0.0
    owner = np.zeros(n, dtype=np.int64)
    names: list[str] = []
    images: list[str] = []
    factor = np.ones((n, N_FEATURES))
    cpu_m, mem = wl.cpu_m.copy(), wl.mem_bytes.copy()
    profiles = np.array(wl.profiles, dtype=object)
    for pname, prof in scenario.profiles.items():
        rows = np.flatnonzero(profiles == pname)
        spec = prof.owners
        if spec is None:
            owner[rows] = len(names)
            names.append(f"Job/{pname}")
            images.append(pname)
            continue
        k = spec.count
        sigma, rsigma = spec.usage_spread, spec.request_spread
        usage = np.exp(rng.normal(-0.5 * sigma**2, sigma, size=(k, N_FEATURES)))  # mean one
        req = np.exp(rng.normal(-0.5 * rsigma**2, rsigma, size=k))
        phase = rng.uniform(0.0, 2 * np.pi, size=k)
        drift = rng.uniform(-spec.drift, spec.drift, size=k)
        late = np.zeros(k, dtype=bool)
        late[rng.permutation(k)[: round(spec.new_share * k)]] = True
        if late.all():
            late[0] = False
        early = np.flatnonzero(~late)
        u = rng.random(len(rows))
        second_half = (wl.arrival[rows] - t0) >= span / 2
        pick = np.where(
            second_half, (u * k).astype(np.int64), early[np.minimum((u * len(early)).astype(np.int64), len(early) - 1)]
        )
        base = len(names)
        owner[rows] = base + pick
        names.extend(f"Deployment/{pname}-{j + 1}" for j in range(k))
        images.extend([pname] * k)
        frac = (wl.arrival[rows] - t0) / span if span > 0 else np.zeros(len(rows))
        when = (1.0 + drift[pick] * frac) * (
            1.0 + spec.daily_amplitude * np.sin(2 * np.pi * wl.arrival[rows] / spec.day_seconds + phase[pick])
        )
        factor[rows] = usage[pick] * when[:, None]
        cap, max_cpu, max_mem = _fits_at_most(scenario, prof)
        base_demand = np.array(prof.demand.vector(), dtype=np.float64)
        factor[rows] = np.minimum(factor[rows], np.where(base_demand > 0, cap / np.maximum(base_demand, 1e-300), 1.0))
        cpu_m[rows] = np.minimum(np.round(prof.requests.cpu_m * req[pick]), max_cpu).astype(np.int64)
        mem[rows] = np.minimum(np.round(prof.requests.mem_bytes * req[pick]), max_mem).astype(np.int64)
    estimate = wl.estimate if wl.estimate is not None else wl.demand
    return replace(
        wl,
        demand=wl.demand * factor,
        estimate=estimate * factor,
        cpu_m=cpu_m,
        mem_bytes=mem,
        owner=owner,
        owner_names=tuple(names),
        owner_images=tuple(images),
    )


def _volume_zones(choices: list[tuple[str, ...]], kind: np.ndarray, seed: int) -> tuple[str, ...] | None:
    """Each pod's volume zone, drawn from its profile's ``volume_zones`` ("" for a profile without); from a stream
    of its own, so declaring volume zones leaves the rest of the workload as it was."""
    if not any(choices):
        return None
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x201]))
    picks = rng.random(len(kind))
    return tuple(choices[k][int(u * len(choices[k]))] if choices[k] else "" for k, u in zip(kind.tolist(), picks))


def _with_background(wl: Workload, scenario: Scenario, seed: int) -> Workload:
    """Merge the scenario's pinned background pods into ``wl`` by arrival time (stable: scheduled pods first).

    Background pods come from their own random stream, so the scheduled pods are the
    same with or without them.
    """
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xB6]))
    hosts = scenario.hostnames()
    default_until = float(wl.arrival[-1]) if len(wl) else 0.0
    names: list[str] = []
    arrival: list[np.ndarray] = []
    work: list[np.ndarray] = []
    demand: list[np.ndarray] = []
    pinned: list[np.ndarray] = []
    for bg in scenario.background:
        until = bg.until_seconds if bg.until_seconds is not None else default_until
        t, times = bg.start_seconds, list[float]()
        while True:  # bounded: until is finite and every gap is > 0 with probability 1
            t += float(rng.exponential(1.0 / bg.rate_per_second))
            if t > until or len(times) >= 100_000:
                break
            times.append(t)
        n = len(times)
        base = np.array(bg.demand.vector(), dtype=np.float64)
        demand.append(base * (1.0 + bg.demand_jitter * rng.uniform(-1.0, 1.0, size=(n, N_FEATURES))))
        work.append(bg.work_seconds * (1.0 + bg.work_jitter * rng.uniform(-1.0, 1.0, size=n)))
        arrival.append(np.array(times))
        pinned.append(np.full(n, hosts.index(bg.node), dtype=np.int64))
        names.extend(f"{BACKGROUND_PROFILE}-{bg.node}-{k + 1:05d}" for k in range(n))
    nb = len(names)
    arr = np.concatenate([wl.arrival, *arrival])
    order = np.argsort(arr, kind="stable")
    no_tols: tuple[Toleration, ...] = ()
    return Workload(
        names=tuple(np.array([*wl.names, *names], dtype=object)[order]),
        profiles=tuple(np.array([*wl.profiles, *([BACKGROUND_PROFILE] * nb)], dtype=object)[order]),
        arrival=arr[order],
        work=np.concatenate([wl.work, *work])[order],
        demand=np.concatenate([wl.demand, *demand])[order],
        cpu_m=np.concatenate([wl.cpu_m, np.zeros(nb, dtype=np.int64)])[order],
        mem_bytes=np.concatenate([wl.mem_bytes, np.zeros(nb, dtype=np.int64)])[order],
        node_selector=tuple([*wl.node_selector, *([{}] * nb)][i] for i in order),
        estimate=np.concatenate([wl.estimate if wl.estimate is not None else wl.demand, *demand])[order],
        tolerations=tuple([*(wl.tolerations or [no_tols] * len(wl)), *([no_tols] * nb)][i] for i in order),
        pinned=np.concatenate([np.full(len(wl), -1, dtype=np.int64), *pinned])[order],
        scalar=None if wl.scalar is None else tuple([*wl.scalar, *([()] * nb)][i] for i in order),
        placement=None if wl.placement is None else tuple([*wl.placement, *([Placement()] * nb)][i] for i in order),
        volume_zone=None if wl.volume_zone is None else tuple([*wl.volume_zone, *([""] * nb)][i] for i in order),
        **_background_owners(wl, nb, order),
        **_background_drift(wl, nb, order),
    )


def _background_drift(wl: Workload, nb: int, order: np.ndarray) -> dict[str, Any]:
    """The usage profile of ``wl`` with ``nb`` background pods (whose usage stays put) merged in ``order``."""
    if wl.usage_times is None or wl.usage_factor is None:
        return {}
    flat = np.ones((nb, *wl.usage_factor.shape[1:]))
    return {"usage_times": wl.usage_times, "usage_factor": np.concatenate([wl.usage_factor, flat])[order]}


def _background_owners(wl: Workload, nb: int, order: np.ndarray) -> dict[str, Any]:
    """The owner fields of ``wl`` with ``nb`` background pods (one owner of their own) merged in ``order``."""
    if wl.owner is None:
        return {}
    background = len(wl.owner_names)
    return {
        "owner": np.concatenate([wl.owner, np.full(nb, background, dtype=np.int64)])[order],
        "owner_names": (*wl.owner_names, f"Pod/{BACKGROUND_PROFILE}"),
        "owner_images": (*wl.owner_images, ""),
    }


def replayed(pods: ReplayPods) -> Workload:
    """The workload of a replayed trace: each pod its own profile-free row, usage as demand and estimate.

    Allowed GPU models become a required node affinity ``gpu-model In (...)``, as a
    Kubernetes manifest of the same pod would say it.
    """
    n = len(pods)
    demand = np.zeros((n, N_FEATURES))
    demand[:, 0] = pods.cpu_used
    demand[:, 1] = pods.mem_used
    affinity = tuple(
        (NodeSelectorTerm((NodeSelectorRequirement(GPU_MODEL_LABEL, "In", models),)),) if models else ()
        for models in pods.gpu_models
    )
    tolerations = tuple(tuple(Toleration(*t) for t in tols) for tols in pods.tolerations)
    return Workload(
        names=pods.names,
        profiles=tuple("trace" for _ in range(n)),
        arrival=np.array(pods.arrival, dtype=np.float64),
        work=np.array(pods.work, dtype=np.float64),
        demand=demand,
        cpu_m=np.array(pods.cpu_m, dtype=np.int64),
        mem_bytes=np.array(pods.mem_bytes, dtype=np.int64),
        node_selector=tuple(dict(sel) for sel in pods.node_selector),
        tolerations=tolerations if any(tolerations) else None,
        scalar=tuple(((GPU_RESOURCE, g),) if g else () for g in pods.gpus) if any(pods.gpus) else None,
        affinity=affinity if any(affinity) else None,
        owner=np.arange(n, dtype=np.int64),  # a replayed pod has no owner the trace names: no history to learn from
        owner_names=tuple(f"Pod/{name}" for name in pods.names),
        owner_images=("",) * n,
    )
