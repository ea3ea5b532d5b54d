"""Usage that moves after placement: per-pod usage profiles over time, and evictions, in the simulated cluster."""

from __future__ import annotations

import numpy as np
import pytest

from drs_prom.errors import ConfigError
from drs_prom.sim.cluster import Cluster, Nodes
from drs_prom.sim.scenario import load_scenario, parse_scenario
from drs_prom.sim.workload import generate

STEP = """
    drift:
      steps: [{at_seconds: 50, share: 1.0, factor: 3.0, signals: [cpu]}]
"""


def drifting(extra: str = STEP):
    return parse_scenario(
        f"""
name: drifting
metric_window_seconds: 0
nodes:
  - {{name: n, count: 1, cpu_cores: 4, mem_bytes: 1Gi, net_rx_bytes: 1Mi, net_tx_bytes: 1Mi, disk_read_bytes: 1Mi,
      disk_write_bytes: 1Mi, idle: {{cpu: 0, mem: 0}}}}
profiles:
  job:
    demand: {{cpu_cores: 0.5, mem_bytes: 64Mi}}
    requests: {{cpu_m: 100, mem_bytes: 64Mi}}
    work_seconds: 100
    work_jitter: 0
{extra}
arrivals:
  - {{pods: 2, rate_per_second: 100, process: uniform}}
"""
    )


def run_to(cluster: Cluster, t: float) -> None:
    while cluster.t < t - 1e-9:
        cluster.advance(t)


def test_a_step_changes_a_running_pods_usage_where_it_runs():
    sc = drifting()
    wl = generate(sc, 0)
    assert wl.usage_times is not None and wl.usage_times.tolist() == [50.0]
    assert wl.usage_factor[:, 0, 0].tolist() == [1.0, 1.0] and wl.usage_factor[:, 1, 0].tolist() == [3.0, 3.0]
    c = Cluster(Nodes.from_scenario(sc), wl)
    c.bind(0, 0)
    c.bind(1, 0)
    run_to(c, 40.0)
    assert c.used()[0, 0] == pytest.approx(1.0)  # two pods at 0.5 core
    run_to(c, 60.0)
    assert c.used()[0, 0] == pytest.approx(3.0)  # tripled at 50 s, under their placement
    assert c.pod_cum[0, 0] == pytest.approx(0.5 * 50 + 1.5 * 10)


def test_a_daily_cycle_is_piecewise_constant_and_groups_share_a_phase():
    sc = drifting("    drift: {daily_amplitude: 0.5, day_seconds: 400, phases: 1, resolution_seconds: 100}\n")
    wl = generate(sc, 0)
    assert wl.usage_times.tolist() == [100.0, 200.0]  # to twice the contention-free span
    f = wl.usage_factor[:, :, 0]
    assert np.allclose(f[0], f[1])  # one group: in phase
    assert f.min() >= 0.5 - 1e-9 and f.max() <= 1.5 + 1e-9 and np.ptp(f[0]) > 0.3


def test_profiles_without_drift_leave_the_workload_exactly_as_before():
    for name in ("drs-paper", "tenants", "drifting-owners"):
        wl = generate(load_scenario(name), 3)
        assert wl.usage_times is None and wl.usage_factor is None


def test_background_pods_keep_their_usage_beside_drifting_ones():
    wl = generate(load_scenario("drift-neighbours").truncated(60), 0)
    assert wl.usage_factor is None or np.all(wl.usage_factor[wl.pinned >= 0] == 1.0)
    wl = generate(load_scenario("drift-mixed").truncated(150), 1)
    assert wl.usage_factor is not None and len(wl.usage_factor) == len(wl)
    assert np.all(wl.usage_factor[wl.pinned >= 0] == 1.0)


def test_an_evicted_pod_releases_its_node_and_does_its_work_left_plus_the_penalty():
    sc = drifting("")
    c = Cluster(Nodes.from_scenario(sc), generate(sc, 0))
    c.bind(0, 0)
    c.bind(1, 0)
    run_to(c, 30.0)
    assert c.evict(0, extra_seconds=20.0) == 0
    assert c.node_of[0] == -1 and c.pod_count[0] == 1 and c.req_cpu_m[0] == 100
    assert c.remaining[0] == pytest.approx(70.0 + 20.0) and np.isnan(c.start[0]) and c.pod_cum[0].sum() == 0
    c.evict(1, extra_seconds=5.0, lose_progress=True)
    assert c.remaining[1] == pytest.approx(100.0 + 5.0) and not len(c.running)
    with pytest.raises(ValueError, match="not running"):
        c.evict(1)


def test_drift_sections_are_validated():
    with pytest.raises(ConfigError, match="unknown signal 'gpu'"):
        drifting("    drift: {steps: [{at_seconds: 5, factor: 2, signals: [gpu]}]}\n")
    with pytest.raises(ConfigError, match="state"):
        drifting("    restart: {state: maybe}\n")
