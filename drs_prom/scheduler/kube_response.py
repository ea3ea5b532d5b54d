"""Raw apiserver responses read to their end, so their connection is reused.

Calls made with ``_preload_content=False`` (the body is parsed here, not by the client's models) return
urllib3's response unread. urllib3 returns a connection to its pool only once the body has been read; an
unread response is closed when it is garbage-collected, and the next call opens a new connection, over TLS
a new handshake on both ends. Every call whose body we do not need goes through ``drained``.
"""

from __future__ import annotations

from typing import Any


def drained(resp: Any) -> bytes:
    """The whole body of a raw response; reading it hands the connection back to the pool."""
    return bytes(resp.data)
