"""Whether a scheduler that places by requests would fill a node's freed room with as much load as a move took off.

kube-scheduler scores nodes by their requests (LeastAllocated, BalancedAllocation), not by their load. Once the
rebalancer evicts a pod, its node has fewer requests than before and new pods are sent there until its requests are
back with the others'. Those pods bring what pods bring per request on this cluster: when the moved pod used no more
per request than that, the node ends as hot as it was, and the move only cost a restart. It is the rule a node hot
with load outside its pods' requests needs most (a noisy neighbour, a process outside Kubernetes): moving its pods
only frees requests, and the freed requests are what attracts more pods. In the simulator's ``drift-mixed`` (noisy
neighbours on two nodes), moving kube-scheduler's pods without this rule took the p95 pod slowdown from 1.067 to
1.248, the batch pods sent to the emptied nodes running slowed; with it, to 1.093 (docs/rebalance.md).

So a pod of such a scheduler moves only if its node's bottleneck, with the pod's usage gone and its requests taken
again at the cluster's usage per request, is below the node's bottleneck now. A pod whose usage passed its requests
(a release that tripled its CPU, a leak) passes; a pod that uses what an average pod uses per request does not. The
cluster's usage per request is per signal: CPU per requested core and memory per requested byte; the scheduler sees
no network or disk, so what a freed core brings back of those is what an average requested core carries.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from drs_prom.features import N_FEATURES
from drs_prom.moves.hot import usage_share


def request_units(cores: float, mem_bytes: float) -> np.ndarray:
    """(N_FEATURES,) the units of request each signal's usage is counted against: requested cores for CPU, network
    and disk, requested bytes for memory."""
    out = np.full(N_FEATURES, float(cores))
    out[1] = float(mem_bytes)
    return out


def usage_per_request(pods: Iterable[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """(N_FEATURES,) the cluster's usage per request unit over ``pods`` ((usage, request_units) pairs, absolute
    units); pods whose usage is not known (NaN) are left out. NaN for a signal no pod requests anything against (no
    rate: the rule then refuses nothing on it)."""
    used = np.zeros(N_FEATURES)
    asked = np.zeros(N_FEATURES)
    for usage, units in pods:
        u = np.asarray(usage, dtype=np.float64)
        if not np.isfinite(u).all():
            continue
        used += u
        asked += np.asarray(units, dtype=np.float64)
    return np.where(asked > 0, used / np.where(asked > 0, asked, 1.0), np.nan)


def refilled(shares: np.ndarray, capacity: np.ndarray, usage: np.ndarray, units: np.ndarray, rate: np.ndarray) -> bool:
    """Whether the node (``shares``: its load, N_FEATURES shares of its ``capacity``) would be no cooler once the
    pod (``usage``, ``units`` of request) left and its requests were taken again at ``rate`` (usage_per_request)."""
    gone = usage_share(usage, capacity)
    back = usage_share(
        np.where(np.isfinite(rate), np.nan_to_num(rate) * np.asarray(units, dtype=np.float64), 0.0), capacity
    )
    now = np.asarray(shares, dtype=np.float64)
    return float(np.max(now + (back - gone))) >= float(np.max(now))  # back == gone leaves now exactly as it is
