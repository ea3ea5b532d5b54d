"""A threading HTTP server that handles at most so many connections at once.

socketserver's ThreadingMixIn starts a thread for every connection and never says no, so a flood of connections
(idle ones held open, or scrapes that time out and reconnect while the abandoned ones still wait for their page)
grows threads, sockets and memory until the process runs out of one of them. ``BoundedThreads`` gives every
connection a slot: when all are busy the accept loop waits (new connections queue in the kernel's listen queue, which
is the back-pressure) for at most ``slot_wait_seconds``, then closes the connection unanswered and counts it in
``refused``. Used by drs-prom's own HTTP endpoints and by the simulated nodes' pages.
"""

from __future__ import annotations

import socketserver
import threading
from typing import Any


class BoundedThreads(socketserver.ThreadingMixIn):
    """Mix in before a ``ThreadingMixIn`` server class and call ``bound_threads`` in its ``__init__``."""

    slots: threading.BoundedSemaphore
    slot_wait_seconds: float
    refused: int

    def bound_threads(self, max_connections: int, wait_seconds: float) -> None:
        self.slots = threading.BoundedSemaphore(max_connections)
        self.slot_wait_seconds = wait_seconds
        self.refused = 0

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(timeout=self.slot_wait_seconds):
            self.refused += 1
            self.shutdown_request(request)  # type: ignore[attr-defined]  # socketserver.BaseServer's, later in the MRO
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()
