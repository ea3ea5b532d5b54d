"""Each node's network and disk bandwidth, from node labels, and the load at which each resource is full.

The load-aware scores (and the guided network's inputs) divide every load by the node's own capacity
(``DecisionContext.full``), so that a small node's link is full at its own speed. CPU and memory come
with the node object; network and disk bandwidth do not: the kubelet reports neither, and node_exporter
gives a NIC's nominal speed but nothing for a disk. Without them every node's link reads as the
normalisation's standard one and a policy sends network-heavy pods to a small node it believes as fast
as a large one. The simulator always knew the capacities; the scheduler did not, which on unequal nodes
made the closed loop place worse than the bench (docs/results.md).

So the bandwidths a node has are stated where Kubernetes keeps facts about nodes, as labels (set by hand,
by the provisioning that made the node, or by a node-feature-discovery rule):
``drs.io/net-rx-bytes-per-second``, ``drs.io/net-tx-bytes-per-second``,
``drs.io/disk-read-bytes-per-second`` and ``drs.io/disk-write-bytes-per-second``, each a positive decimal
number. A node without a label is taken to have the standard capacity of that resource (the
normalisation's ``*_full_bytes``), as before.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np

from drs_prom.features import FEATURES, N_FEATURES

LINK_FEATURES: tuple[str, ...] = FEATURES[2:]
"""The features whose capacities the labels give (network and disk; cpu and memory come with the node)."""

CAPACITY_LABELS: tuple[str, ...] = (
    "drs.io/net-rx-bytes-per-second",
    "drs.io/net-tx-bytes-per-second",
    "drs.io/disk-read-bytes-per-second",
    "drs.io/disk-write-bytes-per-second",
)
"""One label per LINK_FEATURES entry, in that order."""


def parse(labels: Mapping[str, str]) -> tuple[np.ndarray, list[str]]:
    """(len(LINK_FEATURES),) bytes per second from a node's labels, NaN where not given, and one message per
    label whose value is not a positive finite number (that label is then ignored, never guessed)."""
    out = np.full(len(CAPACITY_LABELS), np.nan)
    errors: list[str] = []
    for i, key in enumerate(CAPACITY_LABELS):
        text = labels.get(key)
        if text is None:
            continue
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value <= 0:
            errors.append(f"label {key}={text!r} is not a positive number of bytes per second; ignored")
            continue
        out[i] = value
    return out, errors


def matrix(nodes: Iterable[tuple[str, Mapping[str, str]]]) -> tuple[np.ndarray, list[str]]:
    """(n, len(LINK_FEATURES)) parse() of each (node name, labels), and every message, prefixed with the node.

    Only the nodes that carry a capacity label are parsed; the others' rows stay NaN. A caller without the node
    table's parsed matrix (the extender, a decision handed plain NodeInfos) reads every candidate's labels per
    decision, and most nodes carry none."""
    pairs = list(nodes)
    out = np.full((len(pairs), len(CAPACITY_LABELS)), np.nan)
    errors: list[str] = []
    for i, (name, labels) in enumerate(pairs):
        if labels.keys().isdisjoint(CAPACITY_LABELS):
            continue
        out[i], errs = parse(labels)
        errors.extend(f"node {name}: {e}" for e in errs)
    return out, errors


def labels_for(link_bytes: np.ndarray) -> dict[str, str]:
    """The capacity labels of a node with these LINK_FEATURES bandwidths (bytes per second, whole numbers: a label
    value allows no exponent sign); NaN entries get no label."""
    row = np.asarray(link_bytes, dtype=np.float64).reshape(len(CAPACITY_LABELS))
    return {key: str(max(1, round(float(v)))) for key, v in zip(CAPACITY_LABELS, row) if not math.isnan(v)}


def full_matrix(link_bytes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """(n, N_FEATURES) DecisionContext.full: the value of a node's normalised load at which each resource is
    at its own capacity.

    cpu and memory loads are fractions of the node (normalised by ``cpu_full``/``mem_full``), so they are full
    at ``1 / scale``; network and disk are full at the node's bandwidth over the standard one, and at 1.0
    (the standard) where ``link_bytes`` is NaN. ``scales``: state.scales(norm), in FEATURES order.
    """
    link = np.asarray(link_bytes, dtype=np.float64).reshape(-1, len(LINK_FEATURES))
    s = np.asarray(scales, dtype=np.float64).reshape(N_FEATURES)
    full = np.empty((link.shape[0], N_FEATURES), dtype=np.float64)
    full[:, :2] = 1.0 / s[:2]
    full[:, 2:] = np.where(np.isnan(link), 1.0, link / s[2:])
    return full
