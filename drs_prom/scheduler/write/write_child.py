"""The child process of ``write_process``: POSTs what the scheduler sends it, replies with the answer.

Started as ``python -m drs_prom.scheduler.write.write_child FD`` with FD one end of a socket pair.
It imports only ``api_connections`` (sockets, httptools, urllib3's TLS helpers; no kubernetes client,
no numpy, no TensorFlow), so it starts in a fraction of a second and stays small. The first message is
the connection setup (``api_connections.connection_setup``: host, TLS files, pool size); then every
message is ``(seq, path, body, headers, timeout)``, the body encoded JSON, and gets the
reply ``(seq, status, data, error)``. End of the socket (the scheduler closed it, or died) ends
the process once the requests in flight are answered, so it never outlives its scheduler.
Ctrl-C goes to the whole process group: the child ignores it and lets the scheduler, which
finishes its queued binds first, close the socket.
"""

from __future__ import annotations

import queue
import signal
import sys
import threading
from multiprocessing.connection import Connection

from drs_prom.scheduler.write import api_connections


def serve(conn: Connection) -> None:
    setup = conn.recv()
    try:
        connections = api_connections.poster(setup)
    except Exception as exc:  # noqa: BLE001 - a bad TLS file: said once, the scheduler writes in-process instead
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", None))
    jobs: queue.SimpleQueue[tuple[int, str, bytes, dict[str, str], float] | None] = queue.SimpleQueue()
    send_lock = threading.Lock()

    def work() -> None:
        while (job := jobs.get()) is not None:
            seq, path, body, headers, timeout = job
            try:
                status, data = connections.post(path, body, headers, timeout)
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
