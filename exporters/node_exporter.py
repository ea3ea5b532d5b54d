"""A node_exporter-compatible exporter of the six DRS signals, read at scrape time.

Metric names, types and labels match Prometheus' node_exporter (cpu, meminfo, netdev,
diskstats and uname collectors), so the PromQL in drs_prom/signals/promql.py runs unchanged on
either. ``NodeCollector`` keeps no state: each scrape calls a reader returning
``NodeCounters`` and yields fresh metric families. The default reader is psutil; the
simulator passes its own reader (simulated cumulative counters) and reuses the same
exposition through ``build_registry``/``multi_node_app``.

The process is started by ``drs-prom export`` (drs_prom.cli); this module knows nothing of the CLI.
It imports only psutil, prometheus-client and dependency-free drs_prom modules (errors, devices), so
the exporter image carries no pydantic, numpy or TensorFlow.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, make_wsgi_app, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from drs_prom.devices import DISK_DEVICE_EXCLUDE, NET_DEVICE_EXCLUDE
from drs_prom.errors import ConfigError

log = logging.getLogger(__name__)

DEFAULT_NET_EXCLUDE = NET_DEVICE_EXCLUDE
"""Loopback and virtual interfaces (same default as the PromQL side)."""
DEFAULT_DISK_EXCLUDE = DISK_DEVICE_EXCLUDE
"""Virtual block devices and partitions (node_exporter's diskstats default, plus zram/dm/md/sr)."""

CPU_MODES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
"""The modes node_exporter reports in node_cpu_seconds_total (guest time is separate there)."""

UNAME_LABELS = ("domainname", "machine", "nodename", "release", "sysname", "version")


@dataclass(frozen=True)
class NodeCounters:
    """One reading of a node; ``None`` for a part that could not be read (left out).

    Counters are cumulative since boot (seconds, bytes), as the kernel reports them.
    """

    cpu_seconds: Mapping[str, Mapping[str, float]] | None = None
    """cpu id ("0", "1", ...) -> mode (CPU_MODES) -> seconds."""
    memory_total_bytes: float | None = None
    memory_available_bytes: float | None = None
    net_receive_bytes: Mapping[str, float] | None = None
    """device -> bytes received."""
    net_transmit_bytes: Mapping[str, float] | None = None
    disk_read_bytes: Mapping[str, float] | None = None
    """block device -> bytes read."""
    disk_written_bytes: Mapping[str, float] | None = None
    uname: Mapping[str, str] | None = None
    """sysname, release, version, machine, domainname (nodename comes from the collector)."""


Reader = Callable[[], NodeCounters]


def _try(read: Callable[[], object], what: str) -> object | None:
    try:
        return read()
    except OSError as exc:  # e.g. /proc/diskstats unreadable in a sandbox: leave the metric out
        log.warning("cannot read %s: %s", what, exc)
        return None


def read_psutil() -> NodeCounters:
    """Read the host this exporter runs on through psutil (the /proc files node_exporter reads)."""
    import psutil

    def cpu() -> dict[str, dict[str, float]]:
        return {
            str(i): {m: float(getattr(t, m, 0.0)) for m in CPU_MODES}
            for i, t in enumerate(psutil.cpu_times(percpu=True))
        }

    vm = _try(psutil.virtual_memory, "memory")
    nics = _try(lambda: psutil.net_io_counters(pernic=True, nowrap=True), "network")
    disks = _try(lambda: psutil.disk_io_counters(perdisk=True, nowrap=True), "disks")
    u = os.uname()
    return NodeCounters(
        cpu_seconds=_try(cpu, "cpu"),  # type: ignore[arg-type]
        memory_total_bytes=float(vm.total) if vm is not None else None,  # type: ignore[attr-defined]
        memory_available_bytes=float(vm.available) if vm is not None else None,  # type: ignore[attr-defined]
        net_receive_bytes={d: float(c.bytes_recv) for d, c in nics.items()} if nics is not None else None,  # type: ignore[attr-defined]
        net_transmit_bytes={d: float(c.bytes_sent) for d, c in nics.items()} if nics is not None else None,  # type: ignore[attr-defined]
        disk_read_bytes={d: float(c.read_bytes) for d, c in disks.items()} if disks else None,  # type: ignore[attr-defined]
        disk_written_bytes={d: float(c.write_bytes) for d, c in disks.items()} if disks else None,  # type: ignore[attr-defined]
        uname={
            "sysname": u.sysname,
            "release": u.release,
            "version": u.version,
            "machine": u.machine,
            "domainname": _domainname(),
        },
    )


def _domainname() -> str:
    try:
        with open("/proc/sys/kernel/domainname") as f:
            return f.read().strip() or "(none)"
    except OSError:
        return "(none)"


def default_node_name() -> str:
    """NODE_NAME (set by the DaemonSet from spec.nodeName), else the hostname."""
    return os.environ.get("NODE_NAME") or socket.gethostname()


class NodeCollector(Collector):
    """Exposes one node's ``NodeCounters`` under node_exporter's names, fresh per scrape.

    ``read`` is called once per scrape; an OSError from it drops the whole node for that
    scrape (the HTTP response still succeeds), a ``None`` part drops just that metric.
    ``node_scrape_collector_success{collector}`` says which parts were present.
    """

    def __init__(
        self,
        read: Reader = read_psutil,
        node_name: str | None = None,
        net_exclude: str = DEFAULT_NET_EXCLUDE,
        disk_exclude: str = DEFAULT_DISK_EXCLUDE,
    ) -> None:
        self.read = read
        self.node_name = node_name or default_node_name()
        try:
            self._net_exclude = re.compile(net_exclude) if net_exclude else None
            self._disk_exclude = re.compile(disk_exclude) if disk_exclude else None
        except re.error as exc:
            raise ConfigError(f"invalid device exclude regex: {exc}") from None

    def describe(self) -> list[Metric]:
        return []  # families depend on what each scrape can read

    def collect(self) -> Iterator[Metric]:
        try:
            c = self.read()
        except OSError as exc:
            log.warning("cannot read node counters: %s", exc)
            return
        ok: dict[str, bool] = {}

        ok["cpu"] = c.cpu_seconds is not None
        if c.cpu_seconds is not None:
            fam = CounterMetricFamily(
                "node_cpu_seconds_total", "Seconds the CPUs spent in each mode.", labels=["cpu", "mode"]
            )
            for cpu_id, modes in c.cpu_seconds.items():
                for mode, value in modes.items():
                    fam.add_metric([cpu_id, mode], value)
            yield fam

        ok["meminfo"] = c.memory_total_bytes is not None and c.memory_available_bytes is not None
        if c.memory_total_bytes is not None:
            yield GaugeMetricFamily(
                "node_memory_MemTotal_bytes", "Memory information field MemTotal_bytes.", value=c.memory_total_bytes
            )
        if c.memory_available_bytes is not None:
            yield GaugeMetricFamily(
                "node_memory_MemAvailable_bytes",
                "Memory information field MemAvailable_bytes.",
                value=c.memory_available_bytes,
            )

        ok["netdev"] = c.net_receive_bytes is not None
        yield from self._per_device(
            "node_network_receive_bytes_total",
            "Network device statistic receive_bytes.",
            c.net_receive_bytes,
            self._net_exclude,
        )
        yield from self._per_device(
            "node_network_transmit_bytes_total",
            "Network device statistic transmit_bytes.",
            c.net_transmit_bytes,
            self._net_exclude,
        )

        ok["diskstats"] = c.disk_read_bytes is not None
        yield from self._per_device(
            "node_disk_read_bytes_total",
            "The total number of bytes read successfully.",
            c.disk_read_bytes,
            self._disk_exclude,
        )
        yield from self._per_device(
            "node_disk_written_bytes_total",
            "The total number of bytes written successfully.",
            c.disk_written_bytes,
            self._disk_exclude,
        )

        ok["uname"] = c.uname is not None
        if c.uname is not None:
            labels = {k: str(c.uname.get(k, "")) for k in UNAME_LABELS}
            labels["nodename"] = self.node_name
            uname = GaugeMetricFamily(
                "node_uname_info",
                "Labeled system information as provided by the uname system call.",
                labels=list(UNAME_LABELS),
            )
            uname.add_metric([labels[k] for k in UNAME_LABELS], 1.0)
            yield uname

        collector_success = GaugeMetricFamily(
            "node_scrape_collector_success", "node_exporter: Whether a collector succeeded.", labels=["collector"]
        )
        for name, success in ok.items():
            collector_success.add_metric([name], 1.0 if success else 0.0)
        yield collector_success

    @staticmethod
    def _per_device(
        name: str, doc: str, values: Mapping[str, float] | None, exclude: re.Pattern[str] | None
    ) -> Iterator[Metric]:
        if values is None:
            return
        fam = CounterMetricFamily(name, doc, labels=["device"])
        for device, value in sorted(values.items()):
            if exclude is None or not exclude.fullmatch(device):
                fam.add_metric([device], value)
        yield fam


def build_registry(collector: Collector, process: bool = False) -> CollectorRegistry:
    """A fresh registry holding ``collector`` (and this process's process_* metrics if asked)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    if process:
        ProcessCollector(registry=registry)
    return registry


def multi_node_app(lookup: Callable[[str], CollectorRegistry | None], disable_compression: bool = False) -> Callable:
    """WSGI app serving many simulated nodes: ``GET /nodes/<name>/metrics``.

    ``lookup(name)`` returns that node's registry or None (404). Each node must be its own
    scrape target (distinct ``instance``) so the ``on(instance, job)`` join in promql.py
    maps its series to its nodename; point Prometheus at the paths via ``__metrics_path__``.
    ``disable_compression`` as in prometheus_client's ``make_wsgi_app``.
    """
    apps: dict[int, Callable] = {}

    def app(environ: dict, start_response: Callable) -> list[bytes]:
        parts = environ.get("PATH_INFO", "").strip("/").split("/")
        if len(parts) == 3 and parts[0] == "nodes" and parts[2] == "metrics":
            registry = lookup(parts[1])
            if registry is not None:
                inner = apps.setdefault(id(registry), make_wsgi_app(registry, disable_compression=disable_compression))
                environ = dict(environ, PATH_INFO="/metrics")
                return inner(environ, start_response)
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"unknown node\n"]

    return app


def parse_listen(listen: str) -> tuple[str, int]:
    """``host:port`` (``:9105`` and ``[::]:9105`` too) -> (host, port); ConfigError otherwise."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"--listen must be host:port, got {listen!r}")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


def serve(
    listen: str,
    node_name: str | None = None,
    net_exclude: str = DEFAULT_NET_EXCLUDE,
    disk_exclude: str = DEFAULT_DISK_EXCLUDE,
    stop: threading.Event | None = None,
    read: Reader = read_psutil,
) -> None:
    """Serve /metrics until SIGTERM/SIGINT (or ``stop`` is set), then shut down cleanly."""
    host, port = parse_listen(listen)
    collector = NodeCollector(read, node_name, net_exclude, disk_exclude)
    registry = build_registry(collector, process=True)
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    try:
        httpd, thread = start_http_server(port, host, registry=registry)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {listen}: {exc.strerror or exc}") from None
    log.info("drs node exporter for node %s on http://%s:%d/metrics", collector.node_name, host, httpd.server_port)
    try:
        while not stop.wait(1.0):
            pass
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
