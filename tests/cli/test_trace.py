"""``drs-prom bench --trace`` end to end: the real command in a subprocess on a tiny trace written here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.sim.test_replay import openb

DRS = [sys.executable, "-m", "drs_prom.cli"]


def _tiny(tmp: Path) -> Path:
    nodes = [f"n{i},16000,65536,0," for i in range(3)] + ["g0,32000,131072,4,V100", "g1,32000,131072,4,V100"]
    pods = [
        f"p{i},{2000 + 500 * (i % 4)},4096,{i % 3},1000,,LS,Succeeded,{10 * i},{10 * i + 120},{10 * i}"
        for i in range(30)
    ]
    return openb(tmp, nodes, pods)


def _drs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DRS, *args], capture_output=True, text=True, timeout=600, check=False)


def test_bench_trace_prints_the_table_and_the_paired_interval(tmp_path: Path) -> None:
    (tmp_path / "trace").mkdir()
    trace = _tiny(tmp_path / "trace")
    out = _drs(
        "bench", "--trace", str(trace), "--trace-nodes", "4", "--seeds", "2", "--load-factor", "4",
        "--policies", "kube-default,least-loaded,balanced-load", "--no-progress", "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert "seed 0: 4 nodes, 30 pods" in out.stdout and "seed 1: 4 nodes" in out.stdout
    assert "vs best baseline [95% CI]" in out.stdout
    report = json.loads((tmp_path / "out" / "bench-trace.json").read_text())
    assert report["seeds"] == [0, 1] and report["n_nodes"] == 4
    assert set(report["policies"]) == {"kube-default", "least-loaded", "balanced-load"}


def test_bench_trace_usage_sweep_ranks_the_policies_per_level(tmp_path: Path) -> None:
    trace = _tiny(tmp_path)
    out = _drs(
        "bench", "--trace", str(trace), "--trace-nodes", "4", "--seeds", "2",
        "--policies", "kube-default,least-loaded", "--no-progress", "--usage-sweep", "0.3,1.5",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [line for line in out.stdout.splitlines() if line.startswith(("| 0.3 ", "| 1.5 "))]
    assert len(rows) == 2 and all("kube-default" in r and "least-loaded" in r for r in rows)


def test_bad_trace_options_give_one_line(tmp_path: Path) -> None:
    trace = _tiny(tmp_path)
    out = _drs("bench", "--trace", str(trace), "--trace-window", "0.5:0.2", "--no-progress")
    assert out.returncode == 2 and "window 0.5:0.2 must satisfy" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    out = _drs("bench", "--trace", str(tmp_path / "missing"), "--no-progress")
    assert out.returncode == 2 and "does not exist" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_testbed_trace_options_are_checked_before_anything_starts(tmp_path: Path) -> None:
    trace = _tiny(tmp_path)
    out = _drs("testbed", "--trace", str(trace), "--trace-window", "0.5:0.2", "--no-bench")
    assert out.returncode == 2 and "window 0.5:0.2 must satisfy" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    out = _drs("testbed", "--trace", str(tmp_path / "missing"), "--no-bench")
    assert out.returncode == 2 and "does not exist" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    out = _drs("testbed", "--trace", str(trace), "--nodes-scale", "3", "--no-bench")
    assert out.returncode == 2 and "--trace-nodes" in out.stderr and len(out.stderr.strip().splitlines()) == 1
