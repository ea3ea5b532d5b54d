"""The paired statistics that judge a policy (drs_prom.outcomes.paired_stats): worked examples by hand and properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drs_prom.outcomes.paired_stats import (
    AUTO_MAX_SEEDS,
    AUTO_MIN_SEEDS,
    Interval,
    best_reference,
    harm,
    relative_interval,
    seeds_wanted,
    t95,
)

# exact two-sided 95 % Student-t quantiles (scipy.stats.t.ppf(0.975, df)) beyond the table
EXACT = {31: 2.0395, 40: 2.0211, 60: 2.0003, 99: 1.9842, 1000: 1.9623}


@pytest.mark.parametrize(("df", "quantile"), EXACT.items())
def test_t_quantile_beyond_the_table_is_within_a_thousandth(df: int, quantile: float) -> None:
    assert t95(df) == pytest.approx(quantile, abs=1e-3)


def test_t_quantile_refuses_zero_degrees_of_freedom() -> None:
    with pytest.raises(ValueError, match="degrees of freedom"):
        t95(0)


def test_relative_interval_by_hand() -> None:
    # differences 0.1, 0.2, 0.3 on a reference of mean 2: relative 0.05, 0.1, 0.15 (mean 0.1, sd 0.05)
    cand = {0: 2.1, 1: 1.2, 2: 3.3, 9: 100.0}  # seed 9 has no pair and is left out
    ref = {0: 2.0, 1: 1.0, 2: 3.0}
    i = relative_interval(cand, ref)
    half = 4.303 * 0.05 / math.sqrt(3)
    assert i.seeds == 3 and i.mean == pytest.approx(0.1)
    assert (i.low, i.high) == (pytest.approx(0.1 - half), pytest.approx(0.1 + half))
    assert i.half_width == pytest.approx(half) and i.inferior()  # 0.1 + half > +3 %
    assert not Interval(-0.01, -0.04, 0.02, 10).inferior() and Interval(0.0, -0.04, 0.031, 10).inferior()


def test_one_seed_shows_nothing_so_it_counts_as_inferior() -> None:
    i = relative_interval({0: 1.0}, {0: 2.0})
    assert i.mean == pytest.approx(-0.5) and math.isnan(i.high) and i.inferior() and i.half_width == math.inf


def test_best_reference_is_the_lowest_mean_over_the_given_seeds() -> None:
    runs = {"a": {0: 1.0, 1: 3.0}, "b": {0: 2.1, 1: 1.8}, "c": {0: 0.1}}  # c lacks seed 1
    assert best_reference(runs, [0, 1]) == "b" and best_reference(runs, [0]) == "c" and best_reference({}, [0]) == ""


def test_harm_is_a_composite_above_1_02x_or_a_p95_slowdown_above_1_05x() -> None:
    assert not harm(1.02, 1.05, 1.0, 1.0)
    assert harm(1.0201, 1.0, 1.0, 1.0) and harm(1.0, 1.0501, 1.0, 1.0)


def test_auto_seeds_start_at_ten_stop_when_narrow_and_never_pass_a_hundred() -> None:
    assert seeds_wanted(Interval(0.0, math.nan, math.nan, 0)) == AUTO_MIN_SEEDS
    assert seeds_wanted(Interval(0.0, -0.02, 0.02, 10)) == 10  # half-width exactly 2 %: done
    # twice too wide: sd = 0.04 * sqrt(10) / t(9) = 0.0559; t(32) * 0.0559 / sqrt(33) = 0.0198 <= 2 % (32 seeds: 0.0201)
    assert seeds_wanted(Interval(0.0, -0.04, 0.04, 10)) == 33
    assert seeds_wanted(Interval(0.0, -0.5, 0.5, 20)) == AUTO_MAX_SEEDS
    assert seeds_wanted(Interval(0.0, -0.5, 0.5, AUTO_MAX_SEEDS)) == AUTO_MAX_SEEDS


finite = st.floats(min_value=0.1, max_value=100.0, allow_nan=False)


@given(st.lists(st.tuples(finite, finite), min_size=2, max_size=40))
def test_the_interval_holds_its_mean_and_flips_with_the_roles(pairs: list[tuple[float, float]]) -> None:
    cand = {k: c for k, (c, _) in enumerate(pairs)}
    ref = {k: r for k, (_, r) in enumerate(pairs)}
    i = relative_interval(cand, ref)
    assert i.seeds == len(pairs) and i.low <= i.mean + 1e-12 and i.mean <= i.high + 1e-12
    scale = sum(ref.values()) / len(ref)
    assert i.mean == pytest.approx(sum(cand[k] - ref[k] for k in ref) / len(ref) / scale, abs=1e-9)
    same = relative_interval(ref, ref)
    assert (same.mean, same.low, same.high) == (0.0, 0.0, 0.0) and not same.inferior()


@given(st.lists(finite, min_size=2, max_size=30), st.floats(min_value=1.01, max_value=3.0))
def test_a_candidate_uniformly_worse_by_more_than_the_margin_is_inferior(ref: list[float], factor: float) -> None:
    r = dict(enumerate(ref))
    i = relative_interval({k: v * factor for k, v in r.items()}, r)
    assert i.mean == pytest.approx(factor - 1.0) and i.inferior(margin=(factor - 1.0) / 2)


@given(
    st.integers(min_value=0, max_value=150),
    st.floats(min_value=0.0, max_value=1.0, allow_nan=False),
)
def test_auto_never_asks_for_fewer_seeds_than_run_nor_more_than_the_cap(n: int, half: float) -> None:
    want = seeds_wanted(Interval(0.0, -half, half, n))
    assert want >= min(n, AUTO_MAX_SEEDS) or n > AUTO_MAX_SEEDS
    assert want <= max(n, AUTO_MAX_SEEDS) and (n >= AUTO_MIN_SEEDS or want == AUTO_MIN_SEEDS)
