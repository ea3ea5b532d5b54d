"""What a round's plan counts as moved already: moves the window still reads from before them, and surges in flight.

A node's signals are a quantile over the window (drs_prom.moves.hot), so a node a pod left reads as if the pod were
still on it until the samples after the move outweigh the quantile's share of the window (``quantile x window``
seconds: a median forgets a step after half the window); and a surge's pod (drs_prom.rebalance.surge) runs on until
its replacement is ready. Counted as done (drs_prom.moves.plan.UnderWay), they keep the next rounds from seeing the
node as hot as before and moving more of its pods than its heat asks for. The live rebalancer and the simulator's keep
the same list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from drs_prom.config import RebalanceSettings
from drs_prom.moves.plan import UnderWay


@dataclass(frozen=True)
class Recent:
    """A move made, or a surge under way."""

    at: float
    """When the pod left its node (for a surge under way: when the round saw it)."""
    source: str
    target: str
    """Where the replacement went ("" when not known: an evicted pod's replacement is placed later)."""
    usage: np.ndarray
    """(N_FEATURES,) the pod's stored usage over the window when it was moved (absolute units)."""


def remembered(recent: Iterable[Recent], now: float, settings: RebalanceSettings) -> list[Recent]:
    """The moves the window still reads from before them."""
    lag = settings.quantile * settings.window_seconds
    return [m for m in recent if now - m.at < lag]


def under_way(moves: Iterable[Recent], index: Mapping[str, int]) -> list[UnderWay]:
    """The plan's view of ``moves`` (nodes by their index in the round's view; a node gone is left out)."""
    return [UnderWay(index[m.source], index.get(m.target, -1), m.usage) for m in moves if m.source in index]
