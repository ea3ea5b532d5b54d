"""The two other kinds of scheduler the testbed races: a second kube-scheduler with drs-prom as its extender, and a
heuristic through ``drs-prom run --policy``. Short (10 pods at 20x), behaviour only: every pod bound and
completed, none lost or infeasible, and the PromQL judgement present for both."""

import pytest

from drs_prom.testbed import process
from drs_prom.testbed.api import run_testbed

pytestmark = pytest.mark.integration


def test_extender_and_policy_schedulers(k8s_bins, tmp_path):
    running = process.live_processes()
    lines: list[str] = []
    report = run_testbed(
        "drs-paper",
        seeds=[0],
        pods=10,
        speed=20.0,
        schedulers=["kube-scheduler+drs", "capacity-balanced-overload"],
        out_dir=tmp_path / "out",
        workdir=tmp_path / "work",
        bench=False,
        echo=lines.append,
    )
    print("\n".join(lines))
    per = report["schedulers"]
    assert set(per) == {"kube-scheduler+drs", "capacity-balanced-overload"}
    for name, row in per.items():
        assert (row["bound"], row["completed"], row["lost"], row["infeasible"]) == (10, 10, 0, 0), name
        assert row["runs"][0]["nodes_with_metrics"] == 4, name
        assert row["imbalance"] == row["imbalance"], f"{name}: imbalance is NaN"
    # the second kube-scheduler really asked drs-prom for scores (when more than one node fits), and only for scores
    calls = per["kube-scheduler+drs"]["runs"][0]["extender_calls"]
    assert calls.get("prioritize", 0) > 0 and calls.get("filter", 0) == 0, calls
    assert all(row["violations"] == 0 for row in per.values())
    # the heuristic decided through drs-prom run --policy: its decisions counted under its own name
    # (at least once per pod: a bind that fails, e.g. an apiserver timeout under load, is decided again)
    assert (
        per["capacity-balanced-overload"]["runs"][0]["decisions_by_policy"].get("capacity-balanced-overload", 0) >= 10
    )
    assert process.live_processes() == running
