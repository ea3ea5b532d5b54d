"""A real VictoriaMetrics single-node (Debian ``victoria-metrics``) on 127.0.0.1 with a temp data dir.

``start_victoria_metrics(tmp_path, extra_args) -> VictoriaProc`` returns once ``/health``
answers (bounded); ``.url`` is the PromQL base (with ``-http.pathPrefix`` if given),
``.import_prometheus(text)`` loads exposition-format samples (timestamps in ms) and makes
them searchable at once. A missing binary fails the test with one line (never a skip).
"""

from __future__ import annotations

import re
import ssl
import subprocess
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.prom.fixtures import (
    STARTUP_TIMEOUT,
    ServerError,
    _alive_or_raise,
    _log_tail,
    _Proc,
    find_binary,
    free_port,
    wait_until,
)

# VictoriaMetrics answers an instant query with the newest sample of the last ~2 scrape
# intervals; Prometheus looks back 5 minutes. The same lookback makes gaps read the same.
PROMETHEUS_LOOKBACK = "-search.maxStalenessInterval=5m"


@dataclass
class VictoriaProc(_Proc):
    root: str = ""  # scheme://host:port + path prefix, without credentials
    headers: dict[str, str] | None = None
    ssl_context: ssl.SSLContext | None = None

    @property
    def url(self) -> str:
        return self.root

    def _request(self, path: str, data: bytes | None = None) -> bytes:
        req = urllib.request.Request(self.root + path, data=data, headers=self.headers or {})
        with urllib.request.urlopen(req, timeout=60, context=self.ssl_context) as resp:
            return resp.read()

    def import_prometheus(self, lines: Iterable[str]) -> None:
        """POST /api/v1/import/prometheus, then force a flush so queries see the samples now."""
        self._request("/api/v1/import/prometheus", "".join(lines).encode())
        self._request("/internal/force_flush")


def openmetrics_to_prometheus(openmetrics: Path) -> Iterable[str]:
    """The same samples in Prometheus exposition format: timestamps from seconds to milliseconds."""
    sample = re.compile(r"^(\S+\{.*\}|\S+) (\S+) (\d+(?:\.\d+)?)$")
    for line in openmetrics.read_text().splitlines():
        if line.startswith("#") or not line:
            continue
        found = sample.match(line)
        if not found:
            raise ValueError(f"unexpected OpenMetrics sample line: {line[:120]}")
        name, value, ts = found.groups()
        yield f"{name} {value} {round(float(ts) * 1000)}\n"


def start_victoria_metrics(
    tmp_path: Path,
    extra_args: Sequence[str] = (),
    path_prefix: str = "",
    scheme: str = "http",
    headers: dict[str, str] | None = None,
    ssl_context: ssl.SSLContext | None = None,
    timeout: float = STARTUP_TIMEOUT,
) -> VictoriaProc:
    binary = find_binary("victoria-metrics")
    tmp_path.mkdir(parents=True, exist_ok=True)
    port = free_port()
    data = tmp_path / f"vm-data-{port}"
    log_path = tmp_path / f"vm-{port}.log"
    cmd = [
        binary,
        f"-storageDataPath={data}",
        f"-httpListenAddr=127.0.0.1:{port}",
        "-retentionPeriod=100y",
        "-search.disableCache",  # results of the tests' range queries must come from the data, not a cache
        "-search.latencyOffset=0s",
        "-loggerLevel=WARN",
        *extra_args,
    ]
    if path_prefix:
        cmd.append(f"-http.pathPrefix={path_prefix}")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    vm = VictoriaProc(
        proc=proc,
        log_path=log_path,
        root=f"{scheme}://127.0.0.1:{port}{path_prefix}",
        headers=headers,
        ssl_context=ssl_context,
    )

    def healthy() -> bool:
        _alive_or_raise(vm)
        return vm._request("/health").strip() == b"OK"

    try:
        wait_until(healthy, timeout, f"victoria-metrics at {vm.root} to be healthy")
    except ServerError as exc:
        vm.stop()
        raise ServerError(f"{exc}; log: {_log_tail(log_path)}") from None
    return vm
