"""The one bounded poll the tests use while a real server (or a job thread) catches up."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(fn: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    """``fn()``'s first truthy value; AssertionError naming ``what`` and the last value after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})"[:2000])
