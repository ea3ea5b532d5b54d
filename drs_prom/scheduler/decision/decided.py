"""A pod with its decision, handed from the scheduling thread to the binding cycle (bind, events, journal).

One record instead of a tuple of loose values: the binding cycle runs on worker threads, often after the next pod
has been decided, so everything it needs of this decision travels together and is never read from shared state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from drs_prom.scheduler.decision.arms import Choice
from drs_prom.scheduler.watch.queue import QueuedPod
from drs_prom.types import NodeInfo, PodRequest


@dataclass(frozen=True)
class DecidedPod:
    """``item``'s pod, decided: bind it to ``node`` and journal why."""

    item: QueuedPod
    pod: dict[str, Any]
    """The pod as the watch delivered it (the API's JSON): its events and status patches are written against it."""
    req: PodRequest
    demand: tuple[float, ...]
    """Its expected load, absolute units (FEATURES order), as the policy was told it."""
    node: str
    nodes: Sequence[NodeInfo]
    """The nodes it was filtered and scored on, in the order of ``feasible`` and ``choice.scores``."""
    feasible: np.ndarray
    choice: Choice
    requests: np.ndarray
    """Requests and allocatable of ``nodes`` as of the decision (policies.contract.NODE_REQUEST_COLUMNS)."""
    decided: float
    """Monotonic time the decision was made (the bind_handover stage starts here)."""

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.nodes]


class BindRecorder(Protocol):
    """Told of every pod bound (a test's or a testbed's mirror of the cluster), stopped with the scheduler."""

    def record(self, req: PodRequest, demand: tuple[float, ...], node: str, names: list[str]) -> None: ...

    def stop(self) -> None: ...
