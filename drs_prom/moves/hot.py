"""Which nodes are hot: each signal's quantile over a window, against the node's own capacity, with hysteresis.

A node's six signals (cpu, memory, network receive and transmit, disk read and write) are read as shares of its own
capacity, as the objectives' hot-node time reads demand (drs_prom.outcomes.objectives): cpu and memory are fractions
of the node already, network and disk are divided by the node's bandwidth. Each is summarised over the window by a
quantile (0.5: above the threshold for more than half of it), so one busy sample makes nothing hot. The node's
bottleneck (its largest share) decides: a node becomes hot above ``hot_above`` and stays hot until its bottleneck
falls below ``cool_below``, so a node near the threshold does not flap in and out of the hot set.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

from drs_prom.features import N_FEATURES


def capacity_shares(raw: np.ndarray, link_bytes: np.ndarray) -> np.ndarray:
    """(n, N_FEATURES) shares of each node's own capacity from raw signals (cpu and memory as fractions of the node,
    network and disk in bytes/s) and the nodes' bandwidths (n, 4), bytes/s. NaN stays NaN (no data)."""
    values = np.asarray(raw, dtype=np.float64).reshape(-1, N_FEATURES)
    link = np.asarray(link_bytes, dtype=np.float64).reshape(len(values), N_FEATURES - 2)
    out = values.copy()
    out[:, 2:] = values[:, 2:] / np.where(link > 0, link, np.nan)
    return out


def usage_share(usage: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """A pod's usage (absolute units) as a share of a node's capacity (0 where the node has none of a resource);
    ``capacity`` may be one node's (N_FEATURES) or every node's (n, N_FEATURES)."""
    return np.where(capacity > 0, np.asarray(usage, dtype=np.float64) / np.where(capacity > 0, capacity, 1.0), 0.0)


def quantiles(samples: np.ndarray, q: float) -> np.ndarray:
    """(n, N_FEATURES) quantile ``q`` over the window of samples (k, n, N_FEATURES), missing samples (NaN) left
    out; NaN where a node has none (what PromQL's quantile_over_time gives over a subquery)."""
    values = np.asarray(samples, dtype=np.float64)
    if values.shape[0] == 0:
        return np.full(values.shape[1:], np.nan)
    if not np.isnan(values).any():
        return np.asarray(np.quantile(values, q, axis=0))  # nanquantile is ~50x slower and not needed then
    seen = ~np.isnan(values)
    out = np.full(values.shape[1:], np.nan)
    ok = seen.any(axis=0)
    if ok.any():
        out[ok] = np.nanquantile(values[:, ok], q, axis=0)
    return out


def bottlenecks(shares: np.ndarray) -> np.ndarray:
    """(n,) each node's largest share over the signals; NaN where any signal is missing (a node that cannot be
    judged is never hot, and is not moved to)."""
    values = np.asarray(shares, dtype=np.float64).reshape(-1, N_FEATURES)
    out = values.max(axis=1) if len(values) else np.zeros(0)
    return np.where(np.isnan(values).any(axis=1), np.nan, out)


def hot_nodes(
    names: Sequence[str], shares: np.ndarray, was_hot: Collection[str], hot_above: float, cool_below: float
) -> frozenset[str]:
    """The nodes hot now: a bottleneck above ``hot_above``, or a node hot before whose bottleneck has not yet fallen
    below ``cool_below``. A node without data (NaN) is not hot."""
    peak = bottlenecks(shares)
    out = set()
    for name, value in zip(names, peak.tolist()):
        if np.isnan(value):
            continue
        if value > hot_above or (name in was_hot and value >= cool_below):
            out.add(name)
    return frozenset(out)
