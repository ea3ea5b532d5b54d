"""Properties of node state built from whatever a PromQL vector holds: NaN, +/-Inf, negative
values, duplicate nodename series, series without the label, missing nodes, bad samples.

The contract: ``vector_series`` gives a float Series or one ResultError; the snapshot never
offers a node as fresh unless all six features are finite and non-negative (a node that
only looks idle must not attract pods), and the normalised matrix of fresh nodes lies in
[0, 1] when clipping is on."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from drs_prom.config import Normalisation
from drs_prom.features import FEATURES
from drs_prom.signals.state import ResultError, build_snapshot, features_frame, node_matrix, vector_series

NODES = ("n1", "n2", "n3")
sample_values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["NaN", "+Inf", "-Inf", "0.5", "-0.01", "1e308", "garbage", ""]),
    st.integers(-10, 10**12),
    st.none(),
)
series_item = st.one_of(
    st.fixed_dictionaries(
        {
            "metric": st.fixed_dictionaries(
                {}, optional={"nodename": st.sampled_from(NODES + ("",)), "job": st.just("n")}
            ),
            "value": st.tuples(st.floats(0, 2e9), sample_values.map(lambda v: v if v is None else str(v))),
        }
    ),
    st.just({"metric": {"nodename": "n1"}}),  # no value
    st.just({"metric": {"nodename": "n1"}, "value": "1.0"}),  # not a pair
    st.just({"metric": None, "value": [0, "1"]}),
    st.just("not a series"),
)
vectors = st.one_of(
    st.lists(series_item, max_size=5), st.just({"resultType": "vector"}), st.none(), st.text(max_size=5)
)


@given(vectors)
@example([{"metric": {"nodename": "n1"}, "value": [0, "1"]}, {"metric": {"nodename": "n1"}, "value": [0, "2"]}])
def test_vector_is_series_or_result_error(result: object) -> None:
    try:
        series = vector_series(result)  # type: ignore[arg-type]
    except ResultError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 300
        return
    assert series.dtype == np.float64 and series.index.is_unique
    assert set(series.index) <= set(NODES)


# Mostly complete rows (all six features of a node present), so that fresh nodes occur often.
rows = st.dictionaries(
    st.sampled_from(NODES),
    st.lists(st.floats(-1.0, 2.0) | st.floats(allow_nan=True, allow_infinity=True), min_size=6, max_size=6),
    max_size=3,
).map(lambda by_node: {f: {n: row[i] for n, row in by_node.items()} for i, f in enumerate(FEATURES)})


@given(
    rows,
    st.dictionaries(st.sampled_from(NODES), st.floats(-1e3, 2e3) | st.just(math.nan), max_size=3),
    st.lists(st.sampled_from(NODES + ("n4",)), max_size=4),
    st.booleans(),
)
@example(  # a finite rate beyond float32 (6.8e46 B/s) overflowed to inf in the unclipped matrix
    {f: {"n2": 6.805647135594673e46 if f == "disk_write" else 0.0} for f in FEATURES},
    {"n2": 940.0},
    [],
    False,
)
@example(  # +Inf cpu read as "fully busy" after clipping, -0.5 as idle: both were offered as fresh
    {f: {"n1": math.inf if f == "cpu" else 0.1} for f in FEATURES} | {"mem": {"n1": -0.5}},
    {"n1": 1000.0},
    [],
    True,
)
def test_fresh_nodes_have_finite_non_negative_features(
    raw: dict[str, dict[str, float]], seen: dict[str, float], expected: list[str], clip: bool
) -> None:
    now = 1000.0
    frame = features_frame({f: pd.Series(v, dtype="float64") for f, v in raw.items()})
    snap = build_snapshot(frame, pd.Series(seen, dtype="float64"), now, 60.0, expected)
    assert set(expected) <= set(snap.features.index)
    for node in expected:
        if node not in seen:
            assert node in snap.stale
    fresh = snap.fresh()
    assert not (set(fresh.index) & snap.stale)
    values = fresh.to_numpy()
    assert np.isfinite(values).all() and (values >= 0).all()
    for node in snap.stale:
        assert snap.features.loc[node].isna().all()
    norm = Normalisation(clip=clip)
    m = node_matrix(snap.features, norm, list(fresh.index))
    assert np.isfinite(m).all()
    if clip:
        assert ((m >= 0) & (m <= 1)).all()


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, -1.0])
def test_one_bad_value_makes_that_node_stale_not_others(bad: float) -> None:
    raw = {f: pd.Series({"n1": 0.2, "n2": 0.3}) for f in FEATURES}
    raw["disk_read"]["n2"] = bad
    snap = build_snapshot(features_frame(raw), pd.Series({"n1": 999.0, "n2": 999.0}), 1000.0, 60.0)
    assert snap.stale == {"n2"} and list(snap.fresh().index) == ["n1"]
