"""The throughput benchmark's report and profile breakdown, on literal inputs (the benchmark
itself is a command: it is never run, nor timed, in the suite)."""

from __future__ import annotations

import argparse
import importlib.util
import math
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(label: str, n: int, pods_per_s: float, p50: float, cpu: float, rss: float) -> dict:
    return {
        "label": label,
        "nodes": n,
        "pods": 300,
        "bound": 300,
        "pods_per_s": pods_per_s,
        "p50_ms": p50,
        "p99_ms": 2 * p50,
        "cpu_s_per_1000": cpu,
        "rss_mb": rss,
    }


def drain(label: str, n: int, pods: int, rate: float, rss: float) -> dict:
    return {
        "label": label,
        "nodes": n,
        "pods": pods,
        "bound": pods,
        "drain_pods_per_s": rate,
        "drain_rss_mb": rss,
        "drain_cpu_s_per_1000": 1.0,
        "drain_control_plane_cpu_s_per_1000": 3.0,
    }


def test_summary_has_both_schedulers_and_the_ratios_per_node_count():
    bench = load("sched_throughput")
    results = [
        run("drs-100", 100, 120.0, 30.0, 2.0, 300.0),
        run("kube-100", 100, 100.0, 20.0, 1.0, 80.0),
        run("drs-1000", 1000, 80.0, 40.0, 3.0, 310.0),
        run("kube-1000", 1000, 100.0, 25.0, 1.5, 90.0),
    ]
    drains = [
        drain("drs-100", 100, 300, 400.0, 301.0),
        drain("kube-100", 100, 300, 200.0, 81.0),
        drain("drs-1000", 1000, 300, 150.0, 320.0),
        drain("kube-1000", 1000, 300, 300.0, 95.0),
        drain("drs-1000", 1000, 5000, 140.0, 450.0),
        drain("kube-1000", 1000, 5000, 290.0, 120.0),
    ]
    args = argparse.Namespace(pods=300, prometheus=True, model=None, rate=0.0)
    report = bench.summarise(results, drains, [100, 1000], args)
    r100, r1000 = report["nodes"]["100"], report["nodes"]["1000"]
    assert r100["pods_per_s_ratio"] == pytest.approx(1.2)
    assert r100["queue_drain_ratio"] == pytest.approx(2.0)
    assert r100["p50_ratio"] == pytest.approx(1.5)
    assert r1000["queue_drain_ratio"] == pytest.approx(0.5)  # the 300-pod drain, not the RSS run
    keys = {"pods_per_s", "queue_drain_per_s", "p50_ms", "p99_ms", "rss_mb", "cpu_s_per_1000"}
    for who in ("drs-prom", "kube-scheduler"):
        assert keys <= set(r100[who]) and keys <= set(r1000[who])
    # RSS at the largest node count comes from the big drain (5000 pods), elsewhere from the run
    assert r1000["drs-prom"]["rss_mb"] == 450.0 and r1000["drs-prom"]["rss_pods"] == 5000
    assert r100["kube-scheduler"]["rss_mb"] == 80.0
    assert math.isnan(bench.ratio(1.0, 0.0))
    # all cores busy with 1 ms (scheduler) + 3 ms (apiserver, etcd) per pod
    assert r100["drs-prom"]["drain_cpu_bound_per_s"] == pytest.approx(bench.CORES / 0.004)
    assert "drs-prom, writes in-process" not in r100


def test_summary_reports_the_in_process_variant_against_kube_scheduler():
    bench = load("sched_throughput")
    results = [
        run("drs-100", 100, 120.0, 30.0, 2.0, 300.0),
        run("kube-100", 100, 100.0, 20.0, 1.0, 80.0),
        run("inproc-100", 100, 90.0, 40.0, 2.5, 290.0),
    ]
    drains = [
        drain("drs-100", 100, 300, 400.0, 301.0),
        drain("kube-100", 100, 300, 200.0, 81.0),
        drain("inproc-100", 100, 300, 100.0, 299.0),
    ]
    report = bench.summarise(
        results, drains, [100], argparse.Namespace(pods=300, prometheus=True, model=None, rate=0.0)
    )
    row = report["nodes"]["100"]
    assert row["queue_drain_ratio"] == pytest.approx(2.0)  # drs-prom is not confused with its variant
    ip = row["drs-prom, writes in-process"]
    assert ip["pods_per_s_ratio"] == pytest.approx(0.9)
    assert ip["queue_drain_ratio"] == pytest.approx(0.5)
    assert ip["p50_ratio"] == pytest.approx(2.0)


def test_summary_reports_the_extender_path_against_kube_scheduler_alone():
    bench = load("sched_throughput")
    results = [
        run("drs-100", 100, 120.0, 30.0, 2.0, 300.0),
        run("kube-100", 100, 100.0, 20.0, 1.0, 80.0),
        run("ext-100", 100, 90.0, 26.0, 2.5, 290.0),
    ]
    drains = [
        drain("drs-100", 100, 300, 400.0, 301.0),
        drain("kube-100", 100, 300, 200.0, 81.0),
        drain("ext-100", 100, 300, 50.0, 299.0),
    ]
    args = argparse.Namespace(pods=300, prometheus=True, model=None, rate=50.0)
    row = bench.summarise(results, drains, [100], args)["nodes"]["100"]
    assert row["queue_drain_ratio"] == pytest.approx(2.0)  # drs-prom's own numbers are not the extender's
    ex = row["kube-scheduler + drs-prom extender"]
    assert ex["p50_added_ms"] == pytest.approx(6.0)
    assert ex["p50_ratio"] == pytest.approx(1.3)
    assert ex["queue_drain_ratio"] == pytest.approx(0.25)


def test_stage_quantiles_interpolate_within_the_bucket_as_histogram_quantile_does():
    bench = load("sched_throughput")
    le = lambda stage, bound: f'drs_scheduling_stage_seconds_bucket{{stage="{stage}",le="{bound}"}}'  # noqa: E731
    metrics = {
        le("decide", "0.001"): 0.0,
        le("decide", "0.002"): 50.0,  # half the pods between 1 and 2 ms
        le("decide", "0.005"): 100.0,
        le("decide", "+Inf"): 100.0,
        'drs_scheduling_stage_seconds_count{stage="decide"}': 100.0,
        le("bind_write", "0.01"): 0.0,
        le("bind_write", "+Inf"): 0.0,  # no pod bound yet: no row
    }
    rows = bench.stage_rows(metrics)
    assert set(rows) == {"decide"}
    assert rows["decide"]["count"] == 100
    assert rows["decide"]["p50_ms"] == pytest.approx(2.0)
    assert rows["decide"]["p99_ms"] == pytest.approx(2.0 + 3.0 * 49 / 50)


def test_pinning_splits_the_cores_between_control_plane_and_scheduler():
    bench = load("sched_throughput")
    two = bench.Pinning([0, 1])
    assert (two.plane, two.sched) == ([0], [1])
    assert bench.Pinning([0, 1, 2, 3, 4]).sched == [2, 3, 4]
    with pytest.raises(SystemExit, match="at least 2 cores"):
        bench.Pinning([3])


def test_profile_samples_go_to_the_first_matching_category(tmp_path):
    prof = load("profile_breakdown")
    lines = [
        "_bootstrap (threading.py:1);_bind (drs_prom/scheduler/loop.py:240);bind (drs_prom/scheduler/write/bind.py:60);"
        "request (urllib3/_request_methods.py:1) 7",
        "_bootstrap (threading.py:1);_watch (drs_prom/scheduler/watch/cache.py:150);loads (json/__init__.py:346) 3",
        "_bootstrap (threading.py:1);_write_loop (drs_prom/stores/journal.py:180);dumps (json/__init__.py:1) 2",
        "<module> (<string>:1);Command.main (click/core.py:1560);_find_and_load (<frozen>:1) 50",
    ]
    path = tmp_path / "raw.txt"
    path.write_text("\n".join(lines) + "\n")
    counts = prof.breakdown([path])
    assert counts["bind round trip"] == 7
    assert counts["watch: decode (json)"] == 3
    assert counts["journal"] == 2
    assert counts[prof.STARTUP] == 50


def test_the_throughput_benchmark_measures_the_model_that_ships():
    """No second literal: without --model the benchmark starts drs-prom with the scheduler's own default."""
    from drs_prom.agent import default_model_path

    bench = load("sched_throughput")
    assert bench.default_model_path is default_model_path
    text = (BENCH / "sched_throughput.py").read_text()
    assert "drs-v1.keras" not in text and "drs-v6.keras" not in text and "drs-v7.keras" not in text


def test_owned_pods_resolve_to_their_replicaset_as_the_usage_estimate_reads_owners(monkeypatch):
    """--owners N: the pods are named and referenced as a ReplicaSet's pods are, so drs-prom's usage estimate sees
    N owners (one history read per owner, not one per pod) and its owner query selects exactly their pods."""
    import re

    from drs_prom.usage.owners import pod_name_regex, top_owner

    bench = load("sched_throughput")
    monkeypatch.setattr(bench, "OWNERS", 3)
    pods = [bench.pod(bench.pod_name(i), "drs-scheduler") for i in range(9)]
    owners = [top_owner(p) for p in pods]
    assert sorted(set(owners)) == ["ReplicaSet/bench-0", "ReplicaSet/bench-1", "ReplicaSet/bench-2"]
    for p, owner in zip(pods, owners):
        assert re.fullmatch(pod_name_regex(owner), p["metadata"]["name"])
        assert p["metadata"]["labels"] == {"app": owner.split("/")[1]}
    monkeypatch.setattr(bench, "OWNERS", 0)
    bare = bench.pod(bench.pod_name(7), "drs-scheduler")
    assert top_owner(bare) == "Pod/p00007" and "ownerReferences" not in bare["metadata"]
