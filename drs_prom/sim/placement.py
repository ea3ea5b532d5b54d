"""A scenario profile's placement constraints: what makes its pods a replicated workload under kube-scheduler's
hard constraints (a field of ``scenario.Profile``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Placement(BaseModel):
    """Required placement constraints of a replicated workload, over the pods of its own profile (label
    ``app: <profile>``), as its manifest would state them; kube-scheduler's filters (and drs-prom's) enforce them.

    ``anti_affinity``: required pod anti-affinity on this topology key (``kubernetes.io/hostname``: one replica per
    node); ``spread``: a DoNotSchedule topology spread constraint on this key (``topology.kubernetes.io/zone``) with
    ``max_skew``; ``host_port``: each pod asks for this TCP host port (one pod per node can hold it);
    ``volume_zones``: each pod mounts one bound PersistentVolumeClaim whose PersistentVolume lives in one of these
    zones (``topology.kubernetes.io/zone``), drawn per pod, so it may only run there (VolumeBinding, VolumeZone).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    anti_affinity: str | None = Field(None, min_length=1, description="Topology key of required anti-affinity.")
    spread: str | None = Field(None, min_length=1, description="Topology key of a DoNotSchedule spread constraint.")
    max_skew: int = Field(1, ge=1)
    host_port: int | None = Field(None, ge=1, le=65535)
    volume_zones: tuple[str, ...] = Field((), description="Zones a pod's bound volume is drawn from (one per pod).")

    @field_validator("volume_zones")
    @classmethod
    def _zones(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not z for z in value) or len(set(value)) != len(value):
            raise ValueError("volume_zones must be distinct, non-empty zone names")
        return value

    def check_zones(self, profile: str, node_labels: Sequence[Mapping[str, str]]) -> None:
        """ValueError unless each of ``volume_zones`` is the zone of some node the profile fits (``node_labels``),
        else its pods would wait forever."""
        zones = {labels.get(ZONE_LABEL) for labels in node_labels}
        for zone in self.volume_zones:
            if zone not in zones:
                raise ValueError(f"profile {profile!r}: no node it fits has {ZONE_LABEL}={zone} (volume_zones)")

    def __bool__(self) -> bool:
        return bool(self.anti_affinity or self.spread or self.host_port or self.volume_zones)


ZONE_LABEL = "topology.kubernetes.io/zone"
"""The node label a ``volume_zones`` volume's zone is matched against (its PersistentVolume's node affinity and label)."""


def claim_name(pod: str) -> str:
    """The PersistentVolumeClaim a ``volume_zones`` pod named ``pod`` mounts (in its own namespace)."""
    return f"{pod}-data"
