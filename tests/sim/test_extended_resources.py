"""Extended resources in the simulator: scenarios declare GPUs on node types and per pod, and the
environment offers only nodes with a free GPU (the scheduler's own NodeResourcesFit rule), so
training never sees an infeasible node as an action."""

from __future__ import annotations

import numpy as np
import pytest

from drs_prom.constraints import chain
from drs_prom.errors import ConfigError
from drs_prom.sim.env import SchedulingEnv
from drs_prom.sim.scenario import parse_scenario

GPU_SCENARIO = """
name: gpus
normalisation: default
metric_window_seconds: 0
settle_seconds: 0
sample_interval_seconds: 1
nodes:
  - name: gpu
    count: 2
    cpu_cores: 16
    mem_bytes: 64Gi
    net_rx_bytes: 1Mi
    net_tx_bytes: 1Mi
    disk_read_bytes: 1Mi
    disk_write_bytes: 1Mi
    extended: {nvidia.com/gpu: 1}
    idle: {cpu: 0, mem: 0}
  - name: cpu
    count: 2
    cpu_cores: 16
    mem_bytes: 64Gi
    net_rx_bytes: 1Mi
    net_tx_bytes: 1Mi
    disk_read_bytes: 1Mi
    disk_write_bytes: 1Mi
    idle: {cpu: 0, mem: 0}
profiles:
  train:
    demand: {cpu_cores: 1, mem_bytes: 1Gi}
    requests: {cpu_m: 100, mem_bytes: 64Mi, extended: {nvidia.com/gpu: 1}}
    work_seconds: 1000
    work_jitter: 0
  web:
    demand: {cpu_cores: 0.1, mem_bytes: 64Mi}
    requests: {cpu_m: 100, mem_bytes: 64Mi}
    work_seconds: 1000
    work_jitter: 0
arrivals:
  - {pods: 8, rate_per_second: 10, process: uniform}
"""


def test_gpu_pods_are_offered_only_nodes_with_a_free_gpu() -> None:
    env = SchedulingEnv(parse_scenario(GPU_SCENARIO, "gpus"), seed=0)
    ctx = env.reset()
    gpu_decisions = 0
    while ctx is not None:
        assert ctx.feasible.tolist() == chain.node_mask(ctx.pod, ctx.nodes).tolist()
        for node, ok in zip(ctx.nodes, ctx.feasible.tolist()):
            free = node.allocatable_scalar.get("nvidia.com/gpu", 0) - node.requested_scalar.get("nvidia.com/gpu", 0)
            assert free >= 0  # never more GPUs handed out than a node has
            if ctx.pod.scalar:
                assert ok == (free >= 1 and node.name.startswith("gpu-"))
        gpu_decisions += bool(ctx.pod.scalar)
        ctx, _, _ = env.step(int(np.flatnonzero(ctx.feasible)[0]))
    assert gpu_decisions >= 3  # more GPU pods than GPUs: some waited for a GPU to free up


def test_an_extended_resource_must_be_named_vendor_name() -> None:
    with pytest.raises(ConfigError, match="vendor/name"):
        parse_scenario(
            GPU_SCENARIO.replace("extended: {nvidia.com/gpu: 1}\n    idle", "extended: {gpu: 1}\n    idle"), "bad"
        )
