"""Paired-by-seed statistics that judge a policy against another: one interval, the flags, when to stop adding seeds.

Every policy replays the same seeded workloads, so the per-seed differences are paired and
their spread, not the spread of each policy's own results, sets how sure a comparison is.
``relative_interval`` is the one interval the bench, the suite and the retraining gate use:
the 95 % Student-t interval over seeds of (candidate - reference) / mean(reference), where
reference is the best heuristic (lowest mean composite; lower is better). Pure functions on
plain numbers: no simulator here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

NON_INFERIORITY_MARGIN = 0.03
"""A candidate is "inferior" when the upper end of its interval against the best heuristic is above +3 %."""
HARM_COMPOSITE = 1.02
"""A candidate "harms" when its mean composite is above 1.02x kube-default's ..."""
HARM_SLOWDOWN_P95 = 1.05
"""... or its mean p95 slowdown above 1.05x kube-default's."""
AUTO_HALF_WIDTH = 0.02
"""``--seeds auto`` adds seeds until the interval's half-width is within +-2 % ..."""
AUTO_MIN_SEEDS = 10
AUTO_MAX_SEEDS = 100
"""... with at least 10 and at most 100 seeds per scenario."""

# two-sided 95 % Student-t quantiles for 1..30 degrees of freedom
_T95: tuple[float, ...] = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
_Z975 = 1.959963984540054


def t95(df: int) -> float:
    """Two-sided 95 % Student-t quantile for ``df`` >= 1 degrees of freedom (table to 30, then the
    Cornish-Fisher expansion, within 1e-3 of the exact value; 1.96 in the limit)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= len(_T95):
        return _T95[df - 1]
    z, v = _Z975, float(df)
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
    )


def paired_ci(diffs: Sequence[float]) -> tuple[float, float, float]:
    """(mean, low, high) of a 95 % t interval of paired per-seed differences (NaN bounds with one seed)."""
    d = np.asarray(diffs, dtype=np.float64)
    if len(d) == 0:
        return math.nan, math.nan, math.nan
    mean = float(d.mean())
    if len(d) < 2:
        return mean, math.nan, math.nan
    half = t95(len(d) - 1) * float(d.std(ddof=1)) / math.sqrt(len(d))
    return mean, mean - half, mean + half


@dataclass(frozen=True)
class Interval:
    """(candidate - reference) / mean(reference), paired by seed: its mean and 95 % interval, over ``seeds``."""

    mean: float
    low: float
    high: float
    seeds: int

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2 if self.seeds >= 2 else math.inf

    def inferior(self, margin: float = NON_INFERIORITY_MARGIN) -> bool:
        """The candidate may be worse than the reference by more than ``margin``: the upper end is above it
        (with fewer than two seeds nothing is shown, so it counts as inferior)."""
        return not (self.high <= margin)

    def to_json(self) -> dict[str, float | int]:
        return {"mean": self.mean, "low": self.low, "high": self.high, "seeds": self.seeds}


def relative_interval(candidate: Mapping[int, float], reference: Mapping[int, float]) -> Interval:
    """The paired 95 % interval of (candidate - reference) / mean(reference) over the seeds both have.

    ``candidate``/``reference``: seed -> composite (lower is better). Scaling every difference by the
    reference's mean keeps the interval a t-interval of one sample of paired differences.
    """
    seeds = sorted(set(candidate) & set(reference))
    if not seeds:
        return Interval(math.nan, math.nan, math.nan, 0)
    ref = np.array([reference[s] for s in seeds], dtype=np.float64)
    scale = float(ref.mean())
    if not math.isfinite(scale) or scale == 0.0:
        return Interval(math.nan, math.nan, math.nan, len(seeds))
    diffs = (np.array([candidate[s] for s in seeds], dtype=np.float64) - ref) / abs(scale)
    mean, low, high = paired_ci(diffs.tolist())
    return Interval(mean, low, high, len(seeds))


def best_reference(by_policy: Mapping[str, Mapping[int, float]], seeds: Sequence[int]) -> str:
    """The policy with the lowest mean composite over ``seeds`` ("" if none has them all)."""
    means = {
        p: float(np.mean([runs[s] for s in seeds])) for p, runs in by_policy.items() if all(s in runs for s in seeds)
    }
    return min(means, key=lambda p: (means[p], p)) if means else ""


def harm(composite: float, slowdown_p95: float, reference_composite: float, reference_slowdown_p95: float) -> bool:
    """Worse than the stock scheduler: mean composite > 1.02x kube-default's or mean p95 slowdown > 1.05x."""
    return composite > HARM_COMPOSITE * reference_composite or slowdown_p95 > HARM_SLOWDOWN_P95 * reference_slowdown_p95


def seeds_wanted(
    interval: Interval,
    target: float = AUTO_HALF_WIDTH,
    least: int = AUTO_MIN_SEEDS,
    most: int = AUTO_MAX_SEEDS,
) -> int:
    """How many seeds in all ``--seeds auto`` should run next: ``least`` first; the current count once the
    half-width is within ``target`` (or at ``most``); else the fewest seeds whose half-width, at the spread
    seen so far, is within ``target`` (the t quantile shrinks with the seeds too), at least 5 more and never
    above ``most``."""
    n = interval.seeds
    if n < least:
        return least
    half = interval.half_width
    if n >= most or (math.isfinite(half) and half <= target):
        return n
    if not math.isfinite(half):
        return min(most, n + 5)
    sd = half * math.sqrt(n) / t95(n - 1)  # the per-seed spread of the relative differences
    return next((m for m in range(n + 5, most + 1) if t95(m - 1) * sd / math.sqrt(m) <= target), most)
