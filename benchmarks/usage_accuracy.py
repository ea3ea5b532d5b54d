"""How well each usage estimator predicts what a pod will use: over the suite's workloads, or a testbed run's series.

Every suite scenario (the packaged ones and the 20 evaluation clusters) is played by kube-default on seeds
0..N-1 (its placements read no estimate); each pod it ran becomes a case: what the stored series held at the pod's
start (its owner's earlier pods, other owners running its image) and the mean usage it then had
(drs_prom.usage.fit.replay). The table gives, per estimator, the weighted absolute error per signal (sum of
|estimate - use| over sum of use) for pods whose owner had history and for cold starts: drs-prom's learned
estimator (the shipped usage model), requests as usage, Koordinator's requests x 0.85 / 0.70 and the VPA
recommender's owner p90 (CPU and memory only).

    python benchmarks/usage_accuracy.py --seeds 3
    python benchmarks/usage_accuracy.py --testbed out/testbed/testbed-<scenario>.json

``--testbed`` scores the pods of a testbed report's runs instead: what its real Prometheus stored of each pod (the
per-pod recording rules over the twin kubelets' cAdvisor series, the table the retraining job's refit reads), each
run replayed on its own.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drs_prom.sim.env import TOLD, SchedulingEnv, sim_policy
from drs_prom.sim.generator import resolve_scenario
from drs_prom.sim.suite import suite_names
from drs_prom.sim.usage_history import MIN_SEEN_SECONDS, pod_table
from drs_prom.usage.estimator import shipped_usage_model
from drs_prom.usage.fit import Case, PodTable, anchor_estimators, compare, format_comparison, replay


def scenario_cases(job: tuple[str, int]) -> list[Case]:
    name, seed = job
    sc = resolve_scenario(name)
    env = SchedulingEnv(sc, seed=seed, information=TOLD)  # kube-default reads no estimate: any regime gives these pods
    env.run(sim_policy("kube-default", sc, seed), seed=seed)
    return replay(pod_table(env.cluster), lag=max(MIN_SEEN_SECONDS, sc.metric_window_seconds))


def testbed_tables(path: str) -> tuple[list[PodTable], float]:
    """The pod table of every run of a testbed report, and the report's speed (simulated seconds per wall second)."""
    report = json.loads(Path(path).read_text())
    tables = [
        table_from_json(run["pod_usage"])
        for sched in report["schedulers"].values()
        for run in sched["runs"]
        if run.get("pod_usage")
    ]
    return tables, float(report.get("speed", 1.0))


def table_from_json(data: dict) -> PodTable:
    return PodTable(
        namespace=tuple(data["namespace"]),
        owner=tuple(data["owner"]),
        image=tuple(data["image"]),
        cpu_m=np.array(data["cpu_m"], dtype=np.int64),
        mem_bytes=np.array(data["mem_bytes"], dtype=np.int64),
        start=np.array(data["start"], dtype=np.float64),
        last_seen=np.array(data["last_seen"], dtype=np.float64),
        mean=np.array(data["mean"], dtype=np.float64).reshape(-1, 6),
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--testbed", default="", help="score a testbed report's pods instead of the suite")
    ap.add_argument("--lag", type=float, default=1.0, help="with --testbed: wall seconds before a pod is stored")
    args = ap.parse_args()
    t0 = time.perf_counter()
    model = shipped_usage_model()
    if args.testbed:
        tables, speed = testbed_tables(args.testbed)
        cases = [c for table in tables for c in replay(table, lag=args.lag)]
        where = f"{len(tables)} testbed runs ({args.testbed}), usage stored by their Prometheus"
        # the loop runs ``speed`` times faster: the model's time scales as the testbed's drs-prom scales it
        model = replace(model, full_weight_seconds=model.full_weight_seconds / speed)
    else:
        jobs = [(name, seed) for name in suite_names() for seed in range(args.seeds)]
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            cases = [c for part in pool.map(scenario_cases, jobs) for c in part]
        where = f"the suite's {len(suite_names())} scenarios x {args.seeds} seeds, placed by kube-default"
    print(f"{len(cases)} pods of {where}; usage model: {model.fitted_on or 'default parameters'}")
    print(format_comparison(compare(cases, anchor_estimators(model))))
    print(f"{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
