"""The peak teacher (drs_prom.policies.teachers.CapacityBalancedPeak): the room teacher, minding how hot the chosen node gets."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from drs_prom.agent import load_policy
from drs_prom.features import N_FEATURES
from drs_prom.policies.contract import DecisionContext, choose
from drs_prom.policies.load_aware import peak_load
from drs_prom.registry import HEURISTICS, TEACHERS, make_policy
from drs_prom.types import NodeInfo, PodRequest
from tests.specs import SPEC

GI = 2**30
_loads = arrays(np.float64, (5, N_FEATURES), elements=st.floats(0.0, 2.0))


@given(rel=_loads, pod=_loads)
@settings(max_examples=50, deadline=None)
def test_peak_load_is_the_busiest_plus_the_mean_resource_after_the_bind(rel, pod):
    got = peak_load(rel + pod)
    for i in range(5):
        assert np.isclose(got[i], max(rel[i] + pod[i]) + np.mean(rel[i] + pod[i]))


def _ctx(cpu: list[float], disk: list[float]) -> DecisionContext:
    n = len(cpu)
    load = np.zeros((n, N_FEATURES))
    load[:, 0], load[:, 4] = cpu, disk
    return DecisionContext(
        pod=PodRequest(name="p", cpu_m=400, mem_bytes=GI),
        nodes=[NodeInfo(f"n{i}", 4000, 16 * GI) for i in range(n)],
        feasible=np.ones(n, bool),
        load=load,
        pod_load=np.tile(np.array([0.1, 0.0, 0.0, 0.0, 0.05, 0.0]), (n, 1)),
    )


def test_a_quiet_resource_no_longer_decides_the_bind():
    """CPU at 0.77 / 0.22 / 0.25, disk at 0.115 / 0.109 / 0.103: the disk's spread is tiny.

    The imbalance the room teacher minimises falls most by easing that spread, so it sends the pod to the
    node with the quietest disk and the hotter CPU. The peak teacher sends it where its bottleneck stays
    coolest, as least-loaded would."""
    ctx = _ctx([0.77, 0.22, 0.25], [0.115, 0.109, 0.103])
    assert choose(make_policy("capacity-balanced-room", SPEC), ctx)[0] == 2
    assert choose(make_policy("capacity-balanced-peak", SPEC), ctx)[0] == 1
    assert choose(make_policy("least-loaded", SPEC), ctx)[0] == 1


def test_the_peak_term_only_breaks_near_ties():
    """CPU at 0.7 / 0.4 / 0.5, disk at 0 / 0.6 / 0.4: least-loaded takes node 2, whose peak after the bind is lower
    (0.6 against 0.65); the cluster's balance clearly wants node 1, and the peak teacher keeps to it."""
    ctx = _ctx([0.7, 0.4, 0.5], [0.0, 0.6, 0.4])
    assert choose(make_policy("least-loaded", SPEC), ctx)[0] == 2
    assert choose(make_policy("capacity-balanced-room", SPEC), ctx)[0] == 1
    assert choose(make_policy("capacity-balanced-peak", SPEC), ctx)[0] == 1


def test_the_peak_teacher_is_a_teacher_not_a_judging_baseline():
    assert "capacity-balanced-peak" in TEACHERS and "capacity-balanced-peak" not in HEURISTICS


def test_the_teachers_take_the_ended_pods_still_in_the_metrics_off_a_node():
    """Node 0 shows CPU 0.6, but 0.45 of it is a pod of ours that ended and still fades out of the rate (ctx.ended);
    node 1 really runs at 0.35. Every teacher sends the pod to node 0, which is the quieter one; capacity-balanced-
    overload, a field heuristic that keeps no such memory, reads the metrics as they come and takes node 1. The shipped
    network, which reads the teachers' resident load, goes with the teachers."""
    ctx = _ctx([0.6, 0.35], [0.0, 0.0])
    ended = np.zeros((2, N_FEATURES))
    ended[0, 0] = 0.45
    with_ended = dataclasses.replace(ctx, ended=ended, resident=np.zeros((2, N_FEATURES)))
    for teacher in ("capacity-balanced-resident", "capacity-balanced-room", "capacity-balanced-peak"):
        assert choose(make_policy(teacher, SPEC), ctx)[0] == 1, teacher
        assert choose(make_policy(teacher, SPEC), with_ended)[0] == 0, teacher
    assert choose(make_policy("capacity-balanced-overload", SPEC), with_ended)[0] == 1
    shipped = load_policy(None, 30.0)  # the network reads the teachers' resident load, ended pods taken off
    assert choose(shipped, dataclasses.replace(ctx, resident=np.zeros((2, N_FEATURES))))[0] == 1
    assert choose(shipped, with_ended)[0] == 0
