"""What the rebalancer did to a policy, from a bench report that ran ``<policy>`` and ``<policy>+rebalance``.

Both replay the same seeded workloads, so the per-seed differences are paired: for each pair, the hot-node time with
the rebalancer against without (relative, a 95 % Student-t interval over seeds), the p95 pod slowdown and the
composite (absolute differences, same interval), the evictions per node-hour and the share of replacements that
landed back on the node they were evicted from.
"""

from __future__ import annotations

import math

import numpy as np

from drs_prom.outcomes.paired_stats import paired_ci
from drs_prom.sim.bench_results import BenchReport

SUFFIXES = ("+rebalance", "+rebalance-taint")
SLOWDOWN_DECIMALS = 9
"""Places a p95 slowdown is compared to (a slowdown of 1 + 1e-9 is a billionth of a pod's run time)."""


def pair_stats(report: BenchReport, policy: str, suffix: str = SUFFIXES[0]) -> dict[str, float] | None:
    """The paired comparison of ``policy`` + ``suffix`` with ``policy`` (None when either did not run)."""
    base, with_ = report.row(policy), report.row(policy + suffix)
    if base is None or with_ is None or not base.runs or not with_.runs or base.skipped or with_.skipped:
        return None
    by_seed = {r.seed: r for r in base.runs}
    pairs = [(by_seed[r.seed], r) for r in with_.runs if r.seed in by_seed]
    if not pairs:
        return None
    hot0 = np.array([a.objective_dict()["hot_time"] for a, _ in pairs])
    hot1 = np.array([b.objective_dict()["hot_time"] for _, b in pairs])
    p0 = np.round([a.objective_dict()["slowdown_p95"] for a, _ in pairs], SLOWDOWN_DECIMALS)
    p1 = np.round([b.objective_dict()["slowdown_p95"] for _, b in pairs], SLOWDOWN_DECIMALS)
    c0 = np.array([a.composite for a, _ in pairs])
    c1 = np.array([b.composite for _, b in pairs])
    scale = float(hot0.mean())
    hot_mean, hot_lo, hot_hi = paired_ci((hot1 - hot0).tolist())
    p95_mean, p95_lo, p95_hi = paired_ci((p1 - p0).tolist())
    comp_mean, comp_lo, comp_hi = paired_ci((c1 - c0).tolist())
    stats = [b.rebalance or {} for _, b in pairs]
    rel = (lambda x: x / scale) if scale > 0 else (lambda x: math.nan)
    return {
        "seeds": float(len(pairs)),
        "hot_time": scale,
        "hot_time_with": float(hot1.mean()),
        "hot_time_change": rel(hot_mean),
        "hot_time_change_low": rel(hot_lo),
        "hot_time_change_high": rel(hot_hi),
        "slowdown_p95": float(p0.mean()),
        "slowdown_p95_with": float(p1.mean()),
        "slowdown_p95_diff": p95_mean,
        "slowdown_p95_diff_low": p95_lo,
        "slowdown_p95_diff_high": p95_hi,
        "slowdown_p95_seeds_worse": float((p1 > p0).sum()),
        "composite_diff": comp_mean,
        "composite_diff_low": comp_lo,
        "composite_diff_high": comp_hi,
        "evictions_per_node_hour": float(np.mean([s.get("evictions_per_node_hour", 0.0) for s in stats])),
        "evictions": float(np.mean([s.get("evictions", 0.0) for s in stats])),
        "landed_back_share": float(np.mean([s.get("landed_back_share", 0.0) for s in stats])),
    }


def pairs_text(report: BenchReport) -> list[str]:
    """One line per ``<policy>+rebalance`` (or ``+rebalance-taint``) row whose ``<policy>`` ran too."""
    out = []
    for row in report.rows:
        suffix = next((x for x in SUFFIXES if row.policy.endswith(x)), None)
        if suffix is None:
            continue
        base = row.policy[: -len(suffix)]
        s = pair_stats(report, base, suffix)
        if s is None:
            continue
        out.append(
            f"{row.policy} vs {base} ({s['seeds']:.0f} paired seeds): hot-node time {s['hot_time']:.4f} -> "
            f"{s['hot_time_with']:.4f} ({100 * s['hot_time_change']:+.1f}% "
            f"[{100 * s['hot_time_change_low']:+.1f}, {100 * s['hot_time_change_high']:+.1f}]); p95 slowdown "
            f"{s['slowdown_p95']:.3f} -> {s['slowdown_p95_with']:.3f} ({s['slowdown_p95_diff']:+.3f} "
            f"[{s['slowdown_p95_diff_low']:+.3f}, {s['slowdown_p95_diff_high']:+.3f}], worse on "
            f"{s['slowdown_p95_seeds_worse']:.0f}); composite "
            f"{s['composite_diff']:+.3f} [{s['composite_diff_low']:+.3f}, {s['composite_diff_high']:+.3f}]; "
            f"{s['evictions_per_node_hour']:.2f} evictions per node-hour ({s['evictions']:.1f} per episode), "
            f"{100 * s['landed_back_share']:.0f}% of replacements back on the node they left"
        )
    return out
