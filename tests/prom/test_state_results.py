"""Pure helpers turning Prometheus API results into frames (literal data, no servers)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from drs_prom.config import Normalisation
from drs_prom.features import FEATURES
from drs_prom.signals import promql
from drs_prom.signals.state import (
    ResultError,
    build_snapshot,
    features_frame,
    history_frame,
    matrix_frame,
    node_matrix,
    state_table,
    vector_series,
)


def vec(**values: str) -> list[dict]:
    return [{"metric": {"nodename": n}, "value": [1700000000.0, v]} for n, v in values.items()]


def test_vector_series_keys_by_nodename_and_keeps_nan():
    s = vector_series(vec(b="0.5", a="NaN"))
    assert list(s.index) == ["a", "b"]
    assert s["b"] == 0.5 and math.isnan(s["a"])
    assert vector_series([]).empty  # MetricSnapshotDataFrame would raise here


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({"data": 1}, "vector"),
        ([["1", "2"]], "vector of series"),
        ([{"metric": {}, "value": [1, "2"]}], "nodename"),
        ([{"metric": {"nodename": "a"}, "value": [1, "x"]}], "bad sample"),
        ([{"metric": {"nodename": "a"}}], "bad sample"),
        (vec(a="1") + vec(a="2"), "two series"),
    ],
)
def test_vector_series_rejects_malformed(bad, match):
    with pytest.raises(ResultError, match=match):
        vector_series(bad)


def test_matrix_frame_aligns_series_and_leaves_gaps_nan():
    result = [
        {"metric": {"nodename": "a"}, "values": [[10, "1"], [20, "2"]]},
        {"metric": {"nodename": "b"}, "values": [[20, "5"]]},
    ]
    f = matrix_frame(result)
    assert list(f.columns) == ["a", "b"]
    assert str(f.index.tz) == "UTC" and f.index.name == "time"
    assert f.loc[pd.Timestamp(20, unit="s", tz="UTC"), "b"] == 5.0
    assert math.isnan(f.loc[pd.Timestamp(10, unit="s", tz="UTC"), "b"])
    assert matrix_frame([]).empty


def test_history_frame_has_node_feature_columns():
    a = matrix_frame([{"metric": {"nodename": "n1"}, "values": [[10, "0.5"], [20, "0.6"]]}])
    frame = history_frame({"cpu": a, "mem": a * 0 + 0.25})
    assert frame.columns.names == ["node", "feature"]
    assert list(frame.columns.get_level_values("feature")) == list(FEATURES)
    at = frame.loc[pd.Timestamp(20, unit="s", tz="UTC")].unstack()
    assert at.loc["n1", "cpu"] == 0.6 and at.loc["n1", "mem"] == 0.25
    assert math.isnan(at.loc["n1", "net_rx"])
    assert history_frame({}).empty


def test_snapshot_marks_missing_old_and_incomplete_nodes_stale():
    full = {f: pd.Series({"a": 0.1, "b": 0.2, "c": 0.3}) for f in FEATURES}
    full["disk_write"] = pd.Series({"a": 1.0, "b": 2.0})  # c lacks a feature
    last = pd.Series({"a": 995.0, "b": 900.0, "c": 999.0, "d": 999.0})  # b old; d has no features
    snap = build_snapshot(features_frame(full), last, now=1000.0, max_age_seconds=30, expected_nodes=["e"])
    assert snap.stale == {"b", "c", "d", "e"}
    assert list(snap.fresh().index) == ["a"]
    assert snap.features.loc[["b", "c", "d", "e"]].isna().all().all()  # stale rows never read as idle
    assert snap.age_seconds["a"] == 5.0 and snap.age_seconds["b"] == 100.0 and math.isnan(snap.age_seconds["e"])
    m = node_matrix(snap.features, Normalisation())
    assert m.dtype == np.float32 and m.shape == (5, 6) and np.isnan(m[1]).all()


def test_state_table_shows_units_and_status():
    feats = features_frame({f: pd.Series({"a": 0.5}) for f in FEATURES})
    text = state_table(build_snapshot(feats, pd.Series({"a": 9.0, "b": 1.0}), 10.0, 5.0))
    lines = text.splitlines()
    assert "cpu_%" in lines[0] and "net_rx_KB/s" in lines[0] and "status" in lines[0]
    assert lines[-2].split()[0] == "a" and lines[-2].split()[1] == "50.0" and lines[-2].endswith("ok")
    assert lines[-1].split()[0] == "b" and lines[-1].endswith("stale")


def test_promql_matchers_and_quoting():
    assert promql.matchers() == ""
    assert promql.matchers('job="x",', 'mode="idle"') == '{job="x",mode="idle"}'
    assert promql.quote('a\\d"') == '"a\\\\d\\""'
    q = promql.net_rx("1m", 'job="n"', exclude="^lo$")
    assert q.startswith('sum by(nodename) (rate(node_network_receive_bytes_total{job="n",device!~"^lo$"}[1m])')
    assert 'node_uname_info{job="n"}' in q
    assert "device" not in promql.net_rx("1m", exclude="")
