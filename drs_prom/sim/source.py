"""``SimSource``: the simulator's implementation of ``state.MetricsSource``.

It reports what a metrics pipeline would: per-node features in raw units, averaged
over the scenario's metric window (the lag of Prometheus rate() windows), so policies
read simulated and production state through the same ``state.node_matrix`` code.
"""

from __future__ import annotations

import pandas as pd

from drs_prom.features import FEATURES
from drs_prom.signals.state import NodeSnapshot
from drs_prom.sim.cluster import Cluster


class SimSource:
    """Snapshots of a live ``Cluster`` (the cluster object may be swapped, e.g. on env reset)."""

    def __init__(self, cluster: Cluster, epoch: float = 0.0) -> None:
        self.cluster = cluster
        self.epoch = epoch  # added to simulated seconds for ``taken_at`` (0 = episode start)
        self._index = pd.Index(list(cluster.nodes.names), name="node")
        self._columns = pd.Index(list(FEATURES))

    def snapshot(self) -> NodeSnapshot:
        c = self.cluster
        frame = pd.DataFrame(c.observed(), index=self._index, columns=self._columns)
        return NodeSnapshot(
            features=frame,
            taken_at=self.epoch + c.t,
            age_seconds=pd.Series(0.0, index=frame.index),
            stale=frozenset(),
        )
