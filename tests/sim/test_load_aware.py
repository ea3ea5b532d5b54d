"""Trimaran-style and capacity-aware baselines: their published scores on literal numbers."""

from __future__ import annotations

import numpy as np
import pytest

from drs_prom.policies.contract import DecisionContext, choose
from drs_prom.policies.load_aware import (
    CapacityBalancedLoad,
    CapacityBalancedOverload,
    LoadVariationRiskBalancing,
    TargetLoadPacking,
    lvrb_resource_score,
    tlp_score,
)
from drs_prom.registry import HEURISTICS, make_policy
from drs_prom.sim.bench import run_bench
from drs_prom.types import NodeInfo, PodRequest
from tests.sim.helpers import tiny
from tests.specs import SPEC

GI = 2**30


def _ctx(nodes, pod=None, load=None, pod_load=None, now=0.0, full=None):
    n = len(nodes)
    return DecisionContext(
        pod=pod or PodRequest(name="p", cpu_m=500, mem_bytes=1 * GI),
        nodes=nodes,
        feasible=np.ones(n, bool),
        load=np.zeros((n, 6)) if load is None else np.asarray(load, np.float64),
        pod_load=np.zeros((n, 6)) if pod_load is None else np.asarray(pod_load, np.float64),
        now=now,
        full=None if full is None else np.asarray(full, np.float64),
    )


def _row(cpu=0.0, mem=0.0, net=0.0):
    return [cpu, mem, net, 0.0, 0.0, 0.0]


def test_tlp_score_is_trimarans_piecewise_line():
    assert tlp_score(20, 40) == 70  # (100-40)*20/40 + 40
    assert tlp_score(40, 40) == 100
    assert tlp_score(70, 40) == 20  # 40*(100-70)/(100-40)
    assert tlp_score(100, 40) == 0 and tlp_score(101, 40) == 0
    assert tlp_score(0, 40) == 40


def test_tlp_packs_to_the_target_and_counts_its_own_binds_in_full():
    nodes = [NodeInfo("a", 4000, 16 * GI), NodeInfo("b", 4000, 16 * GI)]
    tlp = TargetLoadPacking(seed=0, metric_window_seconds=30)
    ctx = _ctx(nodes, load=[_row(0.1), _row(0.5)])
    # pod: 500m request x 1.5 = 750m; a: 100*(400+750)/4000 = 28.75 -> 83; b: 68.75 -> round(20.83) = 21
    assert tlp.node_scores(ctx).tolist() == [83, 21]
    assert choose(tlp, ctx)[0] == 0
    # 10 s later, same metrics: a still carries the 750m in full: (400+1500)/4000 = 47.5 -> round(35.0) = 35
    assert tlp.node_scores(_ctx(nodes, load=[_row(0.1), _row(0.5)], now=10.0)).tolist() == [35, 21]
    # past the window the bind is forgotten (the metrics show it by then)
    assert tlp.node_scores(_ctx(nodes, load=[_row(0.1), _row(0.5)], now=31.0)).tolist() == [83, 21]
    best_effort = _ctx(nodes, pod=PodRequest(name="be"), load=[_row(0.0), _row(np.nan)], now=40.0)
    # no request: the 1-core default, 25 % -> round(77.5) = 78 (Python rounds half to even); no metrics -> 0
    assert tlp.node_scores(best_effort).tolist() == [78, 0]


def test_lvrb_resource_score_and_min_over_cpu_and_memory():
    assert lvrb_resource_score(0.5, 0.04, margin=1, sensitivity=2) == 65  # (0.5 + sqrt(0.04)) / 2 = 0.35
    assert lvrb_resource_score(0.5, 0.04, margin=1, sensitivity=1) == 73  # (0.5 + 0.04) / 2 = 0.27
    assert lvrb_resource_score(1.7, 0.0, margin=1, sensitivity=2) == 50  # mu clamped to 1
    nodes = [NodeInfo("a", 4000, 16 * GI), NodeInfo("b", 4000, 16 * GI)]
    pod = PodRequest(name="p", cpu_m=1000, mem_bytes=2 * GI)
    lvrb = LoadVariationRiskBalancing(seed=0, metric_window_seconds=0)
    ctx = _ctx(nodes, pod=pod, load=[_row(0.25, 0.5), _row(0.0, 0.0)])
    # a: cpu mu .5 -> 75; mem mu .5 + .125 = .625 -> int(69.25) = 69; min 69. b: cpu .25 -> 88, mem .125 -> 94
    assert lvrb.node_scores(ctx).tolist() == [69, 88]
    # variability counts: a's cpu moves between .25 and .75 -> std .25, sqrt = .5
    lvrb2 = LoadVariationRiskBalancing(seed=0, metric_window_seconds=0)
    lvrb2.node_scores(_ctx(nodes, pod=pod, load=[_row(0.25), _row(0.0)], now=0.0))
    scores = lvrb2.node_scores(_ctx(nodes, pod=pod, load=[_row(0.75), _row(0.0)], now=5.0))
    # a: cpu mu 1.0, sigma sqrt(.25) = .5 -> risk .75 -> 25; mem mu .125 -> 94 -> min 25
    assert scores.tolist() == [25, 88]


def test_capacity_balanced_reads_loads_relative_to_each_node():
    nodes = [NodeInfo("small", 2000, 8 * GI), NodeInfo("big", 8000, 32 * GI)]
    full = [[1, 1, 1, 1, 1, 1], [1, 1, 2, 2, 2, 2]]  # the big node's link is twice the scale
    ctx = _ctx(nodes, pod_load=[_row(net=0.6), _row(net=0.6)], full=full)
    cb = CapacityBalancedLoad(seed=0, metric_window_seconds=0)
    # relative pod: small 0.6, big 0.3; imbalance after: std(0.6, 0) = .3 vs std(0, .3) = .15
    assert cb.node_scores(ctx) == pytest.approx([-0.3 - 1e-3 * (0.6 + 0.1), -0.15 - 1e-3 * (0.3 + 0.05)])
    # overload penalty: 0.5 x the predicted excess the placement adds
    loaded = _ctx(nodes, load=[_row(cpu=0.9), _row(cpu=0.9)], pod_load=[_row(cpu=0.5), _row(cpu=0.125)])
    plain = CapacityBalancedLoad(seed=0, metric_window_seconds=0).node_scores(loaded)
    over = CapacityBalancedOverload(seed=0, metric_window_seconds=0).node_scores(loaded)
    assert over - plain == pytest.approx([-0.5 * 0.4, -0.5 * 0.025])


def test_registered_and_run_in_the_bench():
    for name in ("trimaran-tlp", "trimaran-lvrb", "capacity-balanced", "capacity-balanced-overload"):
        assert name in HEURISTICS and make_policy(name, SPEC, 0).name == name
    report = run_bench(tiny(nodes=3, pods=12, rate=2.0), [0], ["kube-default", "trimaran-tlp", "capacity-balanced"])
    assert all(len(r.runs) == 1 and r.runs[0].decisions == 12 for r in report.rows)
