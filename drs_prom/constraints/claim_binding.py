"""kube-scheduler's VolumeBinding for claims still waiting for their first consumer, as pure functions.

A claim of a ``WaitForFirstConsumer`` class stays unbound until a scheduler picks a node for a pod
that mounts it; the scheduler then chooses, per node, how each such claim would be satisfied:

- a *static* binding: an Available PersistentVolume of the claim's class that is big enough, has
  the claim's access modes and volume mode, matches its label selector, is claimed by no one (or
  pre-bound to this very claim) and whose required node affinity admits the node; the smallest
  such volume wins, claims taking volumes smallest request first, none taking one another took;
- a *provisioning*: no volume fits, but the class has a provisioner (not
  ``kubernetes.io/no-provisioner``) whose ``allowedTopologies`` (if any) admit the node. A claim a
  provisioner was already asked about (``volume.kubernetes.io/selected-node``) fits that node only.

``prepare`` does the node-independent part once per pod (as kube-scheduler's PreFilter does);
``plan`` answers one node, with kube-scheduler's wording when it fails; ``progress`` reads whether
the claims a plan touched are bound yet, which the binding cycle waits for before binding the pod.
Volumes an in-flight binding reserved (``Storage.reserved``) are nobody else's to choose.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from drs_prom.constraints import matching
from drs_prom.types import ClaimInfo, LabelSelector, NodeInfo, NodeSelectorTerm, VolumeInfo

R_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})


@dataclass(frozen=True)
class Pending:
    """One unbound claim and, smallest first, the volumes it could take on some node; ``prebound`` is
    a volume already pre-bound to it (then the only one it may take)."""

    claim: ClaimInfo
    volumes: tuple[VolumeInfo, ...]
    prebound: VolumeInfo | None = None


@dataclass(frozen=True)
class Plan:
    """What the binding cycle writes for one node: each static (claim, volume) pair and each claim a
    provisioner is asked to create a volume for."""

    node: str
    static: tuple[tuple[ClaimInfo, VolumeInfo], ...] = ()
    provision: tuple[ClaimInfo, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.static and not self.provision


def _selected(sel: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """A claim's volume selector (None: every volume) against a volume's labels."""
    if sel is None:
        return True
    if sel.nothing:
        return False
    if any(labels.get(k) != v for k, v in sel.match_labels):
        return False
    return all(
        r.operator in _SELECTOR_OPERATORS and matching.requirement_matches(r, labels) for r in sel.match_expressions
    )


def bound_to(volume: VolumeInfo, claim: ClaimInfo) -> bool:
    """The volume's claimRef names this claim (and, when both carry one, its uid)."""
    if not volume.claim_ref:
        return False
    ns, name, uid = volume.claim_ref
    return ns == claim.namespace and name == claim.name and (not uid or not claim.uid or uid == claim.uid)


def _fits(volume: VolumeInfo, claim: ClaimInfo) -> bool:
    """The node-independent checks of kube-scheduler's FindMatchingVolume for a volume not pre-bound."""
    return (
        volume.phase == "Available"
        and not volume.claim_ref
        and _selected(claim.selector, dict(volume.labels))
        and all(m in volume.access_modes for m in claim.access_modes)
    )


def prepare(
    claims: Sequence[ClaimInfo],
    volumes: Mapping[str, VolumeInfo],
    reserved: Mapping[str, tuple[str, str]] | None = None,
) -> tuple[Pending, ...]:
    """The unbound claims, smallest request first, each with the volumes it could take on some node.
    ``reserved``: volume name -> (namespace, claim) an in-flight binding chose (only that claim's)."""
    reserved = reserved or {}
    out = []
    for claim in sorted(claims, key=lambda c: c.request_bytes):
        usable, prebound = [], None
        for v in volumes.values():
            if v.storage_class != claim.storage_class:  # kube-scheduler lists the class's volumes only
                continue
            held = reserved.get(v.name)
            if held is not None and held != (claim.namespace, claim.name):
                continue
            if v.claim_ref and not bound_to(v, claim):
                continue
            if v.capacity_bytes < claim.request_bytes or v.volume_mode != claim.volume_mode:
                continue
            if bound_to(v, claim):
                prebound = prebound or v
            elif _fits(v, claim):
                usable.append(v)
        usable.sort(key=lambda v: (v.capacity_bytes, v.name))
        out.append(Pending(claim=claim, volumes=tuple(usable), prebound=prebound))
    return tuple(out)


def admits(volume: VolumeInfo, node: NodeInfo) -> bool:
    """The volume's required node affinity (none: every node) admits the node."""
    return volume.node_affinity is None or any(
        matching.term_matches(t, node.labels, node.name) for t in volume.node_affinity
    )


def plan(
    pending: Sequence[Pending],
    node: NodeInfo,
    provisioners: Mapping[str, str],
    topologies: Mapping[str, tuple[NodeSelectorTerm, ...]],
) -> Plan | str:
    """How every pending claim would be satisfied on ``node``, or kube-scheduler's reason it cannot."""
    static: list[tuple[ClaimInfo, VolumeInfo]] = []
    provision: list[ClaimInfo] = []
    chosen: set[str] = set()
    for p in pending:
        claim = p.claim
        if claim.selected_node:  # a provisioner was asked for this node already: only it will do
            if claim.selected_node != node.name:
                return R_BIND_CONFLICT
            provision.append(claim)
            continue
        if p.prebound is not None and p.prebound.name not in chosen:
            if not admits(p.prebound, node):
                provision.append(claim)  # kube-scheduler then looks for a provisioner, as for no match
                continue
            static.append((claim, p.prebound))
            chosen.add(p.prebound.name)
            continue
        volume = next((v for v in p.volumes if v.name not in chosen and admits(v, node)), None)
        if volume is None:
            provision.append(claim)
            continue
        static.append((claim, volume))
        chosen.add(volume.name)
    for claim in provision:
        prov = provisioners.get(claim.storage_class, "")
        if not prov or prov == NO_PROVISIONER:
            return R_BIND_CONFLICT
        terms = topologies.get(claim.storage_class, ())
        if terms and not any(matching.term_matches(t, node.labels) for t in terms):
            return R_BIND_CONFLICT
    return Plan(node=node.name, static=tuple(static), provision=tuple(provision))


DONE, WAITING = "done", "waiting"


def progress(
    p: Plan,
    claims: Mapping[tuple[str, str], ClaimInfo],
    volumes: Mapping[str, VolumeInfo],
    node: NodeInfo | None,
) -> str:
    """``done`` once every claim of the plan is fully bound (the PV controller set its volume and
    ``bind-completed``), ``waiting`` before, else why the binding cannot finish (kube-scheduler's
    checks: a static volume's claimRef reset, a provisioning claim's selected node changed or gone, a
    provisioned volume that does not admit the node)."""
    for _, volume in p.static:
        now = volumes.get(volume.name)
        if now is None or not now.claim_ref or not now.claim_ref[2]:
            return f'ClaimRef got reset for pv "{volume.name}"'
    for claim in p.provision:
        now_claim = claims.get((claim.namespace, claim.name))
        if now_claim is None:
            return f'persistentvolumeclaim "{claim.name}" not found'
        if now_claim.selected_node != p.node:
            return f'selectedNode annotation reset for PVC "{claim.name}"'
        if now_claim.volume_name:
            made = volumes.get(now_claim.volume_name)
            if made is not None and node is not None and not admits(made, node):
                return f'pv "{made.name}" node affinity doesn\'t match node "{p.node}"'
    for claim, _ in (*p.static, *((c, None) for c in p.provision)):
        now_claim = claims.get((claim.namespace, claim.name))
        if now_claim is None or not now_claim.volume_name or not now_claim.bind_completed:
            return WAITING
    return DONE
