"""What the fill protocol (drs_prom.sim.fill) measured, summarised over seeds: the table, the curve and the JSON file.

Per policy: the share of the resource allocated when the arrived requests reach 100 % of its capacity and at the
target, each the mean over seeds with a 95 % Student-t interval of that mean; the GPU fragmentation rate at both
(the share of unallocated GPUs that the list's typical pod could not use where they are); the pods that found no
node; and the allocation curve (mean over seeds at each checkpoint).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from drs_prom.outcomes.paired_stats import paired_ci
from drs_prom.sim.bench_results import json_default
from drs_prom.sim.fill import FillRun
from drs_prom.sim.fill_sequence import FillSpec, FillStats
from drs_prom.sim.scenario import GPU_RESOURCE
from drs_prom.sim.table import format_columns


@dataclass
class FillReport:
    """Every policy's runs on every seed of one trace's fill."""

    name: str
    spec: FillSpec
    seeds: list[int]
    stats: dict[int, FillStats]
    runs: dict[str, list[FillRun]]
    skipped: dict[str, str]
    information: str
    wall_seconds: float = 0.0

    def allocated(self, policy: str, share: float) -> tuple[float, float, float]:
        """(mean, low, high) over seeds of the share allocated at the checkpoint ``share``."""
        return paired_ci([r.at(share)[1] for r in self.runs.get(policy, [])])

    def fragmentation(self, policy: str, share: float) -> float:
        """Mean of the GPU fragmentation rate at the checkpoint ``share`` over the seeds that left a GPU unallocated
        there (NaN where none did)."""
        vals = [r.at(share)[2] for r in self.runs.get(policy, []) if not math.isnan(r.at(share)[2])]
        return float(np.mean(vals)) if vals else math.nan

    def failed_before_full(self, policy: str) -> dict[int, float]:
        """Mean over seeds of the pods that found no node before 100 % had arrived, by GPUs asked for."""
        runs = self.runs.get(policy, [])
        asked = sorted({g for r in runs for g in r.failed_before_full})
        return {g: float(np.mean([r.failed_before_full.get(g, 0) for r in runs])) for g in asked}

    def ranked(self) -> list[str]:
        """The policies that ran, most allocated at the target first."""
        done = [p for p, runs in self.runs.items() if runs and p not in self.skipped]
        return sorted(done, key=lambda p: -self.allocated(p, self.spec.target)[0])

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "protocol": "fill",
            "spec": asdict(self.spec),
            "checkpoints": list(self.spec.checkpoints()),
            "seeds": self.seeds,
            "information": self.information,
            "gpu_sharing": "not modelled: a pod asking for part of a GPU is given a whole one",
            "stats": {str(s): asdict(v) for s, v in self.stats.items()},
            "summary": {
                p: {
                    "allocated_at_100": _ci(self.allocated(p, 1.0)) if self.spec.target >= 1.0 else None,
                    "allocated_at_target": _ci(self.allocated(p, self.spec.target)),
                    "fragmentation_rate_at_100": self.fragmentation(p, 1.0) if self.spec.target >= 1.0 else None,
                    "fragmentation_rate_at_target": self.fragmentation(p, self.spec.target),
                    "failed_mean": float(np.mean([r.failed for r in self.runs[p]])),
                    "failed_before_full_mean_by_gpus": self.failed_before_full(p),
                }
                for p in self.ranked()
            },
            "runs": {p: [asdict(r) for r in runs] for p, runs in self.runs.items()},
            "skipped": self.skipped,
            "wall_seconds": self.wall_seconds,
        }


def _ci(mean_low_high: tuple[float, float, float]) -> dict[str, float]:
    mean, low, high = mean_low_high
    return {"mean": mean, "ci_low": low, "ci_high": high}


def _rate(value: float) -> str:
    return "-" if math.isnan(value) else f"{100 * value:.1f}"


def _pct(mean_low_high: tuple[float, float, float]) -> str:
    mean, low, high = mean_low_high
    if math.isnan(low):
        return f"{100 * mean:.1f}"
    return f"{100 * mean:.1f} [{100 * low:.1f}, {100 * high:.1f}]"


def format_fill(report: FillReport) -> str:
    """The summary table, the curve table and what the numbers mean."""
    spec = report.spec
    target = f"{100 * spec.target:g} %"
    first = report.stats[report.seeds[0]]
    out = [
        f"fill {report.name}: {first.nodes} nodes, {first.capacity:,.0f} {spec.resource}; pods arrive until their "
        f"requests of it reach {target} of capacity, never end; {len(report.seeds)} seeds (mean [95% CI of the mean])"
    ]
    full = spec.target >= 1.0  # the columns at 100 % arrived
    head = ["policy"]
    head += [f"% of {spec.resource} allocated at 100 % arrived"] if full else []
    head += [f"% allocated at {target} arrived"]
    head += ["GPU fragmentation rate at 100 % (%)"] if full else []
    head += [f"GPU fragmentation rate at {target} (%)"]
    head += ["pods that found no node before 100 % arrived"] if full else []
    head += ["pods that found no node"]
    rows = []
    for p in report.ranked():
        cells = [p]
        cells += [_pct(report.allocated(p, 1.0))] if full else []
        cells += [_pct(report.allocated(p, spec.target))]
        cells += [_rate(report.fragmentation(p, 1.0))] if full else []
        cells += [_rate(report.fragmentation(p, spec.target))]
        cells += [f"{sum(report.failed_before_full(p).values()):,.1f}"] if full else []
        cells.append(f"{np.mean([r.failed for r in report.runs[p]]):,.0f}")
        rows.append(cells)
    rows += [[p, f"skipped: {why}"] for p, why in report.skipped.items()]
    out += format_columns(head, rows)
    points = spec.checkpoints()
    out.append("")
    out.append(f"% of {spec.resource} allocated (mean over seeds) as the arrived requests grow:")
    curve = [
        [p, *(f"{100 * np.mean([r.at(x)[1] for r in report.runs[p]]):.1f}" for x in points)] for p in report.ranked()
    ]
    out += format_columns(["policy / arrived", *(f"{100 * x:g} %" for x in points)], curve)
    out.append(
        "GPU fragmentation rate: the share of unallocated GPUs that a pod drawn from the list could not use on their "
        "node (all of them for a pod asking for no GPU), as Weng et al. (ATC 2023) define it for whole GPUs; the mean "
        "over the seeds that left some GPU unallocated ('-': none did)."
    )
    if spec.resource == GPU_RESOURCE or first.shared:
        out.append(
            f"GPU sharing is not modelled: {first.shared:,} of the list's pods ask for part of a GPU and are given a "
            "whole one here, so the same list asks for more GPUs than in the FGD paper, whose figures count shares."
        )
    return "\n".join(out)


def write_fill(report: FillReport, out_dir: str | Path) -> Path:
    """The report as ``fill-<name>.json`` (written to a temporary name, then renamed)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"fill-{report.name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report.to_json(), indent=1, default=json_default))
    tmp.replace(path)
    return path
