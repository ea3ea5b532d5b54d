"""drs-prom's feasible set equals kube-scheduler's, on generated cluster states (the real
kube-scheduler is the oracle: see tests/differential/oracle.py).

The generated test runs ``DRS_DIFF_CASES`` cases (200 by default) with the features of
``cases.ENABLED_FEATURES``; on a disagreement Hypothesis shrinks it and prints the smallest case.
The fixed cases first show that the oracle itself answers as kube-scheduler should and that a
wrong feasibility function is caught.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from drs_prom.scheduler.feasibility import feasible_nodes
from tests.differential.cases import ENABLED_FEATURES, HOSTNAME, Case, cases
from tests.differential.oracle import Oracle
from tests.differential.runner import report

pytestmark = pytest.mark.integration

CASES = int(os.environ.get("DRS_DIFF_CASES", "200"))


@pytest.fixture(scope="module")
def oracle(control_plane):
    with Oracle(control_plane, feasible_nodes) as o:
        yield o


def _node(i: int, taints: list | None = None, pods: str = "110") -> dict[str, Any]:
    alloc = {"cpu": "2", "memory": "2Gi", "pods": pods}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"@n{i}", "labels": {HOSTNAME: f"@n{i}"}},
        "spec": {"taints": taints} if taints else {},
        "status": {"allocatable": alloc, "capacity": alloc, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _pod(name: str, node: str | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "@ns", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}], **spec},
    }
    if node:
        body["spec"]["nodeName"] = node
    return body


NAMESPACES = (
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "@ns"}},
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "@ons"}},
)


def test_oracle_sees_kube_schedulers_own_filters(oracle: Oracle) -> None:
    """A taint refuses n1; a host port taken on n0 refuses n0 (NodePorts): kube-scheduler's set is {n2},
    and drs-prom's filters (TaintToleration, NodePorts) give the same."""
    port = [{"name": "c", "image": "registry.k8s.io/pause:3.10", "ports": [{"containerPort": 80, "hostPort": 80}]}]
    case = Case(
        namespaces=NAMESPACES,
        nodes=(_node(0), _node(1, [{"key": "k", "value": "v", "effect": "NoSchedule"}]), _node(2)),
        pods=(_pod("b0", "@n0", containers=port),),
        pod=_pod("incoming", containers=port),
    )
    outcome = oracle.run(case)
    names = outcome.names
    assert outcome.kube == {names["@n2"]}
    assert outcome.drs == {names["@n2"]}
    assert outcome.agree
    assert outcome.reasons[names["@n0"]] == ("node(s) didn't have free ports for the requested pod ports",)


def test_oracle_reads_an_empty_set_from_failed_scheduling(oracle: Oracle) -> None:
    """No node left by kube-scheduler's filters: no extender call, the pod's PodScheduled condition
    says why, and both sides agree on the empty set."""
    case = Case(
        namespaces=NAMESPACES,
        nodes=(_node(0, pods="1"), _node(1, pods="1")),
        pods=(_pod("b0", "@n0"), _pod("b1", "@n1")),
        pod=_pod("incoming"),
    )
    outcome = oracle.run(case)
    assert outcome.kube == frozenset()
    assert outcome.drs == frozenset()
    assert "Too many pods" in outcome.kube_message


def test_a_wrong_feasibility_is_caught(oracle: Oracle) -> None:
    """The comparison can fail: a function that refuses nothing disagrees on a tainted node."""

    def accepts_all(pod: Mapping, nodes: list, pods: list, **_: Any) -> dict[str, tuple[str, ...]]:
        return {n["metadata"]["name"]: () for n in nodes}

    case = Case(
        namespaces=NAMESPACES,
        nodes=(_node(0), _node(1, [{"key": "k", "value": "v", "effect": "NoExecute"}])),
        pods=(),
        pod=_pod("incoming"),
    )
    outcome = oracle.run(case, feasible=accepts_all)
    assert outcome.kube == {outcome.names["@n0"]}
    assert not outcome.agree


@settings(
    max_examples=CASES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.generate, Phase.shrink],
)
@given(case=cases(ENABLED_FEATURES))
def test_drs_prom_feasible_set_equals_kube_schedulers(oracle: Oracle, case: Case) -> None:
    outcome = oracle.run(case)
    assert outcome.consistent, report(case, outcome)
