"""The cluster's nodes as arrays, so a scheduling cycle never loops over nodes in Python.

``NodeTable`` is rebuilt only when the node set or a node's spec/status changes; binding
a pod changes three numbers of one row (``add``). ``NodeView`` is an immutable copy the
scheduling thread works on while the watch threads keep updating the table.

The filter chain (drs_prom.constraints.chain) runs on the table: its NODE stage (taints, unschedulable, node
affinity) cached per pod key and table version, so the pods of one Deployment share it; its REQUESTS stage over
the table's arrays; its PLACED stage (host ports, volumes, topology spread, pod affinity) only for pods it has work
for, on the nodes the other stages left.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from drs_prom.constraints import chain, soft_terms, taint_score
from drs_prom.constraints.framework import ClusterHints, FilterResult, NodeArrays
from drs_prom.constraints.placed import EMPTY, Neighbours
from drs_prom.policies.device_stage import is_device
from drs_prom.signals import link_capacity
from drs_prom.types import NodeInfo, PodRequest

_NONE: dict[
    str, int
] = {}  # requested_scalar of nodes when no placed pod requests a scalar resource (shared, never mutated)


class NodeTable:
    """Allocatable and requested resources per node, by index into the sorted ``names``."""

    def __init__(self, base: Sequence[NodeInfo], version: int) -> None:
        self.version = version
        self.base = list(base)  # parsed nodes without pods, sorted by name
        self.names = tuple(n.name for n in self.base)
        self.index = {name: i for i, name in enumerate(self.names)}
        n = len(self.base)
        self.alloc_cpu = np.array([b.allocatable_cpu_m for b in self.base], dtype=np.int64).reshape(n)
        self.alloc_mem = np.array([b.allocatable_mem_bytes for b in self.base], dtype=np.int64).reshape(n)
        self.alloc_pods = np.array([b.allocatable_pods for b in self.base], dtype=np.int64).reshape(n)
        self.req_cpu = np.zeros(n, dtype=np.int64)
        self.req_mem = np.zeros(n, dtype=np.int64)
        self.pods = np.zeros(n, dtype=np.int64)
        self._infos: list[NodeInfo | None] = [None] * n  # NodeInfo with current requests, built on demand
        self.static = chain.StaticMasks(self.base)
        names = sorted({k for b in self.base for k in b.allocatable_scalar})
        self.alloc_scalar = {
            k: np.array([b.allocatable_scalar.get(k, 0) for b in self.base], dtype=np.int64).reshape(n) for k in names
        }
        self.devices = tuple(k for k in names if is_device(k))  # the scalar resources that are devices, sorted
        # the nodes with a PreferNoSchedule taint: only there can TaintToleration's score tell nodes apart
        self.soft_tainted = np.array([taint_score.has_soft_taint(b) for b in self.base], dtype=bool).reshape(n)
        self.any_soft_tainted = bool(self.soft_tainted.any())
        self.req_scalar: dict[str, np.ndarray] = {}  # one array per scalar resource some placed pod requests
        # network/disk bandwidth per node from its labels (NaN: the standard), parsed once per table
        self.link, self.link_errors = link_capacity.matrix((b.name, b.labels) for b in self.base)

    def add(self, node: str, cpu_m: int, mem: int, count: int, scalar: Sequence[tuple[str, int]] = ()) -> None:
        """Add (or with negative values remove) one pod's requests on ``node``; unknown nodes are ignored."""
        i = self.index.get(node)
        if i is None:
            return
        self.req_cpu[i] += cpu_m
        self.req_mem[i] += mem
        self.pods[i] += count
        for name, amount in scalar:
            arr = self.req_scalar.get(name)
            if arr is None:
                arr = self.req_scalar[name] = np.zeros(len(self.names), dtype=np.int64)
            arr[i] += amount

    def view(self, near: Callable[[], Neighbours] = lambda: EMPTY, existing_anti: bool = False) -> NodeView:
        return NodeView(
            table=self,
            names=self.names,
            req_cpu=self.req_cpu.copy(),
            req_mem=self.req_mem.copy(),
            pods=self.pods.copy(),
            req_scalar={k: v.copy() for k, v in self.req_scalar.items()},
            near=near,
            existing_anti=existing_anti,
        )


@dataclass(frozen=True)
class NodeView:
    """The requests per node at one moment (copies), plus the table's static arrays.

    ``near()`` gives the pods placed on each node (bound and assumed) and the namespaces' labels,
    built only when a pod needs them; ``existing_anti`` says whether some placed pod has required
    anti-affinity (then every pod needs them).
    """

    table: NodeTable
    names: tuple[str, ...]
    req_cpu: np.ndarray
    req_mem: np.ndarray
    pods: np.ndarray
    req_scalar: Mapping[str, np.ndarray] = field(default_factory=dict)
    near: Callable[[], Neighbours] = lambda: EMPTY
    existing_anti: bool = False

    def __len__(self) -> int:
        return len(self.names)

    def feasible(self, pod: PodRequest) -> np.ndarray:
        """Every filter of the chain (the NODE stage cached per pod key)."""
        t = self.table
        arrays = NodeArrays(
            t.alloc_cpu,
            t.alloc_mem,
            t.alloc_pods,
            self.req_cpu,
            self.req_mem,
            self.pods,
            t.alloc_scalar,
            self.req_scalar,
        )
        return chain.feasible(pod, t.static, arrays, self.near, ClusterHints(self.existing_anti))

    def devices(self, rows: np.ndarray) -> tuple[str, ...]:
        """The device resources some node at ``rows`` advertises (DecisionContext.devices): from the table's arrays,
        nothing to do on a cluster without devices, where the policy's stages would read every candidate's NodeInfo."""
        t = self.table
        return tuple(k for k in t.devices if bool((t.alloc_scalar[k][rows] > 0).any()))

    def soft_scores(self, pod: PodRequest, rows: np.ndarray, feasible: np.ndarray) -> np.ndarray | None:
        """The score terms every policy shares for the nodes at ``rows`` (``feasible``: which of them passed
        the filters), 0 where infeasible: the pod's ScheduleAnyway spread and, where some feasible node has a
        PreferNoSchedule taint, TaintToleration's score (constraints.soft_terms); None when neither applies (the
        decision is the policy's alone)."""
        if not pod.soft_spread and not self.table.any_soft_tainted:
            return None  # the common case costs nothing
        picked = np.asarray(rows)[feasible]
        tainted = bool(self.table.soft_tainted[picked].any())
        return soft_terms.terms(pod, self.table.base, picked.tolist(), feasible, self.near, tainted)

    def filter_result(self, pod: PodRequest) -> FilterResult:
        """Reasons per node, as kube-scheduler words them (for a FailedScheduling event)."""
        return chain.filter_all(pod, self.all_infos(), self.near())

    def infos(self, idx: Sequence[int] | np.ndarray) -> list[NodeInfo]:
        """NodeInfo (requests as of this view) for the nodes at ``idx``; built once per node
        and request change (the table keeps them), so a cycle mostly reuses them."""
        cache = self.table._infos
        base = self.table.base
        cpus, mems, counts = self.req_cpu.tolist(), self.req_mem.tolist(), self.pods.tolist()
        scalars = {k: v.tolist() for k, v in self.req_scalar.items()}
        out = []
        for i in np.asarray(idx, dtype=np.int64).tolist():
            cpu, mem, count = cpus[i], mems[i], counts[i]
            scalar = {k: v[i] for k, v in scalars.items() if v[i]} if scalars else _NONE
            got = cache[i]
            if (
                got is None
                or got.requested_cpu_m != cpu
                or got.requested_mem_bytes != mem
                or got.pod_count != count
                or (got.requested_scalar is not scalar and got.requested_scalar != scalar)
            ):
                got = dataclasses.replace(
                    base[i], requested_cpu_m=cpu, requested_mem_bytes=mem, pod_count=count, requested_scalar=scalar
                )
                cache[i] = got  # harmless if stale by now: every use compares the counts first
            out.append(got)
        return out

    def requests(self, idx: np.ndarray) -> np.ndarray:
        """(len(idx), len(NODE_REQUEST_COLUMNS)) float64 in policy.NODE_REQUEST_COLUMNS order: the same numbers as
        ``infos(idx)``, for the policy's arrays without a loop over NodeInfo."""
        t = self.table
        return np.column_stack(
            [
                self.req_cpu[idx],
                t.alloc_cpu[idx],
                self.req_mem[idx],
                t.alloc_mem[idx],
                self.pods[idx],
                t.alloc_pods[idx],
            ]
        ).astype(np.float64)

    def link(self, idx: np.ndarray) -> np.ndarray:
        """(len(idx), len(link_capacity.LINK_FEATURES)) bytes per second from the nodes' capacity labels, NaN where
        a node has none (decide() turns them into DecisionContext.full)."""
        return self.table.link[idx]

    def all_infos(self) -> list[NodeInfo]:
        return self.infos(np.arange(len(self.names)))
