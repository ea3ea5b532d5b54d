"""The usage estimator on literal histories: which source answers, how the owner's pods are summarised, and what it
refuses to read."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drs_prom.errors import ConfigError
from drs_prom.usage.estimator import (
    DEFAULT,
    OWNER,
    REQUESTS,
    SIMILAR,
    UsageModel,
    estimate,
    load_usage_model,
    save_usage_model,
    shipped_usage_model,
    summarise,
)
from drs_prom.usage.history import PodUsage

GI = 2**30


def usage(rows, seconds=None, last_seen=None) -> PodUsage:
    mean = np.array(rows, dtype=np.float64).reshape(-1, 6)
    n = len(mean)
    return PodUsage(
        mean,
        np.full(n, 60.0) if seconds is None else np.array(seconds, float),
        np.arange(n, dtype=float) if last_seen is None else np.array(last_seen, float),
    )


PLAIN = UsageModel(prior_pods=0.0, cpu_ratio=0.5, mem_ratio=0.5, io_per_pod=(1.0, 2.0, 3.0, 4.0))


def test_the_owners_pods_answer_first_then_similar_workloads_then_requests_then_defaults():
    own = usage([[1.0, 2 * GI, 10, 20, 30, 40]])
    similar = usage([[3.0, 4 * GI, 0, 0, 0, 0]])
    got = estimate(2000, 8 * GI, own, similar, PLAIN, 100.0)
    assert got.source == OWNER and got.demand == (1.0, 2.0 * GI, 10.0, 20.0, 30.0, 40.0) and got.evidence == 1.0
    got = estimate(2000, 8 * GI, PodUsage.empty(), similar, PLAIN, 100.0)
    assert got.source == SIMILAR and got.demand[0] == 3.0
    got = estimate(2000, 8 * GI, None, None, PLAIN, 100.0)  # the store could not answer: the requests' prior
    assert got.source == REQUESTS and got.demand == (1.0, 4.0 * GI, 1.0, 2.0, 3.0, 4.0)
    got = estimate(0, 0, None, None, PLAIN, 100.0)  # kube-scheduler's non-zero defaults, no I/O
    assert got.source == DEFAULT and got.demand == (0.1, 200.0 * 2**20, 0.0, 0.0, 0.0, 0.0)


def test_a_new_owner_is_pulled_towards_the_prior_by_prior_pods_votes():
    model = UsageModel(prior_pods=1.0, cpu_ratio=1.0, mem_ratio=1.0)
    one = estimate(1000, GI, usage([[3.0, GI, 0, 0, 0, 0]]), None, model, 0.0)
    assert one.demand[0] == pytest.approx((3.0 + 1.0) / 2)  # one pod seen, one prior vote
    three = estimate(1000, GI, usage([[3.0, GI, 0, 0, 0, 0]] * 3), None, model, 0.0)
    assert three.demand[0] == pytest.approx((9.0 + 1.0) / 4)


def test_recent_pods_weigh_more_counted_in_pods_not_seconds():
    rows = [[1.0, GI, 0, 0, 0, 0], [3.0, GI, 0, 0, 0, 0]]
    flat, _ = summarise(usage(rows, last_seen=[0.0, 1e6]), PLAIN, 2e6)
    assert flat[0] == pytest.approx(2.0)
    recent, _ = summarise(usage(rows, last_seen=[0.0, 1.0]), UsageModel(half_life_pods=1.0), 2e6)
    assert recent[0] == pytest.approx((1.0 * 0.5 + 3.0 * 1.0) / 1.5)  # the older pod's vote halves


def test_a_pod_seen_briefly_votes_in_proportion():
    value, weight = summarise(usage([[1.0] * 6, [5.0] * 6], seconds=[60.0, 10.0]), UsageModel(), 0.0)
    assert weight == pytest.approx(1.0 + 10.0 / 30.0)
    assert value[0] == pytest.approx((1.0 + 5.0 / 3.0) / (4.0 / 3.0))


def test_the_weighted_quantile_is_a_stored_value():
    rows = [[float(v)] * 6 for v in (1, 2, 3, 100)]
    value, _ = summarise(usage(rows), UsageModel(quantile=0.5), 0.0)
    assert value[0] == 2.0  # not pulled up by the outlier, as the mean would be


@given(bad=st.sampled_from([math.nan, -1.0, math.inf]), col=st.integers(0, 5))
@settings(max_examples=30, deadline=None)
def test_a_broken_series_is_left_out_not_averaged_in(bad, col):
    good = [1.0, GI, 5.0, 5.0, 5.0, 5.0]
    broken = list(good)
    broken[col] = bad
    got = estimate(1000, GI, usage([good, broken]), None, PLAIN, 0.0)
    assert got.source == OWNER and got.demand == tuple(float(x) for x in good)
    only_broken = estimate(1000, GI, usage([broken]), None, PLAIN, 0.0)
    assert only_broken.source == REQUESTS  # nothing usable was stored: the next source answers


def test_models_round_trip_through_json_and_refuse_nonsense_in_one_line(tmp_path):
    model = UsageModel(quantile=0.75, half_life_pods=4.0, prior_pods=2.0, io_per_pod=(1, 2, 3, 4), fitted_on="x")
    path = save_usage_model(model, tmp_path / "usage.json")
    assert load_usage_model(path) == model
    assert load_usage_model(save_usage_model(UsageModel(), tmp_path / "inf.json")).half_life_pods == math.inf
    (tmp_path / "bad.json").write_text('{"quantile": 2}')
    with pytest.raises(ConfigError, match=r"usage model .*bad.json: quantile must be in \(0, 1\)"):
        load_usage_model(tmp_path / "bad.json")
    (tmp_path / "junk.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match="a usage model is a JSON object"):
        load_usage_model(tmp_path / "junk.json")
    with pytest.raises(ConfigError, match=r"usage model .*missing\.json"):
        load_usage_model(tmp_path / "missing.json")


def test_the_shipped_usage_model_loads_and_says_what_it_was_fitted_on():
    model = shipped_usage_model()
    assert "generated training clusters" in model.fitted_on
    assert set(model.errors) == {"cpu", "mem", "net_rx", "net_tx", "disk_read", "disk_write"}
