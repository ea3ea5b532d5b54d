"""The twin kubelets' ``/metrics/cadvisor``: every running pod's usage under the kubelet's cAdvisor names.

A real kubelet serves, for the pods on its node, what cAdvisor measures of their cgroups; Prometheus keeps it and a
scheduler that estimates usage reads it back (drs_prom.usage). Here every node's page is rendered at scrape time from
the simulator's per-pod integrals (``LiveCluster.pod_counters``: ``Cluster.pod_cum`` divided by the speed, so
``rate()`` over wall time is the simulated usage, as for the node counters):

* per container (``namespace``, ``pod``, ``container`` as in the manifest, ``image`` the container's):
  ``container_cpu_usage_seconds_total`` (core-seconds), ``container_memory_working_set_bytes`` (what the pod
  holds now), ``container_fs_reads_bytes_total`` and ``container_fs_writes_bytes_total``;
* per pod, on its sandbox as cAdvisor reports network (``container="POD"``, the pause image, ``interface="eth0"``):
  ``container_network_receive_bytes_total`` and ``container_network_transmit_bytes_total``;
* the pod's own cgroup, as cAdvisor also reports it (``container=""``, ``image=""``), for CPU and memory: what
  queries must leave out (``container!=""`` or ``image!=""``) not to count a pod twice.

A pod's series are on the page while it runs and gone once it ends, as a kubelet stops reporting a removed container;
Prometheus keeps what it scraped. One port serves every node at ``/nodes/<node>/metrics/cadvisor`` (the path a
kubelet's page has through the apiserver proxy is ``/api/v1/nodes/<node>/proxy/metrics/cadvisor``), each node its own
target; ``scrape_config`` labels them as kube-prometheus-stack's kubelet ServiceMonitor does (``job="kubelet"``,
``metrics_path="/metrics/cadvisor"``, ``node``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from drs_prom.errors import ConfigError
from drs_prom.sim.live_cluster import LiveCluster
from drs_prom.sim.page_server import serve_pages
from exporters.node_exporter import build_registry

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
"""The pod sandbox's image (the kubelet's ``--pod-infra-container-image``), on the pod-level network series."""
SANDBOX_CONTAINER = "POD"
INTERFACE = "eth0"
KUBELET_JOB = "kubelet"
METRICS_PATH = "/metrics/cadvisor"
CONTAINER_LABELS = ("namespace", "pod", "container", "image")
NETWORK_LABELS = (*CONTAINER_LABELS, "interface")
_PATH = re.compile(r"/nodes/([^/]+)/metrics/cadvisor")


@dataclass(frozen=True)
class Container:
    """The one container of a running pod, as its manifest names it."""

    namespace: str
    pod: str
    name: str
    image: str


class Containers:
    """Pod name -> its container, for the pods the twin kubelet admitted and that have not ended (thread-safe)."""

    def __init__(self) -> None:
        self._by_pod: dict[str, Container] = {}
        self._lock = threading.Lock()

    def add(self, container: Container) -> None:
        with self._lock:
            self._by_pod[container.pod] = container

    def remove(self, pod: str) -> None:
        with self._lock:
            self._by_pod.pop(pod, None)

    def get(self, pod: str) -> Container | None:
        with self._lock:
            return self._by_pod.get(pod)


class CadvisorCollector(Collector):
    """One node's cAdvisor page, fresh per scrape. ``read()``: the node's running pods -> their readings in FEATURES
    order (``LiveCluster.pod_counters``); a pod ``containers`` does not know (not admitted yet, or just ended) is
    left out."""

    def __init__(self, read: Callable[[], Mapping[str, np.ndarray]], containers: Containers) -> None:
        self.read, self.containers = read, containers

    def describe(self) -> list[Metric]:
        return []  # the families depend on the pods running at each scrape

    def collect(self) -> Iterator[Metric]:
        running = [(c, v) for pod, v in self.read().items() if (c := self.containers.get(pod)) is not None]
        if not running:
            return
        cpu = CounterMetricFamily(
            "container_cpu_usage_seconds_total", "Cumulative cpu time consumed in seconds.", labels=CONTAINER_LABELS
        )
        mem = GaugeMetricFamily(
            "container_memory_working_set_bytes", "Current working set in bytes.", labels=CONTAINER_LABELS
        )
        reads = CounterMetricFamily(
            "container_fs_reads_bytes_total", "Cumulative count of bytes read.", labels=CONTAINER_LABELS
        )
        writes = CounterMetricFamily(
            "container_fs_writes_bytes_total", "Cumulative count of bytes written.", labels=CONTAINER_LABELS
        )
        rx = CounterMetricFamily(
            "container_network_receive_bytes_total", "Cumulative count of bytes received.", labels=NETWORK_LABELS
        )
        tx = CounterMetricFamily(
            "container_network_transmit_bytes_total", "Cumulative count of bytes transmitted.", labels=NETWORK_LABELS
        )
        for c, v in running:
            own = [c.namespace, c.pod, c.name, c.image]
            cgroup = [c.namespace, c.pod, "", ""]  # the pod's cgroup: its one container and the idle sandbox
            sandbox = [c.namespace, c.pod, SANDBOX_CONTAINER, PAUSE_IMAGE, INTERFACE]
            for labels in (own, cgroup):
                cpu.add_metric(labels, float(v[0]))
                mem.add_metric(labels, float(v[1]))
            rx.add_metric(sandbox, float(v[2]))
            tx.add_metric(sandbox, float(v[3]))
            reads.add_metric(own, float(v[4]))
            writes.add_metric(own, float(v[5]))
        yield from (cpu, mem, rx, tx, reads, writes)


class CadvisorExporter:
    """Every node's ``/metrics/cadvisor`` of a LiveCluster on one port of 127.0.0.1 (``/nodes/<node>/...``)."""

    def __init__(self, live: LiveCluster, containers: Containers | None = None, host: str = "127.0.0.1") -> None:
        """``containers``: the running pods' containers, registered by the twin kubelet (a new registry if None)."""
        self.live, self.host = live, host
        self.containers = containers if containers is not None else Containers()
        self._server: tuple[Any, threading.Thread] | None = None
        self.address = ""

    def _app(self) -> Callable[..., Any]:
        from prometheus_client import make_wsgi_app

        apps = {
            name: make_wsgi_app(
                build_registry(CadvisorCollector(partial(self.live.pod_counters, i), self.containers)),
                disable_compression=True,  # as SimExporter: gzip on loopback only spends the CPU the loop shares
            )
            for i, name in enumerate(self.live.nodes.names)
        }

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
            m = _PATH.fullmatch(environ.get("PATH_INFO", ""))
            inner = apps.get(m.group(1)) if m else None
            if inner is None:
                start_response("404 Not Found", [("Content-Type", "text/plain")])
                return [b"unknown node\n"]
            return inner(dict(environ, PATH_INFO="/metrics"), start_response)

        return app

    def start(self) -> CadvisorExporter:
        try:
            httpd, thread = serve_pages(self.host, 0, self._app(), "twin-kubelet-cadvisor")
        except OSError as exc:
            raise ConfigError(f"cannot listen on {self.host}: {exc.strerror or exc}") from None
        self._server = (httpd, thread)
        self.address = f"{self.host}:{httpd.server_port}"
        return self

    def path(self, node: str) -> str:
        return f"/nodes/{node}{METRICS_PATH}"

    def scrape_config(self, job: str = KUBELET_JOB) -> dict[str, Any]:
        """A ``scrape_configs`` entry as kube-prometheus-stack's kubelet ServiceMonitor makes it: the kubelet's labels
        are kept (``honor_labels``), every node is a target with ``node`` and ``metrics_path`` labels; the scrape
        interval is the global one (the testbed's)."""
        return {
            "job_name": job,
            "honor_labels": True,
            "static_configs": [
                {
                    "targets": [self.address],
                    "labels": {
                        "__metrics_path__": self.path(n),
                        "instance": n,
                        "node": n,
                        "metrics_path": METRICS_PATH,
                    },
                }
                for n in self.live.nodes.names
            ],
        }

    def stop(self) -> None:
        if self._server is not None:
            httpd, thread = self._server
            httpd.shutdown()
            httpd.server_close()
            thread.join(timeout=5)
            self._server = None

    def __enter__(self) -> CadvisorExporter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
