"""The shipped-model bar on the bench suite: per scenario, drs against kube-default and the best heuristic.

Reads the heuristics' per-seed runs from a ``drs-prom bench --suite --out DIR`` run (its
``DIR/scenarios/<name>.json``; they do not depend on the model) and runs ``drs`` (a model file)
on the same scenarios and seeds, exactly as the bench does (same env, scales and memory). Per
scenario it prints the composite and p95-slowdown ratios of drs to kube-default (ratio of
means) and the paired-by-seed 95 % t interval of (drs - best) / best, where best is the
heuristic with the lowest mean composite; pass = composite <= 1.02x and p95 <= 1.05x
kube-default's and the interval's upper end <= +3 %. Then the median drs / best.

    python benchmarks/drs_bar.py --heuristics out/suite-h --model models/drs-v2.keras --seeds 10
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from drs_prom.agent import load_policy
from drs_prom.sim.env import SchedulingEnv, fit_to_scenario, policy_norm, scenario_spec
from drs_prom.sim.suite import paired_ci, resolve_scenario


def drs_runs(model: str, name: str, seeds: list[int]) -> dict[int, tuple[float, float]]:
    """(composite, p95 slowdown) of the model on each seed of scenario ``name``."""
    sc = resolve_scenario(name)
    out = {}
    for seed in seeds:
        policy = fit_to_scenario(load_policy(model, scenario_spec(sc).metric_window_seconds), sc)
        env = SchedulingEnv(sc, seed=seed, norm=policy_norm(policy, sc))
        r = env.run(policy, seed=seed)
        out[seed] = (r.composite, r.objective_dict()["slowdown_p95"])
    return out


def heuristic_runs(path: Path, seeds: list[int]) -> dict[str, dict[int, tuple[float, float]]]:
    bench = json.loads(path.read_text())["bench"]
    out: dict[str, dict[int, tuple[float, float]]] = {}
    for policy, row in bench["policies"].items():
        runs = {r["seed"]: (r["composite"], r["objectives"]["slowdown_p95"]) for r in row["runs"]}
        if all(s in runs for s in seeds):
            out[policy] = {s: runs[s] for s in seeds}
    return out


def judge(drs: dict[int, tuple[float, float]], heur: dict[str, dict[int, tuple[float, float]]]) -> dict:
    seeds = sorted(drs)
    mean = {p: float(np.mean([v[s][0] for s in seeds])) for p, v in heur.items()}
    best = min(mean, key=lambda p: mean[p])
    d_comp = float(np.mean([drs[s][0] for s in seeds]))
    d_p95 = float(np.mean([drs[s][1] for s in seeds]))
    kd = heur["kube-default"]
    rel = [(drs[s][0] - heur[best][s][0]) / heur[best][s][0] for s in seeds]
    m, lo, hi = paired_ci(rel)
    comp_kd = d_comp / mean["kube-default"]
    p95_kd = d_p95 / float(np.mean([kd[s][1] for s in seeds]))
    ok = comp_kd <= 1.02 and p95_kd <= 1.05 and (hi <= 0.03 if not math.isnan(hi) else m <= 0.03)
    return {
        "seeds": len(seeds),
        "best": best,
        "comp_kd": comp_kd,
        "p95_kd": p95_kd,
        "vs_best": m,
        "lo": lo,
        "hi": hi,
        "ratio_best": d_comp / mean[best],
        "pass": ok,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heuristics", required=True, help="out dir of a bench --suite run of the heuristics")
    ap.add_argument("--model", required=True)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--only", default="", help="comma-separated scenario names (default: all in the heuristics run)")
    ap.add_argument("--json", default="", help="write the per-scenario results here")
    args = ap.parse_args()
    seeds = list(range(args.seeds))
    files = sorted(Path(args.heuristics, "scenarios").glob("*.json"))
    only = {n for n in args.only.split(",") if n}
    rows = {}
    print(
        f"{'scenario':20} {'seeds':>5} {'comp/kd':>8} {'p95/kd':>8} {'vs best [95% CI]':>28} {'best heuristic':28} pass"
    )
    for f in files:
        if only and f.stem not in only:
            continue
        res = judge(drs_runs(args.model, f.stem, seeds), heuristic_runs(f, seeds))
        rows[f.stem] = res
        print(
            f"{f.stem:20} {res['seeds']:5d} {res['comp_kd']:7.3f}x {res['p95_kd']:7.3f}x "
            f"{100 * res['vs_best']:+6.1f}% [{100 * res['lo']:+6.1f}, {100 * res['hi']:+6.1f}]   "
            f"{res['best']:28} {'pass' if res['pass'] else 'FAIL'}",
            flush=True,
        )
    if rows:
        ratios = [r["ratio_best"] for r in rows.values()]
        print(
            f"passed {sum(r['pass'] for r in rows.values())}/{len(rows)}; "
            f"median drs / best heuristic {float(np.median(ratios)):.4f}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
