"""What the rebalancer reads from Prometheus: each node's signals over the window, and each pod's stored usage.

Node signals are the scheduler's own six queries (drs_prom.signals.promql.queries_for), each summarised over
``rebalance.window`` by ``quantile_over_time`` of a subquery at ``rebalance.step``; a pod's usage is the mean over the
same window of the per-pod recording rules the usage estimate reads (group ``drs-pod-usage``). The PromQL text is
composed here from the functions and names of drs_prom.signals.promql.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from drs_prom.config import Settings
from drs_prom.features import FEATURES, N_FEATURES
from drs_prom.signals import promql
from drs_prom.signals.prometheus import PrometheusSource


def node_quantile_queries(settings: Settings, quantile: float | None = None) -> dict[str, str]:
    """Per feature: its ``quantile`` (default ``rebalance.quantile``) over ``rebalance.window`` for every node (by
    ``nodename``)."""
    r = settings.rebalance
    q = r.quantile if quantile is None else quantile
    return {
        f: f"quantile_over_time({q:g}, ({expr})[{r.window}:{r.step}])"
        for f, expr in promql.queries_for(settings.prometheus).items()
    }


def pod_usage_queries(settings: Settings) -> dict[str, str]:
    """Per feature: every pod's mean over ``rebalance.window`` of its recorded usage (by ``namespace``, ``pod``)."""
    names = promql.pod_recorded_names(settings.usage.rate_window)
    return {f: f"avg_over_time({names[f]}[{settings.rebalance.window}])" for f in FEATURES}


def node_quantiles(
    source: PrometheusSource, settings: Settings, nodes: Sequence[str], quantile: float | None = None
) -> np.ndarray:
    """(len(nodes), N_FEATURES) raw signals (cpu and memory fractions, the rest bytes/s) at ``quantile`` (default
    ``rebalance.quantile``) over the window, NaN where a node has no data. MetricsError when Prometheus cannot
    answer."""
    out = np.full((len(nodes), N_FEATURES), np.nan)
    for j, (_, query) in enumerate(node_quantile_queries(settings, quantile).items()):
        series = source.query(query)
        for i, name in enumerate(nodes):
            value = series.get(name)
            if value is not None and math.isfinite(float(value)) and float(value) >= 0:
                out[i, j] = float(value)
    return out


def pod_usage(source: PrometheusSource, settings: Settings) -> dict[tuple[str, str], np.ndarray]:
    """(namespace, pod) -> (N_FEATURES,) its mean usage over the window, absolute units; a signal a pod has no series
    for reads 0 (cAdvisor reports no network for a host-network pod). MetricsError when Prometheus cannot answer."""
    out: dict[tuple[str, str], np.ndarray] = {}
    for j, (_, query) in enumerate(pod_usage_queries(settings).items()):
        for labels, value in source.samples(query):
            key = (labels.get("namespace", ""), labels.get("pod", ""))
            if not key[1]:
                continue
            row = out.setdefault(key, np.zeros(N_FEATURES))
            row[j] = value if math.isfinite(value) and value >= 0 else np.nan
    return out
