"""NodeResourcesFit: the pod's requests against the node's allocatable minus what its placed pods requested.

Every resource the pod requests is checked: cpu, memory, the pod count, then ``pod.scalar`` (ephemeral-storage,
hugepages-*, extended and device-plugin resources such as nvidia.com/gpu); a resource the node does not advertise
has allocatable 0. A zero request is never checked, as in kube-scheduler. Every insufficient resource is reported at
once. ``reasons`` (one node, for the message) and ``mask`` (every node, the hot path) state the same rule; a property
test holds them equal.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from drs_prom.constraints.framework import Filter, NodeArrays, Stage
from drs_prom.constraints.placed import Neighbours
from drs_prom.types import NodeInfo, PodRequest

R_CPU = "Insufficient cpu"
R_MEM = "Insufficient memory"
R_PODS = "Too many pods"


def resource_reasons(pod: PodRequest, node: NodeInfo) -> list[str]:
    """Every resource ``pod`` requests more of than ``node`` has left."""
    out: list[str] = []
    if node.pod_count + 1 > node.allocatable_pods:
        out.append(R_PODS)
    if pod.cpu_m > 0 and pod.cpu_m > node.allocatable_cpu_m - node.requested_cpu_m:
        out.append(R_CPU)
    if pod.mem_bytes > 0 and pod.mem_bytes > node.allocatable_mem_bytes - node.requested_mem_bytes:
        out.append(R_MEM)
    for name, amount in pod.scalar:
        if amount > 0 and amount > node.allocatable_scalar.get(name, 0) - node.requested_scalar.get(name, 0):
            out.append(f"Insufficient {name}")
    return out


def resource_mask(pod: PodRequest, a: NodeArrays) -> np.ndarray:
    """``resource_reasons`` over every node at once: True where nothing is insufficient."""
    ok = a.pod_count + 1 <= a.alloc_pods
    if pod.cpu_m > 0:
        ok &= pod.cpu_m <= a.alloc_cpu_m - a.req_cpu_m
    if pod.mem_bytes > 0:
        ok &= pod.mem_bytes <= a.alloc_mem - a.req_mem
    for name, amount in pod.scalar:
        if amount <= 0:
            continue
        have = a.alloc_scalar.get(name)
        if have is None:
            return np.zeros(len(ok), dtype=bool)  # no node advertises it
        used = a.req_scalar.get(name)
        ok &= amount <= (have - used if used is not None else have)
    return np.asarray(ok)


class NodeResourcesFit(Filter):
    name = "NodeResourcesFit"
    stage = Stage.REQUESTS
    order = 50

    def reasons(self, pod: PodRequest, node: NodeInfo, state: object, near: Neighbours) -> Sequence[str]:
        return resource_reasons(pod, node)

    def mask(self, pod: PodRequest, arrays: NodeArrays) -> np.ndarray:
        return resource_mask(pod, arrays)


FILTER = NodeResourcesFit()
