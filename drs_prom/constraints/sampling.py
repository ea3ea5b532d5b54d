"""Which nodes a decision looks at: kube-scheduler's ``percentageOfNodesToScore``.

On a large cluster kube-scheduler stops filtering once it has found enough feasible nodes and scores only those,
going round the nodes from where the previous pod stopped, so every node is looked at in turn.
"""

from __future__ import annotations

import numpy as np

MIN_FEASIBLE_NODES = 100
"""kube-scheduler's minFeasibleNodesToFind: below this many nodes every node is scored."""
MIN_PERCENTAGE = 5
"""kube-scheduler's minFeasibleNodesPercentageToFind."""


def nodes_to_score(n_nodes: int, percentage: int = 0) -> int:
    """How many feasible nodes to find before scoring, as kube-scheduler's numFeasibleNodesToFind.

    ``percentage`` 0 is kube-scheduler's adaptive default: 50% minus 1% per 125 nodes,
    at least 5%; never fewer than 100 nodes (all nodes in clusters below 100).
    """
    if n_nodes < MIN_FEASIBLE_NODES or percentage >= 100:
        return n_nodes
    if percentage <= 0:
        percentage = max(MIN_PERCENTAGE, 50 - n_nodes // 125)
    return max(MIN_FEASIBLE_NODES, n_nodes * percentage // 100)


def sample_feasible(mask: np.ndarray, k: int, start: int) -> tuple[np.ndarray, int]:
    """The first ``k`` feasible node indices going round from ``start``, and how many nodes
    were looked at (kube-scheduler advances its next start index by that), sorted by index."""
    n = len(mask)
    if n == 0:
        return np.zeros(0, dtype=np.int64), 0
    start %= n
    found = np.flatnonzero(np.roll(mask, -start))
    if len(found) > k:
        found = found[:k]
        processed = int(found[-1]) + 1
    else:
        processed = n
    return np.sort((found + start) % n), processed
