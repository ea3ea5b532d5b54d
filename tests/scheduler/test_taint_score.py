"""TaintToleration's score (PreferNoSchedule taints) as a term every policy sees, as kube-scheduler scores it.

The counts and their normalisation are kube-scheduler's (taint_toleration.go: intolerable PreferNoSchedule taints,
DefaultNormalizeScore in reverse); the decision path adds the term to whichever policy decides, and on a cluster
without such taints it adds nothing (the decision is the policy's alone)."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from drs_prom.config import load_settings
from drs_prom.constraints import taint_score
from drs_prom.policies.contract import DecisionContext, choose, with_soft_scores
from drs_prom.registry import PolicySpec
from drs_prom.scheduler.decision.decide import fallback_policy
from drs_prom.scheduler.watch import kube
from drs_prom.types import NodeInfo, PodRequest, Taint, Toleration
from tests.scheduler.test_cache_constraints import _cache
from tests.scheduler.test_feasibility import ZONE, node, pod
from tests.scheduler.test_spread_score import _Fixed, _soft

SOFT = {"key": "drain-soon", "value": "true", "effect": "PreferNoSchedule"}
OTHER = {"key": "spot", "value": "true", "effect": "PreferNoSchedule"}
HARD = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def _node(name: str, *taints: Taint) -> NodeInfo:
    return NodeInfo(name=name, allocatable_cpu_m=4000, allocatable_mem_bytes=2**33, taints=taints)


def _pod(*tolerations: Toleration) -> PodRequest:
    return PodRequest(name="p", namespace="default", cpu_m=100, mem_bytes=2**26, tolerations=tolerations)


def _scores(pod: PodRequest, nodes: list[NodeInfo]) -> np.ndarray | None:
    return taint_score.normalised(taint_score.counts(pod, nodes))


def test_intolerable_prefer_no_schedule_taints_are_counted_and_normalised_in_reverse() -> None:
    soft, spot = Taint("drain-soon", "true", "PreferNoSchedule"), Taint("spot", "true", "PreferNoSchedule")
    nodes = [_node("clean"), _node("one", soft), _node("two", soft, spot), _node("hard", Taint("x", "", "NoSchedule"))]
    assert [taint_score.intolerable(_pod(), n) for n in nodes] == [0, 1, 2, 0]
    assert _scores(_pod(), nodes).tolist() == [100.0, 50.0, 0.0, 100.0]
    # three counts over a maximum of 3: integer division as Go's int64 (100 - 100*1//3 = 67)
    three = [_node("a"), _node("b", soft), _node("c", soft, spot, Taint("z", "", "PreferNoSchedule"))]
    assert _scores(_pod(), three).tolist() == [100.0, 67.0, 0.0]
    # the weighted term over every node, 0 where infeasible
    term = taint_score.term(np.array([0, 1, 2]), np.array([True, False, True, True]))
    assert term is not None and term.tolist() == [150.0, 0.0, 75.0, 0.0]
    assert taint_score.term(np.zeros(2, dtype=np.int64), np.ones(2, dtype=bool)) is None


def test_a_toleration_of_the_taint_or_of_every_effect_takes_it_off_the_count() -> None:
    soft = Taint("drain-soon", "true", "PreferNoSchedule")
    nodes = [_node("clean"), _node("soft", soft)]
    for tol in (
        Toleration(key="drain-soon", operator="Equal", value="true", effect="PreferNoSchedule"),
        Toleration(key="drain-soon", operator="Exists"),  # no effect: every effect
        Toleration(operator="Exists"),  # no key: every taint
    ):
        assert _scores(_pod(tol), nodes) is None, tol
    for tol in (  # the wrong effect, key or value tolerates nothing here
        Toleration(key="drain-soon", operator="Exists", effect="NoSchedule"),
        Toleration(key="spot", operator="Exists"),
        Toleration(key="drain-soon", operator="Equal", value="false"),
    ):
        assert _scores(_pod(tol), nodes).tolist() == [100.0, 0.0], tol


def test_the_view_scores_only_the_feasible_nodes_and_none_without_a_soft_taint() -> None:
    nodes = [node("a", taints=[SOFT]), node("b", taints=[SOFT, OTHER]), node("c", taints=[HARD]), node("d")]
    view = _cache(nodes, []).view()
    req = kube.to_pod_request(pod("p"))
    rows, mask = np.arange(4), view.feasible(req)
    assert mask.tolist() == [True, True, False, True]
    soft = view.soft_scores(req, rows, mask)
    assert soft is not None and soft.tolist() == [1.5 * 50, 0.0, 0.0, 1.5 * 100]
    # counted over the feasible nodes only: without b, a's one taint is the most there is
    assert view.soft_scores(req, rows, np.array([True, False, False, True])).tolist() == [0.0, 0.0, 0.0, 150.0]
    plain = _cache([node("a", taints=[HARD]), node("d")], []).view()
    assert plain.soft_scores(req, np.arange(2), plain.feasible(req)) is None  # no term, nothing changes
    tolerant = kube.to_pod_request(pod("t", tolerations=[{"operator": "Exists"}]))
    assert view.soft_scores(tolerant, rows, view.feasible(tolerant)) is None


def test_the_taint_term_adds_to_the_spread_term_at_the_default_profiles_weights() -> None:
    app = {"app": "s"}
    nodes = [node("n1", "a", taints=[SOFT]), node("n2", "b")]
    view = _cache(nodes, [pod("s1", on="n2", labels=app)]).view()
    req = kube.to_pod_request(pod("s2", labels=app, topologySpreadConstraints=_soft(app, ZONE)))
    soft = view.soft_scores(req, np.arange(2), view.feasible(req))
    # spread prefers the empty zone a (100 against 0), the taint prefers n2 (150 against 0): the taint weighs more
    assert soft is not None and soft.tolist() == [100.0, 150.0]


def test_every_policy_avoids_a_soft_tainted_node_unless_the_pod_tolerates_it() -> None:
    """Told only its requests, the heuristic prefers the emptier node; with the emptier node carrying a
    PreferNoSchedule taint, it and a model that likes that node as much or more take the other node, as
    kube-scheduler (TaintToleration 3 against the resource scores' 2) does."""
    nodes = [node("empty", taints=[SOFT]), node("busy")]
    view = _cache(nodes, [pod("filler", on="busy", requests={"cpu": "8"})]).view()
    assert view.names == ("busy", "empty")
    kube_default = fallback_policy("kube-default", PolicySpec.from_settings(load_settings(None, {})))
    rows = np.arange(2)
    tolerant = pod("t", tolerations=[{"key": "drain-soon", "operator": "Exists"}])
    for manifest, want in ((pod("p"), "busy"), (tolerant, "empty")):
        req = kube.to_pod_request(manifest)
        mask = view.feasible(req)
        soft = view.soft_scores(req, rows, mask)
        assert (soft is None) == (manifest is tolerant)
        ctx = DecisionContext(req, view.infos(rows), mask, np.zeros((2, 6)), np.zeros((2, 6)), soft_scores=soft)
        assert view.names[choose(kube_default, ctx)[0]] == want
        for policy in (_Fixed([0.0, 1.0]), _Fixed([5.0, 5.0])):  # a model for the tainted node, or for neither
            got = choose(policy, ctx)[0]
            own = np.asarray(policy.score(ctx), dtype=np.float64)
            if soft is None:
                assert got == int(np.argmax(own))  # the policy's own choice, untouched
            else:
                assert view.names[got] == "busy" and got == int(np.argmax(with_soft_scores(own, soft)))
        alone = dataclasses.replace(ctx, soft_scores=None)
        assert view.names[choose(kube_default, alone)[0]] == "empty"  # the emptier node, by requests, alone


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=12))
def test_normalised_counts_keep_kube_schedulers_order_and_range(found: list[int]) -> None:
    got = taint_score.normalised(np.array(found))
    if max(found) == 0:
        assert got is None
        return
    assert got is not None and ((got >= 0) & (got <= 100)).all()
    assert got[int(np.argmax(found))] == 0 and all(g == 100 for g, c in zip(got, found) if c == 0)
    order = np.argsort(found, kind="stable")
    assert (np.diff(got[order]) <= 0).all()  # more intolerable taints never score higher
