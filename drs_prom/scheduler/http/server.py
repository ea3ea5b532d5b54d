"""The scheduler's small HTTP servers: /metrics, /healthz and /readyz (HealthServer), and the base the
extender's server shares (BackgroundServer, QuietHandler, RequestRejected): bounded request bodies, TLS and
delegated authentication from ``serving`` settings, a thread of their own.

/healthz: the process and its loop thread are alive. /readyz: caches synced and, with leader election on,
either leading or a healthy standby (a standby is ready: it is meant to take over, not to receive traffic).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from drs_prom.config import ServingSettings
from drs_prom.errors import ConfigError
from drs_prom.scheduler.http.secure_serving import DelegatedAuth, tls_context
from drs_prom.types import KubeClient
from exporters.bounded_server import BoundedThreads

log = logging.getLogger(__name__)


class RequestRejected(Exception):
    """A request refused before it reached a verb: ``status`` and a one-line reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that answers with one body and keeps probes out of the log.

    Bounded for strangers: ``timeout`` bounds every socket read, and a watchdog cuts a
    connection that has not delivered a whole request within ``request_timeout_seconds``
    (a slowloris trickling one byte per second passes any per-read timeout); bodies are
    read only with a Content-Length within ``max_body_bytes``.
    """

    server: BoundedHTTPServer
    # TCP_NODELAY: a reply's headers and body leave in two writes, and with Nagle's algorithm the
    # body waits for the client's delayed ACK of the headers, 40 ms on Linux, on every keep-alive
    # request: kube-scheduler's two extender calls per pod cost 80 ms of waiting and nothing else
    disable_nagle_algorithm = True

    def setup(self) -> None:
        # per-connection socket timeout; StreamRequestHandler reads it as a class default, set here per server
        self.timeout = self.server.serving.request_timeout_seconds  # type: ignore[misc]
        super().setup()

    def handle_one_request(self) -> None:
        watchdog = threading.Timer(self.server.serving.request_timeout_seconds, self._cut)
        watchdog.daemon = True
        self._watchdog = watchdog
        watchdog.start()
        self._drain = False
        try:
            super().handle_one_request()
            if self._drain:
                self._discard_rest()
        except (OSError, ValueError):  # cut by the watchdog, reset by the peer, TLS garbage
            self.close_connection = True
        finally:
            watchdog.cancel()

    def _discard_rest(self) -> None:
        """After refusing a body unread: stop writing, then read and drop what the client still
        sends (at most 2x the limit, within the request deadline) so it receives our answer
        instead of a connection reset."""
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_WR)
        budget = 2 * self.server.serving.max_body_bytes
        while budget > 0:
            chunk = self.rfile.read1(min(budget, 65536)) if hasattr(self.rfile, "read1") else b""
            if not chunk:
                break
            budget -= len(chunk)

    def _cut(self) -> None:
        self.server.slow_clients_cut += 1
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def request_complete(self) -> None:
        """The whole request is in: the rest (deciding, answering) is ours, not the client's."""
        self._watchdog.cancel()

    def read_body(self) -> bytes:
        """The body, or RequestRejected (411 no length, 413 too large, 400 malformed length)."""
        if self.headers.get("Transfer-Encoding"):
            raise RequestRejected(411, "chunked bodies are not accepted; send Content-Length")
        raw = self.headers.get("Content-Length")
        if raw is None:
            raise RequestRejected(411, "Content-Length required")
        try:
            length = int(raw)
        except ValueError:
            raise RequestRejected(400, "bad Content-Length") from None
        limit = self.server.serving.max_body_bytes
        if length < 0:
            raise RequestRejected(400, "bad Content-Length")
        if length > limit:
            self.close_connection = True  # never read into memory; dropped after the answer
            self._drain = True
            raise RequestRejected(413, f"request body of {length} bytes exceeds the limit of {limit}")
        body = self.rfile.read(length)
        if len(body) != length:
            raise RequestRejected(400, "request body shorter than Content-Length")
        self.request_complete()
        return body

    def guard(self, path: str) -> bool:
        """Delegated auth for /metrics (when configured); answers 401/403/503 itself and returns False."""
        auth = self.server.auth
        if auth is None or path != "/metrics":
            return True
        verdict = auth.check(self.headers.get("Authorization"), path)
        if verdict.status == 200:
            return True
        self._raw(verdict.status, verdict.reason.encode())
        return False

    def _raw(self, code: int, body: bytes, ctype: str = "text/plain; charset=utf-8") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class BoundedHTTPServer(BoundedThreads, ThreadingHTTPServer):
    """A thread per connection, at most ``max_connections`` at once (more wait in the listen
    queue for up to one request deadline, by which the watchdog has cut any slow client holding
    a slot, then are closed), so a flood of idle connections cannot grow threads and memory
    without bound; TLS is negotiated in the connection's thread, never in the accept loop."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        serving: ServingSettings,
        tls: ssl.SSLContext | None,
        auth: DelegatedAuth | None,
    ) -> None:
        self.serving = serving
        self.tls = tls
        self.auth = auth
        self.bound_threads(serving.max_connections, serving.request_timeout_seconds)
        self.slow_clients_cut = 0
        super().__init__(address, handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = super().get_request()
        if self.tls is not None:
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr

    def finish_request(self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any) -> None:
        """The TLS handshake first, in the connection's own thread and under the request deadline; a failed one
        ends the connection (process_request_thread shuts it down and frees its slot)."""
        if isinstance(request, ssl.SSLSocket):
            request.settimeout(self.serving.request_timeout_seconds)
            try:
                request.do_handshake()
            except (OSError, ValueError):
                return
        super().finish_request(request, client_address)

    def handle_error(self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any) -> None:
        log.debug("connection from %s ended with an error", client_address, exc_info=True)


class BackgroundServer:
    """A BoundedHTTPServer on ``host:port`` (port 0: any free one) served from a daemon thread.

    ``serving`` chooses TLS and the limits; ``api_client`` is needed only when it asks for
    delegated authentication of /metrics.
    """

    def __init__(
        self,
        listen: str,
        handler: type[BaseHTTPRequestHandler],
        name: str,
        serving: ServingSettings | None = None,
        api_client: KubeClient = None,
    ) -> None:
        serving = serving or ServingSettings()
        host, _, port = listen.rpartition(":")
        auth = None
        if serving.authenticate_metrics:
            if api_client is None:
                raise ConfigError("serving.authenticate_metrics needs a Kubernetes client for TokenReview")
            auth = DelegatedAuth(api_client, serving.auth_cache_ttl_seconds)
        tls, self.cert_file = tls_context(serving)
        self.httpd = BoundedHTTPServer((host or "0.0.0.0", int(port)), handler, serving, tls, auth)
        self.port = self.httpd.server_address[1]
        self.scheme = "http" if serving.tls == "off" else "https"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name=name, daemon=True)

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)


class HealthServer(BackgroundServer):
    """Serves /metrics, /healthz, /readyz on ``host:port`` in a daemon thread."""

    def __init__(
        self,
        listen: str,
        registry: CollectorRegistry,
        healthy: Callable[[], bool],
        ready: Callable[[], bool],
        serving: ServingSettings | None = None,
        api_client: KubeClient = None,
    ) -> None:
        registry_ = registry

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                self.request_complete()
                path = self.path.split("?")[0]
                if path == "/metrics":
                    if self.guard(path):
                        self._raw(200, generate_latest(registry_), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    ok = healthy()
                    self._raw(200 if ok else 500, b"ok" if ok else b"unhealthy")
                elif path == "/readyz":
                    ok = ready()
                    self._raw(200 if ok else 503, b"ok" if ok else b"not ready")
                else:
                    self._raw(404, b"not found")

        super().__init__(listen, Handler, "drs-health", serving, api_client)
