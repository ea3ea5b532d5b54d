"""The simulated nodes' pages served to Prometheus by a bounded number of threads.

prometheus_client's own WSGI server starts a thread for every connection and never says no. A testbed cluster of
a hundred nodes has two pages per node (node_exporter's and the kubelet's cAdvisor page) scraped every half second,
all served by one Python process that shares its CPU with the scheduler under test; when pages come slower than
Prometheus asks for them, its scrapes time out and reconnect while the abandoned ones still hold a thread and a
socket, and the process grows until it runs out of file descriptors. Here at most ``max_in_flight`` pages are
rendered at once; further connections wait in the listen queue (the accept loop blocks, which is the back-pressure)
for at most ``wait_seconds``, then are closed, and Prometheus records that target's scrape as failed, as it would for
a kubelet that does not answer in time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from exporters.bounded_server import BoundedThreads

DEFAULT_MAX_IN_FLIGHT = 32
DEFAULT_WAIT_SECONDS = 1.0


def serve_pages(
    host: str,
    port: int,
    app: Callable[..., Any],
    name: str,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    wait_seconds: float = DEFAULT_WAIT_SECONDS,
) -> tuple[Any, threading.Thread]:
    """``app`` on ``host:port`` (0: any free port) in a daemon thread; returns the server and that thread.

    The server's ``refused`` counts the connections closed unanswered because every slot stayed busy."""
    from wsgiref.simple_server import make_server

    from prometheus_client.exposition import ThreadingWSGIServer, _SilentHandler

    class BoundedWSGIServer(BoundedThreads, ThreadingWSGIServer):
        request_queue_size = 256  # socketserver's 5 would drop SYNs, and the client retries only a second later

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.bound_threads(max_in_flight, wait_seconds)
            super().__init__(*args, **kwargs)

    httpd = make_server(host, port, app, BoundedWSGIServer, handler_class=_SilentHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True, name=name)
    thread.start()
    return httpd, thread
