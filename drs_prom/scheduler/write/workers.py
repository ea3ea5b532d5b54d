"""A fixed set of worker threads taking calls from one queue: the binding cycle's pool.

``concurrent.futures.ThreadPoolExecutor.submit`` builds a Future (a Condition and an
RLock) and probes an idle-thread semaphore in Python for every call; at a few hundred
binds a second that was the scheduling thread's largest cost after the decision itself
(py-spy, 1000 nodes). Nobody waits on the binds' results, so a plain queue put is all a
submit needs. A call that raises is logged, never lost silently (an executor would keep
the exception in a Future nobody reads).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


class WorkerPool:
    """``workers`` daemon threads named ``name``-i; ``shutdown`` runs every queued call first."""

    def __init__(self, workers: int, name: str) -> None:
        self._queue: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...]] | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True) for i in range(max(1, workers))
        ]
        self._lock = threading.Lock()
        self._started = False
        self._closed = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        if not self._started:  # threads start with the first call: a scheduler never started has none
            with self._lock:
                if not self._started:
                    for t in self._threads:
                        t.start()
                    self._started = True
        if self._closed:
            raise RuntimeError("worker pool is shut down")
        self._queue.put((fn, args))

    def shutdown(self, timeout: float = 60.0) -> None:
        """Run what is queued, then stop every thread."""
        if self._closed:
            return
        self._closed = True
        if not self._started:
            return
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            t.join(timeout)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, args = item
            try:
                fn(*args)
            except Exception:  # worker boundary: one call's failure is logged, the worker goes on
                log.exception("%s failed", getattr(fn, "__qualname__", fn))
