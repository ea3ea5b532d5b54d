"""A profile's owners in a scenario: the Deployments or Jobs its pods belong to, and how their usage differs and moves
(drs_prom.sim.workload draws them; drs_prom.usage learns from what they leave in the stored series)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Owners(BaseModel):
    """The owners (Deployments, Jobs) a profile's pods belong to, and how their usage differs and moves.

    A pod's owner is what a live scheduler can learn from: its earlier pods' usage is in the stored series. Each
    owner of a profile runs the same application (the profile's image) with a usage of its own: the profile's
    demand times a factor drawn per owner and signal (``usage_spread``); its own requests (``request_spread``:
    copied manifests over- and under-state); some owners only start mid-episode (``new_share``: a cold start,
    nothing stored yet); an owner's usage may drift over the episode (``drift``: up or down by up to that
    share at the end) or follow the time of day (``daily_amplitude`` over a day of ``day_seconds``, each
    owner its own phase). Drawn from a random stream of their own: a profile without ``owners`` has one owner,
    ``Job/<profile>``, and its pods are exactly as before.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    count: int = Field(1, ge=1, le=1000, description="Owners of this profile; each pod draws one uniformly.")
    usage_spread: float = Field(
        0.0, ge=0, le=2, description="Log-normal sigma of each owner's usage factor per signal around the profile's."
    )
    request_spread: float = Field(
        0.0, ge=0, le=2, description="Log-normal sigma of each owner's requests factor around the profile's."
    )
    new_share: float = Field(
        0.0, ge=0, lt=1, description="Share of owners whose first pod comes only in the second half of the episode."
    )
    drift: float = Field(
        0.0, ge=0, lt=1, description="Usage at the episode's end is (1 +- up to this) times its start."
    )
    daily_amplitude: float = Field(0.0, ge=0, lt=1, description="Relative swing of usage over a day.")
    day_seconds: float = Field(86400.0, gt=0, description="Length of the usage cycle's day (simulated seconds).")
