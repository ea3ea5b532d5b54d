"""NaN-free float64 copies of the arrays a decision reads (a node without metrics has NaN load).

``np.nan_to_num`` makes several passes in Python-level numpy calls (NaN, +inf, -inf, each found and copied over)
whether or not there is anything to replace, and a decision of the shipped model asks for a dozen such copies of
its (nodes x signals) arrays; on a cluster whose nodes all have metrics there is nothing to replace, and one
finiteness check says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def nan_as(values: Any, nan: float) -> np.ndarray:
    """``np.nan_to_num(np.asarray(values, dtype=np.float64), nan=nan)``: a float64 copy with NaN read as ``nan`` and
    infinities as the largest finite floats, the same to the bit."""
    a = np.asarray(values, dtype=np.float64)
    if np.isfinite(a).all():
        return a.copy()
    return np.nan_to_num(a, nan=nan)
