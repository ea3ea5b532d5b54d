"""The retraining twin (drs_prom.sim.twin) rebuilt from what a simulated cluster left behind: journal, pod ends, metrics."""

from __future__ import annotations

import numpy as np
import pytest

from drs_prom.config import Normalisation
from drs_prom.registry import make_policy
from drs_prom.sim.env import TOLD, SchedulingEnv
from drs_prom.sim.scenario import Scenario
from drs_prom.sim.trace import journal_rows, run_sim
from drs_prom.sim.twin import SET_LABEL, TwinError, link_capacity, twin_scenario
from tests.specs import SPEC

NORM = Normalisation(
    net_rx_full_bytes=100e6, net_tx_full_bytes=100e6, disk_read_full_bytes=200e6, disk_write_full_bytes=200e6
)


def cluster() -> Scenario:
    """Two big ssd nodes whose disk saturates at 150 MB/s, one small node; ``db`` may only run on ssd."""
    node = {"net_rx_bytes": 100e6, "net_tx_bytes": 100e6, "disk_write_bytes": 200e6}
    return Scenario.model_validate(
        {
            "name": "own",
            "normalisation": NORM.model_dump(),
            "metric_window_seconds": 10.0,
            "nodes": [
                {
                    "name": "big",
                    "count": 2,
                    "cpu_cores": 8,
                    "mem_bytes": 32 * 2**30,
                    "disk_read_bytes": 150e6,
                    "labels": {"disk": "ssd"},
                    **node,
                },
                {"name": "small", "count": 1, "cpu_cores": 4, "mem_bytes": 8 * 2**30, "disk_read_bytes": 200e6, **node},
            ],
            "profiles": {
                "web": {
                    "demand": {"cpu_cores": 1.0, "mem_bytes": 2**30, "net_tx_bytes": 20e6},
                    "requests": {"cpu_m": 500, "mem_bytes": 2**29},
                    "work_seconds": 60,
                    "weight": 2,
                },
                "db": {
                    "demand": {"cpu_cores": 0.5, "mem_bytes": 2 * 2**30, "disk_read_bytes": 80e6},
                    "requests": {"cpu_m": 1000, "mem_bytes": 2**31},
                    "work_seconds": 120,
                    "node_selector": {"disk": "ssd"},
                },
            },
            "arrivals": [
                {"pods": 120, "rate_per_second": 0.2},
                {"pods": 60, "rate_per_second": 0.1, "gap_seconds": 1500, "mix": {"db": 1.0}},
            ],
        }
    )


@pytest.fixture(scope="module")
def history():
    sc = cluster()
    run = run_sim(
        sc, make_policy("least-loaded", SPEC, 0), seed=4, information=TOLD
    )  # told: the journal holds each profile's demand
    run.epoch = 1.7e9
    return sc, run


def test_the_twin_has_the_clusters_nodes_owners_and_arrivals(history):
    sc, run = history
    rows = journal_rows(run, "least-loaded")
    twin = twin_scenario(rows, run.pod_ends(), NORM, sc.metric_window_seconds, history=run.history(5.0, 10.0))
    sizes = sorted((n.cpu_cores, n.mem_bytes) for n in twin.nodes for _ in range(n.count))
    assert sizes == [(4.0, 8 * 2**30), (8.0, 32 * 2**30), (8.0, 32 * 2**30)]
    assert twin.n_pods == len(rows) == 180
    web, db = twin.profiles["job-web"], twin.profiles["job-db"]
    # demand and requests are what the journal recorded: the profile's own
    assert web.demand.vector() == sc.profiles["web"].demand.vector() and db.requests == sc.profiles["db"].requests
    # work is the median run time (bind to end): at least the work alone, longer under contention
    ends = run.pod_ends()
    for prof, owner, true in ((web, "Job/web", 60.0), (db, "Job/db", 120.0)):
        runs = [ends[r.pod_uid] - r.ts for r in rows if r.owner == owner]
        assert prof.work_seconds == pytest.approx(float(np.median(runs))) and prof.work_seconds >= true * 0.95
    # db never was feasible on the small node: its selector's label is on the big nodes only
    assert not web.node_selector and list(db.node_selector) == [next(iter(db.node_selector))]
    label = next(iter(db.node_selector))
    assert label.startswith(SET_LABEL)
    assert {(n.cpu_cores, label in n.labels) for n in twin.nodes} == {(8.0, True), (4.0, False)}
    # the quiet 1500 s between the two bursts is kept (to the 600 s window), and the second phase is db only
    assert any(p.gap_seconds >= 600 for p in twin.arrivals)
    assert set(twin.arrivals[-1].mix or {}) == {"job-db"}
    # the big nodes' disk read plateaued at its capacity in the history; the small one's never did
    big = next(n for n in twin.nodes if n.cpu_cores == 8.0)
    small = next(n for n in twin.nodes if n.cpu_cores == 4.0)
    assert big.disk_read_bytes == pytest.approx(150e6, rel=0.02) and small.disk_read_bytes == 200e6
    # the twin is a scenario like any other: every pod of it is scheduled and completes
    result = SchedulingEnv(twin, seed=1).run(make_policy("capacity-balanced", SPEC, 0), seed=1)
    assert result.decisions == twin.n_pods


def test_max_pods_keeps_the_newest_workload(history):
    _sc, run = history
    twin = twin_scenario(journal_rows(run, "x"), run.pod_ends(), NORM, 10.0, max_pods=50)
    assert twin.n_pods == 50 and set(twin.profiles) == {"job-db"}  # the last 50 arrivals were all db


def test_link_capacity_reads_a_plateau_as_saturation_and_otherwise_keeps_the_scale():
    t = np.linspace(0, 20, 400)
    values = np.zeros((400, 6))
    values[:, 2] = np.minimum(50e6 * (1 + np.sin(t)), 60e6)  # rx flat at 60 MB/s for much of the time
    values[:, 3] = 60e6 * np.abs(np.sin(t)) ** 16  # tx peaks sharply at 60 MB/s: no plateau
    values[:, 4] = 500e6 * np.abs(np.sin(t)) ** 8  # disk read spikes above the scale: the highest rate seen
    cap = link_capacity(values, np.array([100e6, 100e6, 200e6, 200e6]))
    assert cap[0] == pytest.approx(60e6) and cap[1] == 100e6 and cap[2] == pytest.approx(values[:, 4].max())
    assert cap[3] == 200e6


def test_a_journal_that_cannot_make_a_twin_says_why(history):
    _sc, run = history
    rows = journal_rows(run, "x")
    with pytest.raises(TwinError, match="at least 20 bound decisions"):
        twin_scenario(rows[:5], run.pod_ends(), NORM, 10.0)
    with pytest.raises(TwinError, match="no pod ends"):
        twin_scenario(rows, {}, NORM, 10.0)
    with pytest.raises(TwinError, match="schema 1"):
        twin_scenario(journal_rows(run, "x", schema=1), run.pod_ends(), NORM, 10.0)
