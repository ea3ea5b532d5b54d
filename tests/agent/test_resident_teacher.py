"""capacity-balanced-resident on hand-built contexts: the over-request it penalises and the resident load it reads."""

from __future__ import annotations

import numpy as np
import pytest

from drs_prom.features import N_FEATURES
from drs_prom.policies.contract import DecisionContext, choose
from drs_prom.policies.teachers import CapacityBalancedResident, over_request_take
from drs_prom.registry import HEURISTICS, TEACHERS, make_policy
from drs_prom.types import NodeInfo, PodRequest
from tests.specs import SPEC

GI = 2**30


def _pod(cpu_m: int = 500, mem: int = 1 * GI, demand: tuple[float, ...] | None = None) -> PodRequest:
    """A pod; by default its demand is exactly its requests (no over-request)."""
    if demand is None:
        demand = (cpu_m / 1000.0, float(mem), 0.0, 0.0, 0.0, 0.0)
    return PodRequest(name="p", cpu_m=cpu_m, mem_bytes=mem, demand=demand)


def _ctx(
    nodes: list[NodeInfo],
    pod: PodRequest,
    load: list | None = None,
    pod_load: list | None = None,
    resident: list | None = None,
    full: list | None = None,
) -> DecisionContext:
    n = len(nodes)
    return DecisionContext(
        pod=pod,
        nodes=nodes,
        feasible=np.ones(n, bool),
        load=np.zeros((n, N_FEATURES)) if load is None else np.asarray(load, np.float64),
        pod_load=np.zeros((n, N_FEATURES)) if pod_load is None else np.asarray(pod_load, np.float64),
        resident=None if resident is None else np.asarray(resident, np.float64),
        full=None if full is None else np.asarray(full, np.float64),
    )


def _row(cpu: float = 0.0, mem: float = 0.0, net: float = 0.0) -> list[float]:
    return [cpu, mem, net, 0.0, 0.0, 0.0]


def test_over_request_take_is_the_share_of_free_request_room_the_unused_request_holds() -> None:
    nodes = [
        NodeInfo("small-room", 4000, 8 * GI, requested_mem_bytes=4 * GI),  # 4 GiB free to request
        NodeInfo("big-room", 4000, 40 * GI, requested_mem_bytes=8 * GI),  # 32 GiB free
        NodeInfo("no-room", 4000, 8 * GI, requested_mem_bytes=7 * GI),  # 1 GiB free
    ]
    honest = _pod(cpu_m=500, mem=2 * GI)
    assert over_request_take(_ctx(nodes, honest)).tolist() == [0.0, 0.0, 0.0]
    unknown = PodRequest(name="p", cpu_m=500, mem_bytes=2 * GI)  # demand None: its use is not known
    assert over_request_take(_ctx(nodes, unknown)).tolist() == [0.0, 0.0, 0.0]
    hoarder = _pod(cpu_m=500, mem=2 * GI, demand=(0.5, 0.3 * GI, 0.0, 0.0, 0.0, 0.0))  # asks 2 GiB, uses 0.3
    take = over_request_take(_ctx(nodes, hoarder))
    assert take[0] == pytest.approx(1.7 / 4)
    assert take[1] == pytest.approx(1.7 / 32)
    assert take[0] > take[1]
    assert take[2] == 1.0  # 1.7 GiB of 1 GiB free: clipped
    cpu_hoarder = _pod(cpu_m=2000, mem=GI, demand=(0.2, float(GI), 0.0, 0.0, 0.0, 0.0))  # 1.8 cores unused
    assert over_request_take(_ctx(nodes, cpu_hoarder)).tolist() == pytest.approx([1800 / 4000] * 3)


def test_the_resident_load_steers_away_from_a_node_the_metrics_show_idle() -> None:
    nodes = [NodeInfo("n0", 4000, 16 * GI), NodeInfo("n1", 4000, 16 * GI)]
    pod = _pod()
    ctx = _ctx(
        nodes,
        pod,
        load=[_row(0.05, 0.1), _row(0.05, 0.1)],  # the metrics: both equally idle (they lag)
        pod_load=[_row(0.125, 0.0625), _row(0.125, 0.0625)],
        resident=[_row(0.9, 0.2), _row(0.0, 0.0)],  # but our pods on n0 are expected to use 0.9 of its cpu
    )
    teacher = make_policy("capacity-balanced-resident", SPEC)
    overload = make_policy("capacity-balanced-overload", SPEC)
    assert isinstance(teacher, CapacityBalancedResident)
    blind = overload.node_scores(ctx)
    assert blind[0] == pytest.approx(blind[1])  # what the metrics show cannot tell the nodes apart
    seen = teacher.node_scores(ctx)
    assert seen[1] > seen[0] + 0.01
    assert choose(teacher, ctx)[0] == 1
    # with nothing of ours running anywhere the teacher is as indifferent as the metrics (a fresh one: choose
    # made the first remember its pick as a recent bind)
    quiet = make_policy("capacity-balanced-resident", SPEC).node_scores(
        _ctx(nodes, pod, load=ctx.load, pod_load=ctx.pod_load, resident=np.zeros((2, 6)))
    )
    assert quiet[0] == pytest.approx(quiet[1])


def test_without_resident_load_it_ranks_as_capacity_balanced_overload() -> None:
    nodes = [NodeInfo(f"n{i}", 4000 * (i + 1), 8 * GI * (i + 1)) for i in range(4)]
    rng = np.random.default_rng(3)
    load = rng.uniform(0.0, 1.2, size=(4, N_FEATURES))
    pod_load = rng.uniform(0.0, 0.3, size=(4, N_FEATURES))
    full = rng.uniform(0.5, 1.5, size=(4, N_FEATURES))
    ctx = _ctx(nodes, _pod(), load=load, pod_load=pod_load, full=full)
    teacher = make_policy("capacity-balanced-resident", SPEC).node_scores(ctx)
    overload = make_policy("capacity-balanced-overload", SPEC).node_scores(ctx)
    np.testing.assert_allclose(teacher, overload)
    assert np.argsort(teacher).tolist() == np.argsort(overload).tolist()
    assert len(set(np.round(teacher, 9))) == 4  # a real ranking, not four ties


def test_the_teacher_is_registered_as_a_teacher_not_a_judging_baseline() -> None:
    assert "capacity-balanced-resident" in TEACHERS
    assert "capacity-balanced-resident" not in HEURISTICS
