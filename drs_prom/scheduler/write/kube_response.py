"""Raw apiserver responses read to their end, so their connection is reused.

Calls made with ``_preload_content=False`` (the body is parsed here, not by the client's models) return
urllib3's response unread. urllib3 returns a connection to its pool only once the body has been read; an
unread response is closed when it is garbage-collected, and the next call opens a new connection, over TLS
a new handshake on both ends. Every call whose body we do not need goes through ``drained``.
"""

from __future__ import annotations

from typing import cast

from urllib3 import BaseHTTPResponse


def drained(resp: object) -> bytes:
    """The whole body of a raw response; reading it hands the connection back to the pool.

    ``object``: the client annotates each call with the model it would parse, but with ``_preload_content=False``
    it returns urllib3's response, which is what this reads."""
    return bytes(cast(BaseHTTPResponse, resp).data)
