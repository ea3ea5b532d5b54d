"""The scenario generator: deterministic, within its documented ranges, disjoint train/eval seeds."""

from __future__ import annotations

import numpy as np
import pytest

from drs_prom.errors import ConfigError
from drs_prom.sim.generator import (
    EVAL_CLUSTERS,
    PATTERNS,
    TRAIN_SEEDS,
    GeneratorParams,
    eval_scenario,
    generate_scenario,
    scenario_yaml,
    training_scenario,
)
from drs_prom.sim.scenario import parse_scenario
from drs_prom.sim.workload import generate


def test_same_seed_same_scenario_and_workload():
    a, b = generate_scenario(17), generate_scenario(17)
    assert a == b
    wa, wb = generate(a, 3), generate(b, 3)
    assert np.array_equal(wa.arrival, wb.arrival) and np.array_equal(wa.demand, wb.demand)
    assert generate_scenario(18) != a
    assert parse_scenario(scenario_yaml(a)) == a  # a user can save, read and edit it


def test_parameter_ranges_hold_over_many_seeds():
    p = GeneratorParams()
    patterns, gens, noisy, tainted, misleading, lags = set(), set(), 0, 0, 0, set()
    for seed in range(120):
        sc = generate_scenario(seed, p)
        assert p.nodes[0] <= sc.n_nodes <= p.nodes[1]
        assert 1 <= len(sc.nodes) <= 4
        assert p.pods[0] <= sc.n_pods <= p.max_pods
        assert p.profiles[0] <= len(sc.profiles) <= p.profiles[1]
        gens.add(len(sc.nodes))
        noisy += bool(sc.background)
        tainted += any(t.taints for t in sc.nodes)
        lags.add(sc.metric_window_seconds)
        patterns.add(sc.description.split(", ")[2].removesuffix(" arrivals"))
        for prof in sc.profiles.values():
            assert prof.demand.disk_read_bytes > 0  # the disk-read input varies
            assert p.work_jitter[0] <= prof.work_jitter <= p.work_jitter[1]
            misleading += abs(prof.requests.cpu_m / 1000 - prof.demand.cpu_cores) > 0.5 * prof.demand.cpu_cores
            # every pod runs at full speed alone on any node it may use
            for node in sc.nodes:
                if prof.node_selector and any(node.labels.get(k) != v for k, v in prof.node_selector.items()):
                    continue
                if node.taints and not prof.tolerations:
                    continue
                peak = np.array(prof.demand.vector()) * (1 + prof.demand_jitter)
                cap = np.array([node.cpu_cores * (1 - node.idle.cpu), node.mem_bytes * (1 - node.idle.mem)])
                assert (peak[:2] <= cap + 1e-6).all()
    assert patterns == set(PATTERNS) and gens == {1, 2, 3, 4} and lags == set(p.metric_windows)
    assert 20 < noisy < 100 and tainted > 5 and misleading > 10


def test_params_are_validated():
    with pytest.raises(ValueError, match="nodes"):
        GeneratorParams(nodes=(10, 3))
    with pytest.raises(ValueError, match="generations"):
        GeneratorParams(generations=(1, 6))
    small = GeneratorParams(nodes=(3, 5), pods=(20, 30), max_pods=40, patterns=("burst",))
    sc = generate_scenario(4, small)
    assert 3 <= sc.n_nodes <= 5 and sc.n_pods <= 40 and len(sc.arrivals) > 1
    with pytest.raises(ConfigError, match="arrival pattern"):
        generate_scenario(1, pattern="weekly")


def test_eval_clusters_are_named_disjoint_from_training_and_cover_every_pattern():
    assert len(EVAL_CLUSTERS) == 20
    assert all(spec.seed not in TRAIN_SEEDS for spec in EVAL_CLUSTERS.values())
    assert len({spec.seed for spec in EVAL_CLUSTERS.values()}) == 20
    assert {spec.pattern for spec in EVAL_CLUSTERS.values()} == set(PATTERNS)
    assert sum(name.startswith("shift-") for name in EVAL_CLUSTERS) == 8
    with pytest.raises(ConfigError, match="outside"):
        training_scenario(next(iter(EVAL_CLUSTERS.values())).seed)
    sc = eval_scenario("shift-stale-metrics")
    assert sc.name == "shift-stale-metrics" and sc.metric_window_seconds == 60.0
    assert eval_scenario("shift-noisy-fleet").background
    with pytest.raises(ConfigError, match="unknown evaluation cluster"):
        eval_scenario("eval-nope")
