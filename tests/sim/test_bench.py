import json
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from drs_prom.cli import cli
from drs_prom.sim.bench import METRICS, format_table, run_bench
from drs_prom.sim.scenario import load_scenario


def test_bench_cli_smoke(tmp_path):
    out = tmp_path / "bench"
    result = CliRunner().invoke(
        cli,
        [
            "bench",
            "--scenario",
            "drs-paper",
            "--seeds",
            "2",
            "--pods",
            "12",
            "--policies",
            "random,round-robin",
            "--out",
            str(out),
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("scenario drs-paper: 4 nodes, 12 pods x 2 seeds")
    kube = next(line for line in lines if line.startswith("kube-default"))  # added as the reference
    assert kube.count("(1.00x)") == len(METRICS)  # composite, sd p95, overload + the six historical columns
    data = json.loads((out / "bench-drs-paper.json").read_text())
    assert set(data["policies"]) == {"kube-default", "random", "round-robin"}
    rr = data["policies"]["round-robin"]
    assert len(rr["runs"]) == 2 and rr["runs"][0]["decisions"] == 12
    assert rr["ratio_to_reference"]["imbalance"] == pytest.approx(
        rr["mean"]["imbalance"] / data["policies"]["kube-default"]["mean"]["imbalance"]
    )
    assert (out / "bench-drs-paper.png").stat().st_size > 10_000


def _drs_prom(*args, cwd):
    code = "from drs_prom.cli import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_bench_cli_errors_are_one_line(tmp_path):
    proc = _drs_prom("bench", "--scenario", "nope", "--out", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "unknown scenario 'nope'" in proc.stderr
    proc = _drs_prom("bench", "--policies", "kube-default,zzz", "--pods", "3", "--out", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2 and "unknown policy 'zzz'" in proc.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nnodes: []\nprofiles: {}\narrivals: []\n")
    proc = _drs_prom("bench", "--scenario", str(bad), "--out", str(tmp_path), cwd=tmp_path)
    assert (
        proc.returncode == 2
        and proc.stderr.startswith("drs-prom: error: invalid scenario")
        and proc.stderr.count("\n") == 1
    )


def test_unavailable_policy_is_skipped_with_its_reason():
    from drs_prom.errors import ModelError

    def builder(name, seed, spec):
        if name == "drs":
            raise ModelError("no trained model")
        from drs_prom.registry import make_policy

        return make_policy(name, spec, seed)

    report = run_bench(load_scenario("drs-paper").truncated(5), [0], ["kube-default", "drs"], builder, progress=False)
    assert report.row("drs").skipped == "no trained model"
    assert re.search(r"^drs +skipped: no trained model$", format_table(report), re.MULTILINE)
    assert report.to_json()["policies"]["drs"] == {"skipped": "no trained model"}


def test_demo_runs_the_paper_scenario_and_says_where_the_plot_is(tmp_path):
    result = CliRunner().invoke(cli, ["demo", "--seeds", "1", "--out", str(tmp_path), "--no-progress"])
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert first.startswith("model: ") or "running the heuristics only" in first
    assert "scenario drs-paper: 4 nodes, 100 pods x 1 seeds" in result.output
    assert f"plot: {tmp_path / 'bench-drs-paper.png'}" in result.output
    assert (tmp_path / "bench-drs-paper.png").exists()


def test_a_policy_sees_its_own_scales_but_metrics_stay_on_the_scenarios():
    from drs_prom.baselines import RoundRobin
    from drs_prom.config import Normalisation
    from drs_prom.registry import make_policy

    seen = []

    class DrsScaled(RoundRobin):
        name = "drs-scaled"
        normalisation = Normalisation.drs_paper()

        def score(self, ctx):
            seen.append(ctx.pod_load[0, 0])
            return super().score(ctx)

    def builder(name, seed, spec):
        return DrsScaled() if name == "drs-scaled" else make_policy(name, spec, seed)

    sc = load_scenario("drs-paper").truncated(20)
    report = run_bench(sc, [0], ["round-robin", "drs-scaled"], builder, progress=False)
    assert max(seen) == 1.0  # a video pod's 1 core reads as 100 on DRS's x4 CPU scale (0.25 on the scenario's)
    a, b = report.row("round-robin").runs[0], report.row("drs-scaled").runs[0]
    assert a.imbalance == b.imbalance and a.completion_mean == b.completion_mean
