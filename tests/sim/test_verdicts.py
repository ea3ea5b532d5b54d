"""Judging a candidate on the simulator (drs_prom.sim.verdicts): the paired interval against the best heuristic, the
harm/inferior flags, ``--seeds auto``, and how ``drs-prom bench`` and ``bench --suite`` print them."""

from __future__ import annotations

import re

import numpy as np
import pytest
from click.testing import CliRunner

from drs_prom.cli import cli
from drs_prom.outcomes.paired_stats import AUTO_HALF_WIDTH, AUTO_MAX_SEEDS, AUTO_MIN_SEEDS, harm, relative_interval
from drs_prom.sim.bench import run_bench
from drs_prom.sim.verdicts import judge, run_judged
from tests.sim.helpers import tiny

POLICIES = ["kube-default", "capacity-balanced", "round-robin", "random"]


def _composites(report, policy):
    return {r.seed: r.composite for r in report.row(policy).runs}


def test_the_candidate_is_judged_against_the_heuristic_with_the_lowest_mean_composite():
    report = run_bench(tiny(nodes=3, pods=20, rate=2.0, work=5.0), [0, 1, 2, 3], POLICIES, progress=False)
    j = judge(report, "random")
    others = {p: np.mean(list(_composites(report, p).values())) for p in POLICIES if p != "random"}
    assert j is not None and j.against == min(others, key=others.get)
    expected = relative_interval(_composites(report, "random"), _composites(report, j.against))
    assert j.interval == expected and j.interval.seeds == 4
    assert j.inferior == (expected.high > 0.03)
    kd, mine = report.row("kube-default"), report.row("random")
    sd = [np.mean([r.objective_dict()["slowdown_p95"] for r in row.runs]) for row in (mine, kd)]
    comp = [np.mean([r.composite for r in row.runs]) for row in (mine, kd)]
    assert j.harm == harm(comp[0], sd[0], comp[1], sd[1])
    assert j.composite_ratio == pytest.approx(comp[0] / comp[1])
    assert judge(report, "drs") is None  # not run: nothing to judge


def test_seeds_auto_adds_seeds_until_the_interval_is_narrow_or_a_hundred_ran():
    report = run_judged(tiny(nodes=3, pods=12, rate=2.0, work=5.0), None, POLICIES, candidate="random", progress=False)
    n = len(report.seeds)
    assert report.seeds == list(range(n)) and AUTO_MIN_SEEDS <= n <= AUTO_MAX_SEEDS
    assert all(len(row.runs) == n for row in report.rows)
    j = judge(report, "random")
    assert j.interval.seeds == n and (j.interval.half_width <= AUTO_HALF_WIDTH or n == AUTO_MAX_SEEDS)
    assert n > AUTO_MIN_SEEDS  # random against the best heuristic on 12 pods is far too noisy for 10 seeds


def test_bench_prints_the_judgement_and_the_seeds_used(tmp_path):
    args = ["bench", "--scenario", "drs-paper", "--pods", "12", "--seeds", "4", "--no-progress"]
    args += ["--policies", "kube-default,capacity-balanced,trimaran-tlp", "--candidate", "trimaran-tlp"]
    result = CliRunner().invoke(cli, [*args, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    line = re.search(
        r"^trimaran-tlp vs best heuristic (\S+), paired over 4 seeds: .* flags: (.+)$", result.output, re.M
    )
    assert line is not None and line.group(1) in ("kube-default", "capacity-balanced"), result.output
    bad = CliRunner().invoke(cli, ["bench", "--seeds", "some", "--out", str(tmp_path)])
    assert bad.exit_code == 2 and "neither a count from 1 to 1000 nor 'auto'" in bad.output


def test_the_suite_table_has_the_seeds_the_interval_and_the_flags_per_scenario(tmp_path):
    args = ["bench", "--suite", "--only", "drs-paper,eval-diurnal-2", "--seeds", "3", "--pods", "8", "--no-progress"]
    args += ["--policies", "kube-default,balanced-load,trimaran-tlp", "--candidate", "trimaran-tlp"]
    result = CliRunner().invoke(cli, [*args, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    head = next(line for line in result.output.splitlines() if line.startswith("scenario"))
    assert "seeds" in head and "trimaran-tlp vs best heuristic [95% CI]" in head and "flags" in head
    row = next(line for line in result.output.splitlines() if line.startswith("eval-diurnal-2"))
    assert re.search(r"  3  +[+-]\d+\.\d% \[[+-]\d+\.\d%, [+-]\d+\.\d%\] vs (kube-default|balanced-load)  ", row), row
    assert "trimaran-tlp judged on 2 scenarios: median trimaran-tlp / best heuristic" in result.output
