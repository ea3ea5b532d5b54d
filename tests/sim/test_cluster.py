import numpy as np
import pytest

from drs_prom.sim.cluster import Cluster, Nodes
from drs_prom.sim.workload import generate
from tests.sim.helpers import tiny


def _cluster(**kw):
    sc = tiny(**kw)
    return Cluster(Nodes.from_scenario(sc), generate(sc, 0), metric_window=sc.metric_window_seconds)


def _run_all(c: Cluster) -> None:
    for _ in range(1000):
        if not len(c.running):
            return
        c.advance(float("inf"))
    raise AssertionError("did not finish")


def test_pod_alone_finishes_in_its_work_time():
    c = _cluster(cores=1, cpu=0.5, work=10)
    c.bind(0, 0)
    _run_all(c)
    assert c.finish[0] == pytest.approx(10.0)


def test_overcommitted_node_slows_pods_in_proportion():
    # two pods each wanting a full core on a 1-core node: both run at half speed
    c = _cluster(cores=1, cpu=1.0, work=10)
    c.bind(0, 0)
    c.bind(1, 0)
    assert c.slowdowns() == pytest.approx([2.0, 2.0])
    assert c.used()[0, 0] == pytest.approx(1.0)  # measured CPU never exceeds capacity
    _run_all(c)
    assert c.finish[:2] == pytest.approx([20.0, 20.0])


def test_spread_pods_do_not_slow():
    c = _cluster(cores=1, cpu=1.0, work=10)
    c.bind(0, 0)
    c.bind(1, 1)
    _run_all(c)
    assert c.finish[:2] == pytest.approx([10.0, 10.0])


def test_stretch_changes_when_a_neighbour_finishes():
    # pod A (work 10) shares with pod B (work 4): both at half speed until B is done at t=8,
    # by then A did 4 of 10; the remaining 6 at full speed -> A ends at 14.
    sc = tiny(cores=1, cpu=1.0, work=10)
    wl = generate(sc, 0)
    wl.work[1] = 4.0
    c = Cluster(Nodes.from_scenario(sc), wl)
    c.bind(0, 0)
    c.bind(1, 0)
    _run_all(c)
    assert c.finish[1] == pytest.approx(8.0) and c.finish[0] == pytest.approx(14.0)


def test_windowed_observation_is_the_time_average():
    c = _cluster(cores=1, cpu=1.0, work=10, window=20.0)
    c.bind(0, 0)
    c.advance(20.0)  # pod finishes at 10
    c.advance(20.0)
    assert c.t == pytest.approx(20.0)
    assert c.observed()[0, 0] == pytest.approx(0.5)  # busy half of the last 20 s
    assert c.raw_features(c.used())[0, 0] == pytest.approx(0.0)  # idle right now


def test_copy_is_independent():
    c = _cluster(cores=1, cpu=1.0, work=10)
    c.bind(0, 0)
    look = c.copy()
    look.advance(5.0)
    assert c.t == 0.0 and c.remaining[0] == pytest.approx(10.0)
    assert look.remaining[0] == pytest.approx(5.0)
    np.testing.assert_array_equal(c.cum, 0.0)
