"""Scenarios are data: YAML files validated into a frozen ``Scenario``.

A scenario names node types (capacities, allocatable, idle load), pod profiles (requests, a six-value demand in
absolute units, work in seconds at full speed, owners) and arrival phases. ``load_scenario("drs-paper")`` reads the
packaged file ``drs_prom/sim/scenarios/drs-paper.yaml``; a path reads any file. Every validation error is one line
naming the file and the field.

Over 400 lines because every section of a scenario is validated here, each field with its unit and reason.
"""

from __future__ import annotations

import re
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from drs_prom.config import Normalisation, RebalanceSettings
from drs_prom.errors import ConfigError
from drs_prom.sim.drift_spec import Restart, UsageDrift
from drs_prom.sim.owner_spec import Owners
from drs_prom.sim.placement import Placement
from drs_prom.sim.trace_spec import ReplayPods, TraceSpec

QUANTITY_KEYS: tuple[str, ...] = (
    "cpu_cores",
    "mem_bytes",
    "net_rx_bytes",
    "net_tx_bytes",
    "disk_read_bytes",
    "disk_write_bytes",
)
"""A node type's capacity and a profile's demand field for each of FEATURES, in its order (absolute units)."""

_SUFFIX = {
    "": 1.0,
    "m": 1e-3,
    "k": 1e3,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
}
_QUANTITY = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z]{0,2})\s*$")


def parse_quantity(value: Any) -> float:
    """Kubernetes-style quantity: ``16Gi``, ``500m``, ``80Ki``, ``1.5e6`` or a plain number."""
    if isinstance(value, bool):
        raise ValueError("expected a number or quantity, got a boolean")
    if isinstance(value, (int, float)):
        return float(value)
    match = _QUANTITY.match(str(value))
    if not match or match.group(2) not in _SUFFIX:
        raise ValueError(f"not a quantity: {value!r} (use e.g. 16Gi, 500m, 80Ki)")
    return float(match.group(1)) * _SUFFIX[match.group(2)]


class _M(BaseModel):  # every scenario section: unknown keys refused, values frozen
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Quantities(_M):
    @field_validator("*", mode="before")
    @classmethod
    def _q(cls, value: Any, info: Any) -> Any:
        field = cls.model_fields[info.field_name]
        if field.annotation in (float, "float") and not isinstance(value, (dict, list)):
            return parse_quantity(value)
        return value


class Idle(_Quantities):
    """Load a node carries with no pods (system daemons), as fractions of its capacity."""

    cpu: float = Field(0.02, ge=0, lt=1)
    mem: float = Field(0.05, ge=0, lt=1)


class TaintSpec(_M):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class TolerationSpec(_M):
    """A pod's toleration of a node taint (Kubernetes semantics: empty key + Exists tolerates everything)."""

    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""

    def tolerates(self, taint: TaintSpec) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


class NodeType(_Quantities):
    """``count`` identical nodes. Capacities are what slows pods down; allocatable is what requests fit into."""

    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    count: int = Field(ge=1, le=100000)
    cpu_cores: float = Field(gt=0)
    mem_bytes: float = Field(gt=0)
    net_rx_bytes: float = Field(gt=0, description="Receive capacity, bytes/s.")
    net_tx_bytes: float = Field(gt=0, description="Transmit capacity, bytes/s.")
    disk_read_bytes: float = Field(gt=0, description="Disk read capacity, bytes/s.")
    disk_write_bytes: float = Field(gt=0, description="Disk write capacity, bytes/s.")
    allocatable_cpu_m: float | None = Field(None, gt=0, description="Default: all cores.")
    allocatable_mem_bytes: float | None = Field(None, gt=0, description="Default: all memory.")
    allocatable_pods: int = Field(110, ge=1)
    extended: dict[str, int] = Field(
        {}, description="Allocatable extended resources per node, e.g. {nvidia.com/gpu: 4} (device plugins)."
    )
    idle: Idle = Idle()
    labels: dict[str, str] = {}
    taints: tuple[TaintSpec, ...] = ()

    @field_validator("extended")
    @classmethod
    def _extended(cls, value: dict[str, int]) -> dict[str, int]:
        return _extended_resources(value)

    @field_validator("allocatable_cpu_m", "allocatable_mem_bytes", mode="before")
    @classmethod
    def _opt_q(cls, value: Any) -> Any:
        return None if value is None else parse_quantity(value)

    @property
    def capacity(self) -> tuple[float, ...]:
        """Capacity per feature (QUANTITY_KEYS)."""
        return tuple(float(getattr(self, k)) for k in QUANTITY_KEYS)

    @property
    def alloc_cpu_m(self) -> int:
        return int(self.allocatable_cpu_m if self.allocatable_cpu_m is not None else self.cpu_cores * 1000)

    @property
    def alloc_mem(self) -> int:
        return int(self.allocatable_mem_bytes if self.allocatable_mem_bytes is not None else self.mem_bytes)


class Demand(_Quantities):
    """What a running pod consumes at full speed, absolute units (FEATURES order)."""

    cpu_cores: float = Field(ge=0)
    mem_bytes: float = Field(ge=0)
    net_rx_bytes: float = Field(0.0, ge=0)
    net_tx_bytes: float = Field(0.0, ge=0)
    disk_read_bytes: float = Field(0.0, ge=0)
    disk_write_bytes: float = Field(0.0, ge=0)

    def vector(self) -> tuple[float, ...]:
        """Demand per feature (QUANTITY_KEYS)."""
        return tuple(float(getattr(self, k)) for k in QUANTITY_KEYS)


def _extended_resources(value: dict[str, int]) -> dict[str, int]:
    """Extended resources are named ``vendor/name`` and counted in whole units, as in Kubernetes."""
    for name, amount in value.items():
        if "/" not in name or name.startswith(("requests.", "kubernetes.io/")):
            raise ValueError(f"extended resource {name!r} must be named vendor/name (e.g. nvidia.com/gpu)")
        if amount < 0:
            raise ValueError(f"extended resource {name!r} must not be negative")
    return value


class Requests(_Quantities):
    cpu_m: float = Field(ge=0)
    mem_bytes: float = Field(ge=0)
    extended: dict[str, int] = Field({}, description="Extended resources per pod, e.g. {nvidia.com/gpu: 1}.")

    @field_validator("extended")
    @classmethod
    def _extended(cls, value: dict[str, int]) -> dict[str, int]:
        return _extended_resources(value)

    def scalar(self) -> tuple[tuple[str, int], ...]:
        """The requests NodeResourcesFit checks beyond cpu and memory (PodRequest.scalar), by name."""
        return tuple(sorted((k, v) for k, v in self.extended.items() if v > 0))


class Profile(_Quantities):
    """One kind of pod. Work is seconds at full speed, drawn uniformly in mean*(1 +- jitter)."""

    weight: float = Field(1.0, gt=0, description="Share of arrivals (normalised over profiles).")
    demand: Demand
    requests: Requests
    work_seconds: float = Field(gt=0)
    work_jitter: float = Field(0.2, ge=0, lt=1)
    demand_jitter: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="A pod's demand is its owner's times (1 +- jitter) per feature: noise no estimate knows.",
    )
    node_selector: dict[str, str] = {}
    tolerations: tuple[TolerationSpec, ...] = ()
    placement: Placement = Placement()
    owners: Owners | None = Field(None, description="Owners with usage of their own (default: one owner).")
    drift: UsageDrift | None = Field(None, description="How the pods' usage moves after placement (default: stays).")
    restart: Restart | None = Field(None, description="What an eviction costs a pod (default: Restart()).")


class BackgroundLoad(_Quantities):
    """Load on one node that no scheduler of ours places: a noisy neighbour, a batch agent, another team's pods.

    A Poisson stream of pods pinned to ``node`` (a hostname such as ``worker-2``), each
    running ``work_seconds`` (+- work_jitter) at ``demand`` (+- demand_jitter per feature),
    from ``start_seconds`` until ``until_seconds`` (default: the last scheduled arrival).
    They request nothing, so policies see them only in the metrics; they slow the
    scheduled pods on that node like any other demand. Drawn from their own random stream,
    so adding them leaves the scheduled pods' arrivals unchanged.
    """

    node: str
    demand: Demand
    rate_per_second: float = Field(gt=0)
    work_seconds: float = Field(gt=0)
    work_jitter: float = Field(0.2, ge=0, lt=1)
    demand_jitter: float = Field(0.0, ge=0, lt=1)
    start_seconds: float = Field(0.0, ge=0)
    until_seconds: float | None = Field(None, gt=0)


class Phase(_Quantities):
    """A run of ``pods`` arrivals at ``rate_per_second``, starting ``gap_seconds`` after the previous phase's last arrival."""

    pods: int = Field(ge=1, le=1_000_000)
    rate_per_second: float = Field(gt=0)
    process: Literal["poisson", "uniform"] = "poisson"
    gap_seconds: float = Field(0.0, ge=0)
    mix: dict[str, float] | None = Field(None, description="Profile weights for this phase (default: profile weights).")


class Scenario(_M):
    name: str
    description: str = ""
    normalisation: Normalisation | Literal["drs-paper", "default"] = "default"
    metric_window_seconds: float = Field(
        0.0,
        ge=0,
        description="Load is seen as the average over this many past seconds (Prometheus rate windows); 0 = instant.",
    )
    settle_seconds: float = Field(
        5.0, ge=0, description="Delay after a bind at which the env measures load_after (DRS: 5 s)."
    )
    sample_interval_seconds: float = Field(5.0, gt=0, description="Time-series resolution of the benchmark plot.")
    nodes: tuple[NodeType, ...] = ()
    profiles: dict[str, Profile] = {}
    arrivals: tuple[Phase, ...] = ()
    background: tuple[BackgroundLoad, ...] = Field(
        (), description="Noisy neighbours and other load no policy places (pinned to named nodes)."
    )
    trace: TraceSpec | None = Field(
        None, description="Replay a production trace (drs_prom.sim.trace_sample fills nodes, profiles and arrivals)."
    )
    replay: ReplayPods | None = Field(None, description="The replayed pods, filled by drs_prom.sim.trace_sample.")
    rebalance: RebalanceSettings | None = Field(
        None, description="The rebalancer on this scenario's time scale (bench's +rebalance); default: configured."
    )

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        if self.trace is not None and not self.nodes:
            return self  # a trace section alone: drs_prom.sim.trace_sample.materialise fills the rest
        for section in ("nodes", "profiles", "arrivals"):
            if not getattr(self, section):
                raise ValueError(f"{section}: needs at least one entry (or a trace: section)")
        names = [t.name for t in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError("node type names must be unique")
        hosts = set(self.hostnames())
        for i, bg in enumerate(self.background):
            if bg.node not in hosts:
                raise ValueError(f"background[{i}].node {bg.node!r} is not a node of this scenario")
        for pname, prof in self.profiles.items():
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", pname):
                raise ValueError(f"profile name {pname!r} must be a DNS label")
            fits = [t.labels for t in self.nodes if _fits_empty(prof, t)]
            if not fits:
                raise ValueError(f"profile {pname!r} fits no node type even when empty, so its pods would wait forever")
            prof.placement.check_zones(pname, fits)
        for i, phase in enumerate(self.arrivals):
            for pname, weight in (phase.mix or {}).items():
                if pname not in self.profiles:
                    raise ValueError(f"arrivals[{i}].mix names unknown profile {pname!r}")
                if weight < 0:
                    raise ValueError(f"arrivals[{i}].mix weight of {pname!r} must not be negative")
            if phase.mix is not None and sum(phase.mix.values()) <= 0:
                raise ValueError(f"arrivals[{i}].mix must give some profile a positive weight")
        return self

    @cached_property
    def norm(self) -> Normalisation:
        if isinstance(self.normalisation, Normalisation):
            return self.normalisation
        return Normalisation.drs_paper() if self.normalisation == "drs-paper" else Normalisation()

    @property
    def n_nodes(self) -> int:
        return sum(t.count for t in self.nodes)

    def hostnames(self) -> list[str]:
        """Node names in simulator order (``<type>-<i>``)."""
        return [f"{t.name}-{i + 1}" for t in self.nodes for i in range(t.count)]

    @property
    def n_pods(self) -> int:
        return sum(p.pods for p in self.arrivals)

    def truncated(self, pods: int) -> Scenario:
        """The first ``pods`` arrivals only (phases cut in order), for quick runs and CI."""
        if pods < 1:
            raise ConfigError("pods must be at least 1")
        phases, left = [], pods
        for phase in self.arrivals:
            if left <= 0:
                break
            phases.append(phase.model_dump() | {"pods": min(phase.pods, left)})
            left -= phase.pods
        if self.replay is not None:
            cut = {k: v[:pods] for k, v in self.replay.model_dump().items()}
            return self.with_changes(arrivals=phases, replay=cut)
        return self.with_changes(arrivals=phases)

    def with_changes(self, **changes: Any) -> Scenario:
        """A copy with top-level fields replaced and re-validated (e.g. fewer pods for a test)."""
        data = self.model_dump()
        data.update(changes)
        return Scenario.model_validate(data)


HOSTNAME_LABEL = "kubernetes.io/hostname"
NODE_TYPE_LABEL = "node-type"
GPU_RESOURCE = "nvidia.com/gpu"
"""The extended resource a replayed trace's whole GPUs are requested and offered as (the device plugin's name)."""

GPU_MODEL_LABEL = "gpu-model"
"""Label of a node's GPU model in replayed traces; a pod's allowed models become node affinity In over it."""


def node_labels(node: NodeType, index: int) -> dict[str, str]:
    """Labels of the ``index``-th (0-based) node of a type: hostname ``<type>-<index+1>``, node-type, then the type's own."""
    return {HOSTNAME_LABEL: f"{node.name}-{index + 1}", NODE_TYPE_LABEL: node.name, **node.labels}


def _fits_empty(prof: Profile, node: NodeType) -> bool:
    if not any(all(node_labels(node, i).get(k) == v for k, v in prof.node_selector.items()) for i in range(node.count)):
        return False
    if any(
        t.effect in ("NoSchedule", "NoExecute") and not any(tol.tolerates(t) for tol in prof.tolerations)
        for t in node.taints
    ):
        return False
    return prof.requests.cpu_m <= node.alloc_cpu_m and prof.requests.mem_bytes <= node.alloc_mem


def scenario_names() -> list[str]:
    """Names of the packaged scenarios."""
    root = resources.files("drs_prom.sim") / "scenarios"
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".yaml"))


def load_scenario(name_or_path: str | Path) -> Scenario:
    """A packaged scenario by name or a YAML file by path; ConfigError (one line) when invalid."""
    text: str
    where = str(name_or_path)
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml", ".json") or path.exists():
        try:
            text = path.read_text()
        except OSError as exc:
            raise ConfigError(f"cannot read scenario {where}: {exc.strerror}") from None
    else:
        res = resources.files("drs_prom.sim") / "scenarios" / f"{name_or_path}.yaml"
        if not res.is_file():
            raise ConfigError(f"unknown scenario {where!r}; packaged: {', '.join(scenario_names())}")
        text = res.read_text()
    return parse_scenario(text, where)


def parse_scenario(text: str, where: str = "<scenario>") -> Scenario:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"scenario {where} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"scenario {where} must be a mapping at the top level")
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-after"))
        msg = err["msg"].removeprefix("Value error, ")
        raise ConfigError(f"invalid scenario {where}: {loc + ': ' if loc else ''}{msg}") from None
