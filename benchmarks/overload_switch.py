"""Does spreading by requests pay in hot states on generated clusters? A rule target, measured before training on it.

``capacity-balanced-overload`` loses to kube-default on the overloaded, lagged evaluation cluster
(docs/model.md). A per-decision target that would teach a network that behaviour is: kube-default's
choice while the smoothed share of hot nodes (bottleneck above 0.8 of capacity, the context the
guided network reads) is at or above a threshold, capacity-balanced-overload's otherwise. This
script plays that rule on generated training clusters (never the evaluation clusters) and prints,
per cluster and on average, its composite and kube-default's as ratios to capacity-balanced-overload
on the same workload. A threshold is worth training on only if the mean ratio is below 1.

With ``--judge``, the rule at one threshold (fixed beforehand on generated clusters, never chosen
here) is run on suite scenarios and judged by the shipped-model bar (benchmarks/drs_bar.py) against
the heuristics' runs of a ``bench --suite``: whether imitating it could pass where drs-v2 fails.

    python benchmarks/overload_switch.py --load 1.0,1.3 --clusters 16 --base 100000 --thresholds 0.5,0.7,0.9
    python benchmarks/overload_switch.py --load 1.0,1.3 --metric-windows 30,60 --clusters 16 --base 200000
    python benchmarks/overload_switch.py --thresholds 0.9 --judge shift-overload,eval-phase-shift-1 --heuristics out/suite-h
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from drs_prom.agent.cluster_context import CLUSTER_FEATURES
from drs_prom.agent.guided import GUIDES, GuideScores
from drs_prom.policies.contract import DecisionContext
from drs_prom.policies.recent_binds import RecentBinds
from drs_prom.sim.env import SchedulingEnv, policy_norm, scenario_spec, sim_policy, unclipped_env
from drs_prom.sim.generator import GeneratorParams, training_scenario
from drs_prom.sim.suite import resolve_scenario

FLOOR = GUIDES[0]
HOT_SHARE = CLUSTER_FEATURES.index("hot_share")  # in the smoothed cluster context


class HotSwitch:
    """capacity-balanced-overload, but kube-default's choice (ties broken by the former) while hot share >= threshold."""

    reads_unclipped_load = True
    name = "hot-switch"
    version = ""
    normalisation = None

    def __init__(self, metric_window_seconds: float, threshold: float) -> None:
        self.guides = GuideScores(metric_window_seconds)
        self.threshold = threshold

    @property
    def recent(self) -> RecentBinds:
        return self.guides.recent

    @property
    def metric_window_seconds(self) -> float:
        return self.guides.window

    def score(self, ctx: DecisionContext) -> np.ndarray:
        _, raw = self.guides.rows(ctx)
        context = self.guides.context.advanced(ctx, self.guides.window)[0]  # as it is with this decision counted
        hot = context[HOT_SHARE] >= self.threshold
        s = raw[0].astype(np.float64)
        if hot:
            s = raw[GUIDES.index("kube-default")] + 1e-6 * raw[0] / (np.abs(raw[0]).max() + 1e-9)
        return np.where(np.asarray(ctx.feasible, bool), s, -np.inf)

    def bound(self, ctx: DecisionContext, node: int) -> None:
        self.guides.bound(ctx, node)


def _cluster(job: tuple[int, GeneratorParams, tuple[float, ...]]) -> tuple[int, dict[Any, float]]:
    seed, params, thresholds = job
    sc = training_scenario(seed, params)
    window = scenario_spec(sc).metric_window_seconds
    out: dict[Any, float] = {
        a: unclipped_env(sc, seed).run(sim_policy(a, sc, seed), seed=seed).composite for a in (FLOOR, "kube-default")
    }
    for t in thresholds:
        out[t] = unclipped_env(sc, seed).run(HotSwitch(window, t), seed=seed).composite
    return seed, out


def judge_rule(threshold: float, names: list[str], heuristics: str, seeds: int = 10) -> None:
    """The rule on suite scenarios, judged as drs would be (drs_bar.judge against the heuristics' runs)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from drs_bar import heuristic_runs, judge

    for name in names:
        sc = resolve_scenario(name)
        runs = {}
        for seed in range(seeds):
            policy = HotSwitch(scenario_spec(sc).metric_window_seconds, threshold)
            r = SchedulingEnv(sc, seed=seed, norm=policy_norm(policy, sc)).run(policy, seed=seed)
            runs[seed] = (r.composite, r.objective_dict()["slowdown_p95"])
        res = judge(runs, heuristic_runs(Path(heuristics, "scenarios", f"{name}.json"), list(range(seeds))))
        print(
            f"{name}: threshold {threshold}, composite {res['comp_kd']:.3f}x kube-default, p95 {res['p95_kd']:.3f}x, "
            f"vs {res['best']} {100 * res['vs_best']:+.1f} % [{100 * res['lo']:+.1f}, {100 * res['hi']:+.1f}], "
            f"{'pass' if res['pass'] else 'fail'}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--load", default="1.0,1.3", help="LO,HI bottleneck utilisation of the generated clusters.")
    ap.add_argument("--metric-windows", default="1,5,15,30", help="Metric lags (s) of the generated clusters.")
    ap.add_argument("--clusters", type=int, default=16)
    ap.add_argument("--base", type=int, default=100_000, help="First generator seed (a training seed).")
    ap.add_argument("--thresholds", default="0.5,0.7,0.9")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--judge", default="", help="Suite scenarios to judge the rule on (one threshold).")
    ap.add_argument("--heuristics", default="out/suite-h", help="With --judge: a bench --suite --out directory.")
    args = ap.parse_args()
    if args.judge:
        judge_rule(float(args.thresholds.split(",")[0]), args.judge.split(","), args.heuristics)
        return
    lo, hi = (float(x) for x in args.load.split(","))
    lags = tuple(float(w) for w in args.metric_windows.split(","))
    params = GeneratorParams(load=(lo, hi), metric_windows=lags)
    thresholds = tuple(float(t) for t in args.thresholds.split(","))
    rows = []
    jobs = [(s, params, thresholds) for s in range(args.base, args.base + args.clusters)]
    with ProcessPoolExecutor(args.workers) as pool:
        for seed, r in pool.map(_cluster, jobs):
            rows.append(r)
            c = r[FLOOR]
            print(seed, f"kube-default {r['kube-default'] / c:.3f}", *(f"{t}: {r[t] / c:.3f}" for t in thresholds))
    base = np.array([r[FLOOR] for r in rows])
    print(
        f"mean over {len(rows)}: kube-default {np.mean(np.array([r['kube-default'] for r in rows]) / base):.4f}",
        *(f"{t}: {np.mean(np.array([r[t] for r in rows]) / base):.4f}" for t in thresholds),
    )


if __name__ == "__main__":
    main()
