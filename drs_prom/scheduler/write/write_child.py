"""The child process of ``write_process``: POSTs what the scheduler sends it, replies with the answer.

Started as ``python -m drs_prom.scheduler.write.write_child FD`` with FD one end of a socket pair.
It imports only urllib3 and ``bind`` (no kubernetes client, no numpy, no TensorFlow), so it starts in a
fraction of a second and stays small. The first message is the connection setup (host, TLS
files, pool size); then every message is ``(seq, path, body, headers, timeout)`` and gets the
reply ``(seq, status, data, error)``. End of the socket (the scheduler closed it, or died) ends
the process once the requests in flight are answered, so it never outlives its scheduler.
Ctrl-C goes to the whole process group: the child ignores it and lets the scheduler, which
finishes its queued binds first, close the socket.
"""

from __future__ import annotations

import queue
import signal
import ssl
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

import urllib3

from drs_prom.scheduler.write.bind import post_json


def pool(setup: dict[str, Any]) -> urllib3.PoolManager:
    """The same TLS settings the kubernetes client's REST client gives its own pool."""
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


def serve(conn: Connection) -> None:
    setup = conn.recv()
    try:
        http = pool(setup)
    except Exception as exc:  # noqa: BLE001 - a bad TLS file: said once, the scheduler writes in-process instead
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    host = str(setup["host"]).rstrip("/")
    conn.send(("ready", None))
    jobs: queue.SimpleQueue[tuple[int, str, dict[str, Any], dict[str, str], float] | None] = queue.SimpleQueue()
    send_lock = threading.Lock()

    def work() -> None:
        while (job := jobs.get()) is not None:
            seq, path, body, headers, timeout = job
            try:
                status, data = post_json(http, host + path, body, headers, timeout)
                reply: tuple[int, int, bytes, str | None] = (seq, status, data, None)
            except Exception as exc:  # noqa: BLE001 - one request's failure is its reply, raised in the scheduler
                reply = (seq, 0, b"", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            with send_lock:
                try:
                    conn.send(reply)
                except OSError:  # the scheduler is gone; nobody is waiting for this reply
                    return

    threads = [threading.Thread(target=work, daemon=True) for _ in range(max(1, int(setup.get("threads", 16))))]
    for t in threads:
        t.start()
    try:
        while True:
            jobs.put(conn.recv())
    except (EOFError, OSError):
        pass
    for _ in threads:
        jobs.put(None)
    for t in threads:
        t.join(60)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    serve(Connection(int(sys.argv[1])))


if __name__ == "__main__":
    main()
