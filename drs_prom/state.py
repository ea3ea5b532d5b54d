"""From raw per-node samples to the normalised float32 matrices the policies read.

Everything here is pure (no servers): the Prometheus source and the simulator source
both produce a NodeSnapshot, and both go through ``node_matrix``/``pod_matrix``, so a
policy trained in simulation sees production inputs through the same code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

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


def scales(norm: Normalisation) -> np.ndarray:
    """Raw value at which each feature reads as 1.0, in FEATURES order."""
    return np.array(
        [
            norm.cpu_full,
            norm.mem_full,
            norm.net_rx_full_bytes,
            norm.net_tx_full_bytes,
            norm.disk_read_full_bytes,
            norm.disk_write_full_bytes,
        ],
        dtype=np.float64,
    )


def node_matrix(features: pd.DataFrame, norm: Normalisation, nodes: Sequence[str] | None = None) -> np.ndarray:
    """Normalised (n_nodes, 6) float32 matrix in ``nodes`` order (default: frame order).

    Missing nodes or NaN values stay NaN so that callers decide (mask, fallback) instead
    of scheduling onto a node that merely looks idle.
    """
    frame = features.reindex(columns=list(FEATURES))
    if nodes is not None:
        frame = frame.reindex(index=list(nodes))
    values = frame.to_numpy(dtype=np.float64) / scales(norm)
    if norm.clip:
        values = np.clip(values, 0.0, 1.0)
    return values.astype(np.float32)


def pod_matrix(
    demand: Sequence[float],
    node_cpu_cores: Sequence[float],
    node_mem_bytes: Sequence[float],
    norm: Normalisation,
) -> np.ndarray:
    """The pod's expected load as each candidate node would see it: (n_nodes, 6) float32.

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
    if norm.clip:
        out = np.clip(out, 0.0, 1.0)
    return out.astype(np.float32)


def imbalance(matrix: np.ndarray) -> float:
    """DRS's load imbalance: the std across nodes of each feature, summed over features."""
    if len(matrix) == 0:
        return 0.0
    return float(np.nanstd(np.asarray(matrix, dtype=np.float64), axis=0).sum())
