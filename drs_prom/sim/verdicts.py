"""Judging a candidate policy (``drs`` unless told otherwise) on a benchmark report, with paired statistics.

Per scenario: the best heuristic is the heuristic with the lowest mean composite over the
seeds the candidate ran; the candidate's paired-by-seed 95 % interval of
(candidate - best heuristic) / best heuristic on the composite
(drs_prom.outcomes.paired_stats.relative_interval); "harm" when the candidate's mean composite is above
1.02x kube-default's or its mean p95 slowdown above 1.05x; "inferior" when the interval's upper
end is above +3 %. ``run_judged`` with ``seeds=None`` (``--seeds auto``) adds seeds until the
interval's half-width is within +-2 % (at least 10, at most 100 seeds).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from drs_prom.outcomes.paired_stats import (
    AUTO_MIN_SEEDS,
    Interval,
    best_reference,
    harm,
    relative_interval,
    seeds_wanted,
)
from drs_prom.registry import HEURISTICS, TEACHERS, PolicySpec
from drs_prom.sim.bench import PolicyBuilder, default_builder, run_bench
from drs_prom.sim.bench_results import REFERENCE, BenchReport, PolicyRow
from drs_prom.sim.env import ESTIMATED
from drs_prom.sim.scenario import Scenario

CANDIDATE = "drs"
"""The policy judged unless ``--candidate`` names another."""


@dataclass(frozen=True)
class Judgement:
    """The candidate on one scenario, over ``interval.seeds`` paired seeds."""

    candidate: str
    against: str
    interval: Interval
    composite_ratio: float
    """Mean composite over kube-default's (NaN without kube-default)."""
    slowdown_p95_ratio: float
    """Mean p95 slowdown over kube-default's (NaN without kube-default)."""
    harm: bool
    inferior: bool

    @property
    def flags(self) -> list[str]:
        return [f for f, on in (("harm", self.harm), ("inferior", self.inferior)) if on]

    def to_json(self) -> dict[str, object]:
        return {
            "candidate": self.candidate,
            "against": self.against,
            **self.interval.to_json(),
            "composite_ratio_to_reference": self.composite_ratio,
            "slowdown_p95_ratio_to_reference": self.slowdown_p95_ratio,
            "harm": self.harm,
            "inferior": self.inferior,
        }


def interval_text(mean: float, low: float, high: float) -> str:
    """``+1.2% [-0.4%, +2.8%]`` (percent of the best heuristic's mean composite)."""
    if math.isnan(mean):
        return "-"
    if math.isnan(low):
        return f"{100 * mean:+.1f}% [n/a]"
    return f"{100 * mean:+.1f}% [{100 * low:+.1f}%, {100 * high:+.1f}%]"


def _by_seed(row: PolicyRow, key: str) -> dict[int, float]:
    return {r.seed: float(r.composite if key == "composite" else r.objective_dict()[key]) for r in row.runs}


def judge(report: BenchReport, candidate: str = CANDIDATE) -> Judgement | None:
    """The candidate against the best heuristic of ``report``; None when the candidate or every heuristic is missing."""
    rows = {r.policy: r for r in report.rows if r.runs and not r.skipped}
    mine = rows.get(candidate)
    heuristics = {p: _by_seed(r, "composite") for p, r in rows.items() if p in HEURISTICS and p != candidate}
    if mine is None or not heuristics:
        return None
    own = _by_seed(mine, "composite")
    seeds = sorted(own)
    best = best_reference(heuristics, seeds)
    if not best:
        return None
    interval = relative_interval(own, heuristics[best])
    ref = rows.get(REFERENCE)
    comp_ratio = sd_ratio = math.nan
    harmful = False
    if ref is not None and candidate != REFERENCE:
        ref_comp = float(np.mean(list(_by_seed(ref, "composite").values())))
        ref_sd = float(np.mean(list(_by_seed(ref, "slowdown_p95").values())))
        comp = float(np.mean(list(own.values())))
        sd = float(np.mean(list(_by_seed(mine, "slowdown_p95").values())))
        comp_ratio = comp / ref_comp if ref_comp else math.nan
        sd_ratio = sd / ref_sd if ref_sd else math.nan
        harmful = harm(comp, sd, ref_comp, ref_sd)
    return Judgement(candidate, best, interval, comp_ratio, sd_ratio, harmful, interval.inferior())


def judgement_line(j: Judgement) -> str:
    """One line under the bench table: the interval, the seeds and the flags."""
    i = j.interval
    flags = ", ".join(j.flags) or "none"
    return (
        f"{j.candidate} vs best heuristic {j.against}, paired over {i.seeds} seeds: "
        f"{interval_text(i.mean, i.low, i.high)} (95% CI of the composite difference); "
        f"composite {j.composite_ratio:.3f}x and p95 slowdown {j.slowdown_p95_ratio:.3f}x {REFERENCE}; flags: {flags}\n"
        f"(best heuristic: the lowest composite among the field's heuristics; the teachers "
        f"({', '.join(TEACHERS)}) read what only drs-prom's scheduler keeps, so they are shown but never the baseline)"
    )


def merge(first: BenchReport, more: BenchReport) -> BenchReport:
    """``first`` with the runs of ``more`` (the same scenario and policies on further seeds) added."""
    rows = []
    for a in first.rows:
        b = more.row(a.policy)
        skipped = a.skipped or (b.skipped if b is not None else None)
        runs = [] if skipped else [*a.runs, *(b.runs if b is not None else [])]
        rows.append(PolicyRow(a.policy, runs, skipped))
    return BenchReport(
        first.scenario,
        [*first.seeds, *more.seeds],
        first.n_nodes,
        first.pods,
        rows,
        wall_seconds=first.wall_seconds + more.wall_seconds,
        migration_floor=first.migration_floor,
        information=first.information,
    )


def run_judged(
    scenario: Scenario,
    seeds: Sequence[int] | None,
    policies: Sequence[str],
    builder: PolicyBuilder = default_builder,
    spec: PolicySpec | None = None,
    candidate: str = CANDIDATE,
    progress: bool = True,
    note: Callable[[str], None] | None = None,
    information: str = ESTIMATED,
) -> BenchReport:
    """run_bench on ``seeds``, or with ``seeds=None`` on 0..n-1 with n grown until the candidate's interval
    against the best heuristic is within +-2 % (drs_prom.outcomes.paired_stats.seeds_wanted: 10 to 100 seeds).
    Without the candidate in ``policies`` (or when it cannot run) auto stops at 10 seeds."""
    if seeds is not None:
        return run_bench(scenario, seeds, policies, builder, progress=progress, spec=spec, information=information)
    n = AUTO_MIN_SEEDS
    report = run_bench(
        scenario, list(range(n)), policies, builder, progress=progress, spec=spec, information=information
    )
    while True:
        j = judge(report, candidate)
        want = seeds_wanted(j.interval) if j is not None else n
        if want <= n:
            return report
        if note is not None and j is not None:
            note(f"{scenario.name}: half-width {100 * j.interval.half_width:.1f}% over {n} seeds; running {want}")
        more = run_bench(
            scenario, list(range(n, want)), policies, builder, progress=progress, spec=spec, information=information
        )
        report, n = merge(report, more), want
