"""The field's estimators on hand-worked examples, and learning the estimator's parameters from a table of pods."""

from __future__ import annotations

import numpy as np
import pytest

from drs_prom.usage import anchors
from drs_prom.usage.estimator import UsageModel
from drs_prom.usage.fit import PodTable, errors, fit, learned, priors, replay
from drs_prom.usage.history import PodUsage

GI = 2**30


def test_requests_and_koordinator_know_no_io():
    assert anchors.requests_as_usage(500, GI) == (0.5, float(GI), 0.0, 0.0, 0.0, 0.0)
    assert anchors.koordinator(1000, GI) == pytest.approx((0.85, 0.7 * GI, 0.0, 0.0, 0.0, 0.0))


def test_vpa_takes_the_decayed_90th_percentile_plus_its_margin_and_floors():
    # ten pods seen an hour each, yesterday's pod at 10 cores weighs half as much as today's nine at 1 core
    mean = np.zeros((10, 6))
    mean[:, 0], mean[:, 1] = 1.0, GI
    mean[0, 0] = 10.0
    seen = np.full(10, 3600.0)
    last = np.full(10, 86400.0)
    last[0] = 0.0
    own = PodUsage(mean, seen, last)
    cpu, mem, *io = anchors.vpa(100, GI, own, 86400.0)
    # weights: 0.5 for the 10-core pod, 1 for each of the others: the 90th percentile of 9.5 is below it
    assert cpu == pytest.approx(1.0 * 1.15) and mem == pytest.approx(GI * 1.15) and io == [0.0] * 4
    assert anchors.vpa(1, 1, PodUsage.empty(), 0.0) == anchors.requests_as_usage(1, 1)
    tiny = PodUsage(np.zeros((1, 6)), np.array([60.0]), np.array([0.0]))
    assert anchors.vpa(1, 1, tiny, 0.0)[:2] == (anchors.VPA_MIN_CPU_CORES, anchors.VPA_MIN_MEM_BYTES)


def _table(starts, owners, cpu_used, images=None, runs=100.0) -> PodTable:
    n = len(starts)
    mean = np.zeros((n, 6))
    mean[:, 0] = cpu_used
    mean[:, 1] = GI
    return PodTable(
        namespace=("ns",) * n,
        owner=tuple(owners),
        image=tuple(images or ("img",) * n),
        cpu_m=np.full(n, 1000),
        mem_bytes=np.full(n, 2 * GI),
        start=np.array(starts, float),
        last_seen=np.array(starts, float) + runs,
        mean=mean,
    )


def test_replay_shows_each_pod_only_what_was_stored_before_it_started():
    t = _table([0.0, 50.0, 500.0], ["a", "a", "b"], [1.0, 2.0, 3.0])
    first, second, third = replay(t, lag=1.0)
    assert len(first.own) == 0 and len(first.similar) == 0  # nothing before it
    assert len(second.own) == 1 and second.own.seconds[0] == 50.0  # the first pod, seen for 50 s by then
    assert len(third.own) == 0 and len(third.similar) == 2  # another owner of the same image
    assert np.allclose(third.used, [3.0, GI, 0, 0, 0, 0])
    assert len(replay(t, lag=60.0)[1].own) == 0  # a pod younger than the lag is not stored yet


def test_fit_learns_the_request_ratio_and_beats_the_requests():
    t = _table(np.arange(40) * 10.0, ["a"] * 20 + ["b"] * 20, [0.25] * 20 + [0.5] * 20)
    cases = replay(t, lag=1.0)
    assert priors(cases)[:2] == pytest.approx((0.375, 0.5))
    model = fit(cases, fitted_on="test")
    assert model.fitted_on == "test" and set(model.errors) == {
        "cpu",
        "mem",
        "net_rx",
        "net_tx",
        "disk_read",
        "disk_write",
    }
    assert (
        errors(learned(model), cases)["cpu"]
        < errors(lambda c: anchors.requests_as_usage(c.cpu_m, c.mem_bytes), cases)["cpu"] / 5
    )


def test_errors_are_weighted_absolute_errors_per_signal():
    t = _table([0.0, 1000.0], ["a", "b"], [1.0, 3.0])
    cases = replay(t, lag=1.0)
    e = errors(lambda c: (2.0, GI, 0.0, 0.0, 0.0, 0.0), cases)
    assert e["cpu"] == pytest.approx((1.0 + 1.0) / 4.0) and e["mem"] == 0.0 and np.isnan(e["net_rx"])
    assert isinstance(learned(UsageModel())(cases[0]), tuple)


def test_a_refit_is_promoted_only_if_it_predicts_the_newest_pods_at_least_as_well():
    from drs_prom.usage.fit import refit

    # the cluster's pods use a quarter of a core for every core they request; the model in service thinks all of it
    t = _table(np.arange(60) * 100.0, ["a", "b", "c"] * 20, [0.25] * 60)
    wrong = UsageModel(cpu_ratio=1.0, prior_pods=4.0)
    got = refit(t, now=6000.0, current=wrong, holdout_seconds=1000.0)
    assert got.judged_pods == 10 and got.fitted_pods == 50
    assert got.candidate.cpu_ratio == pytest.approx(0.25) and got.promote
    assert got.candidate_errors["cpu"] < got.current_errors["cpu"]
    # the refit of a model already right is no better: kept only because it is not worse
    again = refit(t, now=6000.0, current=got.candidate, holdout_seconds=1000.0)
    assert again.promote and again.candidate_errors == pytest.approx(again.current_errors, nan_ok=True)
    # nothing started in the last hour: nothing to judge a refit on, so none is promoted
    assert not refit(t, now=1e6, current=wrong, holdout_seconds=1000.0).promote
