"""From raw per-node samples to the normalised float32 matrices the policies read.

Everything here is pure (no servers): the Prometheus source and the simulator source
both produce a NodeSnapshot, and both go through ``node_matrix``/``pod_matrix``, so a
policy trained in simulation sees production inputs through the same code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import numpy as np
import pandas as pd

from drs_prom.config import Normalisation
from drs_prom.features import FEATURES, N_FEATURES


@dataclass(frozen=True)
class NodeSnapshot:
    """Raw node features at one instant.

    ``features``: index = node name, columns = FEATURES, raw units (cpu/mem fractions,
    the rest bytes/s). ``age_seconds``: age of each node's newest sample. ``stale``:
    nodes whose data is missing or too old; their rows are NaN in ``features`` and
    must not be read as idle.
    """

    features: pd.DataFrame
    taken_at: float
    age_seconds: pd.Series = field(default_factory=lambda: pd.Series(dtype="float64"))
    stale: frozenset[str] = frozenset()

    def fresh(self) -> pd.DataFrame:
        """Only the nodes with complete, recent data."""
        return self.features.drop(index=[n for n in self.stale if n in self.features.index]).dropna()


class MetricsSource(Protocol):
    """Anything that can say how loaded each node is right now (Prometheus, simulator)."""

    def snapshot(self) -> NodeSnapshot: ...


_F32_MAX = float(np.finfo(np.float32).max)


def _as_float32(values: np.ndarray, clip: bool) -> np.ndarray:
    """Scaled load as float32: clipped to [0, 1], or else capped at float32's largest value, so that an absurd
    rate or estimate (a counter reset read as a jump) reads as far overloaded, never as inf. NaN stays NaN."""
    bounded: np.ndarray = np.clip(values, 0.0, 1.0) if clip else np.minimum(values, _F32_MAX)
    return bounded.astype(np.float32)


def scales(norm: Normalisation) -> np.ndarray:
    """Raw value at which each feature reads as 1.0, in FEATURES order."""
    return np.array(norm.full_values, dtype=np.float64)


def node_matrix(features: pd.DataFrame, norm: Normalisation, nodes: Sequence[str] | None = None) -> np.ndarray:
    """Normalised (n_nodes, N_FEATURES) float32 matrix in ``nodes`` order (default: frame order).

    Missing nodes or NaN values stay NaN so that callers decide (mask, fallback) instead
    of scheduling onto a node that merely looks idle.
    """
    frame = features.reindex(columns=list(FEATURES))
    if nodes is not None:
        frame = frame.reindex(index=list(nodes))
    return _as_float32(frame.to_numpy(dtype=np.float64) / scales(norm), norm.clip)


def pod_matrix(
    demand: Sequence[float] | np.ndarray,
    node_cpu_cores: Sequence[float] | np.ndarray,
    node_mem_bytes: Sequence[float] | np.ndarray,
    norm: Normalisation,
) -> np.ndarray:
    """The pod's expected load as each candidate node would see it: (n_nodes, N_FEATURES) float32.

    cpu and mem demand are absolute (cores, bytes), so they become fractions of each
    node; the byte rates use the cluster scales. This is what lets one policy serve
    heterogeneous nodes.
    """
    d = np.asarray(demand, dtype=np.float64)
    if d.shape != (N_FEATURES,):
        raise ValueError(f"pod demand must have {N_FEATURES} values, got {d.shape}")
    cores = np.asarray(node_cpu_cores, dtype=np.float64)
    mem = np.asarray(node_mem_bytes, dtype=np.float64)
    out = np.empty((len(cores), N_FEATURES), dtype=np.float64)
    out[:, 0] = d[0] / np.maximum(cores, 1e-9)
    out[:, 1] = d[1] / np.maximum(mem, 1.0)
    out[:, 2:] = d[2:]
    out /= scales(norm)
    return _as_float32(out, norm.clip)


def imbalance(matrix: np.ndarray) -> float:
    """DRS's load imbalance: the std across nodes of each feature, summed over features."""
    if len(matrix) == 0:
        return 0.0
    values = np.asarray(matrix, dtype=np.float64)
    std = np.std(values, axis=0) if not np.isnan(values).any() else np.nanstd(values, axis=0)  # nanstd is ~3x slower
    return float(std.sum())


# ---------------------------------------------------------------------------
# Prometheus query results -> frames. Pure: drs_prom/signals/prometheus.py does the I/O and
# turns a ResultError into a MetricsError naming the URL and the query.


class ResultError(ValueError):
    """A query result that is not the vector/matrix it should be."""


def _key(item: object, label: str) -> str:
    if not isinstance(item, dict) or not isinstance(item.get("metric"), dict):
        raise ResultError(f"expected a vector of series, got {str(item)[:80]!r}")
    key = item["metric"].get(label)
    if not isinstance(key, str) or not key:
        raise ResultError(f"series without a {label!r} label: {item['metric']}")
    return key


def vector_series(result: Sequence[dict[str, Any]], label: str = "nodename") -> pd.Series:
    """An instant-vector result (``PrometheusConnect.custom_query``) -> float Series by ``label``.

    Empty results give an empty Series (prometheus-api-client's DataFrame helpers raise
    there). NaN/Inf sample values are kept for the caller to judge.
    """
    if not isinstance(result, list):
        raise ResultError(f"expected a vector result, got {type(result).__name__}")
    values: dict[str, float] = {}
    for item in result:
        key = _key(item, label)
        try:
            _, raw = item["value"]
            value = float(raw)
        except (KeyError, TypeError, ValueError):
            raise ResultError(f"bad sample for {label}={key}: {str(item.get('value'))[:80]!r}") from None
        if key in values:
            raise ResultError(f"two series for {label}={key}; add a selector so each node appears once")
        values[key] = value
    return pd.Series(values, dtype="float64", name=None).sort_index()


def matrix_frame(result: Sequence[dict[str, Any]], label: str = "nodename") -> pd.DataFrame:
    """A range-vector result (``custom_query_range``) -> frame indexed by UTC time, a column per ``label``.

    Timestamps missing for a series are NaN (a gap, not zero). Empty result -> empty frame.
    """
    if not isinstance(result, list):
        raise ResultError(f"expected a matrix result, got {type(result).__name__}")
    columns: dict[str, pd.Series] = {}
    for item in result:
        key = _key(item, label)
        if key in columns:
            raise ResultError(f"two series for {label}={key}; add a selector so each node appears once")
        try:
            points = [(float(t), float(v)) for t, v in item["values"]]
        except (KeyError, TypeError, ValueError):
            raise ResultError(f"bad samples for {label}={key}") from None
        ts = pd.to_datetime([t for t, _ in points], unit="s", utc=True)
        columns[key] = pd.Series([v for _, v in points], index=ts, dtype="float64")
    frame = pd.DataFrame(columns).sort_index(axis=0).sort_index(axis=1)
    if frame.empty:
        frame = pd.DataFrame(index=pd.DatetimeIndex([], tz="UTC"), dtype="float64")
    frame.index.name = "time"
    return frame


def features_frame(per_feature: dict[str, pd.Series]) -> pd.DataFrame:
    """Per-feature Series (by node) -> frame indexed by node, columns FEATURES (NaN where absent)."""
    frame = pd.DataFrame({f: per_feature.get(f, pd.Series(dtype="float64")) for f in FEATURES}, dtype="float64")
    frame = frame.reindex(columns=list(FEATURES)).sort_index()
    frame.index.name = "node"
    return frame


def history_frame(per_feature: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Per-feature time frames -> one frame indexed by time, columns MultiIndex (node, feature).

    ``features_at(frame, t)`` is the (node x feature) table at time ``t``;
    ``frame.xs(node, axis=1, level="node")`` one node's six series.
    """
    parts = {f: per_feature[f] for f in FEATURES if f in per_feature and not per_feature[f].empty}
    if not parts:
        empty = pd.DataFrame(
            index=pd.DatetimeIndex([], tz="UTC", name="time"),
            columns=pd.MultiIndex.from_tuples([], names=["node", "feature"]),
            dtype="float64",
        )
        return empty
    frame = pd.concat(parts, axis=1, names=["feature", "node"], sort=True)
    frame = frame.swaplevel(0, 1, axis=1)
    nodes = sorted(frame.columns.get_level_values("node").unique())
    frame = frame.reindex(columns=pd.MultiIndex.from_product([nodes, list(FEATURES)], names=["node", "feature"]))
    frame.index.name = "time"
    return frame.sort_index()


def features_at(history: pd.DataFrame, when: pd.Timestamp | int) -> pd.DataFrame:
    """One row of a ``history_frame`` as a features frame (index node, columns FEATURES)."""
    row = history.loc[when] if not isinstance(when, int) else history.iloc[when]
    frame = cast(pd.DataFrame, row.unstack("feature")).reindex(columns=list(FEATURES))  # (node, feature) -> a frame
    frame.index.name = "node"
    frame.columns.name = None
    return frame


def build_snapshot(
    features: pd.DataFrame,
    last_seen: pd.Series,
    now: float,
    max_age_seconds: float,
    expected_nodes: Sequence[str] = (),
) -> NodeSnapshot:
    """Combine feature values with each node's newest-sample time into a NodeSnapshot.

    A node is stale when it has no sample time, its newest sample is older than
    ``max_age_seconds``, any feature is missing, infinite or negative (no utilisation or
    byte rate can be: such a sample is broken, and -1 would read as idle, +Inf clipped as
    merely busy), or it is expected (e.g. listed by Kubernetes) but absent; a stale node's
    row is all NaN so nothing reads it as idle.
    """
    nodes = sorted(set(features.index) | set(last_seen.index) | set(expected_nodes))
    frame = features.reindex(index=nodes, columns=list(FEATURES)).astype("float64")
    age = (now - last_seen.reindex(nodes).astype("float64")).rename("age_seconds")
    values = frame.to_numpy()
    unusable = pd.Series((~np.isfinite(values) | (values < 0)).any(axis=1), index=frame.index)
    stale_mask = age.isna() | (age > max_age_seconds) | unusable
    stale = frozenset(str(n) for n in age.index[stale_mask.to_numpy()])
    frame.loc[stale_mask.to_numpy(), :] = np.nan
    frame.index.name = "node"
    age.index.name = "node"
    return NodeSnapshot(features=frame, taken_at=now, age_seconds=age, stale=stale)


def state_table(snapshot: NodeSnapshot) -> str:
    """The per-node table ``drs-prom state`` prints: % for cpu/mem, KB/s for rates."""
    f = snapshot.features
    rows = pd.DataFrame(index=f.index)
    rows["cpu_%"] = f["cpu"] * 100
    rows["mem_%"] = f["mem"] * 100
    for col in FEATURES[2:]:
        rows[f"{col}_KB/s"] = f[col] / 1024
    rows["age_s"] = snapshot.age_seconds.reindex(f.index)
    rows["status"] = ["stale" if n in snapshot.stale else "ok" for n in f.index]
    if rows.empty:
        return "no nodes found"
    return rows.to_string(float_format=lambda v: f"{v:.1f}", na_rep="-")
