"""The Prometheus-backed MetricsSource: current node state, history and capacity.

Seven instant queries per snapshot (one per feature, one for sample freshness), all at
the same evaluation time, parsed by the pure helpers in drs_prom/signals/state.py. Every failure
(unreachable, HTTP error, timeout, malformed or NaN data) becomes one MetricsError that
names the URL and the query, so the scheduler can log one line and fall back.
"""

from __future__ import annotations

import ast
import json
import math
import re
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import pandas as pd
import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from requests.auth import AuthBase, HTTPBasicAuth
from urllib3.exceptions import ReadTimeoutError
from urllib3.util.retry import Retry

from drs_prom.config import PrometheusSettings, duration_seconds
from drs_prom.errors import MetricsError
from drs_prom.features import FEATURES
from drs_prom.signals import promql
from drs_prom.signals.state import (
    NodeSnapshot,
    ResultError,
    build_snapshot,
    features_frame,
    history_frame,
    matrix_frame,
    vector_series,
)

MAX_POINTS = 11000
"""Prometheus refuses range queries with more points per series than this."""


def _server_error(exc: PrometheusApiClientException) -> str:
    """The status code and Prometheus' own error text out of the client's message."""
    text = str(exc)
    found = re.match(r"HTTP Status Code (\d+) \((b'.*'|b\".*\")\)$", text, re.DOTALL)
    if not found:
        return text[:200].replace("\n", " ")
    detail = ""
    try:
        body = json.loads(ast.literal_eval(found.group(2)))
        detail = str(body.get("error", ""))
    except (ValueError, SyntaxError, AttributeError):
        pass
    detail = detail or ast.literal_eval(found.group(2))[:200].decode(errors="replace")
    return f"HTTP {found.group(1)}: " + " ".join(detail.split())


class _BearerTokenFile(AuthBase):
    """Reads the token at every request: projected service-account tokens rotate under a running process."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        try:
            token = Path(self.path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise MetricsError(f"cannot read prometheus.bearer_token_file {self.path}: {exc.strerror}") from None
        request.headers["Authorization"] = f"Bearer {token}"
        return request


def http_session(settings: PrometheusSettings) -> requests.Session:
    """A requests session carrying the settings' auth, CA and headers (shared by every query)."""
    session = requests.Session()
    token = settings.bearer_token.get_secret_value()
    if token:
        session.headers["Authorization"] = f"Bearer {token}"
    elif settings.bearer_token_file:
        session.auth = _BearerTokenFile(settings.bearer_token_file)
    elif settings.basic_auth_username:
        password = settings.basic_auth_password.get_secret_value()
        if settings.basic_auth_password_file:
            password = Path(settings.basic_auth_password_file).read_text(encoding="utf-8").rstrip("\n")
        session.auth = HTTPBasicAuth(settings.basic_auth_username, password)
    session.headers.update(settings.headers)
    session.verify = settings.ca_file or not settings.insecure_skip_verify
    return session


T = TypeVar("T")


class PrometheusSource:
    """``MetricsSource`` reading node_exporter-style metrics from one Prometheus.

    ``expected_nodes`` (e.g. the Kubernetes node names) makes nodes with no series at
    all show up as stale rather than being absent. ``clock`` is injectable for tests.
    """

    def __init__(
        self,
        settings: PrometheusSettings | None = None,
        *,
        expected_nodes: Callable[[], Iterable[str]] | None = None,
        clock: Callable[[], float] = time.time,
        freshness_step: str | None = None,
    ) -> None:
        self.settings = settings or PrometheusSettings()
        self.url = self.settings.api_url
        self.expected_nodes = expected_nodes
        self.clock = clock
        self.queries = promql.queries_for(self.settings)
        # Ages are known to one subquery step: a tenth of the max age keeps the freshness
        # query cheap on large clusters and the staleness decision within 10%.
        max_age = self.settings.max_sample_age_seconds
        step = freshness_step or f"{max(1, int(max_age / 10))}s"
        lookback = f"{max(300, int(4 * max_age))}s"
        self.freshness_query = promql.last_seen(self.settings.node_selector, lookback, step)
        # No client-side retries: a slow or dead Prometheus must fail within one timeout.
        self._client = PrometheusConnect(
            url=self.url,
            retry=Retry(total=0, raise_on_status=False),
            session=http_session(self.settings),
            timeout=self.settings.timeout_seconds,
        )

    @classmethod
    def from_url(cls, url: str, **settings: object) -> PrometheusSource:
        """Shortcut: ``PrometheusSource.from_url("http://127.0.0.1:9090", window="5s")``."""
        return cls(PrometheusSettings(url=url, **settings))  # type: ignore[arg-type]

    def close(self) -> None:
        self._client.close()

    # -- I/O boundary --------------------------------------------------------------

    def _call(self, query: str, fetch: Callable[[], T]) -> T:
        where = f"Prometheus at {self.url}"
        try:
            return fetch()
        except requests.exceptions.SSLError as exc:
            reason = str(exc.args[0] if exc.args else exc)
            found = re.search(
                r"certificate verify failed[^)'\"]*|wrong version number|CERTIFICATE_VERIFY_FAILED", reason
            )
            raise MetricsError(
                f"{where}: TLS failed ({found.group(0) if found else 'handshake error'}; "
                f"set prometheus.ca_file to the CA that signed its certificate) for query: {query}"
            ) from None
        except requests.exceptions.Timeout:
            raise MetricsError(
                f"{where} timed out after {self.settings.timeout_seconds:g}s on query: {query}", "timeout"
            ) from None
        except requests.exceptions.ConnectionError as exc:
            # With retries off, urllib3 wraps a read timeout in MaxRetryError -> ConnectionError.
            if isinstance(getattr(exc.args[0] if exc.args else None, "reason", None), ReadTimeoutError):
                raise MetricsError(
                    f"{where} timed out after {self.settings.timeout_seconds:g}s on query: {query}", "timeout"
                ) from None
            found = re.search(r"\[Errno -?\d+\] ([^'\")]+)", str(exc))
            reason = found.group(1).strip() if found else "connection failed"
            raise MetricsError(f"{where} is unreachable ({reason[:120]}) for query: {query}", "unreachable") from None
        except PrometheusApiClientException as exc:
            raise MetricsError(f"{where} answered {_server_error(exc)} for query: {query}", "http_error") from None
        except (ValueError, KeyError, TypeError) as exc:  # a body that is not Prometheus' JSON
            raise MetricsError(
                f"{where} returned a malformed response ({type(exc).__name__}) for query: {query}", "malformed"
            ) from None
        except requests.exceptions.RequestException as exc:
            raise MetricsError(
                f"{where} request failed ({type(exc).__name__}) for query: {query}", "unreachable"
            ) from None

    def query(self, query: str, at: float | None = None) -> pd.Series:
        """One instant query -> Series by nodename. NaN/Inf values raise MetricsError."""
        params = {"timeout": f"{self.settings.timeout_seconds:g}s"}
        if at is not None:
            params["time"] = f"{at:.3f}"
        result = self._call(query, lambda: self._client.custom_query(query, params=params))
        try:
            series = vector_series(result)
        except ResultError as exc:
            raise MetricsError(
                f"Prometheus at {self.url} returned unusable data ({exc}) for query: {query}", "unusable"
            ) from None
        bad = [n for n, v in series.items() if not math.isfinite(v)]
        if bad:
            raise MetricsError(
                f"Prometheus at {self.url} returned NaN/Inf for node {bad[0]} on query: {query}", "non_finite"
            )
        return series

    def scalar(self, query: str, at: float | None = None) -> float | None:
        """First sample of an instant query not keyed by node (None when the result is empty)."""
        params = {"timeout": f"{self.settings.timeout_seconds:g}s"}
        if at is not None:
            params["time"] = f"{at:.3f}"
        result = self._call(query, lambda: self._client.custom_query(query, params=params))
        if not result:
            return None
        try:
            return float(result[0]["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            raise MetricsError(
                f"Prometheus at {self.url} returned unusable data for query: {query}", "unusable"
            ) from None

    def samples(self, query: str, at: float | None = None) -> list[tuple[dict[str, str], float]]:
        """One instant query -> (labels, value) per series, values as Prometheus gave them (NaN and Inf kept for
        the caller to judge); MetricsError when the answer is not an instant vector."""
        params = {"timeout": f"{self.settings.timeout_seconds:g}s"}
        if at is not None:
            params["time"] = f"{at:.3f}"
        result = self._call(query, lambda: self._client.custom_query(query, params=params))
        try:
            return [({str(k): str(v) for k, v in item["metric"].items()}, float(item["value"][1])) for item in result]
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            raise MetricsError(
                f"Prometheus at {self.url} returned unusable data for query: {query}", "unusable"
            ) from None

    def query_range(self, query: str, start: datetime, end: datetime, step: float) -> pd.DataFrame:
        """One range query -> frame indexed by UTC time, a column per nodename."""
        if end < start:
            raise MetricsError(f"history range ends before it starts ({start} > {end})")
        if (end - start).total_seconds() / step > MAX_POINTS:
            raise MetricsError(
                f"history range {start}..{end} at step {step:g}s exceeds {MAX_POINTS} points; use a larger step"
            )
        params = {"timeout": f"{self.settings.timeout_seconds:g}s"}
        result = self._call(
            query,
            lambda: self._client.custom_query_range(
                query, start_time=start, end_time=end, step=f"{step:g}", params=params
            ),
        )
        try:
            return matrix_frame(result)
        except ResultError as exc:
            raise MetricsError(f"Prometheus at {self.url} returned unusable data ({exc}) for query: {query}") from None

    # -- MetricsSource ----------------------------------------------------------------

    def snapshot(self) -> NodeSnapshot:
        """Every node's six raw features now; missing or old nodes are in ``stale``."""
        now = self.clock()
        per_feature = {f: self.query(self.queries[f], at=now) for f in FEATURES}
        last_seen = self.query(self.freshness_query, at=now)
        expected = list(self.expected_nodes()) if self.expected_nodes else []
        return build_snapshot(
            features_frame(per_feature), last_seen, now, self.settings.max_sample_age_seconds, expected
        )

    def history(self, start: datetime | float, end: datetime | float, step: float | str = 15.0) -> pd.DataFrame:
        """Features over [start, end] every ``step`` (seconds or a duration like "15s").

        Returns a frame indexed by UTC time with MultiIndex columns (node, feature); gaps
        are NaN. Uses the same feature queries as ``snapshot`` (one range query each).
        """
        start_dt, end_dt = (_as_datetime(t) for t in (start, end))
        step_s = duration_seconds(step) if isinstance(step, str) else float(step)
        if step_s <= 0:
            raise MetricsError(f"history step must be positive, got {step!r}")
        return history_frame({f: self.query_range(self.queries[f], start_dt, end_dt, step_s) for f in FEATURES})

    def node_capacity(self) -> pd.DataFrame:
        """CPU count and memory bytes per node (columns ``cpu_cores``, ``mem_bytes``)."""
        now = self.clock()
        sel = self.settings.node_selector
        frame = pd.DataFrame(
            {
                "cpu_cores": self.query(promql.cpu_cores(sel), at=now),
                "mem_bytes": self.query(promql.mem_total(sel), at=now),
            }
        )
        frame.index.name = "node"
        return frame.sort_index()


def _as_datetime(t: datetime | float) -> datetime:
    if isinstance(t, datetime):
        return t if t.tzinfo else t.replace(tzinfo=UTC)
    return datetime.fromtimestamp(float(t), tz=UTC)
