"""The six per-node signals DRS schedules on, and the schema version models are tied to.

Every layer (exporter names, PromQL, state matrix, simulator, agent inputs) indexes
features by this one tuple, so the column order can never drift between them.
"""

from __future__ import annotations

FEATURES: tuple[str, ...] = ("cpu", "mem", "net_rx", "net_tx", "disk_read", "disk_write")
"""Column order of every per-node and per-pod feature vector.

Raw units: cpu and mem are utilisation fractions (0..1 of the node); the other four
are bytes per second.
"""

N_FEATURES = len(FEATURES)
"""How many signals: use it wherever the node signals are counted, never a literal."""

DRS_SCALE = 100.0
"""DRS scaled every state value to 0..100 (and its reward is on the same scale)."""

FEATURE_SCHEMA_VERSION = 1
"""Bumped whenever the meaning or order of model inputs changes; models record it."""
