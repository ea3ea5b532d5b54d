"""Node features over a span of time from Prometheus (``query_range``, the scheduler's own PromQL) as a NodeHistory."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Protocol, cast

import numpy as np
import pandas as pd

from drs_prom.features import FEATURES
from drs_prom.retrain.rebuild import NodeHistory
from drs_prom.signals import promql


class HistorySource(Protocol):
    """What retraining needs from Prometheus (drs_prom.signals.prometheus.PrometheusSource).

    ``history``: node features (time x (node, feature)) on a grid. A source that also has
    ``query_range`` (and ``settings.node_selector``) gives node capacity (cores, memory).
    """

    def history(self, start: float, end: float, step: float) -> pd.DataFrame: ...


def _unix(index: pd.Index) -> np.ndarray:
    if len(index) == 0:
        return np.zeros(0)
    epoch = pd.Timestamp(0, tz="UTC")
    return np.asarray((pd.DatetimeIndex(index) - epoch) / pd.Timedelta(seconds=1), dtype=np.float64)


def history_from_frame(frame: pd.DataFrame, capacity: Mapping[str, tuple[float, float]] | None = None) -> NodeHistory:
    """PrometheusSource.history's frame (time x (node, feature)) -> NodeHistory."""
    times = _unix(frame.index)
    values: dict[str, np.ndarray] = {}
    if len(frame.columns):
        for node in frame.columns.get_level_values("node").unique():
            per_node = cast(pd.DataFrame, frame.xs(node, axis=1, level="node"))  # a column level: always a frame
            sub = per_node.reindex(columns=list(FEATURES))
            values[str(node)] = sub.to_numpy(dtype=np.float64)
    cap = capacity or {}
    return NodeHistory(
        times=times,
        values=values,
        cores={n: c for n, (c, _) in cap.items()},
        mem_bytes={n: m for n, (_, m) in cap.items()},
    )


def fetch_history(source: HistorySource, start: float, end: float, step: float, max_points: int = 10000) -> NodeHistory:
    """Node features on a grid aligned to ``step`` over [start, end], in chunks Prometheus accepts.

    Aligning the grid to multiples of ``step`` makes every run (and every test) read the
    same evaluation instants. Capacity (cores, memory) is the newest value of each node
    in the span, so nodes that are gone now still have one.
    """
    start = np.floor(start / step) * step
    end = np.ceil(end / step) * step
    frames = []
    t = start
    while t <= end:
        t_end = min(end, t + step * (max_points - 1))
        frames.append(source.history(t, t_end, step))
        t = t_end + step
    frame = pd.concat([f for f in frames if len(f)], axis=0) if any(len(f) for f in frames) else frames[0]
    frame = frame[~frame.index.duplicated(keep="last")].sort_index()
    cap_step = max(step, (end - start) / 1000.0)
    sel = getattr(getattr(source, "settings", None), "node_selector", "")
    capacity: dict[str, tuple[float, float]] = {}
    if hasattr(source, "query_range"):
        s, e = (datetime.fromtimestamp(x, tz=UTC) for x in (start, end))
        cores = source.query_range(promql.cpu_cores(sel), s, e, cap_step)
        mem = source.query_range(promql.mem_total(sel), s, e, cap_step)
        for node in set(cores.columns) & set(mem.columns):
            c, m = cores[node].dropna(), mem[node].dropna()
            if len(c) and len(m):
                capacity[str(node)] = (float(c.iloc[-1]), float(m.iloc[-1]))
    return history_from_frame(frame, capacity)
