"""PodTopologySpread's ScheduleAnyway constraints as the score every policy sees.

The scores are kube-scheduler's (counts per domain, log-weighted, NormalizeScore to 0..100); the
decision path adds them to whichever policy decides, and a pod without such a constraint is placed
exactly as its policy alone would place it."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from drs_prom.config import load_settings
from drs_prom.constraints import spread_score
from drs_prom.features import FEATURES
from drs_prom.policies.contract import DecisionContext, PolicyBase, choose, with_soft_scores
from drs_prom.registry import PolicySpec
from drs_prom.scheduler.decision.decide import Decider, fallback_policy
from drs_prom.scheduler.metrics import SchedulerMetrics
from drs_prom.scheduler.watch import kube
from drs_prom.signals.state import NodeSnapshot
from tests.scheduler.test_cache_constraints import _cache
from tests.scheduler.test_feasibility import HOST, ZONE, _spread, node, pod

FOO = {"foo": ""}


def _soft(labels: dict, key: str, skew: int = 1) -> list:
    out = _spread(labels, key=key, skew=skew)
    out[0]["whenUnsatisfiable"] = "ScheduleAnyway"
    return out


def _scores(incoming: dict, nodes: list[dict], placed: list[dict], feasible: list[str] | None = None) -> dict:
    cache = _cache(nodes, placed)
    view = cache.view()
    names = list(view.names)
    mask = np.array([feasible is None or n in feasible for n in names])
    got = view.soft_scores(kube.to_pod_request(incoming), np.arange(len(names)), mask)
    assert got is not None
    return {n: int(s) for n, s, ok in zip(names, got, mask) if ok}


def test_hostname_spread_scores_as_kube_scheduler_does() -> None:
    nodes = [node(n, None) for n in ("a", "b", "c", "d")]
    placed = [pod(f"p{n}{i}", on=n, labels=FOO) for n, k in (("a", 2), ("b", 1), ("d", 3)) for i in range(k)]
    got = _scores(pod("p", labels=FOO, topologySpreadConstraints=_soft(FOO, HOST)), nodes, placed)
    assert got == {"a": 20, "b": 60, "c": 100, "d": 0}


def test_zone_and_hostname_count_over_every_node_but_score_only_the_feasible() -> None:
    nodes = [node("a", "zone1"), node("b", "zone1"), node("x", "zone2"), node("y", "zone2")]
    counts = {"a": 2, "b": 1, "x": 2, "y": 4}
    placed = [pod(f"p{n}{i}", on=n, labels=FOO) for n, k in counts.items() for i in range(k)]
    incoming = pod("p", labels=FOO, topologySpreadConstraints=_soft(FOO, ZONE) + _soft(FOO, HOST))
    assert _scores(incoming, nodes, placed, feasible=["a", "x"]) == {"a": 100, "x": 63}


def test_a_node_without_the_key_scores_zero_and_an_empty_count_scores_all_100() -> None:
    nodes = [node("a", "z1"), node("b", None)]
    assert _scores(pod("p", labels=FOO, topologySpreadConstraints=_soft(FOO, ZONE)), nodes, []) == {"a": 100, "b": 0}


def test_the_shared_term_keeps_the_policys_order_without_it_and_breaks_near_ties_with_it() -> None:
    scores = np.array([0.3, 0.31, -np.inf, 0.1])
    assert np.argmax(with_soft_scores(scores, np.zeros(4))) == 1
    assert np.argmax(with_soft_scores(scores, np.array([100.0, 0.0, 100.0, 0.0]))) == 0
    assert with_soft_scores(scores, np.full(4, 100.0))[2] == -np.inf


class _Fixed(PolicyBase):
    name = "fixed"

    def __init__(self, scores: list[float]) -> None:
        self.values = np.array(scores)

    def score(self, ctx: DecisionContext) -> np.ndarray:
        return self.values[: len(ctx.nodes)]


class _Idle:
    """Fresh metrics for the nodes: every node idle (the model, not a fallback, decides)."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names

    def snapshot(self) -> NodeSnapshot:
        frame = pd.DataFrame(0.0, index=list(self.names), columns=list(FEATURES))
        return NodeSnapshot(features=frame, taken_at=time.time(), stale=frozenset())


_PLACED = st.lists(
    st.tuples(st.sampled_from(["n1", "n2", "n3", "n4"]), st.sampled_from([{}, {"app": "a"}, {"app": "b"}])),
    max_size=10,
)


@settings(max_examples=60, deadline=None)
@given(
    placed=_PLACED,
    labels=st.sampled_from([{}, {"app": "a"}]),
    hard=st.booleans(),
    own=st.lists(st.floats(-5, 5), min_size=4, max_size=4),
)
def test_without_schedule_anyway_the_decision_path_places_as_the_policy_alone(
    placed: list, labels: dict, hard: bool, own: list[float]
) -> None:
    """The scheduler's decision path (cache view -> shared terms -> Decider -> the policy) on pods with
    no ScheduleAnyway constraint (with or without DoNotSchedule ones) picks the policy's own choice."""
    nodes = [node("n1", "a"), node("n2", "a"), node("n3", "b"), node("n4", None)]
    cache = _cache(nodes, [pod(f"e{i}", on=n, labels=lab) for i, (n, lab) in enumerate(placed)])
    extra: dict[str, Any] = {"topologySpreadConstraints": _spread({"app": "a"}, skew=2)} if hard else {}
    req = kube.to_pod_request(pod("incoming", labels=labels, **extra))
    view = cache.view()
    mask = view.feasible(req)
    rows = np.arange(len(view.names))
    soft = view.soft_scores(req, rows, mask)
    assert soft is None
    policy = _Fixed(own)
    decider = Decider.from_settings(
        load_settings(None, {}), SchedulerMetrics(), source=_Idle(view.names), policy=policy
    )
    decider.refresh()
    nodes_ = view.infos(rows)
    choice = decider.decide(req, (0.0,) * 6, nodes_, mask, soft=soft)
    assert choice.policy is policy and choice.reason is None
    alone, _ = choose(policy, DecisionContext(req, nodes_, mask, np.zeros((4, 6)), np.zeros((4, 6))))
    assert choice.index == (alone if mask.any() else -1)


def test_every_policy_gets_the_same_spread_adjustment() -> None:
    """A model and a heuristic that each leave two nodes tied both take the emptier zone's node, and any
    policy's choice is its own scores (scaled to 0..1) plus the same shared term."""
    nodes = [node("n1", "a"), node("n2", "b")]
    app = {"app": "s"}
    free = {"cpu": "0"}  # no requests, idle metrics: the heuristic sees two equal nodes
    cache = _cache(nodes, [pod("s1", on="n1", labels=app, requests=free), pod("other", on="n2", requests=free)])
    req = kube.to_pod_request(pod("s2", labels=app, topologySpreadConstraints=_soft(app, ZONE)))
    view = cache.view()
    rows, mask = np.arange(2), view.feasible(req)
    soft = view.soft_scores(req, rows, mask)
    assert soft is not None and soft.tolist() == [0.0, 100.0]
    settings_ = load_settings(None, {})
    infos = view.infos(rows)
    for policy in (_Fixed([1.0, 1.0]), fallback_policy("least-loaded", PolicySpec.from_settings(settings_))):
        ctx = DecisionContext(req, infos, mask, np.zeros((2, 6)), np.zeros((2, 6)))
        assert choose(policy, ctx)[0] == 0  # alone: a tie, the first node
        assert choose(policy, dataclasses.replace(ctx, soft_scores=soft))[0] == 1
    for policy in (_Fixed([0.2, 5.0, -1.0]), fallback_policy("kube-default", PolicySpec.from_settings(settings_))):
        three = [node("n1", "a"), node("n2", "a"), node("n3", "b")]
        cache = _cache(three, [pod(f"s{i}", on=n, labels=app) for i, n in enumerate(["n1", "n1", "n2"])])
        view = cache.view()
        rows, mask = np.arange(3), view.feasible(req)
        soft = view.soft_scores(req, rows, mask)
        ctx = DecisionContext(req, view.infos(rows), mask, np.zeros((3, 6)), np.zeros((3, 6)), soft_scores=soft)
        own = np.asarray(policy.score(ctx), dtype=np.float64)
        assert choose(policy, ctx)[0] == int(np.argmax(with_soft_scores(own, soft)))
    assert spread_score.scores(kube.to_pod_request(pod("x")), [], [], cache.neighbours()) is None
