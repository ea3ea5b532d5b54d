import itertools
import json
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from drs_prom.cli import cli
from drs_prom.sim.bench import METRICS, format_table, run_bench
from drs_prom.sim.env import TOLD
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
    assert kube.count("(1.00x)") == len(METRICS)  # composite score, p95 pod slowdown, overload + six historical columns
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
    first, second = result.output.splitlines()[:2]
    assert first.startswith("drs is the shipped model drs-v") or "running the heuristics only" in first
    assert second.startswith("policies: the field's heuristics and the learned ones")  # why the teachers are not here
    assert "scenario drs-paper: 4 nodes, 100 pods x 1 seeds" in result.output
    assert f"plot: {tmp_path / 'bench-drs-paper.png'}" in result.output
    assert (tmp_path / "bench-drs-paper.png").exists()


def test_a_policy_sees_its_own_scales_but_metrics_stay_on_the_scenarios():
    from drs_prom.config import Normalisation
    from drs_prom.policies.baselines import RoundRobin
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
    report = run_bench(sc, [0], ["round-robin", "drs-scaled"], builder, progress=False, information=TOLD)
    assert max(seen) == 1.0  # a video pod's 1 core reads as 100 on DRS's x4 CPU scale (0.25 on the scenario's)
    a, b = report.row("round-robin").runs[0], report.row("drs-scaled").runs[0]
    assert a.imbalance == b.imbalance and a.completion_mean == b.completion_mean


def _header_column(table: str, title: str) -> bool:
    """Whether ``title`` is written in full as one column of the (wrapped) header above the rule."""
    lines = table.splitlines()
    rule = next(i for i, line in enumerate(lines) if set(line) <= {"-", " "} and "--" in line)
    spans, start = [], 0
    for part in lines[rule].split("  "):
        spans.append((start, start + len(part)))
        start += len(part) + 2
    for lo, hi in spans:
        words = " ".join(line[lo:hi].strip() for line in lines[1:rule] if line[lo:hi].strip())
        if words == title:
            return True
    return False


def test_bench_table_names_its_columns_in_full_and_defines_the_composite_once():
    report = run_bench(load_scenario("drs-paper").truncated(10), [0], ["kube-default", "balanced-load"], progress=False)
    table = format_table(report)
    for _, title, _ in METRICS:
        assert _header_column(table, title), title
    assert "sd p95" not in table
    assert table.count("composite score = ") == 1
    definition = next(line for line in table.splitlines() if line.startswith("composite score = "))
    assert "0.5 x p95 pod slowdown" in definition and "(lower is better)" in definition
    assert "pod slowdown = completion time (queueing included) / run time alone" in table


def test_every_policy_gets_its_own_colour_and_neighbours_differ_in_line_style():
    from drs_prom.registry import HEURISTICS, LEARNED
    from drs_prom.sim.bench_plots import policy_styles

    names = [*HEURISTICS, *LEARNED, "clairvoyant"]
    styles = policy_styles(names)
    assert len({s["color"] for s in styles.values()}) == len(names) <= 12
    for a, b in itertools.pairwise(names):
        assert styles[a]["linestyle"] != styles[b]["linestyle"]


def test_bench_plot_keeps_the_legend_off_the_data(tmp_path):
    """The legend sits right of both panels: the saved image is wider than the panels' figure."""
    import matplotlib.image

    from drs_prom.sim.bench_plots import plot_report

    report = run_bench(
        load_scenario("drs-paper").truncated(10), [0], ["kube-default", "random", "round-robin"], progress=False
    )
    png = plot_report(report, tmp_path / "p.png")
    height, width = matplotlib.image.imread(png).shape[:2]
    assert width > 9 * 110 * 1.15  # 9-inch panels at 110 dpi plus the legend column
    assert height < 6.5 * 110 * 1.05
