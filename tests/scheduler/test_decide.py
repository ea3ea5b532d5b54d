"""Decider: which policy decides and why (fallback reasons), and the recent-bind estimate.
Node state here is a literal NodeSnapshot (the Prometheus path has its own integration test)."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from drs_prom.config import load_settings
from drs_prom.features import FEATURES
from drs_prom.policies.contract import PolicyBase
from drs_prom.scheduler.decision.decide import Decider
from drs_prom.scheduler.metrics import SchedulerMetrics
from drs_prom.signals.state import NodeSnapshot
from drs_prom.types import NodeInfo, PodRequest

NODES = [NodeInfo(name=n, allocatable_cpu_m=4000, allocatable_mem_bytes=8 << 30) for n in ("a", "b")]
POD = PodRequest(name="p", cpu_m=500, mem_bytes=1 << 28)
DEMAND = (1.0, float(1 << 30), 0.0, 0.0, 0.0, 0.0)


class Snap:
    def __init__(self, rows, stale=frozenset(), fail=False):
        self.rows, self.stale, self.fail = rows, stale, fail

    def snapshot(self):
        if self.fail:
            raise ConnectionError("refused")
        frame = pd.DataFrame(self.rows, index=["a", "b"][: len(self.rows)], columns=list(FEATURES))
        return NodeSnapshot(features=frame, taken_at=time.time(), stale=frozenset(self.stale))


class Prefers(PolicyBase):
    """A policy that wants node b; raises when told to (a model failing mid-run)."""

    name = "prefers-b"
    version = "v-test"

    def __init__(self, fail=False):
        self.fail = fail

    def score(self, ctx):
        if self.fail:
            raise RuntimeError("bad weights")
        return np.array([0.0, 1.0])


def decider(source, policy, **over):
    d = Decider.from_settings(load_settings(None, over), SchedulerMetrics(), source=source, policy=policy)
    d.refresh()
    return d


def fallbacks(d, reason):
    return d.metrics.registry.get_sample_value("drs_fallback_decisions_total", {"reason": reason}) or 0


FEASIBLE = np.array([True, True])


def test_model_decides_when_metrics_are_fresh():
    d = decider(Snap([[0.1] * 6, [0.1] * 6]), Prefers())
    c = d.decide(POD, DEMAND, NODES, FEASIBLE)
    assert (c.index, c.reason, c.policy.name) == (1, None, "prefers-b") and d.model_version == "v-test"


@pytest.mark.parametrize(
    ("source", "policy", "reason", "fallback_name"),
    [
        (Snap([], fail=True), Prefers(), "prometheus_unreachable", "kube-default"),
        (None, Prefers(), "prometheus_unreachable", "kube-default"),
        (Snap([[0.1] * 6, [0.1] * 6], stale={"b"}), Prefers(), "metrics_stale", "kube-default"),
        (Snap([[0.1] * 6]), Prefers(), "metrics_stale", "kube-default"),  # b has no row at all
        (Snap([[0.1] * 6, [0.1] * 6]), None, "no_model", "capacity-balanced-overload"),
        (Snap([[0.1] * 6, [0.1] * 6]), Prefers(fail=True), "model_error", "capacity-balanced-overload"),
    ],
)
def test_fallback_reasons(source, policy, reason, fallback_name):
    d = decider(source, policy)
    c = d.decide(POD, DEMAND, NODES, FEASIBLE)
    assert c.reason == reason and c.policy.name == fallback_name and c.index in (0, 1)
    assert fallbacks(d, reason) == 1


class SnapAt(Snap):
    """A snapshot evaluated at a known time."""

    def __init__(self, rows, taken_at):
        super().__init__(rows)
        self.taken_at = taken_at

    def snapshot(self):
        snap = super().snapshot()
        return NodeSnapshot(features=snap.features, taken_at=self.taken_at, stale=snap.stale)


def test_stale_infeasible_node_does_not_force_fallback():
    d = decider(Snap([[0.1] * 6, [0.1] * 6], stale={"b"}), Prefers())
    c = d.decide(POD, DEMAND, NODES, np.array([True, False]))
    assert c.reason is None and c.index == 0


def test_recent_binds_are_counted_once_until_metrics_catch_up():
    d = decider(Snap([[0.2] * 6, [0.2] * 6]), None, **{"prometheus.window": "30s"})
    load, _ = d.load(NODES, FEASIBLE)
    first = d.decide(POD, DEMAND, NODES, FEASIBLE)
    # the metrics the policy is given do not change with our own binds ...
    load2, _ = d.load(NODES, FEASIBLE)
    assert np.array_equal(load2, load)
    # ... the policy's own recent-bind memory does: least-loaded avoids the node that just
    # took a pod, though the metrics still show a tie
    second = d.decide(POD, DEMAND, NODES, FEASIBLE)
    assert first.reason == second.reason == "no_model" and second.index != first.index


def test_overload_reaches_the_policies_that_read_it_as_in_the_benchmark():
    """The load matrix is built on the scales the deciding policy reads (drs_prom.policies.contract.input_scales): the
    default fallback, capacity-balanced-overload, sees load above capacity as the bench and the twin give it;
    a policy that does not read overload gets the configured, clipped scales."""
    hot = [1e12] * 6  # far above any configured scale: the node is overloaded on every signal
    overload_aware = decider(Snap([hot, [0.1] * 6]), None)  # no model: capacity-balanced-overload decides
    load, _ = overload_aware.load(NODES, FEASIBLE, scales=overload_aware.scales())
    assert overload_aware.named("capacity-balanced-overload").reads_unclipped_load
    assert load[0].max() > 1.0
    plain = decider(Snap([hot, [0.1] * 6]), Prefers())
    load, _ = plain.load(NODES, FEASIBLE, scales=plain.scales())
    assert load[0].max() <= 1.0


class Records(PolicyBase):
    """Remembers the context it was asked to score; no preference."""

    name = "records"
    version = "v-test"

    def score(self, ctx):
        self.ctx = ctx
        return np.zeros(len(ctx.nodes))


def test_the_policy_is_told_when_its_load_was_measured():
    """The node state is refreshed every state_refresh_seconds: the memories of binds and ended pods fade to the
    snapshot's time, not to the decision's."""
    policy = Records()
    taken = time.time() - 4.0
    d = decider(SnapAt([[0.1] * 6, [0.1] * 6], taken), policy)
    before = time.time()
    d.decide(POD, DEMAND, NODES, FEASIBLE)
    assert policy.ctx.measured_at == taken == d.measured_at() and policy.ctx.now >= before


def test_node_capacity_labels_reach_the_policy_and_a_bad_one_reads_as_standard():
    half = {"drs.io/net-rx-bytes-per-second": "62500000", "drs.io/disk-write-bytes-per-second": "fast"}
    nodes = [NodeInfo(name="a", allocatable_cpu_m=4000, allocatable_mem_bytes=8 << 30, labels=half), NODES[1]]
    policy = Records()
    d = decider(Snap([[0.1] * 6, [0.1] * 6]), policy)  # default normalisation: 1 GbE (125e6 B/s) reads as 1.0
    d.decide(POD, DEMAND, nodes, FEASIBLE)
    full = policy.ctx.full
    assert full.shape == (2, 6)
    assert full[0, 2] == pytest.approx(0.5) and full[0, 5] == 1.0  # the unparsable label is ignored
    assert full[1].tolist() == [1.0] * 6


def test_a_network_heavy_pod_goes_to_the_node_whose_label_says_its_link_is_faster():
    """Equal measured load; node a's link is a tenth of b's. Without the labels both links read as 1 GbE and the
    capacity-aware heuristic could not tell them apart (it would break the tie by chance)."""
    from drs_prom.registry import configured_spec, make_policy

    slow = {"drs.io/net-rx-bytes-per-second": "12500000", "drs.io/net-tx-bytes-per-second": "12500000"}
    nodes = [NodeInfo(name="a", allocatable_cpu_m=4000, allocatable_mem_bytes=8 << 30, labels=slow), NODES[1]]
    heavy = (0.2, float(1 << 28), 10e6, 10e6, 0.0, 0.0)  # 10 MB/s each way
    load = [[0.1, 0.1, 0.05, 0.05, 0.0, 0.0]] * 2
    for seed in range(5):
        policy = make_policy("capacity-balanced-overload", configured_spec(), seed=seed)
        d = decider(Snap(load), policy)
        assert d.decide(POD, heavy, nodes, FEASIBLE).index == 1
