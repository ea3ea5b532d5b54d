import numpy as np
import pytest

from drs_prom.agent.model_inputs import CANDIDATE_COLUMNS, N_CANDIDATE, candidate_matrix, drs_state
from drs_prom.policies.contract import DecisionContext
from drs_prom.signals.state import imbalance
from drs_prom.types import NodeInfo, PodRequest


def ctx(load, pod_load, feasible=None):
    n = len(load)
    nodes = [NodeInfo(f"n{i}", 4000, 8 << 30, requested_cpu_m=500 * i, pod_count=i) for i in range(n)]
    return DecisionContext(
        pod=PodRequest("p", cpu_m=500, mem_bytes=1 << 30),
        nodes=nodes,
        feasible=np.ones(n, bool) if feasible is None else feasible,
        load=np.asarray(load, np.float32),
        pod_load=np.asarray(pod_load, np.float32),
    )


def test_dstd_is_the_exact_imbalance_change_of_placing_there():
    rng = np.random.default_rng(3)
    load = rng.uniform(0, 0.7, (5, 6))
    pod = rng.uniform(0, 0.3, (5, 6))
    m = candidate_matrix(ctx(load, pod))
    assert m.shape == (5, N_CANDIDATE)
    dstd = m[:, CANDIDATE_COLUMNS.index("dstd_0") : CANDIDATE_COLUMNS.index("dstd_5") + 1]
    for i in range(5):
        after = load.copy()
        after[i] = np.clip(after[i] + pod[i], 0, 1)
        assert dstd[i].sum() / 5 == pytest.approx(imbalance(after) - imbalance(load), abs=1e-5)


def test_rows_follow_nodes_so_order_does_not_matter():
    rng = np.random.default_rng(4)
    load = rng.uniform(0, 1, (6, 6))
    pod = np.tile(rng.uniform(0, 0.2, 6), (6, 1))
    perm = rng.permutation(6)
    c1 = ctx(load, pod)
    c2 = DecisionContext(c1.pod, [c1.nodes[i] for i in perm], c1.feasible[perm], c1.load[perm], c1.pod_load[perm])
    np.testing.assert_allclose(candidate_matrix(c1)[perm], candidate_matrix(c2), atol=1e-6)


def test_stale_node_reads_as_full_not_idle():
    load = np.array([[0.2] * 6, [np.nan] * 6])
    m = candidate_matrix(ctx(load, np.zeros((2, 6))))
    assert m[1, CANDIDATE_COLUMNS.index("stale")] == 1.0
    assert m[1, 0] == 1.0 and m[0, CANDIDATE_COLUMNS.index("stale")] == 0.0
    assert np.isfinite(m).all()


def test_request_pressure_includes_the_pod():
    m = candidate_matrix(ctx(np.zeros((3, 6)), np.zeros((3, 6))))
    cpu = m[:, CANDIDATE_COLUMNS.index("cpu_req_after")]
    np.testing.assert_allclose(cpu, [500 / 4000, 1000 / 4000, 1500 / 4000])


def test_drs_state_is_nodes_then_pod_on_0_to_100():
    load = np.arange(24, dtype=np.float32).reshape(4, 6) / 100
    pod = np.tile(np.array([1.0, 0.23, 0.11, 0.02, 0.0, 0.015]), (4, 1))
    s = drs_state(ctx(load, pod))
    assert s.shape == (30,)
    np.testing.assert_allclose(s[:24], np.arange(24), atol=1e-4)
    np.testing.assert_allclose(s[24:], [100, 23, 11, 2, 0, 1.5], atol=1e-4)


def test_recent_binds_count_as_load_and_are_shown_apart():
    load = np.zeros((3, 6))
    recent = np.zeros((3, 6))
    recent[1, 0] = 0.4
    m = candidate_matrix(ctx(load, np.full((3, 6), 0.1)), recent)
    assert m[1, CANDIDATE_COLUMNS.index("load_0")] == pytest.approx(0.4)
    assert m[1, CANDIDATE_COLUMNS.index("recent_0")] == pytest.approx(0.4)
    assert m[0, CANDIDATE_COLUMNS.index("recent_0")] == 0.0
    # placing on the node with pending load raises imbalance more than on an idle one
    d0 = CANDIDATE_COLUMNS.index("dstd_0")
    assert m[1, d0] > m[0, d0]


def test_node_request_arrays_from_the_node_table_give_the_same_matrix_as_the_nodes():
    import dataclasses

    from drs_prom.policies.contract import NODE_REQUEST_COLUMNS
    from drs_prom.scheduler.watch.nodes import NodeTable

    rng = np.random.default_rng(5)
    base = [NodeInfo(f"n{i}", int(rng.integers(1, 64)) * 1000, int(rng.integers(1, 256)) << 30, 110) for i in range(7)]
    table = NodeTable(base, 1)
    for i in range(7):
        table.add(f"n{i}", int(rng.integers(0, 9000)), int(rng.integers(0, 1 << 34)), int(rng.integers(0, 30)))
    view = table.view()
    rows = np.array([1, 2, 4, 6])
    nodes = view.infos(rows)
    arrays = view.requests(rows)
    assert arrays.tolist() == [[float(getattr(n, k)) for k in NODE_REQUEST_COLUMNS] for n in nodes]
    plain = ctx(rng.uniform(0, 0.7, (4, 6)), rng.uniform(0, 0.1, (4, 6)))
    plain = dataclasses.replace(plain, nodes=nodes)
    with_arrays = dataclasses.replace(plain, node_requests=arrays)
    np.testing.assert_array_equal(candidate_matrix(plain), candidate_matrix(with_arrays))
