import dataclasses

import numpy as np
import pytest

from drs_prom.errors import ConfigError
from drs_prom.policies.baselines import (
    BalancedLoad,
    KubeDefault,
    LeastLoaded,
    RoundRobin,
    balanced_allocation_score,
    imbalance_if_placed,
    kube_default_scores,
    least_allocated_score,
)
from drs_prom.policies.contract import DecisionContext, choose, node_requests
from drs_prom.registry import make_policy, policies_by_name
from drs_prom.signals.state import imbalance
from drs_prom.types import NodeInfo, PodRequest
from tests.specs import SPEC, WINDOW

GI = 2**30


def _ctx(nodes, pod=None, load=None, pod_load=None, feasible=None):
    n = len(nodes)
    return DecisionContext(
        pod=pod or PodRequest(name="p", cpu_m=500, mem_bytes=1 * GI),
        nodes=nodes,
        feasible=np.ones(n, bool) if feasible is None else np.asarray(feasible),
        load=np.zeros((n, 6), np.float32) if load is None else np.asarray(load, np.float32),
        pod_load=np.zeros((n, 6), np.float32) if pod_load is None else np.asarray(pod_load, np.float32),
    )


def test_kube_default_matches_hand_computed_k8s_scores():
    nodes = [
        NodeInfo("a", 4000, 8 * GI, requested_cpu_m=1000, requested_mem_bytes=2 * GI),
        NodeInfo("b", 4000, 8 * GI, requested_cpu_m=3000, requested_mem_bytes=1 * GI),
        NodeInfo("c", 2000, 4 * GI, requested_cpu_m=1800, requested_mem_bytes=0),
    ]
    # a: cpu (4000-1500)*100//4000 = 62, mem (8-3)/8 -> 62; fit (62+62)//2 = 62;
    #    fractions .375/.375 -> std 0 -> 100; total 162
    # b: cpu (4000-3500)*100//4000 = 12, mem (8-2)/8 -> 75; fit 87//2 = 43;
    #    fractions .875/.25 -> std .3125 -> int(68.75) = 68; total 111
    # c: cpu 2300 > 2000 -> 0, mem (4-1)/4 -> 75; fit 75//2 = 37;
    #    fractions min(1, 1.15)=1/.25 -> std .375 -> 62; total 99
    assert kube_default_scores(_ctx(nodes)).tolist() == [162, 111, 99]
    assert least_allocated_score(1500, 4000) == 62 and least_allocated_score(5000, 4000) == 0
    assert balanced_allocation_score([0.875, 0.25]) == 68
    assert balanced_allocation_score([0.2, 0.4, 0.6]) == int((1 - np.std([0.2, 0.4, 0.6])) * 100)


def test_kube_default_counts_zero_requests_as_k8s_nonzero_defaults():
    nodes = [NodeInfo("a", 1000, 1000 * 2**20)]
    pod = PodRequest(name="best-effort")
    # 100m of 1000m -> 90; 200Mi of 1000Mi -> 80; fit 85; fractions .1/.2 -> std .05 -> 95
    assert kube_default_scores(_ctx(nodes, pod=pod)).tolist() == [85 + 95]


def test_kube_default_ignores_missing_metrics_and_breaks_ties_randomly():
    nodes = [NodeInfo(f"n{i}", 4000, 8 * GI) for i in range(4)]
    load = np.full((4, 6), np.nan)
    picks = {choose(KubeDefault(seed), _ctx(nodes, load=load))[0] for seed in range(20)}
    assert len(picks) > 1  # equal scores: not always the first node
    assert choose(KubeDefault(0), _ctx(nodes, load=load))[0] == choose(KubeDefault(0), _ctx(nodes, load=load))[0]


def test_least_loaded_adds_the_incoming_pod_and_prefers_the_lowest_bottleneck():
    nodes = [NodeInfo(f"n{i}", 4000, 8 * GI) for i in range(3)]
    load = [[0.5, 0.2, 0, 0, 0, 0], [0.1, 0.1, 0.6, 0, 0, 0], [0.3, 0.3, 0.1, 0, 0, 0]]
    pod_load = np.tile([0.0, 0.0, 0.5, 0, 0, 0], (3, 1))  # a network-heavy pod
    idx, _ = choose(LeastLoaded(0, WINDOW), _ctx(nodes, load=load, pod_load=pod_load))
    assert idx == 0  # n1 would reach 1.1 on net, n2 0.6; n0 reaches 0.5 cpu / 0.5 net


def test_node_without_metrics_is_last_resort_not_excluded():
    nodes = [NodeInfo(f"n{i}", 4000, 8 * GI) for i in range(2)]
    load = [[np.nan] * 6, [0.9] * 6]
    for policy in (LeastLoaded(0, WINDOW), BalancedLoad(0, WINDOW)):
        assert choose(policy, _ctx(nodes, load=load))[0] == 1
        assert choose(policy, _ctx(nodes, load=load, feasible=[True, False]))[0] == 0


def test_imbalance_if_placed_matches_brute_force():
    rng = np.random.default_rng(0)
    load = rng.uniform(size=(5, 6))
    pod = rng.uniform(size=(5, 6)) * 0.3
    fast = imbalance_if_placed(load, pod)
    for i in range(5):
        m = load.copy()
        m[i] += pod[i]
        assert fast[i] == pytest.approx(imbalance(m))


def test_round_robin_cycles_and_skips_infeasible():
    nodes = [NodeInfo(f"n{i}", 4000, 8 * GI) for i in range(3)]
    rr = RoundRobin()
    picks = [choose(rr, _ctx(nodes, feasible=f))[0] for f in ([1, 1, 1], [1, 0, 1], [1, 1, 1], [1, 1, 1])]
    assert picks == [0, 2, 0, 1]


def test_registry():
    names = policies_by_name()
    assert {"kube-default", "least-loaded", "balanced-load", "random", "round-robin", "drs", "drs-original"} <= set(
        names
    )
    assert make_policy("random", SPEC, 1).name == "random"
    with pytest.raises(ConfigError, match="unknown policy 'nope'"):
        make_policy("nope", SPEC)


def test_least_loaded_counts_its_own_placements_the_metrics_do_not_show_yet():
    nodes = [NodeInfo(f"n{i}", 4000, 8 * GI) for i in range(2)]
    pod_load = np.tile([0.3, 0, 0, 0, 0, 0], (2, 1))

    def ctx_at(now, load):
        return DecisionContext(
            pod=PodRequest(name="p"),
            nodes=nodes,
            feasible=np.ones(2, bool),
            load=np.asarray(load, np.float32),
            pod_load=pod_load.astype(np.float32),
            now=now,
        )

    idle = [[0.0] * 6, [0.05, 0, 0, 0, 0, 0]]
    lagging, blind = LeastLoaded(0, metric_window_seconds=30), LeastLoaded(0, metric_window_seconds=0)
    assert choose(lagging, ctx_at(0.0, idle))[0] == 0 and choose(blind, ctx_at(0.0, idle))[0] == 0
    # 3 s later the 30 s window shows only a tenth of the first pod on n0: without correction
    # it still looks emptier than n1 and the next pod herds there too
    shown = [[0.03, 0, 0, 0, 0, 0], [0.05, 0, 0, 0, 0, 0]]
    assert choose(blind, ctx_at(3.0, shown))[0] == 0
    assert choose(lagging, ctx_at(3.0, shown))[0] == 1
    assert lagging.recent.pending(ctx_at(3.0, shown))[0, 0] == pytest.approx(0.3 * 0.9)
    # a new episode (time restarts) forgets the old placements
    assert lagging.recent.pending(ctx_at(0.0, idle)).sum() == 0.0


def test_recent_binds_record_a_bind_the_policy_did_not_choose():
    from drs_prom.policies.recent_binds import RecentBinds

    nodes = [NodeInfo(f"n{i}", 4000, 8 * GI) for i in range(3)]
    pod_load = np.tile([0.2, 0.1, 0, 0, 0, 0], (3, 1)).astype(np.float32)
    ctx = DecisionContext(
        pod=PodRequest(name="p"),
        nodes=nodes,
        feasible=np.ones(3, bool),
        load=np.zeros((3, 6), np.float32),
        pod_load=pod_load,
        now=10.0,
    )
    memory = RecentBinds(20.0)
    memory.record(ctx, 2)
    later = DecisionContext(
        pod=PodRequest(name="q"),
        nodes=nodes,
        feasible=np.ones(3, bool),
        load=np.zeros((3, 6), np.float32),
        pod_load=pod_load,
        now=15.0,
    )
    pending = memory.pending(later)
    assert pending[:2].sum() == 0.0
    assert pending[2] == pytest.approx(pod_load[2] * (1 - 5.0 / 20.0))


def test_vectorised_kube_default_agrees_with_the_scalar_k8s_formulas():
    rng = np.random.default_rng(7)
    nodes = [
        NodeInfo(
            f"n{i}",
            int(rng.integers(1, 64)) * 1000,
            int(rng.integers(1, 256)) * GI,
            requested_cpu_m=int(rng.integers(0, 70_000)),
            requested_mem_bytes=int(rng.integers(0, 300)) * GI // 3,
        )
        for i in range(200)
    ]
    pod = PodRequest(name="p", cpu_m=1500, mem_bytes=3 * GI)
    expected = []
    for n in nodes:
        rc, rm = n.requested_cpu_m + pod.cpu_m, n.requested_mem_bytes + pod.mem_bytes
        fit = (least_allocated_score(rc, n.allocatable_cpu_m) + least_allocated_score(rm, n.allocatable_mem_bytes)) // 2
        expected.append(fit + balanced_allocation_score([rc / n.allocatable_cpu_m, rm / n.allocatable_mem_bytes]))
    assert kube_default_scores(_ctx(nodes, pod=pod)).tolist() == expected
    # the scheduler's node table hands the same numbers as arrays (NODE_REQUEST_COLUMNS): the same scores
    table = node_requests(_ctx(nodes, pod=pod))
    assert kube_default_scores(dataclasses.replace(_ctx(nodes, pod=pod), node_requests=table)).tolist() == expected
