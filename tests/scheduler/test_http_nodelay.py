"""The scheduler's and the extender's HTTP servers send without Nagle's delay.

A reply leaves as two writes (headers, then body); with Nagle's algorithm on, the body waits
for the client's delayed ACK of the headers (40 ms on Linux) on every keep-alive request, which
is every extender call kube-scheduler makes. The handler must switch it off on each accepted
connection; this checks the option on the real accepted socket, over loopback.
"""

from __future__ import annotations

import http.client
import socket
import threading

from drs_prom.config import ServingSettings
from drs_prom.scheduler.http.server import BoundedHTTPServer, QuietHandler


class ReportsNoDelay(QuietHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.request_complete()
        on = self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        self._raw(200, b"nodelay" if on else b"nagle")


def test_accepted_connections_send_without_nagles_delay():
    server = BoundedHTTPServer(("127.0.0.1", 0), ReportsNoDelay, ServingSettings(), None, None)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        conn = http.client.HTTPConnection(*server.server_address, timeout=10)
        for _ in range(2):  # the same keep-alive connection, as kube-scheduler's extender client
            conn.request("GET", "/")
            assert conn.getresponse().read() == b"nodelay"
        conn.close()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
