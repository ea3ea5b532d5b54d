"""Node bandwidth labels -> DecisionContext.full: the scheduler's reading agrees with the simulator's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from drs_prom.signals import link_capacity
from drs_prom.signals.state import scales
from drs_prom.sim.cluster import Nodes
from drs_prom.sim.env import SchedulingEnv
from drs_prom.sim.generator import resolve_scenario


def test_labels_parse_and_bad_values_are_named_and_ignored():
    got, errors = link_capacity.parse(
        {
            "drs.io/net-rx-bytes-per-second": "125000000",
            "drs.io/net-tx-bytes-per-second": "-3",
            "drs.io/disk-read-bytes-per-second": "nan",
            "kubernetes.io/hostname": "n1",
        }
    )
    assert got[0] == 125e6 and np.isnan(got[1:]).all()
    assert len(errors) == 2 and "drs.io/net-tx-bytes-per-second='-3'" in errors[0]
    _, errors = link_capacity.matrix([("n1", {}), ("n2", {"drs.io/disk-write-bytes-per-second": "x"})])
    assert errors == [
        "node n2: label drs.io/disk-write-bytes-per-second='x' is not a positive number of bytes per second; ignored"
    ]


@given(st.lists(st.one_of(st.just(float("nan")), st.integers(1, 10**12).map(float)), min_size=4, max_size=4))
def test_labels_round_trip(values):
    row = np.array(values)
    got, errors = link_capacity.parse(link_capacity.labels_for(row))
    assert errors == []
    np.testing.assert_array_equal(np.isnan(got), np.isnan(row))
    np.testing.assert_allclose(got[~np.isnan(row)], row[~np.isnan(row)])


@pytest.mark.parametrize("name", ["heterogeneous", "eval-diurnal-2", "eval-poisson-1"])
def test_a_labelled_node_reads_as_full_where_the_simulator_says(name):
    """The closed loop labels its fake nodes with the scenario's bandwidths; from those labels the scheduler
    must compute the same DecisionContext.full the bench gives its policies."""
    sc = resolve_scenario(name)
    nodes = Nodes.from_scenario(sc)
    link, errors = link_capacity.matrix(
        (n, link_capacity.labels_for(nodes.capacity[i, 2:])) for i, n in enumerate(nodes.names)
    )
    assert errors == []
    served = link_capacity.full_matrix(link, scales(sc.normalisation))
    simulated = SchedulingEnv(sc, seed=0).reset().full
    np.testing.assert_allclose(served, simulated, rtol=1e-6)
    assert served[:, 2:].min() < served[:, 2:].max()  # these clusters' links differ, so the labels matter


def test_without_labels_every_link_is_the_standard_one():
    full = link_capacity.full_matrix(np.full((3, 4), np.nan), np.array([0.25, 1.0, 4e4, 4e4, 1e7, 1e7]))
    np.testing.assert_array_equal(full, np.array([[4.0, 1.0, 1.0, 1.0, 1.0, 1.0]] * 3))
