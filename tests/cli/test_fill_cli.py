"""``drs-prom bench --trace DIR --fill SHARE`` end to end: the real command in a subprocess on a small trace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sim.test_fill import small_trace

DRS = [sys.executable, "-m", "drs_prom.cli"]


def _drs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DRS, *args], capture_output=True, text=True, timeout=600, check=False)


def test_bench_fill_prints_the_table_and_writes_the_curves(tmp_path: Path) -> None:
    trace = small_trace(tmp_path)
    out = _drs(
        "bench", "--trace", str(trace), "--fill", "1.3", "--fill-step", "0.1", "--seeds", "2",
        "--policies", "kube-default,best-fit-gpu,most-allocated-gpu,fgd", "--no-progress", "--out", str(tmp_path / "o"),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert "seed 0: 4 nodes, 10 nvidia.com/gpu" in out.stdout and "seed 1: 4 nodes" in out.stdout
    assert "GPU sharing is not modelled" in out.stdout and "GPU fragmentation rate" in out.stdout
    rows = {line.split()[0] for line in out.stdout.splitlines() if line[:1].isalpha()}
    assert {"kube-default", "best-fit-gpu", "most-allocated-gpu", "fgd"} <= rows
    report = json.loads((tmp_path / "o" / "fill-trace.json").read_text())
    assert report["seeds"] == [0, 1] and report["checkpoints"][-1] == 1.3
    assert set(report["summary"]) == {"kube-default", "best-fit-gpu", "most-allocated-gpu", "fgd"}
    assert "failed_before_full_mean_by_gpus" in report["summary"]["fgd"]
    curve = report["runs"]["fgd"][0]["curve"]
    assert len(curve) == len(report["checkpoints"]) and curve[-1][0] >= 1.3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fill", "lots"], "--fill 'lots' is not a number"),
        (["--fill", "0"], "--fill '0' must be a share of capacity above 0"),
        (["--fill", "1.3", "--fill-step", "-1"], "--fill-step '-1' must be a share"),
        (["--fill", "1.3", "--fill-step", "2"], "--fill-step 2 must be in (0, --fill]"),
        (["--fill", "1.3", "--fill-resource", "example.com/foo"], "offers example.com/foo"),
        (["--fill", "1.3", "--trace-window", "0.1:0.2"], "--trace-window, --trace-max-pods"),
        (["--fill", "1.3", "--usage-sweep", "0.5"], "--fill is a protocol of its own"),
        (["--fill", "1.3", "--seeds", "auto"], "takes a count of sampling seeds"),
        (["--fill", "1.3", "--policies", "nope"], "unknown policy 'nope'"),
    ],
)
def test_bad_fill_options_give_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    trace = small_trace(tmp_path)
    out = _drs("bench", "--trace", str(trace), "--no-progress", "--out", str(tmp_path / "o"), *args)
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_fill_needs_a_trace() -> None:
    out = _drs("bench", "--scenario", "drs-paper", "--fill", "1.3", "--no-progress")
    assert out.returncode == 2 and "--fill needs a trace" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
