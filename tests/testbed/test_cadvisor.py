"""The twin kubelets' cAdvisor pages: a running pod's usage under the kubelet's names and labels, read over HTTP on
loopback from a LiveCluster on a hand-moved clock (the Prometheus side is in test_usage_testbed.py)."""

import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from drs_prom.sim.live_cluster import LiveCluster
from drs_prom.sim.scenario import load_scenario
from drs_prom.testbed.cadvisor import PAUSE_IMAGE, CadvisorExporter, Container

SPEED = 4.0


def scrape(exporter: CadvisorExporter, node: str) -> dict[tuple[str, frozenset], float]:
    """(sample name, labels) -> value of one node's page."""
    with urllib.request.urlopen(f"http://{exporter.address}{exporter.path(node)}", timeout=5) as resp:
        text = resp.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value for f in text_string_to_metric_families(text) for s in f.samples
    }


def labels(pod: str, container: str, image: str, **extra: str) -> frozenset:
    return frozenset({"namespace": "ns", "pod": pod, "container": container, "image": image, **extra}.items())


def test_a_running_pod_is_on_its_nodes_page_with_its_usage_and_gone_when_it_ends():
    now = [0.0]
    live = LiveCluster(load_scenario("drs-paper"), speed=SPEED, clock=lambda: now[0])
    net = live.scenario.profiles["net"].demand.vector()
    live.bind("net-abcde", "worker-1", net, work_seconds=40.0)  # alone on worker-1: it runs at its demand
    live.bind("video-abcde", "worker-2", live.scenario.profiles["video"].demand.vector(), work_seconds=400.0)
    image = "registry.example/net:1"
    with CadvisorExporter(live) as exporter:
        exporter.containers.add(Container("ns", "net-abcde", "work", image))  # video-abcde: not admitted yet
        a = scrape(exporter, "worker-1")
        now[0] = 2.0  # 8 simulated seconds
        b = scrape(exporter, "worker-1")
        own, cgroup = labels("net-abcde", "work", image), labels("net-abcde", "", "")
        sandbox = labels("net-abcde", "POD", PAUSE_IMAGE, interface="eth0")

        def rate(name: str, at: frozenset) -> float:  # per wall second, as Prometheus' rate() reads the counter
            return (b[name, at] - a[name, at]) / 2.0

        assert rate("container_cpu_usage_seconds_total", own) == pytest.approx(net[0])
        assert rate("container_cpu_usage_seconds_total", cgroup) == pytest.approx(net[0])  # the pod's cgroup
        assert b["container_memory_working_set_bytes", own] == pytest.approx(net[1])
        assert rate("container_network_receive_bytes_total", sandbox) == pytest.approx(net[2])
        assert rate("container_network_transmit_bytes_total", sandbox) == pytest.approx(net[3])
        assert rate("container_fs_reads_bytes_total", own) == pytest.approx(net[4])
        assert rate("container_fs_writes_bytes_total", own) == pytest.approx(net[5])
        assert {name for name, _ in b} == {
            "container_cpu_usage_seconds_total",
            "container_memory_working_set_bytes",
            "container_network_receive_bytes_total",
            "container_network_transmit_bytes_total",
            "container_fs_reads_bytes_total",
            "container_fs_writes_bytes_total",
        }
        assert scrape(exporter, "worker-2") == {}  # a pod the kubelet does not know is not on its page
        now[0] = 20.0  # simulated 80 s: the pod ended at 40
        assert scrape(exporter, "worker-1") == {}
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(f"http://{exporter.address}/nodes/nope/metrics/cadvisor", timeout=5)


def test_a_reused_simulator_slot_starts_its_counters_from_zero():
    now = [0.0]
    live = LiveCluster(load_scenario("drs-paper"), speed=1.0, slots=1, clock=lambda: now[0])
    disk = live.scenario.profiles["disk"].demand.vector()
    live.bind("first", "worker-1", disk, work_seconds=5.0)
    now[0] = 10.0
    assert live.pop_finished()[0][0] == "first"
    live.bind("second", "worker-1", disk, work_seconds=5.0)  # the one slot again
    values = live.pod_counters(0)["second"]
    assert values[0] == 0.0 and values[5] == 0.0 and values[1] == pytest.approx(disk[1])
    now[0] = 12.0
    assert live.pod_counters(0)["second"][0] == pytest.approx(2.0 * disk[0])


def test_every_node_is_a_kubelet_target_as_kube_prometheus_stack_labels_it():
    live = LiveCluster(load_scenario("drs-paper"), speed=1.0)
    with CadvisorExporter(live) as exporter:
        cfg = exporter.scrape_config()
    assert cfg["job_name"] == "kubelet" and cfg["honor_labels"] is True
    assert [c["targets"] for c in cfg["static_configs"]] == [[exporter.address]] * 4
    assert [c["labels"] for c in cfg["static_configs"]] == [
        {
            "__metrics_path__": f"/nodes/{n}/metrics/cadvisor",
            "instance": n,
            "node": n,
            "metrics_path": "/metrics/cadvisor",
        }
        for n in live.nodes.names
    ]
