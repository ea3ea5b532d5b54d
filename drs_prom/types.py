"""Plain records shared by the simulator, the filters and the live scheduler.

They carry no Kubernetes client objects so that filtering and scoring stay pure and
test with literal data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Json = Any
"""A value decoded from the Kubernetes API's JSON (a quantity, a selector, a container): untyped by nature; the
parsers check what they read."""

KubeClient = Any
"""An object of the kubernetes client package (ApiClient, CoreV1Api, CoordinationV1Api), which ships no type
stubs."""


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


@dataclass(frozen=True)
class HostPort:
    """A host port a container asks for: ``host_ip`` "0.0.0.0" binds every address (the default)."""

    port: int
    protocol: str = "TCP"
    host_ip: str = "0.0.0.0"


@dataclass(frozen=True)
class LabelSelector:
    """metav1.LabelSelector: ``match_labels`` pairs and ``match_expressions`` (In, NotIn, Exists,
    DoesNotExist), ANDed. An absent (null) selector matches nothing (``nothing``); an empty one
    matches everything, as labels.Selector does in Kubernetes."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    nothing: bool = False


@dataclass(frozen=True)
class PodAffinityTerm:
    """A required pod (anti-)affinity term after kube-scheduler's defaulting: ``namespaces`` is the
    pod's own namespace when the term names neither namespaces nor a namespaceSelector; an absent
    namespaceSelector is ``LabelSelector(nothing=True)``."""

    selector: LabelSelector
    topology_key: str
    namespaces: frozenset[str] = frozenset()
    namespace_selector: LabelSelector = LabelSelector(nothing=True)


@dataclass(frozen=True)
class SpreadConstraint:
    """A topologySpreadConstraint, its selector already extended by matchLabelKeys (DoNotSchedule ones
    filter, ScheduleAnyway ones score; ``min_domains`` means nothing to the latter)."""

    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int = 1
    node_affinity_policy: str = "Honor"  # Honor | Ignore
    node_taints_policy: str = "Ignore"  # Honor | Ignore


@dataclass(frozen=True)
class PodRecord:
    """A pod already on a node (bound or assumed), as the filters that look at other pods see it:
    labels for selectors, host ports, required anti-affinity, and requests for the node's sums."""

    uid: str
    namespace: str
    node: str
    labels: tuple[tuple[str, str], ...] = ()
    ports: tuple[HostPort, ...] = ()
    anti_affinity: tuple[PodAffinityTerm, ...] = ()
    cpu_m: int = 0
    mem_bytes: int = 0
    scalar: tuple[tuple[str, int], ...] = ()
    terminating: bool = False
    claims: tuple[str, ...] = ()  # PersistentVolumeClaims it mounts (in its namespace)
    name: str = ""
    priority: int = 0  # spec.priority: preemption takes only pods of lower priority
    start: float = float("inf")  # status.startTime (epoch seconds); not started yet counts as the newest


@dataclass(frozen=True)
class ClaimInfo:
    """A PersistentVolumeClaim as the volume filters read it: bound when ``volume_name`` is set. For an
    unbound claim, what VolumeBinding matches a volume against (requested bytes, label ``selector``,
    None: any volume; ``volume_mode``), the node a provisioner was asked to use (``selected_node``),
    and whether the PV controller finished binding it (``bind_completed``)."""

    namespace: str
    name: str
    volume_name: str = ""
    storage_class: str = ""
    access_modes: tuple[str, ...] = ()
    deleting: bool = False
    uid: str = ""
    request_bytes: int = 0
    selector: LabelSelector | None = None
    volume_mode: str = "Filesystem"
    selected_node: str = ""
    bind_completed: bool = False


@dataclass(frozen=True)
class VolumeInfo:
    """A PersistentVolume: its required node affinity (empty: any node), its zone/region labels, and
    for a CSI volume its driver and volume handle (what NodeVolumeLimits counts per node); for
    matching it to an unbound claim its class, access modes, capacity, phase, volume mode and the
    claim it is bound or pre-bound to (``claim_ref``: (namespace, name, uid), empty: none)."""

    name: str
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    labels: tuple[tuple[str, str], ...] = ()
    csi_driver: str = ""
    csi_handle: str = ""
    storage_class: str = ""
    access_modes: tuple[str, ...] = ()
    capacity_bytes: int = 0
    phase: str = ""
    volume_mode: str = "Filesystem"
    claim_ref: tuple[str, ...] = ()


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
    allocatable_scalar: dict[str, int] = field(default_factory=dict)  # ephemeral-storage, hugepages-*, vendor/name
    requested_scalar: dict[str, int] = field(default_factory=dict)


@dataclass
class PodRequest:
    """A pod waiting for a node: its requests, constraints and expected load.

    ``demand`` is the pod's expected load on the FEATURES in absolute units (cpu in
    cores, mem in bytes, the others in bytes/s), so that it can be normalised
    against each candidate node's own capacity; None means "not known yet". Its length
    is N_FEATURES (state.pod_matrix checks it), which a type cannot say. It is an estimate
    (drs_prom.usage) unless the pod's annotations tell it (``demand_source``).
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
    owner: str | None = None  # ``Kind/name`` of its top controller (a Deployment, not its ReplicaSet)
    image: str = ""  # its first container's image: similar workloads run the same one
    demand_source: str = ""  # where ``demand`` came from (drs_prom.usage.estimator.SOURCES, or what told it)
    labels: dict[str, str] = field(default_factory=dict)  # the pod's labels (canary selector, spread, affinity)
    scalar: tuple[tuple[str, int], ...] = ()  # requests beyond cpu/memory: ephemeral-storage, hugepages-*, vendor/name
    ports: tuple[HostPort, ...] = ()
    pod_affinity: tuple[PodAffinityTerm, ...] = ()  # required terms only (preferred ones are scores)
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()  # DoNotSchedule constraints only
    soft_spread: tuple[SpreadConstraint, ...] = ()  # ScheduleAnyway constraints (a score, never a filter)
    unsupported: tuple[str, ...] = ()  # what this pod needs that drs-prom cannot check (it is refused)
    claims: tuple[str, ...] = ()  # PersistentVolumeClaims it mounts (in its namespace), ephemeral ones included
    preempts: bool = True  # False for preemptionPolicy: Never (it waits instead of evicting lower priorities)
