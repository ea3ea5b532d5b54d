"""The closed-loop rebalancing table from `drs-prom testbed` results: each rebalancer against its scheduler alone, and
drs-prom's rebalancer against the real descheduler, paired by seed.

    python benchmarks/rebalance_testbed.py out/testbed-rebalance/testbed-drift-steps.json [more.json ...]

Per pair (a run ``<scheduler>+<rebalancer>`` and its ``<scheduler>`` alone, or ``kube-scheduler+rebalance`` and
``kube-scheduler+descheduler``): the bench's hot-node time (share of node-steps whose busiest signal is above the
objectives' hot fraction) before -> after with the paired relative change and its 95 % t interval, the p95 pod
slowdown with the paired absolute difference, evictions per node-hour (simulated), pods lost and the evictions that left
a Deployment short of its PodDisruptionBudget (drs_prom.testbed.disruption_budgets). A pair whose baseline was not run
is left out.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from drs_prom.outcomes.paired_stats import paired_ci, relative_interval
from drs_prom.testbed.schedulers import split_rebalancer

HOT = "hot_node_time_bench"


def _by_seed(runs: Sequence[Mapping[str, Any]], key: str) -> dict[int, float]:
    return {int(r["seed"]): float(r[key]) for r in runs if r.get(key) is not None}


def pairs(schedulers: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(baseline, candidate) pairs present in one report."""
    out = []
    for name in schedulers:
        base, rebalancer = split_rebalancer(name)
        if rebalancer is not None and base in schedulers:
            out.append((base, name))
    if "kube-scheduler+rebalance" in schedulers and "kube-scheduler+descheduler" in schedulers:
        out.append(("kube-scheduler+descheduler", "kube-scheduler+rebalance"))
    return out


def row(scenario: str, base: Mapping[str, Any], cand: Mapping[str, Any], b: str, c: str) -> list[str]:
    hb, hc = _by_seed(base["runs"], HOT), _by_seed(cand["runs"], HOT)
    change = relative_interval(hc, hb)
    sb, sc = _by_seed(base["runs"], "slowdown_p95"), _by_seed(cand["runs"], "slowdown_p95")
    seeds = sorted(set(sb) & set(sc))
    diff, low, high = paired_ci([sc[s] - sb[s] for s in seeds])
    eph = float(np.mean([float(r.get("evictions_per_node_hour", 0.0)) for r in cand["runs"]]))
    eph_b = float(np.mean([float(r.get("evictions_per_node_hour", 0.0)) for r in base["runs"]]))
    lost = sum(int(r["lost"]) for r in cand["runs"])
    budgets = [r for r in cand["runs"] if "disruption_budgets" in r]  # runs before the budgets have neither key
    broken = str(sum(int(r["pdb_violations"]) for r in budgets)) if budgets else "no budgets"
    return [
        scenario,
        f"{c} vs {b}",
        str(len(seeds)),
        f"{np.mean(list(hb.values())):.4f} -> {np.mean(list(hc.values())):.4f}",
        f"{change.mean * 100:+.1f} % [{change.low * 100:+.1f}, {change.high * 100:+.1f}]",
        f"{np.mean(list(sb.values())):.3f} -> {np.mean(list(sc.values())):.3f}",
        f"{diff:+.3f} [{low:+.3f}, {high:+.3f}]",
        f"{eph_b:.2f} -> {eph:.2f}",
        str(lost),
        broken,
    ]


def main(paths: Sequence[str]) -> int:
    head = [
        "scenario",
        "pair",
        "seeds",
        "hot-node time",
        "change [95 % CI]",
        "p95 slowdown",
        "difference [95 % CI]",
        "evictions per node-hour",
        "pods lost",
        "PDB violations",
    ]
    rows = []
    for path in paths:
        report = json.loads(Path(path).read_text())
        per = report["schedulers"]
        for b, c in pairs(per):
            rows.append(row(report["scenario"], per[b], per[c], b, c))
    print("| " + " | ".join(head) + " |")
    print("| " + " | ".join("---" for _ in head) + " |")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
