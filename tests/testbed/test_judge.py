"""The testbed's pure parts: judging series and pod times, scaling node counts, naming schedulers."""

import math

import numpy as np
import pytest

from drs_prom.errors import ConfigError
from drs_prom.sim.cluster import Nodes
from drs_prom.sim.env import scaled_load
from drs_prom.sim.scenario import load_scenario
from drs_prom.testbed import judge
from drs_prom.testbed.api import scale_scenario
from drs_prom.testbed.kubelet import CREATED_ANNOTATION, FINISHED_ANNOTATION, STARTED_ANNOTATION
from drs_prom.testbed.schedulers import parse_schedulers
from drs_prom.testbed.testbed_report import COUNTS, METRICS, bench_twin

ROW = {k: 0.5 for k, _, _ in METRICS} | dict.fromkeys(COUNTS, 3)
"""One scheduler's means and counts, as testbed_report.summarise gives them."""


def _report(schedulers: dict, seeds: int = 3, **extra: object) -> dict:
    """A testbed report of drs-paper's shape around ``schedulers``, for format_table."""
    base = {"scenario": "drs-paper", "n_nodes": 4, "pods": 3, "seeds": list(range(seeds)), "speed": 10.0}
    return base | {"scrape_seconds": 0.5, "schedulers": schedulers, **extra}


def _series(raw: np.ndarray, names: tuple[str, ...]) -> judge.NodeSeries:
    return judge.NodeSeries(t=np.arange(raw.shape[0], dtype=float), names=names, raw=raw)


def test_node_metrics_apply_the_benchmarks_definitions_to_prometheus_series():
    sc = load_scenario("drs-paper")
    nodes = Nodes.from_scenario(sc)
    rng = np.random.default_rng(1)
    used = rng.uniform(0, 1, (5, 4, 6)) * nodes.capacity[None]  # absolute load, 5 steps
    raw = used.copy()
    raw[..., :2] /= nodes.capacity[None, :, :2]  # what PromQL returns: cpu/mem fractions, byte rates
    m = judge.node_metrics(_series(raw, nodes.names), nodes, sc.norm)
    want_imb = np.mean([scaled_load(u, nodes.capacity, sc.norm).std(axis=0).sum() for u in used])
    assert m["imbalance"] == pytest.approx(want_imb)
    assert m["utilisation"] == pytest.approx(float(np.mean(used / nodes.capacity[None])))
    want_hot = float(np.mean((used / nodes.capacity[None]).max(axis=2) >= judge.HOT_THRESHOLD))
    assert m["hot_node_time"] == pytest.approx(want_hot)
    peak = (used / nodes.capacity[None]).max(axis=2)
    assert m["hot_node_time_bench"] == pytest.approx(float(np.mean(peak > 0.8)))  # the objectives' default
    assert judge.node_metrics(_series(raw, nodes.names), nodes, sc.norm, 0.5)["hot_node_time_bench"] == (
        pytest.approx(float(np.mean(peak > 0.5)))
    )
    assert m["node_coverage"] == dict.fromkeys(nodes.names, 1.0)


def test_steps_missing_a_node_are_left_out_and_coverage_says_so():
    sc = load_scenario("drs-paper")
    nodes = Nodes.from_scenario(sc)
    raw = np.full((4, 4, 6), 0.1)
    raw[..., 2:] = 1000.0
    raw[1, 2, 0] = np.nan  # worker-3 had no cpu sample at step 1
    m = judge.node_metrics(_series(raw, nodes.names), nodes, sc.norm)
    assert m["steps"] == 3
    assert m["node_coverage"]["worker-3"] == pytest.approx(0.75)
    empty = judge.node_metrics(_series(np.full((3, 4, 6), np.nan), nodes.names), nodes, sc.norm)
    assert math.isnan(empty["imbalance"]) and empty["steps"] == 0


def test_pod_times_give_completion_and_slowdown_in_simulated_seconds():
    def pod(name, created, finished, phase="Succeeded", node="worker-1"):
        ann = {CREATED_ANNOTATION: str(created), STARTED_ANNOTATION: str(created + 0.5)}
        if finished is not None:
            ann[FINISHED_ANNOTATION] = str(finished)
        return {"metadata": {"name": name, "annotations": ann}, "spec": {"nodeName": node}, "status": {"phase": phase}}

    times = judge.PodTimes.from_api(
        [pod("a", 100.0, 106.0), pod("b", 101.0, 108.0), pod("c", 102.0, None, "Pending", None)],
        {"a": 50.0, "b": 35.0, "c": 10.0},  # the work the workload gives each pod, handed over in process
    )
    s = times.summary(speed=10.0)
    assert (s["pods"], s["bound"], s["completed"]) == (3, 2, 2)
    assert s["completion_mean"] == pytest.approx(65.0)  # (60 + 70) / 2 simulated seconds
    assert s["start_delay_p95"] == pytest.approx(5.0)  # 0.5 wall seconds at 10x
    assert s["slowdown_p95"] == pytest.approx(np.percentile([60 / 50, 70 / 35], 95))
    assert s["device_pods"] == 0 and math.isnan(s["device_start_delay_p95"])  # no pod asks for a device


def test_the_start_delay_of_the_pods_that_ask_for_devices_is_counted_apart():
    def pod(name, created, started, gpus):
        ann = {
            CREATED_ANNOTATION: str(created),
            STARTED_ANNOTATION: str(started),
            FINISHED_ANNOTATION: str(started + 1),
        }
        resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {"requests": {"cpu": "1", "memory": "1Gi"}}
        spec = {"nodeName": "n", "containers": [{"name": "c", "resources": resources}]}
        return {"metadata": {"name": name, "annotations": ann}, "spec": spec, "status": {"phase": "Succeeded"}}

    pods = [pod("cpu", 100.0, 100.1, 0), pod("one-gpu", 100.0, 100.2, 1), pod("eight-gpus", 100.0, 103.0, 8)]
    assert [judge.asks_for_devices(p) for p in pods] == [False, True, True]
    hugepages = {"spec": {"containers": [{"resources": {"limits": {"hugepages-2Mi": "4Mi", "cpu": "1"}}}]}}
    assert not judge.asks_for_devices(hugepages)
    s = judge.PodTimes.from_api(pods, {}).summary(speed=10.0)
    assert s["device_pods"] == 2
    assert s["device_start_delay_mean"] == pytest.approx(16.0)  # (2 + 30) / 2 simulated seconds
    assert s["device_start_delay_p95"] == pytest.approx(np.percentile([2.0, 30.0], 95))
    assert s["start_delay_p95"] == pytest.approx(np.percentile([1.0, 2.0, 30.0], 95))


def test_scale_scenario_keeps_node_types_in_proportion():
    het = load_scenario("heterogeneous")
    assert het.n_nodes == 6
    big = scale_scenario(het, 100)
    assert big.n_nodes == 100
    assert sorted(t.count for t in big.nodes) == [33, 33, 34]
    assert scale_scenario(load_scenario("drs-paper"), 4).n_nodes == 4
    with pytest.raises(ConfigError):
        scale_scenario(het, 0)


def test_scheduler_names_are_checked_and_have_bench_twins():
    assert parse_schedulers("kube-scheduler, drs,balanced-load") == ["kube-scheduler", "drs", "balanced-load"]
    with pytest.raises(ConfigError, match="unknown scheduler 'nope'"):
        parse_schedulers("kube-scheduler,nope")
    assert bench_twin("kube-scheduler") == "kube-default"
    assert bench_twin("kube-scheduler-most-allocated") == "most-allocated-gpu"
    assert parse_schedulers("kube-scheduler-most-allocated,fgd") == ["kube-scheduler-most-allocated", "fgd"]
    assert bench_twin("kube-scheduler+drs") is None
    assert bench_twin("least-loaded") == "least-loaded"
    assert bench_twin("kube-scheduler+rebalance") == "kube-default+rebalance"
    assert bench_twin("drs+rebalance") == "drs+rebalance"
    assert bench_twin("kube-scheduler+descheduler") is None  # the simulator has no descheduler


def test_testbed_table_names_its_columns_in_full():
    from drs_prom.testbed.testbed_report import COUNT_TITLES, format_table

    table = format_table(_report({"kube-scheduler": ROW, "drs": ROW | {"slowdown_p95": 0.25}}, seeds=1))
    header = " ".join(
        table.splitlines()[1 : table.splitlines().index(next(ln for ln in table.splitlines() if ln.startswith("---")))]
    )
    for title in [*(t for _, t, _ in METRICS), *COUNT_TITLES]:
        assert all(word in header.split() for word in title.split()), title
    assert "0.250 (0.50x)" in table
    assert "pod slowdown = completion time" in table


def test_the_report_judges_each_scheduler_against_the_real_one_paired_by_seed():
    """Per seed, drs's imbalance is 0.9, 1.0 and 1.1 of kube-scheduler's 1.0, 2.0, 3.0: relative differences
    -0.05, 0 and +0.05 of the reference's mean 2.0. The interval is a paired t interval (t = 4.303 at two degrees
    of freedom); seeds only one side ran are left out; the table prints it."""
    from drs_prom.testbed.testbed_report import JUDGED, format_table, versus_reference

    def runs(imbalance: dict[int, float], slowdown: float) -> list[dict[str, float]]:
        return [{"seed": s, "imbalance": v, "slowdown_p95": slowdown} for s, v in imbalance.items()]

    per = {
        "kube-scheduler": {"runs": runs({0: 1.0, 1: 2.0, 2: 3.0, 7: 5.0}, 2.0)},
        "drs": {"runs": runs({0: 0.9, 1: 2.0, 2: 3.1}, 1.0)},
    }
    versus = versus_reference(per)
    assert set(versus) == {"drs"} and set(versus["drs"]) == set(JUDGED)
    imb = versus["drs"]["imbalance"]
    half = 4.303 * 0.05 / 3**0.5
    assert imb["seeds"] == 3 and abs(imb["mean"]) < 1e-12
    assert imb["low"] == pytest.approx(-half, rel=1e-3) and imb["high"] == pytest.approx(half, rel=1e-3)
    assert versus["drs"]["slowdown_p95"]["mean"] == pytest.approx(-0.5)
    assert versus_reference({"drs": per["drs"]}) == {}  # no reference run, nothing to judge against
    report = _report({"kube-scheduler": ROW, "drs": ROW}, versus_reference=versus)
    assert "drs: DRS imbalance +0.0 % [-12.4, +12.4], p95 pod slowdown -50.0 %" in format_table(report)
    one = versus_reference({name: {"runs": r["runs"][:1]} for name, r in per.items()})  # seed 0 alone
    line = format_table(report | {"versus_reference": one})
    assert "drs: DRS imbalance -10.0 % (no interval), p95 pod slowdown -50.0 % (no interval) (1 seed)" in line
    assert "nan" not in line


def test_runs_whose_driver_fell_behind_are_named_as_measuring_the_host():
    """A driver a few hundredths of a second late is a host that keeps up; one more than a second late (ten
    simulated seconds at 10x) is not, and the report says which runs those were and how far behind."""
    from drs_prom.testbed.testbed_report import format_table, saturated_runs

    def runs(*lags: float) -> list[dict[str, float]]:
        return [{"seed": s, "driver_max_lag_seconds": lag} for s, lag in enumerate(lags)]

    per = {"kube-scheduler": ROW | {"runs": runs(0.02, 0.01, 0.03)}, "drs": ROW | {"runs": runs(0.02, 14.3, 16.3)}}
    saturated = saturated_runs(per)
    assert saturated == [
        {"scheduler": "drs", "seed": 1, "driver_lag_seconds": 14.3},
        {"scheduler": "drs", "seed": 2, "driver_lag_seconds": 16.3},
    ]
    report = _report(per, host_saturated=saturated)
    assert (
        "host saturated: the workload driver fell more than 1 s behind its schedule in 2 of 6 runs (up to 16.3 s)"
        in format_table(report)
    )
    quiet = {name: r | {"runs": runs(0.01, 0.02, 0.03)} for name, r in per.items()}
    assert saturated_runs(quiet) == []
    assert "host saturated" not in format_table(report | {"schedulers": quiet, "host_saturated": []})
