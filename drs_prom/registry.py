"""Every placement policy by name, built one way: ``make_policy(name, spec, seed)``.

The benchmark, the scheduler, the extender, retraining, the twin and training all build
their policies here, from a ``PolicySpec`` taken from the validated settings
(``PolicySpec.from_settings``): the rate window behind the metrics (``prometheus.window``,
how long a policy remembers its own binds), the cluster's normalisation and the model
file. Whatever a caller may read of a policy afterwards (drs_prom.policies.contract.Policy) is set
here, so no module falls back to defaults of its own.

The heuristics (drs_prom.policies.baselines, drs_prom.policies.load_aware), the GPU clusters' baselines
(drs_prom.policies.device_fit, drs_prom.policies.fragmentation) and the teachers (drs_prom.policies.teachers) are
registered at import. The learned policies (``drs``, ``drs-original``) load their model file only when such a policy
is asked for: importing ``drs_prom.agent`` is cheap (no TensorFlow), loading a model is not.
A new model-backed policy registers a factory with ``register`` (or, for a new kind of
model file, adds a branch to drs_prom.agent.persistence.LoadedModel.policy).

This module sits above drs_prom.agent in the layers (it knows the agent package; the
agent does not know the registry).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from drs_prom import agent
from drs_prom.agent.numpy_policy import Layers
from drs_prom.config import FILL_WINDOW, WHOLE_NODE_RESERVE, Normalisation, Settings, load_settings
from drs_prom.errors import ConfigError
from drs_prom.policies.baselines import BalancedLoad, KubeDefault, LeastLoaded, RandomPolicy, RoundRobin
from drs_prom.policies.contract import Policy
from drs_prom.policies.device_fit import BestFitGpu, MostAllocatedGpu
from drs_prom.policies.device_stage import DEVICES_SUFFIX, DeviceStage
from drs_prom.policies.fragmentation import FragmentationGradientDescent
from drs_prom.policies.load_aware import (
    CapacityBalancedLoad,
    CapacityBalancedOverload,
    LoadVariationRiskBalancing,
    TargetLoadPacking,
)
from drs_prom.policies.staged import Staged
from drs_prom.policies.teachers import CapacityBalancedPeak, CapacityBalancedResident, CapacityBalancedRoom
from drs_prom.policies.whole_reserve import WholeNodeReserve
from drs_prom.stores.model_store import MODEL_FILE


@dataclass(frozen=True)
class PolicySpec:
    """What every policy is built from; one value for a whole run (scheduler, bench scenario, retraining)."""

    metric_window_seconds: float
    """The rate window behind ctx.load (seconds): new load shows fully only after it, so a policy remembers
    its own binds that long."""
    normalisation: Normalisation
    """The cluster's scales; a policy that reads overload gets them unclipped (drs_prom.policies.contract.input_scales)."""
    model_path: str = ""
    """Model file of ``drs``; "" = the shipped one."""
    model_version: str = ""
    """What the journal calls that model; "" = the file's stem and creation time."""
    whole_node_reserve: int = WHOLE_NODE_RESERVE
    """Whole device nodes ``drs`` holds back per device resource (drs_prom.policies.whole_reserve)."""
    fill_window: int = FILL_WINDOW
    """Binds without a departure after which ``drs`` packs devices (drs_prom.policies.filling); 0: never."""

    @classmethod
    def from_settings(cls, settings: Settings) -> PolicySpec:
        """The spec the scheduler, the extender and retraining use: their configuration, nothing else."""
        return cls(
            metric_window_seconds=settings.prometheus.window_seconds,
            normalisation=settings.normalisation,
            model_path=settings.scheduler.model_path,
            whole_node_reserve=settings.scheduler.whole_node_reserve,
            fill_window=settings.scheduler.fill_window,
        )

    def with_window_at_least(self, seconds: float) -> PolicySpec:
        """The same spec whose window is never shorter than ``seconds`` (a simulated scenario's metric lag)."""
        return replace(self, metric_window_seconds=max(self.metric_window_seconds, float(seconds)))


def configured_spec() -> PolicySpec:
    """PolicySpec of the configuration as drs_prom.config.load_settings reads it without a file (``DRS_PROM_*``
    environment, then the documented defaults): for the simulator tools that take no settings of their own."""
    return PolicySpec.from_settings(load_settings())


PolicyFactory = Callable[[int, PolicySpec], Policy]
"""``factory(seed, spec) -> Policy``, every attribute of the Policy contract set."""


def _heuristic(cls: Callable[[int, float], Policy]) -> PolicyFactory:
    def factory(seed: int, spec: PolicySpec) -> Policy:
        return cls(seed, spec.metric_window_seconds)

    return factory


_REGISTRY: dict[str, PolicyFactory] = {
    name: _heuristic(cls)
    for name, cls in (
        ("kube-default", KubeDefault),
        ("least-loaded", LeastLoaded),
        ("balanced-load", BalancedLoad),
        ("random", RandomPolicy),
        ("round-robin", RoundRobin),
        ("trimaran-tlp", TargetLoadPacking),
        ("trimaran-lvrb", LoadVariationRiskBalancing),
        ("capacity-balanced", CapacityBalancedLoad),
        ("capacity-balanced-overload", CapacityBalancedOverload),
    )
}

HEURISTICS: tuple[str, ...] = tuple(_REGISTRY)
"""The field's heuristics: the baselines a learned policy is judged against."""

TEACHERS: tuple[str, ...] = ("capacity-balanced-resident", "capacity-balanced-room", "capacity-balanced-peak")
"""Heuristics that read what only drs-prom's own scheduler keeps (DecisionContext.resident, the shapes of the pods it
decided): the shipped networks' training targets. Built and benchmarked like the others (the bench table shows them),
never a judging baseline."""
_REGISTRY["capacity-balanced-resident"] = _heuristic(CapacityBalancedResident)
_REGISTRY["capacity-balanced-room"] = _heuristic(CapacityBalancedRoom)
_REGISTRY["capacity-balanced-peak"] = _heuristic(CapacityBalancedPeak)

DEVICE_HEURISTICS: tuple[str, ...] = ("most-allocated-gpu", "best-fit-gpu", "fgd")
"""The field's placements for GPU clusters (drs_prom.policies.device_fit, drs_prom.policies.fragmentation): baselines
of the trace benchmark and the fill protocol (drs_prom.sim.fill), not of the CPU suite, whose verdicts judge against
HEURISTICS only. Built by name like every other policy."""
_REGISTRY["most-allocated-gpu"] = _heuristic(MostAllocatedGpu)
_REGISTRY["best-fit-gpu"] = _heuristic(BestFitGpu)
_REGISTRY["fgd"] = _heuristic(FragmentationGradientDescent)

LEARNED: tuple[str, ...] = ("drs", "drs-original")


def register(name: str, factory: PolicyFactory) -> None:
    """Add a policy factory (``factory(seed, spec) -> Policy``) under ``name``."""
    _REGISTRY[name] = factory


def _learned(name: str, reserve: bool = True) -> PolicyFactory:
    """Factory for a shipped learned policy; ModelError (one line) when its model cannot be loaded. ``drs`` is its
    network behind the whole-node stage (drs_prom.policies.whole_reserve) unless ``reserve`` is False."""

    def factory(seed: int, spec: PolicySpec) -> Policy:
        del seed  # a trained policy is deterministic
        if name == "drs-original":
            return agent.load_policy(
                agent.default_original_path(), spec.metric_window_seconds, spec.model_version or None
            )
        network = agent.load_policy(spec.model_path or None, spec.metric_window_seconds, spec.model_version or None)
        return _with_reserve(network, spec) if reserve else network

    return factory


def _with_reserve(network: Policy, spec: PolicySpec) -> Policy:
    """``drs`` as it serves: ``network`` behind the stage that keeps whole device nodes, a reserve while pods come
    and go, packing while the cluster fills (drs_prom.policies.whole_reserve)."""
    return Staged(network, WholeNodeReserve(spec.whole_node_reserve, spec.fill_window))


for _name in LEARNED:
    _REGISTRY.setdefault(_name, _learned(_name))

STAGED: tuple[str, ...] = ("drs" + DEVICES_SUFFIX,)
"""``drs``'s network behind the device stage (drs_prom.policies.device_stage) instead of the whole-node stage: an
option for GPU clusters that pack every GPU pod, not the default (docs/traces.md). Benchmarked by name like every
other policy."""


def _staged(inner: str) -> PolicyFactory:
    network = _learned(inner, reserve=False)

    def factory(seed: int, spec: PolicySpec) -> Policy:
        return Staged(network(seed, spec), DeviceStage(), DEVICES_SUFFIX)

    return factory


for _name in STAGED:
    _REGISTRY[_name] = _staged(_name.removesuffix(DEVICES_SUFFIX))


def policies_by_name() -> dict[str, PolicyFactory]:
    """Every known policy name -> factory(seed, spec). Learned ones load their model only when built."""
    return dict(_REGISTRY)


def make_policy(name: str, spec: PolicySpec, seed: int = 0) -> Policy:
    """Build a policy by name from ``spec``; ConfigError (one line) for an unknown name."""
    factory = _REGISTRY.get(name)
    if factory is None:
        raise ConfigError(f"unknown policy {name!r}; known: {', '.join(sorted(_REGISTRY))}")
    return factory(seed, spec)


def make_candidate_policy(layers: Layers, head: dict[str, Any] | None, spec: PolicySpec) -> Policy:
    """``drs`` from a network being trained (retraining's candidate, the current model's layers), not a file:
    the same classes and settings as a loaded model (drs_prom.agent.persistence.model_policy), behind the same
    whole-node stage as the ``drs`` it would replace; it reads the cluster's scales, which retraining trains on."""
    network = agent.model_policy(layers, {"policy": "drs", "head": head}, spec.metric_window_seconds, "candidate")
    return _with_reserve(network, spec)


def stored_model_loader(spec: PolicySpec) -> Callable[[Path], Policy]:
    """``loader(version_dir)`` for drs_prom.stores.model_store.ModelWatcher: ``drs`` from one version directory of
    the model store, built from ``spec`` like any other policy and named by that version."""

    def load(version_dir: Path) -> Policy:
        model = replace(spec, model_path=str(Path(version_dir) / MODEL_FILE), model_version=Path(version_dir).name)
        return make_policy("drs", model)

    return load
