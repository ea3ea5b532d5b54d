"""Pending pods in scheduling order: higher spec.priority first, then first come first served.

A pod that fit nowhere waits with exponential backoff (never dropped); a cluster
change that could make room (node added/updated, pod deleted) shortens every wait to
the initial backoff, like kube-scheduler moving pods out of its unschedulable pool.
Deleting a pod removes it wherever it is. Thread-safe; ``pop`` blocks with a timeout.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class QueuedPod:
    uid: str
    key: str  # namespace/name
    priority: int
    first_seen: float  # monotonic time the pod first entered the queue (queue-to-bind latency)
    seq: int = 0  # arrival order: FIFO within a priority, kept across retries
    attempts: int = 0
    last_attempt: float = 0.0
    # stage timestamps (monotonic) of the current attempt, for drs_scheduling_stage_seconds{stage}
    received: float = 0.0  # the watch event that made it pending was read
    queued: float = 0.0  # it became ready to pop (added, requeued or out of backoff)
    popped: float = 0.0  # the scheduling thread took it
    pod: dict[str, Any] = field(default_factory=dict, repr=False)


class SchedulingQueue:
    def __init__(
        self,
        backoff_initial: float = 1.0,
        backoff_max: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self._clock = clock
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._active: list[tuple[int, int, str]] = []  # (-priority, seq, uid)
        self._in_active: set[str] = set()
        self._waiting: dict[str, float] = {}  # uid -> due time
        self._items: dict[str, QueuedPod] = {}
        self._in_flight: set[str] = set()
        self._closed = False

    # -- producers ---------------------------------------------------------
    def add(self, pod: dict[str, Any], received: float | None = None) -> None:
        """New or updated pending pod; an update refreshes the stored object only.
        ``received``: when its watch event was read (monotonic), for the stage timings."""
        meta = pod.get("metadata") or {}
        uid = meta.get("uid", "")
        with self._cond:
            item = self._items.get(uid)
            if item is not None:
                item.pod = pod
                item.priority = int((pod.get("spec") or {}).get("priority") or 0)
                return
            now = self._clock()
            item = QueuedPod(
                uid=uid,
                key=f"{meta.get('namespace', '')}/{meta.get('name', '')}",
                priority=int((pod.get("spec") or {}).get("priority") or 0),
                first_seen=now,
                seq=next(self._seq),
                received=now if received is None else received,
                pod=pod,
            )
            self._items[uid] = item
            if uid not in self._in_flight:
                self._push(item)

    def delete(self, uid: str) -> None:
        with self._cond:
            self._items.pop(uid, None)
            self._waiting.pop(uid, None)
            self._in_active.discard(uid)  # heap entry is skipped lazily

    def move_all(self) -> None:
        """A cluster change: retry waiting pods after at most the initial backoff from their last try."""
        with self._cond:
            if (
                not self._waiting
            ):  # nobody backed off: nothing to move, nobody to wake (pods are deleted by the thousand)
                return
            for uid, due in self._waiting.items():
                item = self._items[uid]
                self._waiting[uid] = min(due, item.last_attempt + self.backoff_initial)
            self._cond.notify_all()

    # -- consumer ----------------------------------------------------------
    def pop(self, timeout: float | None = None) -> QueuedPod | None:
        """Next pod to schedule, or None on timeout/close. The pod stays 'in flight' until done()."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while not self._closed:
                self._promote_due()
                while self._active:
                    _, _, uid = heapq.heappop(self._active)
                    if uid in self._in_active:
                        self._in_active.discard(uid)
                        self._in_flight.add(uid)
                        item = self._items[uid]
                        item.attempts += 1
                        item.last_attempt = item.popped = self._clock()
                        return item
                wait = None
                if self._waiting:
                    wait = max(0.0, min(self._waiting.values()) - self._clock())
                if deadline is not None:
                    left = deadline - self._clock()
                    if left <= 0:
                        return None
                    wait = left if wait is None else min(wait, left)
                self._cond.wait(wait if wait is None else max(wait, 0.001))
            return None

    def done(self, item: QueuedPod, scheduled: bool) -> None:
        """Finish an attempt: forget the pod when bound, else back it off."""
        with self._cond:
            self._in_flight.discard(item.uid)
            if item.uid not in self._items:
                return  # deleted meanwhile
            if scheduled:
                self._items.pop(item.uid, None)
                return
            delay = min(self.backoff_max, self.backoff_initial * (2 ** max(0, item.attempts - 1)))
            self._waiting[item.uid] = self._clock() + delay
            self._cond.notify_all()

    def requeue_now(self, item: QueuedPod) -> None:
        """Retry at once (e.g. a bind raced with a cache change), keeping its place by priority."""
        with self._cond:
            self._in_flight.discard(item.uid)
            if item.uid in self._items:
                self._push(item)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # -- introspection -----------------------------------------------------
    def __len__(self) -> int:
        with self._cond:
            return len(self._items)

    def pending(self) -> dict[str, int]:
        with self._cond:
            return {"active": len(self._in_active), "backoff": len(self._waiting), "in_flight": len(self._in_flight)}

    def has_active(self) -> bool:
        """Pods are waiting for a scheduling attempt now (not backed off). Lock-free: a hint."""
        return bool(self._in_active)

    def __contains__(self, uid: str) -> bool:
        with self._cond:
            return uid in self._items

    # -- internals ---------------------------------------------------------
    def _push(self, item: QueuedPod) -> None:
        self._waiting.pop(item.uid, None)
        if item.uid in self._in_active:
            return
        self._in_active.add(item.uid)
        item.queued = self._clock()
        heapq.heappush(self._active, (-item.priority, item.seq, item.uid))
        self._cond.notify_all()

    def _promote_due(self) -> None:
        now = self._clock()
        for uid in [u for u, due in self._waiting.items() if due <= now]:
            item = self._items.get(uid)
            self._waiting.pop(uid, None)
            if item is not None:
                self._push(item)
