"""Compare two benchmark result files (``bench --out`` or ``bench --suite --out`` JSON) value by value, timings aside.

    python benchmarks/same_results.py before/suite.json after/suite.json

A change that should not change behaviour (a refactor, a faster path) must leave every simulated number as it was,
to the last digit: the same seeds give the same workloads, and every policy's choices depend only on them. Wall-clock
fields (``wall_seconds``, ``policy_seconds``, ``decisions_per_s`` and the like) differ from run to run and are left
out. Prints each differing path with both values and exits 1 when there is one; exits 0 when the files agree.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

TIMING_KEYS = frozenset(
    {
        "wall_seconds",
        "policy_seconds",
        "decisions_per_s",
        "decisions_per_second",
        "placements_per_second",
        "placements_per_s",
    }
)
"""Fields that measure the machine, not the simulation."""


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Every path where ``a`` and ``b`` differ (timing fields aside); NaN equals NaN."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in sorted(set(a) | set(b)):
            if key in TIMING_KEYS:
                continue
            if key not in a or key not in b:
                out.append(f"{path}/{key}: only in {'the first' if key in a else 'the second'}")
                continue
            out += differences(a[key], b[key], f"{path}/{key}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items vs {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return []
    return [] if a == b else [f"{path}: {a!r} vs {b!r}"]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    first, second = (json.loads(Path(p).read_text()) for p in argv)
    found = differences(first, second)
    for line in found[:200]:
        print(line)
    if len(found) > 200:
        print(f"... and {len(found) - 200} more")
    print(f"{len(found)} differences" if found else "identical (timings aside)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
