"""The suite in both information regimes side by side: what drs keeps of its told-the-usage advantage when it is
told only what a live scheduler can know.

    drs-prom bench --suite --seeds auto --out out/estimated
    drs-prom bench --suite --seeds auto --told-usage --out out/told
    python benchmarks/regimes_table.py out/told/suite.json out/estimated/suite.json

Per scenario: drs's composite and p95 slowdown as ratios to kube-default (which reads requests only, so the same in
both regimes), the judged interval against the best field heuristic given the same information, and the share of the
told advantage over kube-default (1 - ratio) that the estimated regime keeps. The summary line gives the median of
that share over the scenarios where the told advantage is at least ``--min-advantage`` (5 %).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def _by_scenario(path: str) -> tuple[str, dict[str, dict]]:
    data = json.loads(Path(path).read_text())
    return data.get("information", "estimated"), {s["summary"]["scenario"]: s["summary"] for s in data["scenarios"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("told")
    ap.add_argument("estimated")
    ap.add_argument("--candidate", default="drs")
    ap.add_argument("--min-advantage", type=float, default=0.05)
    args = ap.parse_args()
    told_info, told = _by_scenario(args.told)
    est_info, est = _by_scenario(args.estimated)
    if (told_info, est_info) != ("told", "estimated"):
        print(f"expected a told suite then an estimated one, got {told_info} and {est_info}", file=sys.stderr)
        return 2
    c = args.candidate
    head = (
        "| scenario | told: composite / kube-default | estimated | told: p95 slowdown / kube-default | estimated "
        "| estimated: vs best heuristic [95% CI] | seeds | flags | share of the told advantage kept |"
    )
    lines = [head, "|---" * 9 + "|"]
    kept = []
    for name, t in told.items():
        e = est.get(name)
        if e is None:
            continue
        tr = t["ratio_to_reference"].get(c, {})
        er = e["ratio_to_reference"].get(c, {})
        adv_t, adv_e = 1 - tr.get("composite", np.nan), 1 - er.get("composite", np.nan)
        share = adv_e / adv_t if adv_t >= args.min_advantage else np.nan
        if adv_t >= args.min_advantage:
            kept.append(share)
        j = e.get("judged") or {}
        interval = (
            f"{100 * j['mean']:+.1f}% [{100 * j['low']:+.1f}, {100 * j['high']:+.1f}] vs {j['against']}" if j else "-"
        )
        flags = ", ".join(f for f in ("harm", "inferior") if j.get(f)) or "-"
        lines.append(
            f"| {name} | {tr.get('composite', np.nan):.3f}x | {er.get('composite', np.nan):.3f}x "
            f"| {tr.get('slowdown_p95', np.nan):.3f}x | {er.get('slowdown_p95', np.nan):.3f}x | {interval} "
            f"| {e.get('seeds', '-')} | {flags} | {'-' if np.isnan(share) else f'{100 * share:.0f} %'} |"
        )
    print("\n".join(lines))
    if kept:
        print(
            f"\nmedian share of the told advantage kept over the {len(kept)} scenarios where it is at least "
            f"{100 * args.min_advantage:.0f} %: {100 * float(np.median(kept)):.0f} % (min {100 * min(kept):.0f} %)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
