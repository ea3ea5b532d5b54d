"""Hours of the kubelet's cAdvisor series for a few workloads, written as promtool backfills them.

``write_cadvisor`` writes OpenMetrics text (what ``promtool tsdb create-blocks-from openmetrics`` reads: timestamps
in seconds, each family's series contiguous and in time order, ``# EOF`` last) with the kubelet's real metric
names and labels, as kube-prometheus-stack's kubelet job scrapes them (``job="kubelet"``,
``metrics_path="/metrics/cadvisor"``, ``namespace``, ``pod``, ``container``, ``image``; ``interface`` on network):

* per container: ``container_cpu_usage_seconds_total``, ``container_memory_working_set_bytes``,
  ``container_fs_reads_bytes_total``, ``container_fs_writes_bytes_total``;
* the pod's own cgroup (``container=""``), which repeats its containers' CPU and memory;
* network on the pod's cgroup (``container=""``) and on its sandbox (``container="POD"``), the same interface
  twice, as cAdvisor reports it with some runtimes;
* optionally the kubelet's ``/metrics/resource`` copies of CPU and memory (``metrics_path="/metrics/resource"``).

Each pod uses a constant ``usage`` (FEATURES order, absolute units) while it runs, so its true mean is known
exactly; a pod may restart its containers (counters back to 0) or carry absurd series (NaN CPU, negative memory).

``backfilled_prometheus`` puts them in a real Prometheus with the generated per-pod recording rules' series over
them. Prometheus evaluates recording rules only as time passes, never over backfilled history, so the rules are
backfilled too, the way Prometheus documents for new rules: ``promtool tsdb create-blocks-from rules`` evaluates
them against the running Prometheus over the history and writes blocks, which Prometheus loads on restart. The
scheduler's queries then read the rules' series as on a live cluster.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from drs_prom.signals import promql
from drs_prom.sim.backfill import create_blocks
from tests.prom.fixtures import PrometheusProc, start_prometheus
from tests.prom.test_deploy import promtool
from tests.waiting import wait_for

KUBELET = 'instance="10.0.0.7:10250",job="kubelet",node="node-1"'
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
SIDECAR = ("proxy", "docker.io/istio/proxyv2:1.20", 0.05, 30e6)
"""A sidecar container: name, image, cores and working set (part of the pod's usage)."""


@dataclass(frozen=True)
class StoredPod:
    name: str
    image: str  # as the runtime reports it (containerd: the full reference)
    start: float  # epoch seconds of its first sample
    end: float  # of its last
    usage: tuple[float, float, float, float, float, float]  # cores, bytes, rx, tx, read, write bytes/s
    sidecar: bool = False
    restart_at: float | None = None  # its containers restart: every counter starts again from 0
    nan_cpu: bool = False
    negative_mem: bool = False
    resource_endpoint: bool = False
    namespace: str = "shop"


def _fmt(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    return repr(float(v)) if not float(v).is_integer() else f"{float(v):.1f}"


STARTED_BEFORE = 5.0
"""Seconds a container runs before its first scrape: its counters never start at 0 in the series."""


def _counter(pod: StoredPod, times: np.ndarray, rate: float) -> np.ndarray:
    """A counter of ``rate`` per second since the pod (or its restarted containers) started."""
    since = times - pod.start + STARTED_BEFORE
    if pod.restart_at is not None:
        since = np.where(times >= pod.restart_at, times - pod.restart_at, since)
    return rate * since


def _series(pod: StoredPod, step: float) -> Iterator[tuple[str, str, np.ndarray, np.ndarray]]:
    """(metric, labels, times, values) of every series of one pod."""
    times = np.arange(pod.start, pod.end + step / 2, step)
    cpu, mem, rx, tx, rd, wr = pod.usage
    side_cpu, side_mem = (SIDECAR[2], SIDECAR[3]) if pod.sidecar else (0.0, 0.0)
    base = f'{KUBELET},metrics_path="/metrics/cadvisor",namespace="{pod.namespace}",pod="{pod.name}"'
    app = f'{base},container="app",image="{pod.image}"'
    cgroup = f'{base},container="",image=""'
    app_cpu = np.full(len(times), math.nan) if pod.nan_cpu else _counter(pod, times, cpu - side_cpu)
    yield "container_cpu_usage_seconds_total", app, times, app_cpu
    yield "container_cpu_usage_seconds_total", cgroup, times, _counter(pod, times, cpu)
    app_mem = -5e7 if pod.negative_mem else mem - side_mem
    yield "container_memory_working_set_bytes", app, times, np.full(len(times), app_mem)
    yield "container_memory_working_set_bytes", cgroup, times, np.full(len(times), mem + 40e6)
    if pod.sidecar:
        proxy = f'{base},container="{SIDECAR[0]}",image="{SIDECAR[1]}"'
        yield "container_cpu_usage_seconds_total", proxy, times, _counter(pod, times, side_cpu)
        yield "container_memory_working_set_bytes", proxy, times, np.full(len(times), side_mem)
    if pod.resource_endpoint:
        res = f'{KUBELET},metrics_path="/metrics/resource",namespace="{pod.namespace}",pod="{pod.name}",container="app"'
        yield "container_cpu_usage_seconds_total", res, times, _counter(pod, times, cpu - side_cpu)
        yield "container_memory_working_set_bytes", res, times, np.full(len(times), mem - side_mem)
    for metric, rate in (("container_network_receive_bytes_total", rx), ("container_network_transmit_bytes_total", tx)):
        for where in ('container="",image=""', f'container="POD",image="{PAUSE_IMAGE}"'):
            yield metric, f'{base},{where},interface="eth0"', times, _counter(pod, times, rate)
    dev = f'{app},device="/dev/vda"'
    yield "container_fs_reads_bytes_total", dev, times, _counter(pod, times, rd)
    yield "container_fs_writes_bytes_total", dev, times, _counter(pod, times, wr)


_FAMILIES = {
    "container_cpu_usage_seconds_total": ("counter", "Cumulative cpu time consumed in seconds."),
    "container_memory_working_set_bytes": ("gauge", "Current working set in bytes."),
    "container_network_receive_bytes_total": ("counter", "Cumulative count of bytes received."),
    "container_network_transmit_bytes_total": ("counter", "Cumulative count of bytes transmitted."),
    "container_fs_reads_bytes_total": ("counter", "Cumulative count of bytes read."),
    "container_fs_writes_bytes_total": ("counter", "Cumulative count of bytes written."),
}


def write_cadvisor(path: Path, pods: Sequence[StoredPod], step: float = 15.0) -> int:
    """Write every pod's series; returns the number of samples."""
    by_family: dict[str, list[tuple[str, np.ndarray, np.ndarray]]] = {m: [] for m in _FAMILIES}
    for pod in pods:
        for metric, labels, times, values in _series(pod, step):
            by_family[metric].append((labels, times, values))
    n = 0
    with Path(path).open("w") as fh:
        for metric, series in by_family.items():
            kind, help_text = _FAMILIES[metric]
            fh.write(f"# HELP {metric} {help_text}\n# TYPE {metric} {kind}\n")
            for labels, times, values in series:
                fh.writelines(f"{metric}{{{labels}}} {_fmt(v)} {t:.3f}\n" for t, v in zip(times, values))
                n += len(times)
        fh.write("# EOF\n")
    return n


def backfilled_prometheus(tmp: Path, pods: Sequence[StoredPod], step: float = 15.0) -> tuple[PrometheusProc, int]:
    """A real Prometheus (running, with the per-pod rules loaded) holding ``pods``' cAdvisor series and the per-pod
    rules' series over them; and the number of cAdvisor samples. The caller stops it."""
    tmp.mkdir(parents=True, exist_ok=True)
    samples = write_cadvisor(tmp / "cadvisor.om", pods, step)
    create_blocks(tmp / "cadvisor.om", tmp / "tsdb")
    group = next(g for g in promql.rule_groups()["groups"] if g["name"] == promql.POD_USAGE_GROUP)
    rules = tmp / "pod-usage.rules.yml"
    rules.write_text(yaml.safe_dump({"groups": [group]}, sort_keys=False))
    prom = start_prometheus(
        tmp / "prom", rule_files=[rules], storage_path=tmp / "tsdb", extra_args=["--storage.tsdb.retention.time=100y"]
    )
    try:
        start, end = min(p.start for p in pods) - 60, max(p.end for p in pods) + 900
        cmd = [promtool(), "tsdb", "create-blocks-from", "rules", f"--url={prom.url}", f"--start={int(start)}"]
        cmd += [f"--end={int(end)}", f"--output-dir={tmp / 'rule-blocks'}", str(rules)]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            raise RuntimeError(f"promtool could not backfill the rules: {out.stderr[-2000:]}")
        prom.stop()
        for block in (tmp / "rule-blocks").iterdir():
            if block.is_dir() and (block / "meta.json").exists():
                shutil.move(str(block), tmp / "tsdb" / block.name)
        prom.restart()
        series = f"count(count_over_time({promql.POD_LAST_SEEN_RULE}[1y]))"
        wait_for(lambda: prom.query(series, at=end), 60, "the backfilled rules' series")
    except BaseException:
        prom.stop()
        raise
    return prom, samples
