"""The closed loop on real parts: kube-apiserver + the real kube-scheduler, drs-prom run as its own
process, twin kubelets over the simulator, sim-serve scraped by a real Prometheus; judged by PromQL.

Short: 20 drs-paper pods at 10x. Asserts behaviour (every pod bound and completed, none on a node
where it cannot run, PromQL series for every node, drs-prom's decisions made by the model and counted
in Prometheus) and that nothing the testbed started is left running. Numbers are printed, not
asserted as limits.
"""

import json

import pytest

from drs_prom.testbed import process
from drs_prom.testbed.api import run_testbed

pytestmark = pytest.mark.integration


def test_closed_loop_kube_scheduler_vs_drs_prom(k8s_bins, tmp_path, capsys):
    lines: list[str] = []
    running = process.live_processes()  # e.g. the suite's shared control plane: not the testbed's to stop
    report = run_testbed(
        "drs-paper",
        seeds=[0],
        pods=20,
        speed=10.0,
        schedulers=["kube-scheduler", "drs"],
        out_dir=tmp_path / "out",
        workdir=tmp_path / "work",
        echo=lines.append,
    )
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    per = report["schedulers"]
    assert set(per) == {"kube-scheduler", "drs"}
    for name, row in per.items():
        run = row["runs"][0]
        assert (row["bound"], row["completed"]) == (20, 20), name
        assert (row["lost"], row["double_bound"], row["infeasible"]) == (0, 0, 0), name
        assert run["nodes_with_metrics"] == run["n_nodes"] == 4, name
        assert run["node_coverage_min"] > 0.5, name
        assert run["steps"] > 10, name
        for key in ("imbalance", "utilisation", "hot_node_time", "completion_p95", "slowdown_p95"):
            assert row[key] == row[key], f"{name} {key} is NaN"
        assert row["slowdown_p95"] >= 1.0 - 0.05  # a pod cannot finish faster than its full-speed work
    # Which scheduler places better is an outcome, measured by `drs-prom testbed` over 5 seeds x 100 pods and
    # printed (README: on drs-paper drs-prom was 1.00-1.20x kube-scheduler's imbalance per seed); one 20-pod seed
    # cannot decide it (the same seed gave kube-scheduler 0.538 in a CI run and 0.661 in a re-run), so it is not asserted.
    # What is asserted: every drs-prom decision reached Prometheus through its own counters, the model made most
    # of them (the first rate windows after start may be stale), and every other one is a fallback with a reason.
    decisions = per["drs"]["decisions_by_policy"]
    total = sum(decisions.values())
    assert total >= 20, decisions  # more only if a failed bind was decided again
    assert decisions.get("drs", 0) >= 10, (decisions, per["drs"]["fallback_decisions"])
    assert sum(per["drs"]["fallback_decisions"].values()) == total - decisions.get("drs", 0)
    agreement = report["bench_agreement"]
    assert set(agreement["policies"]) == {"kube-scheduler", "drs"}
    assert "kube_default_vs_kube_scheduler_percent" in agreement
    saved = json.loads((tmp_path / "out" / "testbed-drs-paper.json").read_text())
    assert saved["schedulers"]["drs"]["completed"] == 20
    assert (tmp_path / "out" / "testbed-drs-paper.png").exists()
    assert process.live_processes() == running  # everything the testbed started is stopped
