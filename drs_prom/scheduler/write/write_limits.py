"""Client-side rate limits for API writes, like client-go's token bucket (kube-scheduler's
``clientConnection.qps`` / ``burst``): ``burst`` requests may go at once, then ``qps`` per
second. ``qps <= 0`` means no limit.

kube-scheduler builds two clientsets from that one configuration, one for its work (binds, preemption, pod status) and
one for its events, and client-go gives each clientset a token bucket of its own. ``WriteLimits`` keeps the
same split: an event never takes a bind's token, so a burst of pods binds at ``qps``, not at half of it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class TokenBucket:
    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.qps = float(qps)
        self.burst = max(1, int(burst))
        self._clock = clock
        self._tokens = float(self.burst)
        self._last = clock()
        self._lock = threading.Lock()

    def reserve(self) -> float:
        """Take one token; returns how long the caller must wait before using it (0: now)."""
        if self.qps <= 0:
            return 0.0
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def wait(self) -> None:
        delay = self.reserve()
        if delay > 0:
            time.sleep(delay)


class WriteLimits:
    """The bind bucket and the event bucket, each ``qps`` / ``burst`` (kube-scheduler's two clientsets)."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.binds = TokenBucket(qps, burst, clock)
        self.events = TokenBucket(qps, burst, clock)
