"""Pure parts of retraining on literal data: journal filtering, transition rebuild, the gate."""

from __future__ import annotations

import numpy as np

from drs_prom.config import Settings
from drs_prom.retrain.gate import gate
from drs_prom.retrain.rebuild import NodeHistory, load_decisions, rebuild_transitions, reward_delay
from drs_prom.stores.journal import Decision, Journal

S = Settings.model_validate(
    {"prometheus": {"window": "10s", "max_sample_age_seconds": 15}, "scheduler": {"settle_seconds": 5}}
)
NODES = ["a", "b"]


def _history(t_end: float = 300.0, missing: dict | None = None) -> NodeHistory:
    times = np.arange(0.0, t_end + 1, 5.0)
    vals = {}
    for i, n in enumerate(NODES):
        v = np.tile([0.2 + 0.1 * i, 0.5, 1e6, 1e6, 0.0, 2e6], (len(times), 1)).astype(float)
        v[times >= 100, 0] += 0.3 * (i == 0)  # the pod bound to "a" at t=95 shows up
        for lo, hi in (missing or {}).get(n, []):
            v[(times >= lo) & (times < hi)] = np.nan
        vals[n] = v
    return NodeHistory(times, vals, dict.fromkeys(NODES, 4.0), dict.fromkeys(NODES, 16000000000.0))


def _d(ts: float, chosen: str = "a", cands=NODES) -> Decision:
    return Decision(
        "u",
        f"p{ts:g}",
        "default",
        [1.2, 1e9, 0, 0, 0, 0],
        list(cands),
        [True] * len(cands),
        chosen,
        [0.0] * len(cands),
        "x",
        ts=ts,
    )


def test_reward_is_read_after_the_settle_delay_and_window():
    assert reward_delay(S) == 15.0
    trans, skipped, cursor = rebuild_transitions([_d(95.0), _d(150.0, "b")], _history(), S)
    assert not skipped and len(trans) == 2 and cursor == 150.0
    t = trans[0]
    assert t.action == 0 and np.isclose(t.ctx.load[0, 0], 0.2) and np.isclose(t.load_after[0, 0], 0.5)
    assert np.isclose(t.ctx.pod_load[0, 0], 0.3)  # 1.2 cores of a 4-core node
    assert t.next_ctx is trans[1].ctx and trans[1].next_ctx is None  # chained, last is terminal
    assert t.reward != trans[1].reward


def test_bad_data_is_skipped_by_reason():
    hist = _history(400.0, missing={"b": [(120, 200)], "a": [(250, 500)]})
    ds = [_d(10.0), _d(60.0, cands=["a", "b", "zz"]), _d(150.0), _d(190.0), _d(236.0), _d(280.0), _d(395.0)]
    trans, skipped, cursor = rebuild_transitions(ds, hist, S)
    assert [t.ts for t in trans] == [10.0]
    # 60: a node with no series; 150/190: b not scraped; 236: a stops before its reward;
    # 280: a gone for good; 395: its reward is not due yet
    assert skipped == {"gap": 2, "node_gone": 2, "no_settled_reward": 2}
    assert cursor == 280.0  # the newest decision cannot settle yet: read again next run


def test_journal_rows_of_other_schema_and_outcomes_are_counted(tmp_path):
    j = Journal(tmp_path / "j.sqlite")
    j.append(_d(1.0))
    old = _d(2.0)
    old.schema = 0
    j.append(old)
    lost = _d(3.0)
    lost.outcome = "conflict"
    j.append(lost)
    broken = _d(4.0)
    broken.chosen = "nowhere"
    j.append(broken)
    rows, skipped = load_decisions(j, 0, 10, 100)
    assert [r.ts for r in rows] == [1.0]
    assert skipped == {"old_schema": 1, "not_bound": 1, "bad_row": 1}


def test_gate_margin():
    assert gate({"td": {"candidate": -1.0}}, 0.02).reason == "no current model"
    assert gate({"td": {"candidate": -1.01, "current": -1.0}}, 0.02).promote
    v = gate({"td": {"candidate": -1.05, "current": -1.0}, "sim": {"candidate": 5, "current": 1}}, 0.02)
    assert not v.promote and v.reason.startswith("td:")
    assert not gate({"sim": {"candidate": float("nan"), "current": 1.0}}, 0.5).promote


def test_journalled_node_requests_rebuild_the_models_request_columns():
    """Schema 2: requests/allocatable/pod counts come from the journal, not Prometheus capacity."""
    from drs_prom.agent.model_inputs import CANDIDATE_COLUMNS, candidate_matrix
    from drs_prom.retrain.rebuild import decision_nodes

    d = _d(95.0)
    d.pod_cpu_m, d.pod_mem_bytes = 500, 2**30
    d.nodes = [
        {
            "allocatable_cpu_m": 3800,
            "allocatable_mem_bytes": 14 * 2**30,
            "allocatable_pods": 110,
            "requested_cpu_m": 1900,
            "requested_mem_bytes": 7 * 2**30,
            "pod_count": 10,
        },
        {
            "allocatable_cpu_m": 3800,
            "allocatable_mem_bytes": 14 * 2**30,
            "allocatable_pods": 20,
            "requested_cpu_m": 100,
            "requested_mem_bytes": 0,
            "pod_count": 19,
        },
    ]
    trans, skipped, _ = rebuild_transitions([d, _d(150.0, "b")], _history(), S)
    assert not skipped and trans[0].node_info and not trans[1].node_info
    m = candidate_matrix(trans[0].ctx)
    col = {c: i for i, c in enumerate(CANDIDATE_COLUMNS)}
    np.testing.assert_allclose(m[:, col["cpu_req_after"]], [(1900 + 500) / 3800, (100 + 500) / 3800], rtol=1e-6)
    np.testing.assert_allclose(m[:, col["mem_req_after"]], [8 / 14, 1 / 14], rtol=1e-6)
    np.testing.assert_allclose(m[:, col["pods_after"]], [11 / 110, 20 / 20], rtol=1e-6)
    assert [n.name for n in trans[0].ctx.nodes] == NODES and trans[0].ctx.pod.cpu_m == 500
    # the pod's load is still normalised by the node's capacity from Prometheus (4 cores)
    assert np.isclose(trans[0].ctx.pod_load[0, 0], 0.3)

    # schema 1 (no node info): Prometheus capacity, zero requests, the pod's requests unknown (0)
    old = decision_nodes(_d(150.0), _history())
    assert [(n.allocatable_cpu_m, n.allocatable_mem_bytes, n.requested_cpu_m, n.pod_count) for n in old] == [
        (4000, 16_000_000_000, 0, 0)
    ] * 2
    m1 = candidate_matrix(trans[1].ctx)
    np.testing.assert_allclose(m1[:, col["cpu_req_after"]], [0.0, 0.0])
    np.testing.assert_allclose(m1[:, col["pods_after"]], [1 / 110, 1 / 110], rtol=1e-6)


def test_approximated_rows_are_visible_in_metrics_and_summary():
    from prometheus_client import CollectorRegistry

    from drs_prom.retrain.outcome import RetrainMetrics, RetrainResult, record

    reg = CollectorRegistry()
    metrics = RetrainMetrics(reg)
    assert reg.get_sample_value("drs_retrain_transitions_approximated_total", {"reason": "no_node_info"}) == 0
    res = RetrainResult("rejected", transitions=5, approximated={"no_node_info": 3})
    record(metrics, res, 1.0)
    assert reg.get_sample_value("drs_retrain_transitions_approximated_total", {"reason": "no_node_info"}) == 3
    assert "approximated: no_node_info=3" in res.summary()
