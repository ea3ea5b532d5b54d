"""The hot set: quantiles over the window against each node's own capacity, with hysteresis."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drs_prom.features import N_FEATURES
from drs_prom.moves.hot import bottlenecks, capacity_shares, hot_nodes, quantiles

NAMES = ("a", "b", "c")


def shares(*peaks: float) -> np.ndarray:
    out = np.full((len(peaks), N_FEATURES), 0.1)
    out[:, 0] = peaks
    return out


def test_network_and_disk_are_read_against_each_nodes_own_bandwidth():
    raw = np.array([[0.2, 0.3, 50e6, 10e6, 0.0, 0.0], [0.2, 0.3, 50e6, 10e6, 0.0, 0.0]])
    link = np.array([[100e6, 100e6, 200e6, 200e6], [50e6, 50e6, 200e6, 200e6]])
    got = capacity_shares(raw, link)
    assert got[0, 2] == pytest.approx(0.5) and got[1, 2] == pytest.approx(1.0)  # the small link is full
    assert bottlenecks(got).tolist() == pytest.approx([0.5, 1.0])


def test_one_busy_sample_makes_no_node_hot_but_a_sustained_window_does():
    calm, busy = shares(0.3, 0.3, 0.3), shares(0.95, 0.95, 0.3)
    window = np.stack([calm] * 9 + [busy])  # one busy sample in ten
    assert hot_nodes(NAMES, quantiles(window, 0.5), (), 0.8, 0.7) == frozenset()
    window = np.stack([calm] * 4 + [busy] * 6)  # busy for most of the window
    assert hot_nodes(NAMES, quantiles(window, 0.5), (), 0.8, 0.7) == {"a", "b"}


def test_hysteresis_a_hot_node_stays_hot_until_it_falls_below_the_lower_threshold():
    assert hot_nodes(NAMES, shares(0.75, 0.75, 0.85), (), 0.8, 0.7) == {"c"}  # not hot before: 0.75 is not enough
    assert hot_nodes(NAMES, shares(0.75, 0.65, 0.85), {"a", "b"}, 0.8, 0.7) == {"a", "c"}  # a stays, b cools


def test_a_node_without_data_is_never_hot():
    s = shares(0.95, 0.95, 0.95)
    s[1, 3] = np.nan
    assert hot_nodes(NAMES, s, {"b"}, 0.8, 0.7) == {"a", "c"}
    window = np.full((5, 3, N_FEATURES), np.nan)
    assert np.isnan(quantiles(window, 0.5)).all()


@settings(max_examples=200, deadline=None)
@given(
    peaks=st.lists(st.floats(0, 2, allow_nan=False), min_size=1, max_size=6),
    hot_above=st.floats(0.1, 1.5),
    gap=st.floats(0.01, 0.5),
    was=st.sets(st.integers(0, 5)),
)
def test_hysteresis_properties(peaks, hot_above, gap, was):
    names = [f"n{i}" for i in range(len(peaks))]
    cool_below = hot_above - gap
    was_hot = {names[i] for i in was if i < len(names)}
    values = np.zeros((len(peaks), N_FEATURES))
    values[np.arange(len(peaks)), np.arange(len(peaks)) % N_FEATURES] = peaks  # each node's peak on some signal
    got = hot_nodes(names, values, was_hot, hot_above, cool_below)
    for name, p in zip(names, peaks):
        if p > hot_above:
            assert name in got  # above the high threshold: hot, whatever it was
        elif p < cool_below:
            assert name not in got  # below the low threshold: never hot
        else:
            assert (name in got) == (name in was_hot)  # in between: as it was
