"""``drs-prom testbed --scenario`` reads names as ``drs-prom bench`` does: a generated evaluation cluster by
name (eval-diurnal-2), a packaged scenario or a YAML path (drs_prom.sim.generator.resolve_scenario). Nothing is
started: an invalid --speed is refused right after the scenario is read, so reaching that error shows the name
was accepted."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from drs_prom.cli import cli
from drs_prom.errors import ConfigError
from drs_prom.sim.generator import EVAL_CLUSTERS, eval_scenario, resolve_scenario, scenario_yaml
from drs_prom.testbed.api import run_testbed


def test_evaluation_clusters_packaged_scenarios_and_files_resolve_by_name(tmp_path):
    assert "eval-diurnal-2" in EVAL_CLUSTERS
    assert resolve_scenario("eval-diurnal-2") == eval_scenario("eval-diurnal-2")
    assert resolve_scenario("drs-paper").name == "drs-paper"
    path = tmp_path / "mine.yaml"
    path.write_text(scenario_yaml(eval_scenario("eval-poisson-1")))
    assert resolve_scenario(str(path)) == eval_scenario("eval-poisson-1")
    with pytest.raises(ConfigError) as err:
        resolve_scenario("eval-nope")
    assert "\n" not in str(err.value) and "eval-diurnal-2" in str(err.value)  # says which names exist


def test_the_testbed_accepts_an_evaluation_cluster_by_name(tmp_path):
    with pytest.raises(ConfigError, match="--speed must be positive"):
        run_testbed("eval-diurnal-2", [0], None, 0.0, ["kube-scheduler"], tmp_path, bench=False, echo=lambda _: None)
    result = CliRunner().invoke(cli, ["testbed", "--scenario", "eval-nope", "--out", str(tmp_path)])
    assert isinstance(result.exception, ConfigError) and "unknown evaluation cluster 'eval-nope'" in str(
        result.exception
    )
