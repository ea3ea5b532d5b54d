"""What a benchmark run produced: per-policy episode results over seeds, and ratios to kube-default.

Data only (no running, no plotting): drs_prom.sim.bench fills it, drs_prom.sim.bench_plots draws it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from drs_prom.config import ObjectiveSettings
from drs_prom.outcomes.objectives import OBJECTIVES
from drs_prom.sim.env import EpisodeResult

REFERENCE = "kube-default"
METRICS: tuple[tuple[str, str, str], ...] = (
    # key, column title (in full: the table wraps it), which direction is better
    ("composite", "composite score", "lower"),
    ("slowdown_p95", "p95 pod slowdown", "lower"),
    ("overload", "overload", "lower"),
    ("imbalance", "DRS imbalance", "lower"),
    ("utilisation", "utilisation", "higher"),
    ("completion_mean", "mean completion time (s)", "lower"),
    ("completion_p95", "p95 completion time (s)", "lower"),
    ("makespan", "makespan (s)", "lower"),
    ("decisions_per_s", "decisions per second", "higher"),
)


@dataclass
class PolicyRow:
    policy: str
    runs: list[EpisodeResult] = field(default_factory=list)
    skipped: str | None = None

    def mean(self, key: str) -> float:
        vals = [r.summary()[key] for r in self.runs]
        return float(np.mean(vals)) if vals else math.nan


@dataclass
class BenchReport:
    scenario: str
    seeds: list[int]
    n_nodes: int
    pods: int
    rows: list[PolicyRow]
    wall_seconds: float = 0.0
    migration_floor: float | None = (
        None  # mean over seeds of a reference run's floor (bench.ReferenceRun), when asked for
    )
    information: str = "estimated"
    """What the policies were told of each pod's usage (drs_prom.sim.env.INFORMATION)."""

    def row(self, policy: str) -> PolicyRow | None:
        return next((r for r in self.rows if r.policy == policy), None)

    def ratio(self, policy: str, key: str) -> float:
        """policy's mean over the reference's mean (NaN when either is missing)."""
        ref, row = self.row(REFERENCE), self.row(policy)
        if ref is None or row is None or not ref.runs or not row.runs:
            return math.nan
        base = ref.mean(key)
        return row.mean(key) / base if base else math.nan

    def ratio_composite(self, policy: str) -> float:
        """policy's mean composite over the reference's (NaN when either is missing)."""
        ref, row = self.row(REFERENCE), self.row(policy)
        if ref is None or row is None or not ref.runs or not row.runs:
            return math.nan
        base = float(np.mean([r.composite for r in ref.runs]))
        return float(np.mean([r.composite for r in row.runs])) / base if base else math.nan

    def to_json(self) -> dict:
        out: dict = {
            "scenario": self.scenario,
            "seeds": self.seeds,
            "n_nodes": self.n_nodes,
            "pods": self.pods,
            "reference": REFERENCE,
            "information": self.information,
            "wall_seconds": self.wall_seconds,
            "objective_settings": ObjectiveSettings().model_dump(),
            "policies": {},
        }
        if self.migration_floor is not None:
            out["migration_floor"] = self.migration_floor
        for row in self.rows:
            if row.skipped:
                out["policies"][row.policy] = {"skipped": row.skipped}
                continue
            ref = self.row(REFERENCE)
            objs = {k: float(np.mean([r.objective_dict()[k] for r in row.runs])) for k in OBJECTIVES}
            ref_objs = (
                {k: float(np.mean([r.objective_dict()[k] for r in ref.runs])) for k in OBJECTIVES}
                if ref is not None and ref.runs
                else {}
            )
            out["policies"][row.policy] = {
                "composite": float(np.mean([r.composite for r in row.runs])),
                "composite_ratio_to_reference": self.ratio_composite(row.policy),
                "objectives": objs,
                "objectives_ratio_to_reference": {
                    k: (v / ref_objs[k] if ref_objs.get(k) else math.nan) for k, v in objs.items()
                },
                "mean": {k: row.mean(k) for k, _, _ in METRICS},
                "ratio_to_reference": {k: self.ratio(row.policy, k) for k, _, _ in METRICS},
                "placements_per_s": float(np.mean([r.placements_per_second for r in row.runs])),
                "slowdown_mean": float(np.mean([r.slowdown_mean for r in row.runs])),
                "max_queue": int(max(r.max_queue for r in row.runs)),
                "runs": [
                    {
                        k: v
                        for k, v in asdict(r).items()
                        if not k.startswith("series_") and (k, v) != ("rebalance", None)
                    }
                    | {"summary": r.summary()}
                    for r in row.runs
                ],
                "series_seed": row.runs[0].seed,
                "series": {
                    "t": row.runs[0].series_t,
                    "imbalance": row.runs[0].series_imbalance,
                    "utilisation": row.runs[0].series_utilisation,
                },
            }
        return out


def json_default(value: object) -> object:
    """``json.dumps(..., default=json_default)``: numpy scalars and arrays as plain numbers and lists, for every
    results file a benchmark or the testbed writes."""
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
