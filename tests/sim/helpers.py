"""Tiny literal scenarios for simulator tests (YAML text, so they exercise the loader too)."""

from __future__ import annotations

from drs_prom.sim.scenario import Scenario, parse_scenario


def tiny(
    nodes: int = 2,
    cores: float = 1,
    pods: int = 4,
    rate: float = 1.0,
    process: str = "uniform",
    work: float = 10.0,
    cpu: float = 1.0,
    req_cpu_m: int = 100,
    alloc_cpu_m: int | None = None,
    window: float = 0.0,
    settle: float = 5.0,
    jitter: float = 0.0,
    extra_profiles: str = "",
) -> Scenario:
    alloc = f"\n    allocatable_cpu_m: {alloc_cpu_m}" if alloc_cpu_m else ""
    return parse_scenario(
        f"""
name: tiny
normalisation: default
metric_window_seconds: {window}
settle_seconds: {settle}
sample_interval_seconds: 1
nodes:
  - name: n
    count: {nodes}
    cpu_cores: {cores}
    mem_bytes: 1Gi
    net_rx_bytes: 1Mi
    net_tx_bytes: 1Mi
    disk_read_bytes: 1Mi
    disk_write_bytes: 1Mi{alloc}
    idle: {{cpu: 0, mem: 0}}
profiles:
  job:
    demand: {{cpu_cores: {cpu}, mem_bytes: 64Mi}}
    requests: {{cpu_m: {req_cpu_m}, mem_bytes: 64Mi}}
    work_seconds: {work}
    work_jitter: {jitter}
{extra_profiles}
arrivals:
  - {{pods: {pods}, rate_per_second: {rate}, process: {process}}}
""",
        "tiny",
    )
