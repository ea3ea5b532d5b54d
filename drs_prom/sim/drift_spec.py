"""How a profile's pods' usage moves after they are placed, and what an eviction costs them (scenario sections).

Placement decides once; a pod's usage does not stay put. ``UsageDrift`` gives the pods of a profile a usage that
changes while they run: in ``steps`` (from a moment of the episode on, a share of the pods use ``factor`` times as
much of some signals: a release that doubles CPU, a cache that grows) and with the day (``daily_amplitude`` over
``day_seconds``, each pod or group of pods its own phase, held for ``resolution_seconds`` at a time). drs_prom.sim.
workload draws it per pod into a usage profile over time, which the simulated cluster follows (its rates change at
each step); a profile without ``drift`` keeps its usage, exactly as before.

``Restart`` is what an eviction (drs_prom.sim.rebalancer) costs a pod of the profile: its replacement starts after
``penalty_seconds`` of work (pulling, starting, warming up) and then does the work the pod had left, or, for a pod
whose state is ``lost`` (a service's in-memory state, a job that does not checkpoint), its whole work again.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from drs_prom.features import FEATURES


def _signals(value: tuple[str, ...]) -> tuple[str, ...]:
    bad = [s for s in value if s not in FEATURES]
    if bad:
        raise ValueError(f"unknown signal {bad[0]!r}; known: {', '.join(FEATURES)}")
    return value


class DriftStep(BaseModel):
    """From ``at_seconds`` of the episode on, a ``share`` of the profile's pods (drawn per pod) use ``factor`` times
    as much of ``signals`` (all six when empty) as before: running ones change under their placement, later ones
    start so."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    at_seconds: float = Field(ge=0, description="Simulated seconds from the episode's start.")
    share: float = Field(1.0, gt=0, le=1, description="Share of the profile's pods whose usage changes.")
    factor: float = Field(gt=0, le=20, description="Their usage from then on, times their usage before.")
    signals: tuple[str, ...] = Field((), description="Signals that change (cpu, mem, net_rx, ...); empty: all.")

    @field_validator("signals")
    @classmethod
    def _known(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _signals(value)


class UsageDrift(BaseModel):
    """How a profile's pods' usage moves while they run (module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    steps: tuple[DriftStep, ...] = ()
    daily_amplitude: float = Field(0.0, ge=0, lt=1, description="Relative swing of usage over a day.")
    day_seconds: float = Field(86400.0, gt=0, description="Length of the usage cycle's day (simulated seconds).")
    phases: int = Field(
        0, ge=0, le=1000, description="0: each pod its own phase of the day; k: k groups whose pods peak together."
    )
    resolution_seconds: float = Field(
        600.0, gt=0, description="The daily curve is held constant this long at a time (the rates change in steps)."
    )
    daily_signals: tuple[str, ...] = Field((), description="Signals the day moves; empty: all.")

    @field_validator("daily_signals")
    @classmethod
    def _known(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _signals(value)


class Restart(BaseModel):
    """What an eviction costs a pod of the profile (module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    penalty_seconds: float = Field(30.0, ge=0, description="Work a replacement does before it resumes (seconds).")
    state: Literal["kept", "lost"] = Field(
        "kept", description="kept: the replacement does the work left; lost: it does the whole work again."
    )
