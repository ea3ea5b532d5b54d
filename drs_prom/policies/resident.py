"""Expected load of the pods a scheduler placed that are still running: what the metrics cannot show.

Measured load has two blind spots. It lags: a rate over a window of ``w`` seconds shows a pod
that started ``dt`` ago at ``dt / w`` of its load, and one that ended ``dt`` ago at ``1 - dt / w``
(recent_binds covers the first half for a policy's own binds). And it is capped: a node asked
for twice its network bandwidth reports it full, no more, because contention slows its pods
down. A scheduler knows every pod it placed and what it expected of it when it placed it; the
sum of those expectations over the pods still running on a node has neither blind spot.

``ResidentLoad`` is that sum: each placement's expected load row (the ``pod_load`` row of the
chosen node, the policy's own units) is added under the pod's uid and taken away when the pod
ends, is deleted or its bind fails. Pods placed by others are not in it: their load shows only
in the metrics. The simulator and the scheduler keep one each, fed at the same points.

It also covers the second half of the lag. A pod that ended at ``t`` is remembered for one rate
window (``ended``): at ``now`` the metrics still show ``row * (1 - (now - t) / w)`` of it, which a
policy takes off the measured load instead of reading a node as busy with pods that are gone.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence

import numpy as np

from drs_prom.features import N_FEATURES
from drs_prom.policies.array_math import nan_as
from drs_prom.policies.recent_binds import RecentBinds


class ResidentLoad:
    """Per-node sum of the expected load rows of running placements, keyed by pod.

    ``window_seconds``: the rate window behind the metrics the policies read; pods that ended within it are
    remembered, faded, in ``ended``. 0: no such memory."""

    def __init__(self, window_seconds: float = 0.0) -> None:
        self._lock = threading.Lock()
        self._ended = RecentBinds(window_seconds)
        self._pods: dict[Hashable, tuple[str, np.ndarray]] = {}
        self._sum: dict[str, np.ndarray] = {}
        self._count: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._pods)

    def __getstate__(self) -> dict[str, object]:
        """Copies and forks of a simulation (look-ahead play-outs) carry the sums, not the lock."""
        with self._lock:
            state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def add(self, pod: Hashable, node: str, row: Sequence[float] | np.ndarray) -> None:
        """Count ``pod`` on ``node`` with expected load ``row`` (N_FEATURES values, NaN read as 0)."""
        r = nan_as(np.asarray(row, dtype=np.float64).reshape(N_FEATURES), 0.0)
        with self._lock:
            self._drop(pod)
            self._pods[pod] = (node, r)
            if node in self._sum:
                self._sum[node] = self._sum[node] + r
            else:
                self._sum[node] = r.copy()
            self._count[node] = self._count.get(node, 0) + 1

    def drop(self, pod: Hashable, ended_at: float | None = None) -> bool:
        """Stop counting ``pod``; False if it was not counted. ``ended_at``: when it stopped running (it ended or
        was deleted while running), so that ``ended`` fades it out of the metrics; None: it never ran (its bind
        failed or was never confirmed)."""
        with self._lock:
            return self._drop(pod, ended_at)

    def _drop(self, pod: Hashable, ended_at: float | None = None) -> bool:
        old = self._pods.pop(pod, None)
        if old is None:
            return False
        node, r = old
        if ended_at is not None and self._ended.window_seconds > 0:
            self._ended.add(float(ended_at), node, r)
        left = self._count[node] - 1
        if left == 0:  # exactly zero again, whatever rounding the sum collected
            del self._count[node], self._sum[node]
        else:
            self._count[node] = left
            self._sum[node] = self._sum[node] - r
        return True

    def keep_only(self, pods: set[Hashable]) -> None:
        """Forget every pod not in ``pods`` (a relist: pods that vanished while the watch was down)."""
        with self._lock:
            for pod in [p for p in self._pods if p not in pods]:
                self._drop(pod)

    def ended(self, nodes: Sequence[str], now: float) -> np.ndarray:
        """(len(nodes), N_FEATURES) float64: what a rate over the window still shows at ``now`` of our pods that
        have ended (DecisionContext.ended); zeros where none ended within the window."""
        with self._lock:
            return self._ended.faded(tuple(nodes), now)

    def clear(self) -> None:
        with self._lock:
            self._ended.clear()
            self._pods.clear()
            self._sum.clear()
            self._count.clear()

    def count(self, node: str) -> int:
        """How many of our running placements ``node`` carries (what its row of ``matrix`` sums)."""
        with self._lock:
            return self._count.get(node, 0)

    def matrix(self, nodes: Sequence[str]) -> np.ndarray:
        """(len(nodes), N_FEATURES) float64: the summed rows per node, zeros where none run."""
        out = np.zeros((len(nodes), N_FEATURES))
        with self._lock:
            if not self._sum:
                return out
            for i, name in enumerate(nodes):
                s = self._sum.get(name)
                if s is not None:
                    out[i] = s
        return out
