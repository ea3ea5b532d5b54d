"""benchmarks/rebalance_testbed.py on a literal testbed report: each rebalancer against its scheduler alone and
drs-prom's against the descheduler, paired by seed."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _module():
    spec = importlib.util.spec_from_file_location("rebalance_testbed", BENCH / "rebalance_testbed.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def _runs(hot, p95, eph, lost=0):
    return {"runs": [
        {"seed": s, "hot_node_time_bench": h, "slowdown_p95": p, "evictions_per_node_hour": e, "lost": lost}
        for s, (h, p, e) in enumerate(zip(hot, p95, eph))
    ]}  # fmt: skip


def test_the_pairs_and_their_paired_changes(tmp_path, capsys):
    m = _module()
    per = {
        "kube-scheduler": _runs([0.10, 0.20, 0.30], [1.10, 1.20, 1.30], [0, 0, 0]),
        "kube-scheduler+descheduler": _runs([0.09, 0.19, 0.29], [1.20, 1.30, 1.40], [3, 3, 3]),
        "kube-scheduler+rebalance": _runs([0.05, 0.10, 0.15], [1.10, 1.20, 1.30], [0.5, 0.5, 0.5]),
        "drs": _runs([0.1, 0.1, 0.1], [1, 1, 1], [0, 0, 0]),
    }
    assert m.pairs(per) == [
        ("kube-scheduler", "kube-scheduler+descheduler"),
        ("kube-scheduler", "kube-scheduler+rebalance"),
        ("kube-scheduler+descheduler", "kube-scheduler+rebalance"),
    ]
    r = m.row("s", per["kube-scheduler"], per["kube-scheduler+rebalance"], "kube-scheduler", "kube-scheduler+rebalance")
    # -5, -10, -15 points over a 0.2 mean: -25, -50, -75 %, sd 25 %, t(2) 4.30
    assert r[3] == "0.2000 -> 0.1000" and r[4] == "-50.0 % [-112.1, +12.1]"
    assert r[6] == "+0.000 [+0.000, +0.000]" and r[7] == "0.00 -> 0.50" and r[8] == "0"
    assert r[9] == "no budgets"  # results from before the testbed's PodDisruptionBudgets
    for i, run in enumerate(per["kube-scheduler+rebalance"]["runs"]):
        run.update(disruption_budgets=8, pdb_violations=i)
    assert m.row("s", per["kube-scheduler"], per["kube-scheduler+rebalance"], "b", "c")[9] == "3"
    path = tmp_path / "testbed-s.json"
    path.write_text(json.dumps({"scenario": "s", "schedulers": per}))
    assert m.main([str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 + 3 and "kube-scheduler+rebalance vs kube-scheduler+descheduler" in out[-1]
