import pytest

from drs_prom.config import Normalisation
from drs_prom.errors import ConfigError
from drs_prom.signals.state import pod_matrix
from drs_prom.sim.scenario import load_scenario, parse_quantity, parse_scenario, scenario_names
from tests.sim.helpers import tiny

EXPECTED = {"drs-paper", "drs-paper-lag", "heterogeneous", "burst", "cluster-50", "cluster-500"}


def test_packaged_scenarios_load():
    assert set(scenario_names()) >= EXPECTED
    sizes = {name: load_scenario(name).n_nodes for name in EXPECTED}
    assert sizes["drs-paper"] == 4 and sizes["cluster-50"] == 50 and sizes["cluster-500"] == 500
    assert load_scenario("drs-paper").n_pods == 100


def test_drs_paper_profiles_read_as_drs_numbers_under_drs_scales():
    sc = load_scenario("drs-paper")
    node = sc.nodes[0]
    drs = {
        "video": (100, 23.0, 11.25, 2.49, 0.0, 1.54),
        "net": (54.0, 46.2, 80.04, 71.4, 0.0, 1.58),
        "disk": (100, 22.96, 12.6, 2.73, 0.0, 86.26),
    }
    for name, expected in drs.items():
        got = pod_matrix(
            sc.profiles[name].demand.vector(), [node.cpu_cores], [node.mem_bytes], Normalisation.drs_paper()
        )[0]
        assert got * 100 == pytest.approx(expected, abs=0.01)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("16Gi", 16 * 2**30), ("500m", 0.5), ("80Ki", 81920), (3, 3.0), ("1.5e3", 1500.0), ("2M", 2e6)],
)
def test_quantities(value, expected):
    assert parse_quantity(value) == pytest.approx(expected)


def _error(text: str) -> str:
    with pytest.raises(ConfigError) as exc:
        parse_scenario(text, "bad.yaml")
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_validation_errors_are_one_line_and_name_the_field():
    good = tiny().model_dump_json()
    import json

    data = json.loads(good)
    data["nodes"][0]["count"] = 0
    assert "nodes.0.count" in _error(json.dumps(data))
    data = json.loads(good)
    data["nodes"][0]["cpu_cores"] = "lots"
    assert "nodes.0.cpu_cores" in _error(json.dumps(data)) and "quantity" in _error(json.dumps(data))
    data = json.loads(good)
    data["surprise"] = 1
    assert "surprise" in _error(json.dumps(data))
    assert "not valid YAML" in _error("name: [unclosed")
    assert "mapping" in _error("- a\n- b")


def test_profile_that_fits_no_node_is_rejected():
    data = tiny().model_dump()
    data["profiles"]["job"]["requests"]["cpu_m"] = 999999
    import json

    msg = _error(json.dumps(data))
    assert "fits no node" in msg and "'job'" in msg


def test_unknown_scenario_and_missing_file():
    with pytest.raises(ConfigError, match=r"unknown scenario 'nope'.*drs-paper"):
        load_scenario("nope")
    with pytest.raises(ConfigError, match="cannot read scenario"):
        load_scenario("/nonexistent/x.yaml")


def test_truncated_keeps_first_arrivals():
    sc = load_scenario("burst")
    cut = sc.truncated(15)
    assert cut.n_pods == 15 and [p.pods for p in cut.arrivals] == [10, 5]


def test_scenarios_name_one_quantity_per_feature() -> None:
    from drs_prom.features import N_FEATURES
    from drs_prom.sim.scenario import QUANTITY_KEYS, load_scenario

    assert len(QUANTITY_KEYS) == N_FEATURES
    paper = load_scenario("drs-paper")
    assert len(paper.nodes[0].capacity) == N_FEATURES
    assert len(next(iter(paper.profiles.values())).demand.vector()) == N_FEATURES
