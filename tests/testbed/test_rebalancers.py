"""A testbed run's rebalancer: named after its scheduler, on the scenario's settings scaled to the run's clock; the
judge counts a replaced pod once, from its first creation."""

from __future__ import annotations

import pytest

from drs_prom.config import duration_seconds
from drs_prom.errors import ConfigError
from drs_prom.sim.rebalancer import rebalance_settings
from drs_prom.sim.scenario import load_scenario
from drs_prom.testbed.closed_loop import workload_for
from drs_prom.testbed.judge import PodOutcome, PodTimes, continued, with_deleted_completions
from drs_prom.testbed.pod_owners import pod_owners
from drs_prom.testbed.rebalancers import scaled_settings
from drs_prom.testbed.schedulers import parse_schedulers, split_rebalancer


def test_a_rebalancer_follows_its_schedulers_name():
    assert split_rebalancer("kube-scheduler+descheduler") == ("kube-scheduler", "descheduler")
    assert split_rebalancer("drs+rebalance") == ("drs", "rebalance")
    assert split_rebalancer("kube-scheduler+drs") == ("kube-scheduler+drs", None)  # the extender, no rebalancer
    assert split_rebalancer("kube-scheduler+drs+rebalance") == ("kube-scheduler+drs", "rebalance")
    names = "kube-scheduler,kube-scheduler+descheduler,kube-scheduler+rebalance,drs+rebalance"
    assert parse_schedulers(names) == names.split(",")
    with pytest.raises(ConfigError, match=r"\+descheduler"):
        parse_schedulers("nope+rebalance")


def test_the_settings_run_on_the_testbeds_clock_in_the_runs_namespace():
    sc = load_scenario("drift-steps")
    base = rebalance_settings(sc)
    got = scaled_settings(sc, 50.0, "tb1")
    assert got.mode == "evict" and got.namespaces == ["tb1"] and not got.guardrails.enabled
    assert got.interval_seconds == pytest.approx(base.interval_seconds / 50)
    assert duration_seconds(got.window) == pytest.approx(duration_seconds(base.window) / 50, rel=1e-3)
    assert duration_seconds(got.step) == pytest.approx(duration_seconds(base.step) / 50, rel=1e-2)
    assert got.min_age_seconds == pytest.approx(base.min_age_seconds / 50)
    assert got.cooldown_seconds == pytest.approx(base.cooldown_seconds / 50)
    assert (got.hot_above, got.cool_below, got.max_per_node) == (base.hot_above, base.cool_below, base.max_per_node)
    with pytest.raises(ConfigError):
        scaled_settings(sc, 0.0, "tb1")


def test_a_replaced_pod_counts_once_from_its_first_creation_and_start():
    pods = [
        PodOutcome("web-abcde", "n1", "Succeeded", 10.0, 11.0, 20.0, work=100.0),
        PodOutcome("web-fghjk", "n2", "Succeeded", 50.0, 52.0, 80.0, work=100.0),  # replaces web-zzzzz
    ]
    got = continued(PodTimes(pods), {"web-fghjk": "web-zzzzz"}, {"web-zzzzz": 5.0}, {"web-zzzzz": 6.0})
    assert got.pods[0] == pods[0]
    assert (got.pods[1].created, got.pods[1].started, got.pods[1].finished) == (5.0, 6.0, 80.0)
    assert got.summary(1.0)["completion_p95"] == pytest.approx(10 + 0.95 * (75 - 10))
    assert continued(PodTimes(pods), {}, {}, {}).pods == pods


def test_a_replacement_is_named_as_its_controller_names_pods():
    wl = workload_for(load_scenario("drift-steps"), seed=0, pods=30)
    owners = pod_owners(wl)
    row = next(i for i in range(len(wl)) if owners.of(i).kind == "ReplicaSet")
    first, second = owners.replacement_name(row, 0), owners.replacement_name(row, 1)
    assert first and second and first != second and first not in owners.names
    assert first.startswith(owners.of(row).name + "-") and len(first) == len(owners.of(row).name) + 6


def test_a_pod_deleted_as_its_work_ended_counts_as_completed_not_lost():
    listed = PodTimes([PodOutcome("a-1", "n1", "Succeeded", 0.0, 1.0, 10.0, work=9.0)])
    got = with_deleted_completions(
        listed, {"a-1": 0.0, "a-2": 2.0, "a-3": 3.0}, {"a-2": 3.0}, {"a-1": 10.0, "a-2": 12.0}, {"a-2": 9.0},
        {"a-2": "n2"},
    )  # fmt: skip
    assert [p.name for p in got.pods] == ["a-1", "a-2"]  # a-3 never finished: not made up
    extra = got.pods[1]
    assert (extra.phase, extra.node, extra.created, extra.started, extra.finished, extra.work) == (
        "Succeeded", "n2", 2.0, 3.0, 12.0, 9.0,
    )  # fmt: skip
    assert with_deleted_completions(listed, {}, {}, {}, {}, {}) is listed
