"""Turn a simulated load trace into node_exporter series in a real Prometheus TSDB.

``write_openmetrics`` integrates per-interval loads into the counters node_exporter
exposes (node_cpu_seconds_total per cpu and mode, node_network_*_bytes_total,
node_disk_*_bytes_total) plus the memory gauges and node_uname_info, with the
``instance``/``job`` labels a scrape would add, so the project's PromQL reads them
unchanged. ``create_blocks`` runs ``promtool tsdb create-blocks-from openmetrics``
(OpenMetrics text, timestamps in seconds, ``# EOF`` last; series of one family
contiguous and in time order).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from drs_prom.features import N_FEATURES


@dataclass(frozen=True)
class NodeSpec:
    name: str
    cores: int
    mem_bytes: float

    @property
    def instance(self) -> str:
        return f"{self.name}:9100"


def _fmt(v: float) -> str:
    return repr(float(v)) if not float(v).is_integer() else f"{float(v):.1f}"


def write_openmetrics(
    path: Path,
    nodes: Sequence[NodeSpec],
    times: np.ndarray,
    counters: np.ndarray,
    mem_frac: np.ndarray,
    present: np.ndarray | None = None,
    job: str = "node",
) -> int:
    """Write the series; returns the number of samples.

    ``times``: (T,) unix seconds of the samples. ``counters``: (T, n, N_FEATURES) running totals
    in FEATURES order: column 0 busy seconds of each CPU, columns 2..5 bytes (column 1
    unused). ``mem_frac``: (T, n) memory in use. ``present``: (T, n) bool, False where
    the node was not scraped (a gap, a node that went away).
    """
    times = np.asarray(times, dtype=np.float64)
    counters = np.asarray(counters, dtype=np.float64)
    T, n, f = counters.shape
    assert f == N_FEATURES and len(nodes) == n and len(times) == T
    present = np.ones((T, n), bool) if present is None else np.asarray(present, bool)
    elapsed = times - times[0]
    base = 1e5  # counters start at a boot-time value, as on a real host
    n_samples = 0

    def emit(fh, metric: str, node_idx: int, labels: str, values: np.ndarray) -> None:
        nonlocal n_samples
        spec = nodes[node_idx]
        lab = f'instance="{spec.instance}",job="{job}"' + (f",{labels}" if labels else "")
        ok = present[:, node_idx]
        lines = [f"{metric}{{{lab}}} {_fmt(v)} {t:.3f}\n" for t, v, p in zip(times, values, ok) if p]
        fh.writelines(lines)
        n_samples += len(lines)

    path = Path(path)
    with path.open("w") as fh:
        fh.write(
            "# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.\n# TYPE node_cpu_seconds_total counter\n"
        )
        for i, spec in enumerate(nodes):
            busy = counters[:, i, 0]  # each CPU carries the node's utilisation
            for c in range(spec.cores):
                emit(fh, "node_cpu_seconds_total", i, f'cpu="{c}",mode="idle"', base + elapsed - busy)
                emit(fh, "node_cpu_seconds_total", i, f'cpu="{c}",mode="user"', base * 0.1 + 0.8 * busy)
                emit(fh, "node_cpu_seconds_total", i, f'cpu="{c}",mode="system"', base * 0.05 + 0.2 * busy)
        gauges = {
            "node_memory_MemTotal_bytes": lambda i: np.full(T, nodes[i].mem_bytes),
            "node_memory_MemAvailable_bytes": lambda i: nodes[i].mem_bytes * (1.0 - mem_frac[:, i]),
            "node_memory_MemFree_bytes": lambda i: nodes[i].mem_bytes * (1.0 - mem_frac[:, i]) * 0.6,
        }
        for metric, fn in gauges.items():
            fh.write(f"# HELP {metric} Memory information field.\n# TYPE {metric} gauge\n")
            for i in range(n):
                emit(fh, metric, i, "", np.round(fn(i)))
        families = {
            "node_network_receive_bytes_total": (2, "device", ("eth0", "lo")),
            "node_network_transmit_bytes_total": (3, "device", ("eth0", "lo")),
            "node_disk_read_bytes_total": (4, "device", ("sda", "loop0")),
            "node_disk_written_bytes_total": (5, "device", ("sda", "loop0")),
        }
        for metric, (col, label, (real, excluded)) in families.items():
            fh.write(f"# HELP {metric} Bytes.\n# TYPE {metric} counter\n")
            for i in range(n):
                emit(fh, metric, i, f'{label}="{real}"', base + counters[:, i, col])
                # an excluded device with heavy traffic: it must not count as node load
                emit(fh, metric, i, f'{label}="{excluded}"', np.round(base + 5e6 * elapsed))
        fh.write(
            "# HELP node_uname_info Labeled system information as provided by the uname system call.\n# TYPE node_uname_info gauge\n"
        )
        for i, spec in enumerate(nodes):
            emit(
                fh,
                "node_uname_info",
                i,
                f'machine="x86_64",nodename="{spec.name}",release="6.1.0",sysname="Linux"',
                np.ones(T),
            )
        fh.write("# EOF\n")
    return n_samples


def create_blocks(openmetrics: Path, data_dir: Path) -> str:
    """``promtool tsdb create-blocks-from openmetrics`` into ``data_dir``; returns its output."""
    promtool = shutil.which("promtool")
    if promtool is None:
        raise RuntimeError("promtool not found on PATH (install prometheus: scripts/install-test-deps.sh)")
    data_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(openmetrics), str(data_dir)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"promtool failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return proc.stdout
