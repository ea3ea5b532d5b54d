"""Judge one policy of ``bench --trace`` runs against every other policy in them, random and the packers included.

    python benchmarks/trace_verdict.py out/slice-a/bench-trace.json out/slice-b/bench-trace.json [--candidate drs]

``bench --trace``'s own last column compares each policy with the best of the suite's heuristics (``HEURISTICS``); on
a GPU cluster the policy to beat may be random placement, a packer or a GPU cluster's baseline (``DEVICE_HEURISTICS``),
so this reads the per-seed composites of a run's JSON and prints, per file, the candidate's paired 95 % interval
against the best other policy of that run (non-inferior: upper end <= +3 %) and the harm check against kube-default
(composite <= 1.02x and p95 slowdown <= 1.05x), with the same arithmetic as the suite
(drs_prom.outcomes.paired_stats).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from drs_prom.outcomes.paired_stats import NON_INFERIORITY_MARGIN, best_reference, harm, relative_interval

REFERENCE = "kube-default"


def composites(run: dict[str, Any]) -> dict[str, dict[int, float]]:
    """policy -> seed -> composite, for the policies of ``run`` that ran (skipped ones have no runs)."""
    out: dict[str, dict[int, float]] = {}
    for name, body in run["policies"].items():
        runs = body.get("runs") if isinstance(body, dict) else None
        if runs:
            out[name] = {int(r["seed"]): float(r["composite"]) for r in runs}
    return out


def slowdown_p95(run: dict[str, Any], policy: str) -> float:
    return float(np.mean([r["summary"]["slowdown_p95"] for r in run["policies"][policy]["runs"]]))


def verdict(run: dict[str, Any], candidate: str) -> dict[str, Any]:
    by_policy = composites(run)
    if candidate not in by_policy or REFERENCE not in by_policy:
        raise SystemExit(f"the run has no results for {candidate!r} or {REFERENCE!r}")
    seeds = sorted(by_policy[candidate])
    others = {p: v for p, v in by_policy.items() if p != candidate}
    best = best_reference(others, seeds)
    vs_best = relative_interval(by_policy[candidate], by_policy[best])
    mean = {p: float(np.mean([by_policy[p][s] for s in seeds])) for p in (candidate, REFERENCE)}
    p95 = {p: slowdown_p95(run, p) for p in (candidate, REFERENCE)}
    return {
        "best": best,
        "vs_best": vs_best,
        "non_inferior": not vs_best.inferior(NON_INFERIORITY_MARGIN),
        "composite_ratio": mean[candidate] / mean[REFERENCE],
        "slowdown_p95_ratio": p95[candidate] / p95[REFERENCE],
        "harm": harm(mean[candidate], p95[candidate], mean[REFERENCE], p95[REFERENCE]),
        "seeds": len(seeds),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="bench --trace JSON files (bench-trace.json)")
    ap.add_argument("--candidate", default="drs")
    args = ap.parse_args(argv)
    print(
        f"| run | seeds | {args.candidate} / kube-default composite | p95 slowdown | best other policy | "
        f"({args.candidate} - best) / best [95 % CI] | non-inferior (<= +{NON_INFERIORITY_MARGIN:.0%}) | no harm |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    failed = False
    for path in args.runs:
        v = verdict(json.loads(path.read_text()), args.candidate)
        i = v["vs_best"]
        failed |= v["harm"] or not v["non_inferior"]
        print(
            f"| {path.parent.name or path.name} | {v['seeds']} | {v['composite_ratio']:.3f}x | "
            f"{v['slowdown_p95_ratio']:.3f}x | {v['best']} | {i.mean:+.1%} [{i.low:+.1%}, {i.high:+.1%}] | "
            f"{'yes' if v['non_inferior'] else 'no'} | {'no' if v['harm'] else 'yes'} |"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
