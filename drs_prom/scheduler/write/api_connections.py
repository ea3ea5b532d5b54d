"""The binding cycle's POSTs on kept-alive connections: the request written as bytes, the answer read by httptools.

Why: a POST through urllib3's ``PoolManager.request`` costs about 0.5 ms of CPU on this path (the
URL parsed and the pool looked up, Timeout and Retry objects, http.client's response and its email
header parser, urllib3's wrapper and decoders); written as bytes on a kept connection and read by
httptools (llhttp, the C parser of Node and uvicorn) it costs about a third of that
(``benchmarks/sched_throughput.py --floor`` measures both in one run). A queue drain makes two per
pod, the Binding and its Scheduled event, on the core its decisions run on.

TLS is the kubernetes client's: the context comes from urllib3's own ``create_urllib3_context``
with the settings the client gives its pool (CA file or data, client certificate, ``verify_ssl``,
``tls_server_name``, ``assert_hostname=False``), so a kubeconfig that works for the watches works
here. Settings this path does not reproduce (a proxy; ``assert_hostname`` naming another host) keep
urllib3 (``UrllibPool``), said once in the log.

A kept connection the apiserver closed while idle (its idle timeout) is readable before it is
reused: it is dropped then, as urllib3 drops it, and a new one is opened. A request that fails is
not retried here (a Binding is not safe to send twice blindly); its connection is closed and the
caller counts the failure, as with urllib3 and ``retries=False``.
"""

from __future__ import annotations

import logging
import re
import socket
import ssl
import threading
import time
from typing import Any, Protocol
from urllib.parse import urlsplit

import httptools
import urllib3
from urllib3.util.ssl_ import create_urllib3_context
from urllib3.util.wait import wait_for_read

log = logging.getLogger(__name__)


class Poster(Protocol):
    """One POST of an encoded JSON body: (HTTP status, response body); connection errors raise."""

    def post(self, path: str, body: bytes, headers: dict[str, str], timeout: float) -> tuple[int, bytes]: ...


def connection_setup(cfg: Any, pool_size: int) -> dict[str, Any]:
    """What a connection to the apiserver needs from a ``kubernetes.client.Configuration``, as plain
    values (the write process's child gets it over a socket)."""
    return {
        "host": str(cfg.host).rstrip("/"),
        "verify_ssl": bool(cfg.verify_ssl),
        "ssl_ca_cert": cfg.ssl_ca_cert,
        "cert_file": cfg.cert_file,
        "key_file": cfg.key_file,
        "ca_cert_data": getattr(cfg, "ca_cert_data", None),
        "assert_hostname": cfg.assert_hostname,
        "tls_server_name": getattr(cfg, "tls_server_name", None),
        "proxy": getattr(cfg, "proxy", None),
        "threads": pool_size,
    }


def unsupported(setup: dict[str, Any]) -> str | None:
    """Why ``KeptConnections`` cannot reproduce these settings, or None."""
    if setup.get("proxy"):
        return "a proxy is configured"
    if setup.get("assert_hostname") not in (None, True, False):
        return "assert_hostname names another host"
    if urlsplit(setup["host"]).scheme not in ("http", "https"):
        return f"the host {setup['host']!r} is neither http nor https"
    return None


def tls_context(setup: dict[str, Any]) -> ssl.SSLContext:
    """The context urllib3 builds for the kubernetes client's pool with the same settings."""
    verify = bool(setup.get("verify_ssl", True))
    ctx = create_urllib3_context(cert_reqs=ssl.CERT_REQUIRED if verify else ssl.CERT_NONE)
    ctx.check_hostname = verify and setup.get("assert_hostname") is not False
    ca_file, ca_data = setup.get("ssl_ca_cert"), setup.get("ca_cert_data")
    if ca_file or ca_data:
        ctx.load_verify_locations(cafile=ca_file, cadata=ca_data)
    else:
        ctx.load_default_certs()
    if setup.get("cert_file"):
        ctx.load_cert_chain(setup["cert_file"], setup.get("key_file"))
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


class _Response:
    """httptools' callbacks for one response: its body, whether the connection may be kept (read when the
    headers end: the parser forgets it once the message is complete), and whether it has ended."""

    __slots__ = ("body", "done", "keep", "parser")

    def __init__(self) -> None:
        self.body: list[bytes] = []
        self.done = False
        self.keep = False
        self.parser: httptools.HttpResponseParser | None = None

    def on_headers_complete(self) -> None:
        assert self.parser is not None
        self.keep = self.parser.should_keep_alive()

    def on_body(self, data: bytes) -> None:
        self.body.append(data)

    def on_message_complete(self) -> None:
        self.done = True
        self.parser = None  # no cycle left between the parser and its callbacks


class KeptConnections:
    """Connections to one apiserver, each used by one request at a time and kept for the next; at most
    ``setup["threads"]`` are kept idle (more may be open while that many requests are in flight).

    The request is written as bytes (a request line, the headers given, ``Host`` and ``Content-Length``) and
    the answer read by httptools (llhttp, Node's parser: chunked bodies, keep-alive) without building
    header objects nobody reads: reading an answer with ``http.client``, which builds an email message
    object of its headers, cost twice the CPU of reading it as bytes."""

    def __init__(self, setup: dict[str, Any]) -> None:
        why = unsupported(setup)
        if why is not None:
            raise ValueError(f"kept connections cannot be used: {why}")
        url = urlsplit(setup["host"])
        self._address = (url.hostname or "localhost", url.port or (443 if url.scheme == "https" else 80))
        self._prefix = url.path.rstrip("/")
        self._host_line = f"Host: {url.netloc}\r\n"
        self._tls = tls_context(setup) if url.scheme == "https" else None
        self._server_hostname = setup.get("tls_server_name") or self._address[0]
        self._keep = max(1, int(setup.get("threads", 16)))
        self._idle: list[socket.socket] = []
        self._lock = threading.Lock()

    def _open(self, timeout: float) -> socket.socket:
        sock = socket.create_connection(self._address, timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a request is one write: never wait for an ACK
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock, server_hostname=self._server_hostname)
        except BaseException:
            sock.close()
            raise
        return sock

    def _connection(self, timeout: float) -> socket.socket:
        while True:
            with self._lock:
                sock = self._idle.pop() if self._idle else None
            if sock is None:
                return self._open(timeout)
            if not wait_for_read(sock, timeout=0.0):
                return sock
            sock.close()  # closed by the apiserver while idle (or sent something unasked): never reused

    def post(self, path: str, body: bytes, headers: dict[str, str], timeout: float) -> tuple[int, bytes]:
        if _UNSAFE.search(path) or _UNSAFE.search("".join(headers.values())) or _UNSAFE.search("".join(headers)):
            raise ValueError("a request path or header holds a line break or NUL")
        lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        head = f"POST {self._prefix}{path} HTTP/1.1\r\n{self._host_line}{lines}Content-Length: {len(body)}\r\n\r\n"
        request = head.encode("ascii") + body  # a name that is not ASCII fails here, before a connection is taken
        deadline = time.monotonic() + timeout
        sock = self._connection(timeout)
        try:
            sock.settimeout(timeout)
            sock.sendall(request)
            answer = _Response()
            answer.parser = parser = httptools.HttpResponseParser(answer)
            while not answer.done:
                sock.settimeout(max(deadline - time.monotonic(), 0.001))
                data = sock.recv(65536)
                if not data:
                    raise ConnectionError("the apiserver closed the connection before its answer ended")
                parser.feed_data(data)
            status = parser.get_status_code()
        except BaseException:
            sock.close()
            raise
        if answer.keep:
            with self._lock:
                if len(self._idle) < self._keep:
                    self._idle.append(sock)
                    return status, b"".join(answer.body)
        sock.close()
        return status, b"".join(answer.body)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for sock in idle:
            sock.close()


_UNSAFE = re.compile(r"[\r\n\x00]")


class UrllibPool:
    """The same POST through a urllib3 pool, for the settings ``KeptConnections`` does not reproduce."""

    def __init__(self, pool: urllib3.PoolManager, host: str, owned: bool) -> None:
        self._pool = pool
        self._host = host.rstrip("/")
        self._owned = owned  # False: the kubernetes client's own pool, which its watches share

    def post(self, path: str, body: bytes, headers: dict[str, str], timeout: float) -> tuple[int, bytes]:
        resp = self._pool.request(
            "POST", self._host + path, body=body, headers=headers, timeout=urllib3.Timeout(total=timeout), retries=False
        )
        return resp.status, resp.data

    def close(self) -> None:
        if self._owned:
            self._pool.clear()


def urllib3_pool(setup: dict[str, Any]) -> urllib3.PoolManager:
    """The pool the kubernetes client's REST client builds from the same settings (no proxy)."""
    args: dict[str, Any] = {
        "cert_reqs": ssl.CERT_REQUIRED if setup.get("verify_ssl", True) else ssl.CERT_NONE,
        "ca_certs": setup.get("ssl_ca_cert"),
        "cert_file": setup.get("cert_file"),
        "key_file": setup.get("key_file"),
        "ca_cert_data": setup.get("ca_cert_data"),
        "maxsize": int(setup.get("threads", 16)),
    }
    if setup.get("assert_hostname") is not None:
        args["assert_hostname"] = setup["assert_hostname"]
    if setup.get("tls_server_name"):
        args["server_hostname"] = setup["tls_server_name"]
    return urllib3.PoolManager(**args)


def poster(setup: dict[str, Any], pool: urllib3.PoolManager | None = None) -> KeptConnections | UrllibPool:
    """Kept connections where they reproduce ``setup``; else ``pool`` (the kubernetes client's own, which
    also knows its proxy) or a urllib3 pool built from ``setup``."""
    why = unsupported(setup)
    if why is None:
        return KeptConnections(setup)
    log.info("binds and events are written through urllib3: %s", why)
    if pool is not None:
        return UrllibPool(pool, setup["host"], owned=False)
    return UrllibPool(urllib3_pool(setup), setup["host"], owned=True)
