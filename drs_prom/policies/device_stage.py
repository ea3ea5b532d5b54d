"""The device stage: before a balancing policy chooses, keep only the nodes where the bind strands fewest devices.

Devices (extended resources such as ``nvidia.com/gpu``) are indivisible and not contended like cpu: what hurts is a
node left with too few free for the pods to come. A policy that balances cpu, memory, network and disk spreads GPU
pods over every GPU node, so a pod asking for a whole 8-GPU node finds none free and waits (docs/traces.md, slice A;
the fill protocol's 8-GPU pods). FGD's measure says what a bind costs in devices
(drs_prom.policies.fragmentation: the growth of the node's free devices that a typical pod of the recent mix could
not use there), and balance cannot: so the device stage decides the devices and leaves the rest to the balance.

Per decision, on a cluster where some node advertises a device resource:

- per feasible node, the fragmentation growth the bind causes (``fragmentation_growth`` over the shapes of the last
  pods bound and the pod itself, as ``fgd`` computes it); a pod asking for no device is judged by the same measure,
  since its cpu and memory on a GPU node can leave that node's GPUs unusable;
- keep the nodes whose growth is within ``band`` devices of the least (``within_band``);
- for a pod that asks for the device: of those, the nodes where the bind leaves fewest devices free (best fit, the
  field's GPU packing), among the nodes the pod leaves below ``HOT`` of every resource where there is one. Packing
  lets the other nodes drain to whole, where balance would refill the emptiest; the measure alone cannot keep whole
  nodes for a shape the recent pods do not show (on openb a pod asking for 8 GPUs comes once in thousands, and until
  one is among the recent pods a 1-GPU bind costs nothing by the measure on a whole free 8-GPU node);
- for a pod that asks for none: of those, every node but the whole ones (every device free), where another takes
  it, so its cpu and memory do not fill the node a whole-node pod needs;
- the policy then chooses among the nodes left by its own scores. With several device resources, each narrows in
  turn (sorted by name).

On a cluster where no node advertises a device, ``narrow`` returns the context itself and ``record`` keeps nothing,
so the policy decides exactly as without the stage.

Which resources are devices: the extended resources of NodeResourcesFit, named ``vendor/name`` outside the
``kubernetes.io`` domains (``nvidia.com/gpu``, ``amd.com/gpu``, ``aws.amazon.com/neuron``); ephemeral-storage,
hugepages-* and attachable-volumes-* are quantities of bytes or slots, not devices.

The stage wraps a policy (drs_prom.policies.staged.Staged): ``drs+devices`` is the shipped network behind it
(drs_prom.registry), so the live scheduler, the extender and the simulator run the same code through the policy. It
is an option, not the default: on openb it keeps whole 8-GPU nodes for the pods that need them where spreading
strands them, and costs 1-3 % of the composite through imbalance on slices where no pod waits for a whole node
(docs/traces.md, "drs on GPU clusters"); the shipped ``drs`` keeps one whole node in reserve instead, and packs
only while the cluster fills (drs_prom.policies.whole_reserve). The memory of shapes is kept by ``record`` (a
policy's ``bound``), never by ``narrow``: scoring stays pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from drs_prom.policies.contract import DecisionContext
from drs_prom.policies.device_fit import pod_devices, whole_nodes
from drs_prom.policies.fragmentation import DEFAULT_SHAPES, TIE, DeviceShapes, fragmentation_growth, free_of
from drs_prom.policies.load_aware import full_of
from drs_prom.types import NodeInfo

DEVICE_BAND = 0.02
"""How much more fragmentation than the least (in devices, expected) a node may cost and stay a candidate. Set from
the measure's arithmetic, not tuned on any benchmark: on openb's pod mix binding a 1-GPU pod to a whole free 8-GPU node
costs about 0.05 more than binding it to a partly used one, and taking one of 4 free GPUs about 0.01 more, so 0.02
keeps whole 8-GPU nodes for the pods that need them while leaving the balance a choice among the partly used nodes."""

HOT = 0.8
"""The share of a node's capacity above which the objectives count it hot (``objectives.hot_fraction``'s default):
best fit on the devices packs a GPU pod only onto nodes it leaves below it."""


def is_device(resource: str) -> bool:
    """Whether ``resource`` is an extended resource (``vendor/name`` outside the ``kubernetes.io`` domains)."""
    domain, slash, _ = resource.partition("/")
    return bool(slash) and not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def device_resources(nodes: Sequence[NodeInfo]) -> tuple[str, ...]:
    """The device resources some node of ``nodes`` advertises (allocatable above 0), sorted; () on a CPU cluster."""
    found = {name for x in nodes for name, amount in x.allocatable_scalar.items() if amount > 0}
    return tuple(sorted(name for name in found if is_device(name)))


def devices_of(ctx: DecisionContext) -> tuple[str, ...]:
    """``ctx.devices``, or the same read from ``ctx.nodes`` (``device_resources``)."""
    return ctx.devices if ctx.devices is not None else device_resources(ctx.nodes)


def hot_after(ctx: DecisionContext) -> np.ndarray:
    """Per node: whether the pod's load would take one of its resources above HOT of its capacity (unknown: not hot)."""
    rel = (np.asarray(ctx.load, dtype=np.float64) + np.asarray(ctx.pod_load, dtype=np.float64)) / full_of(ctx)
    with np.errstate(invalid="ignore"):
        return np.asarray(np.nan_to_num(rel, nan=0.0).max(axis=1) > HOT)


def within_band(growth: np.ndarray, feasible: np.ndarray, band: float) -> np.ndarray:
    """The feasible nodes whose ``growth`` is at most the least feasible growth plus ``band`` (ties within TIE)."""
    feasible = np.asarray(feasible, bool)
    if not feasible.any():
        return feasible
    least = float(np.min(growth[feasible]))
    return np.asarray(feasible & (growth <= least + band + TIE))


class DeviceStage:
    """Narrows a decision to the nodes where the bind strands fewest devices (see the module docstring).

    One per policy: its memory of the recent pods' shapes (per device resource) is that policy's, filled by
    ``record`` from the policy's ``bound``.
    """

    def __init__(self, band: float = DEVICE_BAND, size: int = DEFAULT_SHAPES) -> None:
        if band < 0:
            raise ValueError(f"band must not be negative, got {band}")
        self.band = band
        self.shapes = DeviceShapes(size)

    def keep(self, ctx: DecisionContext, resources: Sequence[str]) -> np.ndarray:
        """The feasible nodes of ``ctx`` the stage keeps, for each of ``resources`` in turn: the band of the least
        fragmentation growth, then best fit for a pod asking for the device or no whole node broken for one that
        does not (the module docstring)."""
        pod = ctx.pod
        keep = np.asarray(ctx.feasible, bool)
        for resource in resources:
            free = free_of(ctx, resource)
            asked = pod_devices(pod, resource)
            growth = fragmentation_growth(
                free, self.shapes.of(resource).mix(ctx), asked, int(pod.cpu_m), int(pod.mem_bytes)
            )
            keep = within_band(growth, keep, self.band)
            if asked:  # best fit on the devices, among the nodes the pod leaves cool: other nodes drain
                cool = keep & ~hot_after(ctx)
                keep = within_band(free.gpus - asked, cool if cool.any() else keep, 0.0)
            else:  # a pod asking for none breaks into no whole node (every device free) where another takes it
                broken_in = keep & ~whole_nodes(ctx.nodes, resource)
                if broken_in.any():
                    keep = broken_in
        return keep

    def narrow(self, ctx: DecisionContext) -> DecisionContext:
        """``ctx`` with ``feasible`` narrowed to the nodes ``keep`` keeps; ``ctx`` itself where no node has devices
        or every feasible node is kept. Records nothing."""
        resources = devices_of(ctx)
        if not resources:
            return ctx
        keep = self.keep(ctx, resources)
        if np.array_equal(keep, np.asarray(ctx.feasible, bool)):
            return ctx
        return replace(ctx, feasible=keep)

    def record(self, ctx: DecisionContext) -> None:
        """Remember the shape of ``ctx``'s pod (decided, on the nodes the filters found feasible: ``ctx`` as the
        policy was given it, not narrowed); nothing on a cluster without devices."""
        self.shapes.record(ctx, devices_of(ctx))


DEVICES_SUFFIX = "+devices"
"""A policy behind the device stage is registered as its name with this suffix (``drs+devices``)."""
