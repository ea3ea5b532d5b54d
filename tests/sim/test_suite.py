"""bench --suite on a tiny subset: composite ranking, paired CIs, Pareto plots, JSON keeps the bench fields."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from drs_prom.outcomes.paired_stats import paired_ci, t95
from drs_prom.sim.bench import run_bench
from drs_prom.sim.suite import suite_names, summarise
from tests.sim.helpers import tiny


def test_paired_ci_by_hand():
    mean, lo, hi = paired_ci([1.0, 2.0, 3.0])
    # mean 2, sample std 1, t(2) = 4.303: half-width 4.303 / sqrt(3)
    assert mean == 2.0 and hi - mean == pytest.approx(4.303 / 3**0.5) and mean - lo == pytest.approx(hi - mean)
    assert math.isnan(paired_ci([1.0])[1]) and t95(1) == 12.706 and t95(500) == pytest.approx(1.9647, abs=1e-3)


def test_summary_ranks_by_composite_against_the_best_baseline():
    report = run_bench(tiny(nodes=3, pods=20, rate=2.0, work=5.0), [0, 1, 2], ["kube-default", "round-robin", "random"])
    s = summarise(report)
    comp = s.composite
    assert s.best == min(comp, key=comp.get) and s.best_baseline == s.best
    v = s.vs_best_baseline["random"]
    others = [p for p in comp if p != "random"]
    assert v["against"] == min(others, key=comp.get)
    assert v["mean"] == pytest.approx(comp["random"] - comp[v["against"]])
    assert v["ci_low"] <= v["mean"] <= v["ci_high"]
    assert s.ratio_to_reference["kube-default"]["composite"] == pytest.approx(1.0)


def test_suite_cli_smoke(tmp_path):
    names = suite_names()
    assert "drs-paper" in names and "eval-poisson-1" in names and "cluster-500" not in names and len(names) == 27
    code = "from drs_prom.cli import main; main()"
    args = ["bench", "--suite", "--only", "drs-paper,eval-diurnal-2", "--seeds", "2", "--pods", "8"]
    args += ["--policies", "kube-default,balanced-load,trimaran-tlp", "--out", str(tmp_path), "--no-progress"]
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "eval-diurnal-2" in proc.stdout and "best composite per scenario" in proc.stdout
    data = json.loads((tmp_path / "suite.json").read_text())
    assert [s["summary"]["scenario"] for s in data["scenarios"]] == ["drs-paper", "eval-diurnal-2"]
    bench = data["scenarios"][0]["bench"]
    kd = bench["policies"]["kube-default"]
    for key in ("mean", "ratio_to_reference", "placements_per_s", "slowdown_mean", "max_queue", "runs", "series"):
        assert key in kd  # the single-scenario bench JSON's fields are all still there
    assert kd["composite_ratio_to_reference"] == pytest.approx(1.0) and "objectives" in kd
    assert (tmp_path / "pareto-eval-diurnal-2.png").stat().st_size > 10_000
    md = (tmp_path / "suite.md").read_text()
    assert "### eval-diurnal-2" in md and "slowdown_p95" in md and "| kube-default |" in md
    bad = subprocess.run(
        [sys.executable, "-c", code, "bench", "--suite", "--only", "nope", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert bad.returncode == 2 and "unknown suite scenario 'nope'" in bad.stderr
