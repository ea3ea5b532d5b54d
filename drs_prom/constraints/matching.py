"""Matching labels, selectors, node selector terms and tolerations, as Kubernetes matches them.

Shared by every filter that reads labels (NodeAffinity, TaintToleration, PodTopologySpread, InterPodAffinity, the
volume filters' node affinity), by preemption's budgets and by the scores every policy shares. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from drs_prom.types import (
    LabelSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodAffinityTerm,
    PodRequest,
    Taint,
    Toleration,
)

_GO_INT = re.compile(r"[+-]?[0-9]+")

LABEL_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
"""A label selector's operators; the apiserver refuses any other (Gt and Lt are node selectors' only)."""


def tolerates(tol: Toleration, taint: Taint) -> bool:
    """Kubernetes' ToleratesTaint: effect, key and value/operator must all match."""
    if tol.effect and tol.effect != taint.effect:
        return False
    if tol.key and tol.key != taint.key:
        return False
    if tol.operator == "Exists":
        return True
    if tol.operator not in ("Equal", ""):  # an unknown operator tolerates nothing, as in Kubernetes
        return False
    if not tol.key:  # Equal with an empty key matches nothing (only Exists may omit the key)
        return False
    return tol.value == taint.value


def requirement_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    """One matchExpressions requirement of a node selector term or (without Gt/Lt) of a label selector."""
    present = req.key in labels
    value = labels.get(req.key, "")
    op = req.operator
    if op == "In":
        return present and value in req.values
    if op == "NotIn":
        return not present or value not in req.values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(req.values) != 1:
            return False
        have, want = _go_int(value), _go_int(req.values[0])
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want
    return False  # unknown operator: the apiserver rejects these, never match


def _go_int(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64): ASCII digits with an optional sign, in int64 range.

    Python's int() also takes spaces, underscores and non-ASCII digits ("1_0" is 10), which
    would let a Gt/Lt requirement match a node kube-scheduler refuses.
    """
    if not isinstance(text, str) or not _GO_INT.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def _field_matches(req: NodeSelectorRequirement, node_name: str) -> bool:
    """matchFields: only metadata.name with In/NotIn exists (the apiserver refuses the rest)."""
    if req.key != "metadata.name":
        return False
    if req.operator == "In":
        return node_name in req.values
    if req.operator == "NotIn":
        return node_name not in req.values
    return False


def term_matches(term: NodeSelectorTerm, labels: Mapping[str, str], node_name: str = "") -> bool:
    """Requirements are ANDed; a term with no requirements matches nothing (as in Kubernetes)."""
    if not term.match_expressions and not term.match_fields:
        return False
    return all(requirement_matches(r, labels) for r in term.match_expressions) and all(
        _field_matches(f, node_name) for f in term.match_fields
    )


def _expression_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    return req.operator in LABEL_SELECTOR_OPERATORS and requirement_matches(req, labels)


def selector_matches(sel: LabelSelector, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics: every matchLabels pair and every expression; ``nothing`` matches nothing."""
    if sel.nothing:
        return False
    for key, value in sel.match_labels:
        if labels.get(key) != value:
            return False
    return all(_expression_matches(r, labels) for r in sel.match_expressions)


def tuple_selector_matches(sel: LabelSelector, labels: tuple[tuple[str, str], ...]) -> bool:
    """``selector_matches`` on a record's sorted label pairs; the common matchLabels-only selector
    is decided without building a dict."""
    if sel.nothing:
        return False
    if not sel.match_expressions:
        return all(pair in labels for pair in sel.match_labels)
    return selector_matches(sel, dict(labels))


def is_everything(sel: LabelSelector) -> bool:
    """An empty selector: it selects every object (a null one, ``nothing``, selects none)."""
    return not sel.nothing and not sel.match_labels and not sel.match_expressions


def incoming_term_matches(
    term: PodAffinityTerm, namespace: str, labels: Mapping[str, str], ns_labels: Mapping[str, Mapping[str, str]]
) -> bool:
    """One of the incoming pod's terms against a pod in ``namespace``: kube-scheduler first turns a
    namespaceSelector into the namespaces it selects (an empty selector stays "every namespace")."""
    if not (
        namespace in term.namespaces
        or is_everything(term.namespace_selector)
        or (namespace in ns_labels and selector_matches(term.namespace_selector, ns_labels[namespace]))
    ):
        return False
    return selector_matches(term.selector, labels)


def existing_term_matches(term: PodAffinityTerm, pod: PodRequest, pod_ns_labels: Mapping[str, str]) -> bool:
    """An existing pod's anti-affinity term against the incoming pod (its namespace's labels as given)."""
    if not (pod.namespace in term.namespaces or selector_matches(term.namespace_selector, pod_ns_labels)):
        return False
    return selector_matches(term.selector, pod.labels)
