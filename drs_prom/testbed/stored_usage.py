"""What the testbed's Prometheus stored of a run's pods, as the retraining job's refit reads a cluster's: the table
``benchmarks/usage_accuracy.py --pods-json`` scores the usage estimators on (the estimator accuracy on real series)."""

from __future__ import annotations

from typing import Any

from drs_prom.config import PrometheusSettings, UsageSettings
from drs_prom.errors import MetricsError
from drs_prom.ops.usage_refit import Placed, pod_table, table_json
from drs_prom.signals.prometheus import PrometheusSource
from drs_prom.sim.workload import Workload
from drs_prom.testbed.pod_owners import PodOwners


def run_pod_table(
    prom_url: str, namespace: str, wl: Workload, owners: PodOwners, since: float, now: float
) -> dict[str, Any]:
    """The run's placed pods (background load aside) with the usage Prometheus stored of them; empty lists where
    Prometheus could not answer (the run's report still stands)."""
    index, names, _ = wl.owners
    placed = {
        (namespace, owners.names[i]): Placed(names[int(index[i])], int(wl.cpu_m[i]), int(wl.mem_bytes[i]))
        for i in range(len(wl))
        if wl.scheduled[i]
    }
    source = PrometheusSource(PrometheusSettings(url=prom_url, timeout_seconds=30.0))
    try:
        table, _missing = pod_table(placed, source, UsageSettings(), now, now - since + 60.0)
    except MetricsError:
        table, _missing = pod_table({}, source, UsageSettings(), now, 1.0)
    finally:
        source.close()
    return table_json(table)
