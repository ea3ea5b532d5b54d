"""Room keeping (drs_prom.policies.room_keeping): the slots a bind takes, the memory of shapes, and the teacher that reads them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drs_prom.features import N_FEATURES
from drs_prom.policies.contract import DecisionContext, choose
from drs_prom.policies.room_keeping import RecentShapes, slot_take
from drs_prom.registry import HEURISTICS, TEACHERS, make_policy
from drs_prom.types import NodeInfo, PodRequest
from tests.specs import SPEC

GI = 2**30


def _ctx(nodes: list[NodeInfo], pod: PodRequest, feasible: list[bool] | None = None) -> DecisionContext:
    n = len(nodes)
    return DecisionContext(
        pod=pod,
        nodes=nodes,
        feasible=np.ones(n, bool) if feasible is None else np.asarray(feasible, bool),
        load=np.zeros((n, N_FEATURES)),
        pod_load=np.zeros((n, N_FEATURES)),
    )


def _oracle(nodes: list[NodeInfo], pod: PodRequest, shapes: list[tuple[int, int, list[bool]]]) -> list[float]:
    """slot_take by counting, one node and one shape at a time."""

    def slots(free_cpu: float, free_mem: float, free_pods: float, cpu: int, mem: int) -> int:
        k = 0
        while k < free_pods and (k + 1) * max(cpu, 1) <= free_cpu and (k + 1) * max(mem, 1) <= free_mem:
            k += 1
        return k

    out = []
    for i, node in enumerate(nodes):
        total = 0.0
        for cpu, mem, usable in shapes:
            if not usable[i]:
                continue
            free = [
                (nd.allocatable_cpu_m - nd.requested_cpu_m, nd.allocatable_mem_bytes - nd.requested_mem_bytes, nd)
                for nd in nodes
            ]
            everywhere = sum(
                slots(fc, fm, nd.allocatable_pods - nd.pod_count, cpu, mem)
                for (fc, fm, nd), ok in zip(free, usable, strict=True)
                if ok
            )
            fc, fm, _ = free[i]
            now = slots(fc, fm, node.allocatable_pods - node.pod_count, cpu, mem)
            after = slots(
                max(fc - pod.cpu_m, 0),
                max(fm - pod.mem_bytes, 0),
                max(node.allocatable_pods - node.pod_count - 1, 0),
                cpu,
                mem,
            )
            total += (now - after) / max(everywhere, 1)
        out.append(total / len(shapes))
    return out


_node = st.builds(
    lambda cpu, used_cpu, mem, used_mem, pods, used_pods: (
        cpu,
        min(used_cpu, cpu),
        mem,
        min(used_mem, mem),
        pods,
        min(used_pods, pods),
    ),
    st.sampled_from([1000, 2000, 4000, 8000]),
    st.integers(0, 8000),
    st.sampled_from([2, 4, 8, 16]),
    st.integers(0, 16),
    st.integers(1, 8),
    st.integers(0, 8),
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(_node, min_size=1, max_size=5),
    st.tuples(st.integers(0, 3000), st.integers(0, 6)),
    st.lists(st.tuples(st.integers(0, 4000), st.integers(0, 8), st.integers(0, 2**5 - 1)), min_size=1, max_size=4),
)
def test_slot_take_counts_the_slots_a_bind_removes_as_a_share_of_the_shapes_room(node_specs, pod_spec, shape_specs):
    nodes = [
        NodeInfo(
            f"n{i}", cpu, mem * GI, requested_cpu_m=uc, requested_mem_bytes=um * GI, allocatable_pods=p, pod_count=up
        )
        for i, (cpu, uc, mem, um, p, up) in enumerate(node_specs)
    ]
    pod = PodRequest(name="p", cpu_m=pod_spec[0], mem_bytes=pod_spec[1] * GI // 2)
    shapes = [(c, m * GI // 2, [bool(bits >> i & 1) for i in range(len(nodes))]) for c, m, bits in shape_specs]
    got = slot_take(
        _ctx(nodes, pod),
        np.array([s[0] for s in shapes], np.float64),
        np.array([s[1] for s in shapes], np.float64),
        np.array([s[2] for s in shapes], bool),
    )
    assert got.tolist() == pytest.approx(_oracle(nodes, pod, shapes))
    assert (got >= 0).all() and (got <= 1).all()


def test_no_shape_no_take():
    nodes = [NodeInfo("a", 2000, 8 * GI)]
    assert slot_take(
        _ctx(nodes, PodRequest(name="p", cpu_m=100)), np.zeros(0), np.zeros(0), np.zeros((0, 1), bool)
    ).tolist() == [0.0]


def test_recent_shapes_remember_the_last_pods_by_node_name_whatever_the_candidates():
    memory = RecentShapes(size=2)
    a, b, c = NodeInfo("a", 2000, 8 * GI), NodeInfo("b", 2000, 8 * GI), NodeInfo("c", 2000, 8 * GI)
    memory.record(_ctx([a, b], PodRequest(name="p1", cpu_m=100, mem_bytes=GI), feasible=[True, False]))
    memory.record(_ctx([b, c], PodRequest(name="p2", cpu_m=200, mem_bytes=2 * GI), feasible=[True, True]))
    memory.record(_ctx([c, a], PodRequest(name="p3", cpu_m=300, mem_bytes=3 * GI), feasible=[False, True]))
    assert len(memory) == 2  # p1 is forgotten
    cpu, mem, usable = memory.shapes(_ctx([a, b, c], PodRequest(name="q")))
    assert sorted(cpu.tolist()) == [200.0, 300.0]
    assert sorted(zip(cpu.tolist(), mem.tolist(), strict=True)) == [(200.0, 2.0 * GI), (300.0, 3.0 * GI)]
    rows = {int(x): row.tolist() for x, row in zip(cpu, usable, strict=True)}
    assert rows[200] == [False, True, True]  # feasible on b and c; a was not among its candidates
    assert rows[300] == [True, False, False]  # by name: it saw [c, a] and only a was feasible


def test_node_churn_cannot_grow_the_memory_without_bound():
    memory = RecentShapes(size=4)
    for k in range(300):  # 300 x 8 distinct node names
        nodes = [NodeInfo(f"n{k}-{i}", 2000, 8 * GI) for i in range(8)]
        memory.record(_ctx(nodes, PodRequest(name=f"p{k}", cpu_m=100)))
    assert len(memory._cols) <= 1024 + 8
    cpu, _, usable = memory.shapes(_ctx(nodes, PodRequest(name="q")))
    assert len(cpu) >= 1 and usable.shape == (len(cpu), 8) and usable[-1].all()


def test_the_room_teacher_keeps_the_only_node_a_large_pod_still_fits_free():
    """Two 2-core nodes: 'used' already runs 300m, 'empty' runs nothing. The pods seen recently need 1.8 cores.

    A small pod on 'empty' would leave no node where the next 1.8-core pod fits; on 'used' it costs no slot.
    Load-spreading policies pick the emptier node; the room-keeping teacher does not."""
    nodes = [NodeInfo("used", 2000, 8 * GI, requested_cpu_m=300, pod_count=1), NodeInfo("empty", 2000, 8 * GI)]
    load = np.zeros((2, N_FEATURES))
    load[0, 0] = 0.15  # the metrics see the running pod on 'used'
    teacher = make_policy("capacity-balanced-room", SPEC)
    resident = make_policy("capacity-balanced-resident", SPEC)
    big = PodRequest(name="big", cpu_m=1800, mem_bytes=GI, demand=(1.2, float(GI), 0.0, 0.0, 0.0, 0.0))
    for _ in range(3):  # the large pods it decided before (placed elsewhere)
        teacher.shapes.record(_ctx(nodes, big))
    small = PodRequest(name="small", cpu_m=220, mem_bytes=GI // 2, demand=(0.25, GI / 2, 0.0, 0.0, 0.0, 0.0))
    ctx = DecisionContext(
        pod=small,
        nodes=nodes,
        feasible=np.ones(2, bool),
        load=load,
        pod_load=np.tile(np.array([0.125, 1 / 16, 0, 0, 0, 0]), (2, 1)),
    )
    assert choose(resident, ctx)[0] == 1
    assert choose(teacher, ctx)[0] == 0
    assert slot_take(ctx, *teacher.shapes.shapes(ctx))[1] > 0.5  # 'empty' holds the only 1.8-core slot


def test_the_room_teacher_is_a_teacher_not_a_judging_baseline():
    assert "capacity-balanced-room" in TEACHERS and "capacity-balanced-room" not in HEURISTICS
