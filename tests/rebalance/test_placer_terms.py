"""Where the rebalancer predicts a replacement goes: the score terms either scheduler adds (ScheduleAnyway spread,
PreferNoSchedule taints), the rebalancer's own taint counted once whether or not the nodes it read carry it yet."""

from __future__ import annotations

import numpy as np
import pandas as pd

from drs_prom.config import load_settings
from drs_prom.constraints.placed import Neighbours
from drs_prom.rebalance.cluster import ClusterState, LivePlacer
from drs_prom.registry import PolicySpec, make_policy
from drs_prom.scheduler.watch import kube
from drs_prom.types import NodeInfo, PodRequest, Taint, Toleration
from tests.scheduler.test_cache_constraints import _cache
from tests.scheduler.test_feasibility import ZONE, node
from tests.scheduler.test_feasibility import pod as manifest
from tests.scheduler.test_spread_score import _soft


def placer(state: ClusterState, prefer_not: frozenset[str] = frozenset()) -> LivePlacer:
    """The placer with the default settings; the policies do not matter to the terms."""
    settings = load_settings(None, {})
    spec = PolicySpec.from_settings(settings)
    own, other = make_policy("least-loaded", spec, 0), make_policy("kube-default", spec, 0)
    return LivePlacer(state, settings, own, other, pd.DataFrame(), prefer_not=prefer_not)


def test_the_placer_counts_soft_taints_and_its_own_taint_once():
    settings = load_settings(None, {})
    key = settings.rebalance.taint_key
    nodes = [
        NodeInfo("tainted", 8000, 2**34, taints=(Taint(key, "true", "PreferNoSchedule"),)),  # set last round
        NodeInfo("tainting", 8000, 2**34),  # in this round's hot set: the nodes were read before the taint went on
        NodeInfo("plain", 8000, 2**34),
        NodeInfo("spot", 8000, 2**34, taints=(Taint("spot", "true", "PreferNoSchedule"),)),
    ]
    state = ClusterState(nodes, np.ones((4, 6)), np.ones((4, 4)), [], [], Neighbours())
    with_taint = placer(state, prefer_not=frozenset({"tainted", "tainting"}))
    pod = PodRequest("p", cpu_m=100, mem_bytes=2**26)
    every = np.ones(4, dtype=bool)
    term = with_taint.soft_terms(pod, nodes, Neighbours(), every)
    assert term is not None and term.tolist() == [0.0, 0.0, 150.0, 0.0]  # one intolerable taint each, plain none
    spot = PodRequest("q", cpu_m=100, mem_bytes=2**26, tolerations=(Toleration(key="spot", operator="Exists"),))
    term = with_taint.soft_terms(spot, nodes, Neighbours(), every)
    assert term is not None and term.tolist() == [0.0, 0.0, 150.0, 150.0]
    term = with_taint.soft_terms(
        spot, nodes, Neighbours(), np.array([True, True, False, True])
    )  # over the feasible nodes only
    assert term is not None and term.tolist() == [0.0, 0.0, 0.0, 150.0]
    assert (
        placer(state).soft_terms(spot, nodes[1:], Neighbours(), np.ones(3, dtype=bool)) is None
    )  # nothing to prefer: no term


def test_the_placer_adds_the_terms_the_scheduler_adds():
    """For a pod with a ScheduleAnyway spread constraint on a cluster with a PreferNoSchedule node, the placer's
    terms are the live scheduler's (NodeView.soft_scores) on the same nodes and placed pods."""
    app = {"app": "s"}
    nodes = [node("n1", "a"), node("n2", "a", taints=[{"key": "k", "effect": "PreferNoSchedule"}]), node("n3", "b")]
    cache = _cache(nodes, [manifest(f"s{i}", on=n, labels=app) for i, n in enumerate(["n1", "n1", "n2"])])
    view = cache.view()
    request = kube.to_pod_request(manifest("s9", labels=app, topologySpreadConstraints=_soft(app, ZONE)))
    rows, mask = np.arange(3), view.feasible(request)
    want = view.soft_scores(request, rows, mask)
    assert want is not None and want.tolist() == [150.0, 0.0, 250.0]  # spread (zone b empty) plus the taint term
    infos = view.infos(rows)
    state = ClusterState(infos, np.ones((3, 6)), np.ones((3, 4)), [], [], cache.neighbours())
    got = placer(state).soft_terms(request, infos, cache.neighbours(), mask)
    assert got is not None and got.tolist() == want.tolist()
