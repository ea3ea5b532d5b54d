"""What a filter is: the small interface every filter plugin implements, as kube-scheduler's framework defines one.

A filter answers one question for one pod on one node: may it go there, and if not, why (reasons worded as
kube-scheduler words them, so a ``FailedScheduling`` event reads the same as the stock scheduler's). Around that
question a plugin says what it reads, because that decides how often it must be asked:

- ``Stage.NODE``: the node's own spec (labels, taints, readiness, unschedulable) and the pod's constraints. The
  answer changes only when a node changes, so the scheduler and the simulator cache the whole stage's mask per
  ``key(pod)`` (pods of one workload share it) and node-table version.
- ``Stage.REQUESTS``: what the pods placed on the node requested (NodeResourcesFit). Asked at every decision,
  as one vectorised pass over node arrays (``mask``), with ``reasons`` for the per-node message.
- ``Stage.PLACED``: the pods placed on each node and the storage objects (``placed.Neighbours``). Asked only for a
  pod it has work for (``needed``), and only on the nodes the other stages left; a ``prefilter`` may compute state
  once per pod (kube-scheduler's PreFilter) or turn the pod away on every node (``Rejection``).

The chain (drs_prom.constraints.chain) runs the registered plugins in their ``order``; the first plugin that fails
decides a node's reasons, as in kube-scheduler. Adding a filter is one module in drs_prom/constraints/plugins/
(docs/extending.md). Pure: records in, reasons and masks out.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from drs_prom.constraints.placed import Neighbours
from drs_prom.types import NodeInfo, PodRequest


class Stage(enum.IntEnum):
    """What a filter reads, which decides how often it is asked (see the module docstring)."""

    NODE = 1
    REQUESTS = 2
    PLACED = 3


@dataclass(frozen=True)
class Rejection:
    """A PreFilter verdict: the pod is turned away on every node with ``reason``. ``refused``: what drs-prom could
    not decide, when that is why (counted by the scheduler, which then names kube-scheduler as the way to run it)."""

    reason: str
    refused: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeArrays:
    """Allocatable and requested resources of every node as arrays (the scheduler's node table, the simulator's
    cluster): what a REQUESTS-stage filter reads in one vectorised pass. ``alloc_scalar``/``req_scalar`` hold one
    array per scalar resource some node advertises or some placed pod requests; a missing one is 0 everywhere."""

    alloc_cpu_m: np.ndarray
    alloc_mem: np.ndarray
    alloc_pods: np.ndarray
    req_cpu_m: np.ndarray
    req_mem: np.ndarray
    pod_count: np.ndarray
    alloc_scalar: Mapping[str, np.ndarray] = field(default_factory=dict)
    req_scalar: Mapping[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterHints:
    """What a PLACED-stage filter may ask of the whole cluster before deciding it has work: whether some placed pod
    carries required anti-affinity (then every incoming pod must be checked against it)."""

    anti_affinity: bool = False


class Filter:
    """One filter plugin. Subclasses set ``name``, ``stage`` and ``order`` and implement ``reasons``; the rest has
    defaults that are right for a filter reading only the node and the pod's spec.

    ``order``: its place in the chain (lower runs first). The built-in filters keep kube-scheduler's order, ten
    apart: NodeUnschedulable 10, TaintToleration 20, NodeAffinity 30, NodePorts 40, NodeResourcesFit 50, the
    volume filters 60, PodTopologySpread 70, InterPodAffinity 80; DynamicResources (which only turns pods away)
    runs its PreFilter first (5).
    """

    name: ClassVar[str] = ""
    stage: ClassVar[Stage] = Stage.NODE
    order: ClassVar[int] = 100

    def key(self, pod: PodRequest) -> Hashable:
        """NODE stage: the part of the pod this filter reads; pods with equal keys get the same answer on every node
        (the cache key of the stage's mask). The default, the pod's name, never shares: override it."""
        return pod.name

    def needed(self, pod: PodRequest, hints: ClusterHints) -> bool:
        """PLACED stage: whether the filter has work for ``pod`` (else it passes on every node unasked)."""
        return True

    def prefilter(self, pod: PodRequest, nodes: Sequence[NodeInfo], near: Neighbours) -> object:
        """State computed once per pod for ``reasons`` (None: none), or a ``Rejection`` that turns it away."""
        return None

    def reasons(self, pod: PodRequest, node: NodeInfo, state: object, near: Neighbours) -> Sequence[str]:
        """Why ``pod`` may not go to ``node`` (empty: it may). ``state``: what ``prefilter`` returned."""
        raise NotImplementedError

    def mask(self, pod: PodRequest, arrays: NodeArrays) -> np.ndarray | None:
        """REQUESTS stage: the verdict over every node as one array (None: ask ``reasons`` node by node)."""
        return None

    def eviction_may_help(self, reasons: Sequence[str]) -> bool:
        """Whether evicting lower-priority pods could lift this filter's ``reasons`` on a node (kube-scheduler's
        Unschedulable, as opposed to UnschedulableAndUnresolvable): preemption looks only at such nodes. A filter
        that reads only the node never can."""
        return self.stage is not Stage.NODE


@dataclass(frozen=True)
class FilterResult:
    """``mask[i]`` is True when ``nodes[i]`` is feasible; ``reasons[i]`` says why not and ``failed_by[i]`` names the
    filter that said so ("" where feasible).

    ``prefilter`` is set when the pod was turned away before any node was looked at (kube-scheduler's
    PreFilter rejection): every node then carries that one reason and the summary names it once.
    """

    mask: np.ndarray
    reasons: tuple[tuple[str, ...], ...]
    prefilter: str = ""
    refused: tuple[str, ...] = ()  # what drs-prom could not decide, when that is why the pod was turned away
    failed_by: tuple[str, ...] = ()

    @property
    def any(self) -> bool:
        return bool(self.mask.any())


def unsupported_reason(what: Sequence[str]) -> str:
    """The PreFilter reason for a pod drs-prom will not place: what it needs and how to run it instead."""
    return (
        f"drs-prom does not check {', '.join(what)}; schedule this pod with kube-scheduler "
        "and drs-prom as its extender (which keeps every kube-scheduler filter)"
    )
