"""Exporter scrape cost: median ms per scrape and CPU share at a 1 s scrape interval.

Measured for our exporter and, as the baseline in the same run, Debian's node_exporter
with the same five collectors. Printed as numbers and ratios, never asserted as limits.
Run alone: ``python -m tests.prom.scrape_cost`` (starts both exporters itself).
"""

from __future__ import annotations

import statistics
import time
import urllib.request
from dataclasses import dataclass

import psutil
from prometheus_client import generate_latest


@dataclass(frozen=True)
class Cost:
    name: str
    median_ms: float
    p90_ms: float
    cpu_share: float
    """Process CPU seconds per wall second while scraped once a second."""


def http_scrape_ms(url: str, n: int = 200) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        with urllib.request.urlopen(url, timeout=10) as resp:
            resp.read()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def in_process_ms(n: int = 200) -> list[float]:
    """generate_latest on a fresh registry with the psutil collector (no HTTP)."""
    from exporters.node_exporter import NodeCollector, build_registry

    registry = build_registry(NodeCollector(node_name="bench"))
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        generate_latest(registry)
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def cpu_share(pids: dict[str, int], urls: dict[str, str], seconds: float = 15.0) -> dict[str, float]:
    """CPU time / wall time of each process while it is scraped once per second.

    ``urls`` are scraped here once a second; pass none when a Prometheus already does.
    """
    procs = {k: psutil.Process(p) for k, p in pids.items()}
    before = {k: sum(p.cpu_times()[:2]) for k, p in procs.items()}
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        for url in urls.values():
            with urllib.request.urlopen(url, timeout=10) as resp:
                resp.read()
        time.sleep(max(0.0, 1.0 - (time.monotonic() - t0) % 1.0))
    wall = time.monotonic() - t0
    return {k: (sum(p.cpu_times()[:2]) - before[k]) / wall for k, p in procs.items()}


def measure(
    ours_url: str,
    ours_pid: int,
    real_url: str,
    real_pid: int,
    n: int = 200,
    seconds: float = 15.0,
    scraped_elsewhere: bool = False,
) -> tuple[Cost, Cost, float]:
    """``scraped_elsewhere``: a Prometheus already scrapes both at 1 s, so don't add scrapes."""
    urls = {} if scraped_elsewhere else {"ours": ours_url, "real": real_url}
    shares = cpu_share({"ours": ours_pid, "real": real_pid}, urls, seconds)
    ours_ms, real_ms = [], []
    for _ in range(n // 20):  # interleave so both see the same machine load
        ours_ms += http_scrape_ms(ours_url, 20)
        real_ms += http_scrape_ms(real_url, 20)
    inproc = statistics.median(in_process_ms(n))

    def cost(name: str, ms: list[float], share: float) -> Cost:
        return Cost(name, statistics.median(ms), statistics.quantiles(ms, n=10)[-1], share)

    return cost("drs exporter", ours_ms, shares["ours"]), cost("node_exporter", real_ms, shares["real"]), inproc


def report(ours: Cost, real: Cost, inproc_ms: float) -> str:
    lines = [f"{'exporter':<14} {'median ms':>10} {'p90 ms':>8} {'CPU @1s':>8}"]
    for c in (ours, real):
        lines.append(f"{c.name:<14} {c.median_ms:>10.2f} {c.p90_ms:>8.2f} {c.cpu_share * 100:>7.2f}%")
    lines.append(
        f"ratio ours/node_exporter: scrape {ours.median_ms / real.median_ms:.2f}x, "
        f"CPU {ours.cpu_share / max(real.cpu_share, 1e-9):.2f}x; in-process collect+encode {inproc_ms:.2f} ms"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    import tempfile
    from pathlib import Path

    from tests.prom.fixtures import start_drs_exporter, start_node_exporter_real

    with tempfile.TemporaryDirectory() as tmp:
        ours = start_drs_exporter(Path(tmp))
        real = start_node_exporter_real(Path(tmp))
        try:
            print(report(*measure(ours.url, ours.pid, real.url, real.pid)))
        finally:
            ours.stop()
            real.stop()
