"""What to replay from a production trace, as data: a scenario's ``trace:`` section and the pods it yields.

``TraceSpec`` says which files, how many nodes, which window, how much to compress time and
which usage model to assume; drs_prom.sim.trace_sample turns it, with a sampling seed, into a
concrete scenario whose ``replay`` holds every pod as columns (``ReplayPods``). Kept apart
from drs_prom.sim.scenario so that the scenario module stays about generated workloads.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class UsageModel(_M):
    """Used/requested ratios for traces that carry requests only (openb).

    Each pod's CPU (memory) use is its request times a ratio drawn from a log-normal
    distribution with mean ``cpu_ratio`` (``mem_ratio``) and standard deviation
    ``spread``: most pods use less than they ask for, a few more (burstable pods), which
    is what lets load-aware placement matter. docs/traces.md gives the published figures
    the defaults come from.
    """

    cpu_ratio: float = Field(0.4, gt=0, le=4, description="Mean used/requested CPU over pods.")
    mem_ratio: float = Field(0.6, gt=0, le=4, description="Mean used/requested memory over pods.")
    spread: float = Field(0.3, ge=0, le=4, description="Standard deviation of each ratio across pods.")
    from_trace: bool = Field(True, description="Use the trace's own per-pod usage columns where it has them.")

    def lognormal(self, mean: float) -> tuple[float, float]:
        """(mu, sigma) of the log-normal with this mean and ``spread`` as its standard deviation."""
        sigma2 = math.log1p((self.spread / mean) ** 2)
        return math.log(mean) - sigma2 / 2, math.sqrt(sigma2)


class TraceSpec(_M):
    """A replay of a trace directory: which pods, on how many of its nodes, over which window."""

    path: str = Field(description="Directory with the trace files.")
    format: Literal["auto", "openb", "csv"] = Field(
        "auto", description="openb (Alibaba GPU trace 2023), csv (nodes.csv + pods.csv), or detect from the files."
    )
    pod_list: str = Field("openb_pod_list_default.csv", description="openb: which pod list of the directory.")
    nodes: int | None = Field(None, ge=1, description="Sampled nodes, stratified by node type (default: every node).")
    window: tuple[float, float] = Field(
        (0.0, 1.0),
        description="Arrival window as fractions of the pod list in arrival order: (0.2, 0.4) replays the pods "
        "arriving between the 20th and 40th percentile of arrival times.",
    )
    max_pods: int | None = Field(None, ge=1, description="At most this many pods of the window (the first ones).")
    compression: float = Field(1.0, gt=0, description="Every time (arrivals and run times) is divided by this.")
    load_factor: float = Field(
        1.0, gt=0, description="Arrival times are further divided by this (run times are not): concurrency x factor."
    )
    cut_at_window_end: bool = Field(
        True,
        description="Pods still running at the window's end stop there, so the episode measures the window, "
        "not months of a few long-running pods after it.",
    )
    carry_over: bool = Field(
        True, description="Pods started before the window and still running at its start arrive at time 0."
    )
    gpu_sharing: Literal["round-up", "refuse"] = Field(
        "round-up", description="A pod asking for part of a GPU gets a whole one, or the trace is refused."
    )
    usage: UsageModel = UsageModel()

    @model_validator(mode="after")
    def _window(self) -> TraceSpec:
        a, b = self.window
        if not 0.0 <= a < b <= 1.0:
            raise ValueError(f"window {a}:{b} must satisfy 0 <= start < end <= 1")
        return self


class ReplayPods(_M):
    """Every replayed pod as columns, in arrival order; times already sampled, compressed and drawn."""

    names: tuple[str, ...]
    arrival: tuple[float, ...] = Field(description="Seconds from the replay's start.")
    work: tuple[float, ...] = Field(description="Seconds of run time at full speed.")
    cpu_m: tuple[int, ...]
    mem_bytes: tuple[int, ...]
    gpus: tuple[int, ...] = Field(description="Whole GPUs (extended resource nvidia.com/gpu).")
    cpu_used: tuple[float, ...] = Field(description="Cores used at full speed.")
    mem_used: tuple[float, ...] = Field(description="Bytes used.")
    gpu_models: tuple[tuple[str, ...], ...] = Field(description="Allowed GPU models (empty: any).")
    node_selector: tuple[tuple[tuple[str, str], ...], ...]
    tolerations: tuple[tuple[tuple[str, str, str, str], ...], ...] = Field(
        description="(key, operator, value, effect) per toleration."
    )

    @model_validator(mode="after")
    def _aligned(self) -> ReplayPods:
        n = len(self.names)
        for name in ReplayPods.model_fields:
            if len(getattr(self, name)) != n:
                raise ValueError(f"replay column {name} has {len(getattr(self, name))} rows, not {n}")
        return self

    def __len__(self) -> int:
        return len(self.names)
