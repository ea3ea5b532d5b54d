"""A real Prometheus scrapes the simulated cluster; the production PrometheusSource reads it back."""

import numpy as np
import pytest

from drs_prom.features import FEATURES
from drs_prom.signals.prometheus import PrometheusSource
from drs_prom.sim.live_cluster import LiveCluster, SimExporter
from drs_prom.sim.scenario import load_scenario
from tests.prom.fixtures import start_prometheus, wait_until
from tests.specs import SPEC


def test_live_cluster_counts_monotonic_totals_consistent_with_rates():
    now = [0.0]
    live = LiveCluster(load_scenario("drs-paper"), speed=4.0, clock=lambda: now[0])
    live.bind_profile("net-1", "worker-1", "net")  # 50 s of work at full speed
    a = live.counters(0)
    now[0] = 2.0  # 2 wall seconds = 8 simulated seconds
    b = live.counters(0)
    rate_rx = (b.net_receive_bytes["eth0"] - a.net_receive_bytes["eth0"]) / 2.0
    assert rate_rx == pytest.approx(live.scenario.profiles["net"].demand.net_rx_bytes)  # per wall second
    idle = [(b.cpu_seconds[c]["idle"] - a.cpu_seconds[c]["idle"]) / 2.0 for c in b.cpu_seconds]
    assert 1 - np.mean(idle) == pytest.approx(live.features()[0, 0])
    now[0] = 100.0  # the pod finished at simulated 50 s; totals stop growing but never fall
    c = live.counters(0)
    assert c.net_receive_bytes["eth0"] == pytest.approx(live.scenario.profiles["net"].demand.net_rx_bytes * 50 / 4.0)
    assert live.running() == {}


def test_replay_reproduces_the_simulated_episode():
    from drs_prom.registry import make_policy

    sc = load_scenario("drs-paper").truncated(10)
    now = [0.0]
    live = LiveCluster.replay(sc, make_policy("round-robin", SPEC), seed=0, speed=1.0, clock=lambda: now[0])
    now[0] = 1e6
    assert live.sim_time == pytest.approx(1e6)
    wl_finish = live.cluster.finish[:10]
    assert np.nanmax(wl_finish) == pytest.approx(live.expected.makespan + 0.0, rel=1e-9)


def test_a_pods_usage_follows_its_profile_over_the_clusters_usage_changes():
    now = [0.0]
    live = LiveCluster(load_scenario("drs-paper"), speed=1.0, clock=lambda: now[0], usage_times=np.array([10.0]))
    demand = np.array([1.0, 2**30, 0, 0, 0, 0])
    steps = np.ones((2, len(FEATURES)))
    steps[1] = 2.5  # from t = 10 on, two and a half times the demand on every signal
    live.bind("drifts", "worker-1", demand, work_seconds=1e6, factor=steps)
    live.bind("steady", "worker-2", demand, work_seconds=1e6)
    now[0] = 20.0
    drifts, steady = live.pod_counters(0)["drifts"], live.pod_counters(1)["steady"]
    assert drifts[0] == pytest.approx(10 * 1.0 + 10 * 2.5) and drifts[1] == pytest.approx(2.5 * 2**30)
    assert steady[0] == pytest.approx(20.0) and steady[1] == pytest.approx(2**30)


def test_replay_runs_a_drifting_workload_with_its_usage_profile():
    from drs_prom.registry import make_policy

    sc = load_scenario("drift-steps").truncated(60)
    now = [0.0]
    live = LiveCluster.replay(sc, make_policy("round-robin", SPEC), seed=0, speed=1.0, clock=lambda: now[0])
    wl = live.cluster.workload
    assert wl.usage_times is not None and wl.usage_factor is not None
    assert any(b.factor is not None and not np.all(b.factor == 1.0) for b in live._schedule)
    now[0] = 1e7
    assert live.sim_time == pytest.approx(1e7)
    assert np.nanmax(live.cluster.finish[:60]) == pytest.approx(live.expected.makespan, rel=1e-9)


@pytest.mark.integration
@pytest.mark.parametrize(("mode", "speed"), [("ports", 1.0), ("paths", 10.0)])
def test_real_prometheus_scrapes_simulated_nodes(tmp_path, mode, speed):
    sc = load_scenario("drs-paper")
    live = LiveCluster(sc, speed=speed)
    for name, node, prof in (
        ("net-1", "worker-1", "net"),
        ("disk-1", "worker-2", "disk"),
        ("video-1", "worker-3", "video"),
    ):
        p = sc.profiles[prof]
        live.bind(name, node, p.demand.vector(), work_seconds=10_000, cpu_m=500, mem_bytes=2**29)
    with SimExporter(live, mode=mode) as exporter:
        prom = start_prometheus(tmp_path, extra_config={"scrape_configs": [exporter.scrape_config("node")]})
        try:
            source = PrometheusSource.from_url(prom.url, window="10s")
            wait_until(lambda: sum(v == 1.0 for v in prom.targets_up().values()) == 4, 30, "4 simulated targets up")

            def complete():
                snap = source.snapshot()
                fresh = snap.fresh()
                return snap if len(fresh) == 4 and fresh["net_rx"].loc["worker-1"] > 0 else None

            snap = wait_until(complete, 30, "rates for all 4 simulated nodes")
            # let the 10 s window fill with samples at constant rates: the exporter reads the wall clock when it is
            # scraped, a few ms after Prometheus stamps the scrape, so a longer window keeps that jitter small
            wait_until(
                lambda: (
                    len(prom.query('node_network_receive_bytes_total{instance="worker-1"}[12s]')[0]["values"]) >= 12
                ),
                40,
                "12 s of samples",
            )
            snap = source.snapshot()
            expected = live.features()
            got = snap.features.loc[list(live.nodes.names), list(FEATURES)].to_numpy()
            # scrape timestamps jitter by milliseconds against the counters, so allow a little slack:
            # fractions within 0.01, byte rates within 3%
            np.testing.assert_allclose(got[:, :2], expected[:, :2], atol=0.01)
            np.testing.assert_allclose(got[:, 2:], expected[:, 2:], rtol=0.03, atol=1.0)
            assert sorted(snap.features.index) == ["worker-1", "worker-2", "worker-3", "worker-4"]
            assert prom.query("sum(resets(node_network_receive_bytes_total[1m]))")[0]["value"][1] == "0"
            cap = source.node_capacity()
            assert cap.loc["worker-1", "cpu_cores"] == 4 and cap.loc["worker-1", "mem_bytes"] == 16 * 2**30
            source.close()
        finally:
            prom.stop()


def test_serve_scenario_prints_a_scrape_config_and_stops_on_request():
    import threading
    import urllib.request

    import yaml

    from drs_prom.registry import make_policy
    from drs_prom.sim.live_cluster import serve_scenario

    lines: list[str] = []
    stop = threading.Event()
    sc = load_scenario("drs-paper").truncated(5)
    thread = threading.Thread(
        target=serve_scenario,
        args=(sc, make_policy("round-robin", SPEC)),
        kwargs={"speed": 50.0, "mode": "paths", "stop": stop, "echo": lines.append},
    )
    thread.start()
    try:
        wait_until(lambda: len(lines) >= 2, 30, "the scrape config")
        job = yaml.safe_load(lines[1])["scrape_configs"][0]
        first = job["static_configs"][0]
        url = f"http://{first['targets'][0]}{first['labels']['__metrics_path__']}"
        body = urllib.request.urlopen(url, timeout=5).read().decode()
        assert 'nodename="worker-1"' in body and "node_network_receive_bytes_total" in body
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()


@pytest.mark.parametrize("mode", ["ports", "paths"])
def test_pages_go_out_uncompressed_even_when_gzip_is_accepted(mode):
    """Prometheus asks every target for gzip; on this host compressing each page at every scrape only takes CPU
    from the scheduler under test, so the simulated exporters answer in plain text."""
    import urllib.request

    live = LiveCluster(load_scenario("drs-paper"), speed=1.0)
    with SimExporter(live, mode=mode) as exporter:
        name = live.nodes.names[0]
        url = f"http://{exporter.targets[name]}{exporter.paths[name]}"
        req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.headers.get("Content-Encoding") is None
            body = resp.read().decode()
    assert f'nodename="{name}"' in body
    assert "node_cpu_seconds_total" in body


def test_an_evicted_pod_stops_at_once_and_says_the_work_it_had_left():
    now = [0.0]
    live = LiveCluster(load_scenario("drs-paper"), speed=1.0, slots=2, clock=lambda: now[0])
    demand = np.array([1.0, 2**30, 0, 0, 0, 0])
    idle = live.counters(0).memory_available_bytes
    live.bind("moved", "worker-1", demand, work_seconds=100.0)
    now[0] = 30.0
    assert live.counters(0).memory_available_bytes == pytest.approx(idle - 2**30)
    assert live.evict("moved") == pytest.approx(70.0)  # alone on its node: full speed for 30 s
    assert live.running() == {} and live.pod_counters(0) == {}
    assert live.counters(0).memory_available_bytes == pytest.approx(idle)  # it holds nothing any more
    now[0] = 60.0
    assert live.pop_finished() == []  # an eviction is not a completion
    assert live.evict("moved") is None and live.evict("never-bound") is None
    live.bind("a", "worker-1", demand, work_seconds=10.0)
    live.bind("b", "worker-1", demand, work_seconds=10.0)  # the evicted pod's slot is free again
    assert set(live.running()) == {"a", "b"}
