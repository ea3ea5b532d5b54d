"""Where the rebalancer predicts a replacement goes: either scheduler's TaintToleration preference, the rebalancer's
own PreferNoSchedule taint counted once whether or not the nodes it read carry it yet."""

from __future__ import annotations

import numpy as np
import pandas as pd

from drs_prom.config import load_settings
from drs_prom.constraints.placed import Neighbours
from drs_prom.rebalance.cluster import ClusterState, LivePlacer
from drs_prom.registry import PolicySpec, make_policy
from drs_prom.types import NodeInfo, PodRequest, Taint, Toleration


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
    spec = PolicySpec.from_settings(settings)
    placer = LivePlacer(
        state,
        settings,
        make_policy("least-loaded", spec, 0),
        make_policy("kube-default", spec, 0),
        pd.DataFrame(),
        prefer_not=frozenset({"tainted", "tainting"}),
    )
    pod = PodRequest("p", cpu_m=100, mem_bytes=2**26)
    every = np.ones(4, dtype=bool)
    term = placer.taint_term(pod, nodes, every)
    assert term is not None and term.tolist() == [0.0, 0.0, 150.0, 0.0]  # one intolerable taint each, plain none
    spot = PodRequest("q", cpu_m=100, mem_bytes=2**26, tolerations=(Toleration(key="spot", operator="Exists"),))
    term = placer.taint_term(spot, nodes, every)
    assert term is not None and term.tolist() == [0.0, 0.0, 150.0, 150.0]
    term = placer.taint_term(spot, nodes, np.array([True, True, False, True]))  # over the feasible nodes only
    assert term is not None and term.tolist() == [0.0, 0.0, 0.0, 150.0]
    untainted = LivePlacer(state, settings, placer.own, placer.other, pd.DataFrame())
    assert untainted.taint_term(spot, nodes[1:], np.ones(3, dtype=bool)) is None  # nothing to prefer: no term
