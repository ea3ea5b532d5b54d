"""Plain records shared by the simulator, the filters and the live scheduler.

They carry no Kubernetes client objects so that filtering and scoring stay pure and
test with literal data.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"  # NoSchedule | PreferNoSchedule | NoExecute


@dataclass(frozen=True)
class Toleration:
    key: str = ""  # empty key with operator Exists tolerates everything
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty matches every effect


@dataclass(frozen=True)
class NodeSelectorRequirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeSelectorTerm:
    """Requirements ANDed together; a pod's terms are ORed, as in Kubernetes.

    ``match_fields`` are on node fields (only ``metadata.name`` exists), never labels, so a
    label that happens to be called ``metadata.name`` cannot satisfy them.
    """

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


@dataclass
class NodeInfo:
    """A node as filters and request-based scorers see it.

    ``requested_*`` and ``pod_count`` are the sums over pods already bound to the node.
    """

    name: str
    allocatable_cpu_m: int
    allocatable_mem_bytes: int
    allocatable_pods: int = 110
    requested_cpu_m: int = 0
    requested_mem_bytes: int = 0
    pod_count: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True


@dataclass
class PodRequest:
    """A pod waiting for a node: its requests, constraints and expected load.

    ``demand`` is the pod's expected load on the FEATURES in absolute units (cpu in
    cores, mem in bytes, the others in bytes/s), so that it can be normalised
    against each candidate node's own capacity; None means "not known yet". Its length
    is N_FEATURES (state.pod_matrix checks it), which a type cannot say.
    """

    name: str
    namespace: str = "default"
    uid: str = ""
    cpu_m: int = 0
    mem_bytes: int = 0
    priority: int = 0
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity_terms: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    demand: tuple[float, ...] | None = None
    profile: str | None = None
    owner: str | None = None
    labels: dict[str, str] = field(default_factory=dict)  # the pod's labels (canary selector)
