"""Whole device nodes for the pods that need one: a reserve while pods come and go, packing while the cluster fills.

Devices (extended resources such as ``nvidia.com/gpu``) are indivisible: a pod asking for all eight GPUs of a node
can run only on a node where none is taken. A policy that balances cpu, memory, network and disk spreads the GPU pods
over every GPU node, so once the cluster is busy no 8-GPU node is whole, and such a pod waits until one drains, which
spreading keeps from happening (the emptiest node is refilled first). On Alibaba's GPU trace one 8-GPU pod so waited
8.2 hours under kube-default and drs alike (docs/traces.md, slice A). Packing every GPU pod (best fit, FGD) keeps
nodes whole but gives up the balance where no pod needs a whole node (1-3 % of the composite on the trace's other
slices).

The reserve costs the balance one node per device resource instead: per device resource, among the nodes with the
most devices (the largest whole-node request the cluster can serve), ``count`` whole nodes (every device free) are
held back. A pod goes there only where no other node is feasible for it, as a pod asking for a whole node is once
no whole node outside the reserve is left; another whole node, if any, then takes the taken one's place. A node that
drains to whole while the reserve is short joins it and stays whole. Which ones: the whole nodes with the most cpu
free, then the most memory free, then by name (the same choice every time for the same cluster). A pod asking for a
whole node asks for much of its cpu and memory too, and nodes with as many devices differ in both: on openb an 8-GPU
pod asks for 64 to 120 cores and 8-GPU nodes have 64 to 128, so a reserve held by name kept a node most of those
pods cannot use (measured in docs/traces.md). Nodes of one device are never held back: one device cannot be split
between pods, so such a node is never partly used.

While the cluster fills (no pod has left it over the last ``fill_window`` binds, drs_prom.policies.filling), a held
node would serve one whole-node pod and never come back, as nothing drains: there the stage packs instead
(drs_prom.policies.fill_packing: FGD's least fragmentation, no whole node broken where another node takes the pod,
not the roomiest where one must be). On openb's fill protocol one held node left 22.5 pods per seed finding no
node, the packing 3.2 (``fgd`` 2.5; docs/traces.md).

On a cluster where no node advertises a device, ``narrow`` hands the context on untouched, so ``drs`` decides
exactly as its network does (the CPU suite's numbers do not move); with devices, on nodes of one device each, only
the packing can narrow. The stage's memory (the recent pods' shapes, the binds since a pod left) is kept by
``record``, never by ``narrow``: scoring stays pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from drs_prom.config import FILL_WINDOW, WHOLE_NODE_RESERVE
from drs_prom.policies.contract import DecisionContext, node_requests
from drs_prom.policies.device_fit import device_columns
from drs_prom.policies.device_stage import devices_of
from drs_prom.policies.fill_packing import packing_keep
from drs_prom.policies.filling import FillWatch
from drs_prom.policies.fragmentation import DeviceShapes
from drs_prom.types import NodeInfo


def reserved(nodes: Sequence[NodeInfo], requests: np.ndarray, resource: str, count: int) -> np.ndarray:
    """Per node: whether it is held back for ``resource`` (see the module docstring). ``requests`` is the
    (n, len(NODE_REQUEST_COLUMNS)) matrix of ``nodes`` (drs_prom.policies.contract.node_requests)."""
    alloc, used = device_columns(nodes, resource)
    held = np.zeros(len(alloc), bool)
    if count <= 0 or len(alloc) == 0 or alloc.max() < 2:
        return held
    whole = np.flatnonzero((alloc == alloc.max()) & (used == 0))
    if len(whole) == 0:
        return held
    free_cpu = requests[whole, 1] - requests[whole, 0]
    free_mem = requests[whole, 3] - requests[whole, 2]
    names = np.array([nodes[int(i)].name for i in whole])
    held[whole[np.lexsort((names, -free_mem, -free_cpu))[:count]]] = True
    return held


class WholeNodeReserve:
    """A stage (drs_prom.policies.staged.Stage) that keeps whole device nodes for the pods that need one: while pods
    come and go, ``count`` whole nodes per device resource held back; while the cluster fills, packing (the module
    docstring)."""

    def __init__(self, count: int = WHOLE_NODE_RESERVE, fill_window: int = FILL_WINDOW) -> None:
        if count < 0:
            raise ValueError(f"the whole-node reserve must not be negative, got {count}")
        self.count = count
        self.watch = FillWatch(fill_window)
        self.shapes = DeviceShapes()

    def _resources(self, ctx: DecisionContext) -> tuple[str, ...]:
        return devices_of(ctx) if self.count or self.watch.window else ()

    def keep(self, ctx: DecisionContext) -> np.ndarray:
        """The feasible nodes of ``ctx`` this pod may take, for each device resource in turn: packed while the
        cluster fills; otherwise without the reserve, unless the reserve holds every node feasible for it."""
        keep = np.asarray(ctx.feasible, bool)
        resources = self._resources(ctx)
        if not resources:
            return keep
        if self.watch.filling:
            for resource in resources:
                keep = packing_keep(ctx, keep, resource, self.shapes.of(resource).mix(ctx))
            return keep
        requests = node_requests(ctx)
        for resource in resources:
            rest = keep & ~reserved(ctx.nodes, requests, resource, self.count)
            if rest.any():
                keep = rest
        return keep

    def narrow(self, ctx: DecisionContext) -> DecisionContext:
        keep = self.keep(ctx)
        if np.array_equal(keep, np.asarray(ctx.feasible, bool)):
            return ctx
        return replace(ctx, feasible=keep)

    def record(self, ctx: DecisionContext) -> None:
        """Tell the watch of the bind and remember the pod's shape (``ctx`` as the filters gave it); nothing on a
        cluster without devices."""
        resources = self._resources(ctx)
        if not resources:
            return
        self.watch.record(ctx, resources)
        self.shapes.record(ctx, resources)
