"""The simulated cluster's stored pod usage, as the live scheduler's Prometheus would hold it.

Every pod's usage is integrated as it runs (``Cluster.pod_cum``, what its cAdvisor counters count): at a decision,
a pod of the owner that has run at least one rate window is in the history with its mean usage so far (a finished
one with its whole run's). That is the usage it got, not the demand it asked for: a pod slowed by contention used
less CPU, network and disk than it wanted, as cAdvisor would show. The estimator reads this through the same
contract as the Prometheus store (drs_prom.usage.history.UsageHistory), so the simulator's estimates are the live
scheduler's.
"""

from __future__ import annotations

import numpy as np

from drs_prom.sim.cluster import Cluster
from drs_prom.usage.fit import PodTable
from drs_prom.usage.history import PodUsage

MIN_SEEN_SECONDS = 1.0
"""A rate needs two samples: a pod is in the history once it has run this long (or the metric window, if longer)."""


class SimUsageHistory:
    """``UsageHistory`` over a simulated cluster (read at the cluster's current time)."""

    def __init__(self, cluster: Cluster, metric_window_seconds: float = 0.0) -> None:
        self.cluster = cluster
        self.lag = max(MIN_SEEN_SECONDS, float(metric_window_seconds))

    def _usage(self, rows: np.ndarray, now: float) -> PodUsage:
        c = self.cluster
        start = c.start[rows]
        seen_until = np.where(np.isnan(c.finish[rows]), now, np.minimum(c.finish[rows], now))
        seconds = seen_until - start
        keep = seconds >= self.lag
        rows, seconds = rows[keep], seconds[keep]
        return PodUsage(c.pod_cum[rows] / seconds[:, None], seconds, seen_until[keep])

    def _started(self, mask: np.ndarray) -> np.ndarray:
        return np.flatnonzero(mask & ~np.isnan(self.cluster.start))

    def owner(self, namespace: str, owner: str, now: float) -> PodUsage:
        del namespace  # every simulated pod is in one namespace
        index, names, _ = self.cluster.workload.owners
        try:
            o = names.index(owner)
        except ValueError:
            return PodUsage.empty()
        return self._usage(self._started(index == o), now)

    def image(self, namespace: str, image: str, owner: str, now: float) -> PodUsage:
        del namespace
        if not image:
            return PodUsage.empty()
        index, names, images = self.cluster.workload.owners
        same = np.array([img == image and name != owner for name, img in zip(names, images)], dtype=bool)
        if not same.any():
            return PodUsage.empty()
        return self._usage(self._started(same[index]), now)


def pod_table(cluster: Cluster, namespace: str = "default") -> PodTable:
    """The pods the cluster ran (placed ones; pinned background load aside), as the stored series hold them at the
    cluster's current time: what drs_prom.usage.fit learns from and scores estimators on."""
    wl = cluster.workload
    index, names, images = wl.owners
    rows = np.flatnonzero(~np.isnan(cluster.start) & wl.scheduled)
    last = np.where(np.isnan(cluster.finish[rows]), cluster.t, cluster.finish[rows])
    seconds = np.maximum(last - cluster.start[rows], 1e-9)
    return PodTable(
        namespace=(namespace,) * len(rows),
        owner=tuple(names[int(index[i])] for i in rows),
        image=tuple(images[int(index[i])] for i in rows),
        cpu_m=wl.cpu_m[rows].astype(np.int64),
        mem_bytes=wl.mem_bytes[rows].astype(np.int64),
        start=cluster.start[rows].copy(),
        last_seen=last,
        mean=cluster.pod_cum[rows] / seconds[:, None],
    )
