"""How the shipped network's teacher was chosen: its over-request and room weights, its resident load, on generated clusters.

``capacity-balanced-resident`` (drs_prom.policies.load_aware) adds two things to capacity-balanced-overload: load raised to
the expected load of the pods the scheduler placed that still run (ctx.resident), and a penalty
``over_request_penalty x over_request_take``. This script plays every variant (penalty in ``--weights``, with and
without the resident load) and capacity-balanced-overload on the same workloads of generated *training* clusters
(generator seeds ``--base`` and up, 2 bench seeds each; never the packaged scenarios or the evaluation clusters)
and prints, per variant, the geometric mean of its composite over capacity-balanced-overload's with a 95 %
interval over clusters, and on how many clusters it is more than 3 % worse or better. The shipped teacher is the
variant with the lowest mean.

``--room-weights`` plays ``capacity-balanced-room`` (the resident teacher minus ``room_penalty x`` the share of the
recent pods' slots a bind takes, drs_prom.policies.room_keeping) with each weight instead, against capacity-balanced-resident
on the same workloads. ``--peak-weights`` plays ``capacity-balanced-peak`` (the room teacher minus ``peak_weight x``
the node's own busiest-plus-mean relative load after the bind) with each weight, and least-loaded, against
capacity-balanced-room. ``--trend-weights`` plays the peak teacher with its room weight raised while arrivals speed
up (``room_penalty x (1 + k x max(trend, 0))``, the guided network's arrival-rate trend), against the peak teacher.
``--ended`` plays the peak teacher blind to what the metrics still show of its ended pods (ctx.ended) against the
peak teacher as shipped, which takes it off the measured load. ``--soon-horizons`` plays the peak teacher reading
each of its running pods at its mean presence over the next H seconds, from the expected run time of the pod's
owner (the mean work of its profile, what the journal's run times would tell), against the peak teacher: a node
whose pods are about to end reads lighter than one whose pods just started. ``--standard-weights`` plays the peak
teacher minus ``w x`` DRS's imbalance after the bind on the standard scale (network and disk in bytes, not over each
node's own link), alone and only where the node stays below the hot fraction after it, against the peak teacher, and
reports DRS's imbalance and the p95 slowdown beside the composite: the peak teacher balances each node against its
own capacity, which on unequal links leaves more bytes on the fast nodes.

    python benchmarks/teacher_weight.py --clusters 64 --base 600000 --weights 0,0.1,0.2,0.5
    python benchmarks/teacher_weight.py --clusters 64 --base 600000 --room-weights 0.1,0.2,0.3,0.5,1
    python benchmarks/teacher_weight.py --clusters 128 --base 700000 --peak-weights 0.03,0.1,0.3,1
    python benchmarks/teacher_weight.py --clusters 128 --base 900000 --trend-weights 1,3
    python benchmarks/teacher_weight.py --clusters 128 --base 960000 --ended
    python benchmarks/teacher_weight.py --clusters 128 --base 970000 --soon-horizons 30,120
    python benchmarks/teacher_weight.py --clusters 64 --base 980000 --standard-weights 0.02,0.05,0.1,0.2,0.5,1
    python benchmarks/teacher_weight.py --clusters 128 --base 990000 --standard-weights 0.05,0.2
"""

from __future__ import annotations

import argparse
import dataclasses
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from drs_prom.agent.cluster_context import ArrivalTrend, ClusterFeatures
from drs_prom.config import ObjectiveSettings
from drs_prom.features import N_FEATURES
from drs_prom.policies.contract import DecisionContext, Policy
from drs_prom.policies.load_aware import NO_METRICS_SCORE, full_of, has_metrics, imbalance_if_placed
from drs_prom.policies.teachers import CapacityBalancedPeak, CapacityBalancedResident, CapacityBalancedRoom
from drs_prom.signals.state import pod_matrix
from drs_prom.sim.env import SchedulingEnv, scenario_spec, sim_policy, unclipped_env
from drs_prom.sim.generator import GeneratorParams, training_scenario

FLOOR = "capacity-balanced-overload"
PARAMS = GeneratorParams(load=(0.4, 1.3), metric_windows=(1.0, 5.0, 15.0, 30.0, 60.0))
"""The widened training distribution: overloaded periods and long lags included."""


class Variant(CapacityBalancedResident):
    """The teacher with another weight, or blind to the resident load."""

    def __init__(self, seed: int, window: float, weight: float, resident: bool) -> None:
        super().__init__(seed, window)
        self.over_request_penalty = weight
        self.reads_resident = resident

    def node_scores(self, ctx: DecisionContext) -> np.ndarray:
        if not self.reads_resident:
            ctx = dataclasses.replace(ctx, resident=None)
        return super().node_scores(ctx)


class RoomVariant(CapacityBalancedRoom):
    """The room-keeping teacher with another room weight."""

    def __init__(self, seed: int, window: float, weight: float) -> None:
        super().__init__(seed, window)
        self.room_penalty = weight


class PeakVariant(CapacityBalancedPeak):
    """The peak teacher with another peak weight."""

    def __init__(self, seed: int, window: float, weight: float) -> None:
        super().__init__(seed, window)
        self.peak_weight = weight


class TrendVariant(CapacityBalancedPeak):
    """The peak teacher keeping more room while arrivals speed up: more of the recent shapes are on their way."""

    def __init__(self, seed: int, window: float, weight: float) -> None:
        super().__init__(seed, window)
        self.trend_weight = weight
        self.base_room_penalty = self.room_penalty
        self.context = ClusterFeatures()
        self.trend = ArrivalTrend()

    def score(self, ctx: DecisionContext) -> np.ndarray:
        state = self.context.advanced(ctx, self.recent.window_seconds)
        rising = max(self.trend.advanced(ctx.now, state[1])[0], 0.0)
        self.room_penalty = self.base_room_penalty * (1.0 + self.trend_weight * rising)
        return super().score(ctx)

    def bound(self, ctx: DecisionContext, node: int) -> None:
        state = self.context.advanced(ctx, self.recent.window_seconds)
        self.trend.commit(self.trend.advanced(ctx.now, state[1])[1])
        self.context.commit(state)
        super().bound(ctx, node)


class BlindToEnded(CapacityBalancedPeak):
    """The peak teacher reading the measured load as it comes, ended pods' fading load included."""

    def score(self, ctx: DecisionContext) -> np.ndarray:
        return super().score(dataclasses.replace(ctx, ended=None))


class SoonVariant(CapacityBalancedPeak):
    """The peak teacher reading each running pod of its own at its mean presence over the next ``horizon`` seconds.

    The share of the horizon a pod is expected to be gone (its owner's mean work minus the time it has run, over
    the horizon) is taken off the measured load as the ended pods are, and off the resident load."""

    def __init__(self, seed: int, window: float, horizon: float, env: SchedulingEnv) -> None:
        super().__init__(seed, window)
        self.horizon = horizon
        self.env = env
        self._owner_work: tuple[int, dict[str, float]] = (-1, {})

    def _expected_work(self) -> dict[str, float]:
        wl = self.env.workload
        if self._owner_work[0] != id(wl):
            by: dict[str, list[float]] = {}
            for profile, work in zip(wl.profiles, wl.work, strict=True):
                by.setdefault(profile, []).append(float(work))
            self._owner_work = (id(wl), {k: float(np.mean(v)) for k, v in by.items()})
        return self._owner_work[1]

    def score(self, ctx: DecisionContext) -> np.ndarray:
        env, c, wl = self.env, self.env.cluster, self.env.workload
        expected = self._expected_work()
        slot = {n.name: i for i, n in enumerate(ctx.nodes)}
        cap = env.nodes.capacity
        soon = np.zeros((len(ctx.nodes), N_FEATURES))
        for p in c.running:
            i = slot.get(env.node_names[c.node_of[p]])
            if i is None or not wl.scheduled[p]:
                continue
            left = max(expected[wl.profiles[p]] - (ctx.now - float(c.start[p])), 0.0)
            gone = 1.0 - min(1.0, left / self.horizon)
            if gone > 0.0:
                d = (wl.demand if wl.estimate is None else wl.estimate)[p]
                soon[i] += gone * pod_matrix(d, cap[i : i + 1, 0], cap[i : i + 1, 1], env.norm)[0]
        ended = soon if ctx.ended is None else ctx.ended + soon
        resident = None if ctx.resident is None else np.maximum(ctx.resident - soon, 0.0)
        return super().score(dataclasses.replace(ctx, ended=ended, resident=resident))


class StandardVariant(CapacityBalancedPeak):
    """The peak teacher minus ``weight`` x DRS's imbalance after the bind on the standard scale (``below_hot``: only
    on nodes that stay below the hot fraction after it; the others get the largest, so it never draws a pod to a
    node about to run hot)."""

    hot_fraction = ObjectiveSettings().hot_fraction  # the objectives' own

    def __init__(self, seed: int, window: float, weight: float, below_hot: bool) -> None:
        super().__init__(seed, window)
        self.weight = weight
        self.below_hot = below_hot

    def scores_and_take_on(self, ctx: DecisionContext, rel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s, take = super().scores_and_take_on(ctx, rel)
        full = full_of(ctx)
        pod = np.asarray(ctx.pod_load, dtype=np.float64)
        imb = imbalance_if_placed(rel * full, pod)  # node-relative load back on the standard scale
        if self.below_hot:
            imb = np.where((rel + pod / full).max(axis=1) > self.hot_fraction, imb.max(), imb)
        return np.where(has_metrics(ctx), s - self.weight * imb, NO_METRICS_SCORE), take


RESIDENT = "capacity-balanced-resident"
ROOM = "capacity-balanced-room"
PEAK = "capacity-balanced-peak"
LEAST = "least-loaded"
KINDS: dict[str, tuple[str, type[CapacityBalancedRoom]]] = {
    "room": (RESIDENT, RoomVariant),
    "peak": (ROOM, PeakVariant),
    "trend": (PEAK, TrendVariant),
}
"""Per weighted term: the teacher it is compared with and the variant that plays each weight."""


def _weight_job(args: tuple[int, int, str, tuple[float, ...]]) -> dict[str, float]:
    """One cluster and seed: the reference teacher and its child at every weight (room, peak or trend), same workload."""
    key, seed, kind, weights = args
    sc = training_scenario(key, PARAMS)
    window = scenario_spec(sc).metric_window_seconds
    reference, variant = KINDS[kind]
    out = {reference: unclipped_env(sc, seed).run(sim_policy(reference, sc, seed), seed=seed).composite}
    if kind == "peak":  # the heuristic whose measure the peak term borrows, for scale
        out[LEAST] = unclipped_env(sc, seed).run(sim_policy(LEAST, sc, seed), seed=seed).composite
    for w in weights:
        policy = variant(seed, window, w)
        out[f"{kind} weight {w:g}"] = unclipped_env(sc, seed).run(policy, seed=seed).composite
    return out


def _ended_job(args: tuple[int, int]) -> dict[str, float]:
    """One cluster and seed: the peak teacher blind to ctx.ended and as shipped, same workload."""
    key, seed = args
    sc = training_scenario(key, PARAMS)
    window = scenario_spec(sc).metric_window_seconds
    return {
        "blind to ended pods": unclipped_env(sc, seed).run(BlindToEnded(seed, window), seed=seed).composite,
        PEAK: unclipped_env(sc, seed).run(sim_policy(PEAK, sc, seed), seed=seed).composite,
    }


def _soon_job(args: tuple[int, int, tuple[float, ...]]) -> dict[str, float]:
    """One cluster and seed: the peak teacher and its pods read at their presence over each horizon, same workload."""
    key, seed, horizons = args
    sc = training_scenario(key, PARAMS)
    window = scenario_spec(sc).metric_window_seconds
    out = {PEAK: unclipped_env(sc, seed).run(sim_policy(PEAK, sc, seed), seed=seed).composite}
    for h in horizons:
        env = unclipped_env(sc, seed)
        out[f"horizon {h:g} s"] = env.run(SoonVariant(seed, window, h, env), seed=seed).composite
    return out


STANDARD_METRICS = ("composite", "drs_imbalance", "slowdown_p95")


def _standard_job(args: tuple[int, int, tuple[float, ...]]) -> dict[str, dict[str, float]]:
    """One cluster and seed: the peak teacher and each standard-scale weight, alone and below hot, same workload;
    per policy its composite, DRS imbalance and p95 slowdown."""
    key, seed, weights = args
    sc = training_scenario(key, PARAMS)
    window = scenario_spec(sc).metric_window_seconds

    def measures(policy: Policy) -> dict[str, float]:
        r = unclipped_env(sc, seed).run(policy, seed=seed)
        assert r.objectives is not None
        return {"composite": r.composite, **{k: r.objectives.as_dict()[k] for k in STANDARD_METRICS[1:]}}

    out = {PEAK: measures(sim_policy(PEAK, sc, seed))}
    for w in weights:
        out[f"standard weight {w:g}"] = measures(StandardVariant(seed, window, w, below_hot=False))
        out[f"standard weight {w:g} below hot"] = measures(StandardVariant(seed, window, w, below_hot=True))
    return out


def _report(rows: list[dict[str, float]], labels: list[str], reference: str, clusters: int) -> None:
    for label in labels:
        log = np.array([np.log(r[label] / r[reference]) for r in rows]).reshape(clusters, 2).mean(axis=1)
        half = 1.96 * log.std(ddof=1) / np.sqrt(len(log))
        print(
            f"{label}: {np.exp(log.mean()):.4f}x {reference} [{np.exp(log.mean() - half):.4f}, "
            f"{np.exp(log.mean() + half):.4f}]; >3 % worse on {int(np.sum(log > np.log(1.03)))}, "
            f">3 % better on {int(np.sum(log < np.log(0.97)))} of {clusters}"
        )


def _label(weight: float, resident: bool) -> str:
    return f"weight {weight:g}{' + resident' if resident else ''}"


def _job(args: tuple[int, int, tuple[tuple[float, bool], ...]]) -> dict[str, float]:
    key, seed, variants = args
    sc = training_scenario(key, PARAMS)
    window = scenario_spec(sc).metric_window_seconds
    out = {FLOOR: unclipped_env(sc, seed).run(sim_policy(FLOOR, sc, seed), seed=seed).composite}
    for weight, resident in variants:
        policy = Variant(seed, window, weight, resident)
        out[_label(weight, resident)] = unclipped_env(sc, seed).run(policy, seed=seed).composite
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clusters", type=int, default=64)
    ap.add_argument("--base", type=int, default=600_000, help="First generator seed (training range).")
    ap.add_argument("--weights", default="0,0.1,0.2,0.5")
    ap.add_argument("--room-weights", default="", help="Weights of the room term instead (see above).")
    ap.add_argument("--peak-weights", default="", help="Weights of the peak term instead (see above).")
    ap.add_argument("--trend-weights", default="", help="Weights of the arrival trend on the room term (see above).")
    ap.add_argument("--soon-horizons", default="", help="Horizons (s) of the expected-run-time attempt (see above).")
    ap.add_argument("--ended", action="store_true", help="The ended pods' fading load, taken off or not (see above).")
    ap.add_argument("--standard-weights", default="", help="Weights of the standard-scale imbalance (see above).")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    seeds = range(args.base, args.base + args.clusters)
    if args.soon_horizons:
        hs = tuple(float(h) for h in args.soon_horizons.split(","))
        with ProcessPoolExecutor(args.workers) as pool:
            found = list(pool.map(_soon_job, [(k, s, hs) for k in seeds for s in (0, 1)]))
        _report(found, [f"horizon {h:g} s" for h in hs], PEAK, args.clusters)
        return
    if args.standard_weights:
        ws = tuple(float(w) for w in args.standard_weights.split(","))
        with ProcessPoolExecutor(args.workers) as pool:
            measured = list(pool.map(_standard_job, [(k, s, ws) for k in seeds for s in (0, 1)]))
        labels = [f"standard weight {w:g}{hot}" for w in ws for hot in ("", " below hot")]
        for metric in STANDARD_METRICS:
            print(f"-- {metric}")
            _report([{k: v[metric] for k, v in r.items()} for r in measured], labels, PEAK, args.clusters)
        return
    if args.ended:
        with ProcessPoolExecutor(args.workers) as pool:
            found = list(pool.map(_ended_job, [(k, s) for k in seeds for s in (0, 1)]))
        _report(found, [PEAK], "blind to ended pods", args.clusters)
        return
    for kind, given in (("room", args.room_weights), ("peak", args.peak_weights), ("trend", args.trend_weights)):
        if not given:
            continue
        reference = KINDS[kind][0]
        ws = tuple(float(w) for w in given.split(","))
        with ProcessPoolExecutor(args.workers) as pool:
            found = list(pool.map(_weight_job, [(k, s, kind, ws) for k in seeds for s in (0, 1)]))
        labels = [f"{kind} weight {w:g}" for w in ws]
        _report(found, [LEAST, *labels] if kind == "peak" else labels, reference, args.clusters)
        return
    weights = [float(w) for w in args.weights.split(",")]
    variants = tuple((w, r) for r in (False, True) for w in weights if (w, r) != (0.0, False))
    with ProcessPoolExecutor(args.workers) as pool:
        rows = list(pool.map(_job, [(k, s, variants) for k in seeds for s in (0, 1)]))
    _report(rows, [_label(w, r) for w, r in variants], FLOOR, args.clusters)


if __name__ == "__main__":
    main()
