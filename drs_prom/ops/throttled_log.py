"""One log line per problem per interval: a full disk or a damaged file fails on every
decision, and a warning per pod would bury everything else in the log."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable


class RateLimitedLog:
    """``warn(key, msg, *args)`` logs at most once per ``interval`` seconds per ``key``; the
    next line says how many were suppressed in between."""

    def __init__(self, logger: logging.Logger, interval: float = 60.0, clock: Callable[[], float] = time.monotonic):
        self.logger = logger
        self.interval = interval
        self.clock = clock
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        self._lock = threading.Lock()

    def warn(self, key: str, msg: str, *args: object) -> bool:
        """True when the line was written."""
        now = self.clock()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.interval:
                self._suppressed[key] = self._suppressed.get(key, 0) + 1
                return False
            self._last[key] = now
            skipped = self._suppressed.pop(key, 0)
        if skipped:
            msg += f" ({skipped} more since the last report)"
        self.logger.warning(msg, *args)
        return True
