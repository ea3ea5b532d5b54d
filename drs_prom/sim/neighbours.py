"""The simulated cluster's placed pods as the inter-pod filters read them (``interpod.Neighbours``).

NodePorts, PodTopologySpread and InterPodAffinity decide a node from the pods already on it, so the
simulator hands them the same view the live scheduler builds from the apiserver: each running pod's
labels, namespace, node, host ports and required anti-affinity, and the claims and volumes of the pods
of a ``volume_zones`` profile for the volume filters. Only pods of a profile with a
``Placement`` carry any of those (the others have no labels, ports or terms, so no filter can see
them), which keeps the view as small as the constrained part of the workload.
"""

from __future__ import annotations

import numpy as np

from drs_prom.constraints.placed import Neighbours
from drs_prom.constraints.volumes import NO_STORAGE, Storage
from drs_prom.sim.placement import Placement
from drs_prom.sim.workload import Workload, placement_fields
from drs_prom.types import PodRecord


def has_interpod(workload: Workload) -> bool:
    """Whether any pod of ``workload`` has a placement constraint the inter-pod filters enforce."""
    return workload.placement is not None and any(workload.placement)


def _record(workload: Workload, pod: int, node: str) -> PodRecord:
    fields = placement_fields(workload.profiles[pod], workload.placement[pod] if workload.placement else Placement())
    return PodRecord(
        uid=f"sim-{pod}",
        namespace="default",
        node=node,
        labels=tuple(sorted(fields.get("labels", {}).items())),
        ports=fields.get("ports", ()),
        anti_affinity=fields.get("pod_anti_affinity", ()),
    )


def sim_neighbours(
    workload: Workload,
    running: np.ndarray,
    node_of: np.ndarray,
    node_names: tuple[str, ...] | list[str],
    storage: Storage = NO_STORAGE,
) -> Neighbours:
    """The running pods with a placement constraint, by node name (requests are already in the node sums), and
    ``storage``: the claims and volumes of the workload's pods (``zonal_volumes.workload_storage``)."""
    placement = workload.placement
    by_node: dict[str, list[PodRecord]] = {}
    if placement is None:
        return Neighbours(storage=storage)
    for pod in running.tolist():
        if placement[pod]:
            name = node_names[int(node_of[pod])]
            by_node.setdefault(name, []).append(_record(workload, pod, name))
    return Neighbours(pods_by_node=by_node, storage=storage)
