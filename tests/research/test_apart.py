"""The research package stays apart from the product: not in the wheel, never imported by it, and what it adds
(model heads, the clairvoyant reference) exists only once it is imported."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

from click.testing import CliRunner

import drs_prom_research
from drs_prom.agent.persistence import head_kind
from drs_prom.cli import cli
from drs_prom.sim.bench import parse_policies, reference_names
from drs_prom_research.commands import research

REPO = Path(__file__).resolve().parents[2]

PRODUCT_ALONE = textwrap.dedent(
    """
    import json, sys
    import drs_prom.cli, drs_prom.ops.retrain_job, drs_prom.retrain.retrain_run, drs_prom.sim.retrain_checks, drs_prom.sim.suite
    from drs_prom.agent.persistence import head_kind
    from drs_prom.errors import ConfigError
    from drs_prom.sim.bench import parse_policies, reference_names
    try:
        parse_policies("kube-default,clairvoyant")
        refused = ""
    except ConfigError as exc:
        refused = str(exc)
    print(json.dumps({
        "research_loaded": sorted(m for m in sys.modules if m.startswith("drs_prom_research")),
        "references": list(reference_names()),
        "heads": [k for k in ("heuristic-guided", "top-k-correction", "heuristic-selector") if head_kind(k)],
        "refused": refused,
    }))
    """
)


def test_the_product_alone_loads_no_research_and_knows_none_of_its_names():
    """The CLI, retraining and the simulator's retraining checks, imported in a fresh interpreter that could import
    the research package (the checkout is on its path), never do; the shipped head is the only one it serves."""
    proc = subprocess.run(
        [sys.executable, "-c", PRODUCT_ALONE], capture_output=True, text=True, timeout=120, cwd=REPO, check=True
    )
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["research_loaded"] == []
    assert seen["references"] == []
    assert seen["heads"] == ["heuristic-guided"]
    assert "unknown policy 'clairvoyant'" in seen["refused"]


def test_importing_research_registers_its_heads_and_the_clairvoyant_reference():
    drs_prom_research.register()  # idempotent: the import already did
    correction, selector = head_kind("top-k-correction"), head_kind("heuristic-selector")
    assert correction is not None and correction.fine_tunable  # it reads the per-node rows the journal rebuilds
    assert selector is not None and not selector.fine_tunable  # it reads cluster features
    assert reference_names() == ("clairvoyant",)
    assert parse_policies("balanced-load,clairvoyant") == ["kube-default", "balanced-load", "clairvoyant"]


def test_the_shipped_train_command_offers_shipped_learners_only(tmp_path):
    runner = CliRunner()
    help_text = runner.invoke(cli, ["train", "--help"]).output
    assert "[dqn|guided]" in help_text
    assert "--members" not in help_text and "--samples" not in help_text  # the research learners' options left too
    for learner in ("selector", "rollout"):
        result = runner.invoke(cli, ["train", "--learner", learner, "--out", str(tmp_path / "m.keras")])
        assert result.exit_code == 2 and "Invalid value for '--learner'" in result.output


def test_research_learners_have_their_own_commands_and_defaults():
    runner = CliRunner()
    selector = runner.invoke(research, ["train-selector", "--help"]).output
    correction = runner.invoke(research, ["train-correction", "--help"]).output
    assert "[default: 400;" in selector and "[default: 5;" in selector  # clusters, members of the selector runs
    assert "[default: 800;" in correction and "[default: 3;" in correction  # those of the correction runs
    bench_help = runner.invoke(research, ["bench", "--help"]).output
    assert "'clairvoyant'" in bench_help
    assert "clairvoyant" not in CliRunner().invoke(cli, ["bench", "--help"]).output


def test_research_bench_runs_the_clairvoyant_reference_beside_the_policies(tmp_path):
    result = CliRunner().invoke(
        research,
        [
            "bench",
            "--scenario",
            "drs-paper",
            "--pods",
            "12",
            "--seeds",
            "1",
            "--policies",
            "kube-default,balanced-load,clairvoyant",
            "--candidate",
            "balanced-load",
            "--no-progress",
            "--out",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "bench-drs-paper.json").read_text())
    assert set(report["policies"]) == {"kube-default", "balanced-load", "clairvoyant"}
    assert "composite" in report["policies"]["clairvoyant"] and "migration_floor" in report
    assert "migration floor" in result.output


def test_the_wheel_leaves_the_research_package_out(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
        check=True,
        timeout=300,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("drs_prom-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "drs_prom/agent/guided.py" in names and "drs_prom/agent/cluster_context.py" in names
    assert not [n for n in names if n.startswith("drs_prom_research/")]
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "drs_prom_research" not in zipfile.ZipFile(wheel).read(entry_points).decode()
