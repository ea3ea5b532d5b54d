"""The simulated nodes' pages are rendered by a bounded number of threads: a flood of scrapes (Prometheus timing out
and reconnecting while the abandoned connections still wait) cannot grow the process's threads and sockets without
bound; what cannot be served in time is closed unanswered and counted, and the server goes on serving after it."""

from __future__ import annotations

import socket
import threading
import urllib.request

from drs_prom.sim.page_server import serve_pages
from tests.waiting import wait_for


def _first_bytes(c: socket.socket) -> bytes:
    """What the server sent first; b"" for a connection it closed unanswered (a reset when our request was unread)."""
    try:
        return c.recv(64)
    except ConnectionResetError:
        return b""


def test_at_most_max_in_flight_pages_render_at_once_and_the_rest_are_refused_then_served_again():
    release = threading.Event()
    lock = threading.Lock()
    state = {"now": 0, "peak": 0}

    def app(environ, start_response):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        try:
            release.wait(10)
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"up 1\n"]
        finally:
            with lock:
                state["now"] -= 1

    httpd, thread = serve_pages("127.0.0.1", 0, app, "test-pages", max_in_flight=2, wait_seconds=0.3)
    port = httpd.server_port
    clients = []
    try:
        for _ in range(6):
            c = socket.create_connection(("127.0.0.1", port), timeout=10)
            c.sendall(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
            clients.append(c)
        wait_for(lambda: httpd.refused >= 4, 10, "the connections beyond the two slots refused")
        assert state["peak"] == 2
        release.set()
        answered = [_first_bytes(c) for c in clients]
        assert sum(a.startswith(b"HTTP/1.0 200") for a in answered) == 2
        assert sum(a == b"" for a in answered) == 4  # closed unanswered
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            assert r.read() == b"up 1\n"
    finally:
        release.set()
        for c in clients:
            c.close()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
