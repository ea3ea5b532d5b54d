"""Exporter unit tests: fresh registry per test, values read back with get_sample_value."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from wsgiref.util import setup_testing_defaults

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from drs_prom.errors import ConfigError
from exporters.node_exporter import (
    CPU_MODES,
    NodeCollector,
    NodeCounters,
    build_registry,
    multi_node_app,
    parse_listen,
    read_psutil,
    serve,
)
from tests.prom.fixtures import free_port, wait_until

COUNTERS = NodeCounters(
    cpu_seconds={"0": {"idle": 100.0, "user": 20.0}, "1": {"idle": 90.0, "user": 30.0}},
    memory_total_bytes=8e9,
    memory_available_bytes=6e9,
    net_receive_bytes={"eth0": 1000.0, "lo": 5e9, "veth12ab": 7.0},
    net_transmit_bytes={"eth0": 2000.0, "lo": 5e9},
    disk_read_bytes={"sda": 4096.0, "sda1": 4096.0, "loop0": 1.0, "nvme0n1": 512.0},
    disk_written_bytes={"sda": 8192.0, "nvme0n1": 1024.0, "nvme0n1p2": 1024.0},
    uname={"sysname": "Linux", "release": "6.1", "version": "#1", "machine": "x86_64", "domainname": "(none)"},
)


def registry_for(counters: NodeCounters | None = None, **kw) -> CollectorRegistry:
    return build_registry(NodeCollector(lambda: counters or COUNTERS, node_name="node-a", **kw))


def test_names_types_and_labels_match_node_exporter():
    reg = registry_for()
    assert reg.get_sample_value("node_cpu_seconds_total", {"cpu": "1", "mode": "idle"}) == 90.0
    assert reg.get_sample_value("node_memory_MemTotal_bytes") == 8e9
    assert reg.get_sample_value("node_memory_MemAvailable_bytes") == 6e9
    assert reg.get_sample_value("node_network_receive_bytes_total", {"device": "eth0"}) == 1000.0
    assert reg.get_sample_value("node_network_transmit_bytes_total", {"device": "eth0"}) == 2000.0
    assert reg.get_sample_value("node_disk_read_bytes_total", {"device": "sda"}) == 4096.0
    assert reg.get_sample_value("node_disk_written_bytes_total", {"device": "nvme0n1"}) == 1024.0
    uname = {
        "domainname": "(none)",
        "machine": "x86_64",
        "nodename": "node-a",
        "release": "6.1",
        "sysname": "Linux",
        "version": "#1",
    }
    assert reg.get_sample_value("node_uname_info", uname) == 1.0
    types = {f.name: f.type for f in text_string_to_metric_families(generate_latest(reg).decode())}
    assert types["node_cpu_seconds"] == "counter"  # parser strips _total from counter family names
    assert types["node_network_receive_bytes"] == "counter"
    assert types["node_disk_written_bytes"] == "counter"
    assert types["node_memory_MemTotal_bytes"] == "gauge"
    assert types["node_uname_info"] == "gauge"
    text = generate_latest(reg).decode()
    assert "# TYPE node_cpu_seconds_total counter" in text  # exposition keeps node_exporter's name
    assert "_created" not in text


def test_default_excludes_drop_loopback_virtual_and_partitions():
    reg = registry_for()
    for dev in ("lo", "veth12ab"):
        assert reg.get_sample_value("node_network_receive_bytes_total", {"device": dev}) is None
    for dev in ("sda1", "loop0"):
        assert reg.get_sample_value("node_disk_read_bytes_total", {"device": dev}) is None
    assert reg.get_sample_value("node_disk_written_bytes_total", {"device": "nvme0n1p2"}) is None


def test_excludes_are_configurable():
    reg = registry_for(net_exclude="^eth0$", disk_exclude="")
    assert reg.get_sample_value("node_network_receive_bytes_total", {"device": "eth0"}) is None
    assert reg.get_sample_value("node_network_receive_bytes_total", {"device": "lo"}) == 5e9
    assert reg.get_sample_value("node_disk_read_bytes_total", {"device": "sda1"}) == 4096.0
    with pytest.raises(ConfigError, match="regex"):
        NodeCollector(lambda: COUNTERS, net_exclude="(")


def test_missing_part_leaves_only_that_metric_out():
    partial = NodeCounters(cpu_seconds=COUNTERS.cpu_seconds, uname=COUNTERS.uname)
    reg = registry_for(partial)
    assert reg.get_sample_value("node_cpu_seconds_total", {"cpu": "0", "mode": "idle"}) == 100.0
    assert reg.get_sample_value("node_memory_MemTotal_bytes") is None
    assert reg.get_sample_value("node_scrape_collector_success", {"collector": "cpu"}) == 1.0
    assert reg.get_sample_value("node_scrape_collector_success", {"collector": "diskstats"}) == 0.0


def test_oserror_from_psutil_leaves_that_metric_out(monkeypatch):
    # A real kernel cannot be made to fail /proc/diskstats on demand: fake just that read.
    import psutil

    def broken(*a, **k):
        raise PermissionError("diskstats unreadable")

    monkeypatch.setattr(psutil, "disk_io_counters", broken)
    counters = read_psutil()
    assert counters.disk_read_bytes is None
    reg = build_registry(NodeCollector(lambda: counters, node_name="n"))
    assert reg.get_sample_value("node_memory_MemTotal_bytes") > 0
    assert reg.get_sample_value("node_scrape_collector_success", {"collector": "diskstats"}) == 0.0
    assert "node_disk_read_bytes_total" not in generate_latest(reg).decode()


def test_oserror_from_reader_fails_only_this_collector():
    def dead() -> NodeCounters:
        raise OSError("gone")

    reg = build_registry(NodeCollector(dead, node_name="n"), process=True)
    text = generate_latest(reg).decode()  # the scrape still succeeds
    assert "node_uname_info" not in text
    assert "process_cpu_seconds_total" in text


def test_psutil_reader_reads_this_machine_fresh_per_scrape():
    reg = build_registry(NodeCollector(node_name="me"))

    def cpu_total() -> float:  # all modes together grow with wall time, busy or idle
        return sum(
            reg.get_sample_value("node_cpu_seconds_total", {"cpu": str(i), "mode": m})
            for i in range(os.cpu_count())
            for m in CPU_MODES
        )

    first = cpu_total()
    time.sleep(0.3)
    assert cpu_total() > first  # counters are read at scrape time, not cached
    assert set(read_psutil().cpu_seconds["0"]) == set(CPU_MODES)
    total = reg.get_sample_value("node_memory_MemTotal_bytes")
    assert total > reg.get_sample_value("node_memory_MemAvailable_bytes") > 0
    assert reg.get_sample_value("node_uname_info", {**_uname_labels(reg), "nodename": "me"}) == 1.0


def _uname_labels(reg: CollectorRegistry) -> dict[str, str]:
    for fam in reg.collect():
        if fam.name == "node_uname_info":
            return dict(fam.samples[0].labels)
    raise AssertionError("no node_uname_info")


def test_node_name_defaults_to_NODE_NAME(monkeypatch):
    monkeypatch.setenv("NODE_NAME", "from-env")
    assert NodeCollector(lambda: COUNTERS).node_name == "from-env"


def test_multi_node_app_serves_each_node_on_its_path():
    regs = {"a": registry_for(), "b": build_registry(NodeCollector(lambda: COUNTERS, node_name="node-b"))}
    app = multi_node_app(regs.get)

    def get(path: str) -> tuple[str, bytes]:
        env: dict = {"PATH_INFO": path}
        setup_testing_defaults(env)
        env["PATH_INFO"] = path
        status: list[str] = []
        body = b"".join(app(env, lambda s, h: status.append(s)))
        return status[0], body

    status, body = get("/nodes/b/metrics")
    assert status.startswith("200") and b'nodename="node-b"' in body
    assert get("/nodes/zzz/metrics")[0].startswith("404")
    assert get("/metrics")[0].startswith("404")


@pytest.mark.parametrize("bad", ["9105", "host:", "host:99999", "host:x"])
def test_parse_listen_rejects_bad_values(bad):
    with pytest.raises(ConfigError, match="host:port"):
        parse_listen(bad)


def test_parse_listen_forms():
    assert parse_listen("0.0.0.0:9105") == ("0.0.0.0", 9105)
    assert parse_listen(":9105") == ("0.0.0.0", 9105)
    assert parse_listen("[::]:9105") == ("::", 9105)


def test_serve_stops_when_asked():
    port = free_port()
    stop = threading.Event()
    t = threading.Thread(target=serve, args=(f"127.0.0.1:{port}", "x"), kwargs={"stop": stop, "read": lambda: COUNTERS})
    t.start()
    try:
        body = wait_until(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read(), 10, "exporter"
        )
        assert b'node_uname_info{domainname="(none)"' in body
    finally:
        stop.set()
        t.join(timeout=10)
    assert not t.is_alive()


@pytest.mark.integration
def test_export_command_exits_cleanly_on_sigterm(tmp_path):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "drs_prom", "export", "--listen", f"127.0.0.1:{port}"],
        env=dict(os.environ, NODE_NAME="sigterm-node"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        body = wait_until(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read(), 20, "exporter"
        )
        assert b'nodename="sigterm-node"' in body
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)


def test_export_command_reports_port_in_use():
    with __import__("socket").socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "drs_prom", "export", "--listen", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1].startswith(f"drs-prom: error: cannot listen on 127.0.0.1:{port}")
