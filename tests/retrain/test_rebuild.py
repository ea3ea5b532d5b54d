"""Pure parts of retraining on literal data: journal filtering, transition rebuild, the gate."""

from __future__ import annotations

import numpy as np

from drs_prom.config import Settings
from drs_prom.journal import Decision, Journal
from drs_prom.retrain import NodeHistory, gate, load_decisions, rebuild_transitions, reward_delay

S = Settings.model_validate({"prometheus": {"window": "10s", "max_sample_age_seconds": 15}, "scheduler": {"settle_seconds": 5}})
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
    return NodeHistory(times, vals, {n: 4.0 for n in NODES}, {n: 16e9 for n in NODES})


def _d(ts: float, chosen: str = "a", cands=NODES) -> Decision:  # noqa: ANN001
    return Decision("u", f"p{ts:g}", "default", [1.2, 1e9, 0, 0, 0, 0], list(cands), [True] * len(cands), chosen, [0.0] * len(cands), "x", ts=ts)


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
