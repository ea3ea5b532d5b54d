"""Every placement policy by name: ``make_policy(name, seed)`` for the benchmark, the scheduler and training.

The heuristics (drs_prom.baselines, drs_prom.load_aware) are registered at import. The learned policies
(``drs``, ``drs-original``) are built in one place, ``_learned``, which loads the shipped
model only when such a policy is asked for: importing ``drs_prom.agent`` is cheap (no
TensorFlow), loading a model file is not.

This module sits above drs_prom.agent in the layers (it knows the agent package; the
agent does not know the registry).
"""

from __future__ import annotations

from collections.abc import Callable

from drs_prom import agent
from drs_prom.baselines import BalancedLoad, KubeDefault, LeastLoaded, RandomPolicy, RoundRobin
from drs_prom.errors import ConfigError
from drs_prom.load_aware import (
    CapacityBalancedLoad,
    CapacityBalancedOverload,
    LoadVariationRiskBalancing,
    TargetLoadPacking,
)
from drs_prom.policy import Policy

PolicyFactory = Callable[[int], Policy]
"""``factory(seed) -> Policy``."""

_REGISTRY: dict[str, PolicyFactory] = {
    "kube-default": KubeDefault,
    "least-loaded": LeastLoaded,
    "balanced-load": BalancedLoad,
    "random": RandomPolicy,
    "round-robin": RoundRobin,
    "trimaran-tlp": TargetLoadPacking,
    "trimaran-lvrb": LoadVariationRiskBalancing,
    "capacity-balanced": CapacityBalancedLoad,
    "capacity-balanced-overload": CapacityBalancedOverload,
}

HEURISTICS: tuple[str, ...] = tuple(_REGISTRY)
LEARNED: tuple[str, ...] = ("drs", "drs-original")


def register(name: str, factory: PolicyFactory) -> None:
    """Add a policy factory (``factory(seed) -> Policy``) under ``name``."""
    _REGISTRY[name] = factory


def _learned(name: str) -> PolicyFactory:
    """Factory for a shipped learned policy; ModelError (one line) when its model cannot be loaded."""

    def factory(seed: int) -> Policy:
        del seed  # a trained policy is deterministic
        path = agent.default_original_path() if name == "drs-original" else agent.default_model_path()
        return agent.load_policy(path)

    return factory


for _name in LEARNED:
    _REGISTRY.setdefault(_name, _learned(_name))


def policies_by_name() -> dict[str, PolicyFactory]:
    """Every known policy name -> factory(seed). Learned ones load their model only when built."""
    return dict(_REGISTRY)


def make_policy(name: str, seed: int = 0) -> Policy:
    """Build a policy by name; ConfigError (one line) for an unknown name."""
    factory = _REGISTRY.get(name)
    if factory is None:
        raise ConfigError(f"unknown policy {name!r}; known: {', '.join(sorted(_REGISTRY))}")
    return factory(seed)
