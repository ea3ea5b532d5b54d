"""Prometheus answers a real Prometheus cannot be made to give on demand, from a small fake
PromQL HTTP server on 127.0.0.1: NaN and +Inf samples for a node (a real one only gives
those for particular data, and we need them in every feature query at once), a body that
is not JSON (a proxy's HTML error page), JSON of the wrong shape, an answer slower than
the timeout, a partial answer missing one node's series, duplicate series for one node,
an HTTP 500, and a huge answer. The real-Prometheus path (and killing it) is tested in
test_prometheus_fallback.py.

Contract: every decision is still made (the documented fallback: request-based
kube-default without usable metrics, counted in drs_fallback_decisions_total{reason}),
each refresh failure is counted by kind, and a good answer afterwards brings the
policy back."""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from drs_prom.config import load_settings
from drs_prom.registry import make_policy
from drs_prom.scheduler.decision.decide import Decider
from drs_prom.scheduler.metrics import SchedulerMetrics
from drs_prom.signals.prometheus import PrometheusSource
from drs_prom.types import NodeInfo, PodRequest
from tests.specs import SPEC

NODES = ("pa-1", "pa-2", "pa-3")


class FakePrometheus:
    """Answers /api/v1/query according to ``mode``; ``good`` is a plausible idle cluster."""

    def __init__(self) -> None:
        self.mode = "good"
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
                code, body = fake.answer(q.get("query", [""])[0], float(q.get("time", [time.time()])[0]))
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass

            do_POST = do_GET

            def log_message(self, *a: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._t = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._t.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def answer(self, query: str, at: float) -> tuple[int, bytes]:
        fresh = "timestamp(" in query
        nodes = list(NODES)

        def value(n: str) -> float:
            return at - 1 if fresh else 0.1 * (1 + NODES.index(n)) if n in NODES else 0.5

        mode = self.mode
        if mode == "slow":
            time.sleep(2.0)
        if mode == "garbage":
            return 200, b"<html><body>502 Bad Gateway</body></html>"
        if mode == "http_500":
            return 500, json.dumps({"status": "error", "errorType": "internal", "error": "boom"}).encode()
        if mode == "wrong_shape":
            return 200, json.dumps({"status": "success", "data": {"resultType": "vector", "result": {"a": 1}}}).encode()
        result = [{"metric": {"nodename": n}, "value": [at, str(value(n))]} for n in nodes]
        if mode in ("nan", "inf") and not fresh:
            result[1]["value"][1] = "NaN" if mode == "nan" else "+Inf"
        if mode == "partial" and not fresh:
            result = result[:2]  # pa-3 has no series: stale, not idle
        if mode == "duplicate":
            result.append(dict(result[0]))
        if mode == "huge":
            result += [
                {"metric": {"nodename": f"x-{i}"}, "value": [at, str(at - 1 if fresh else 0.5)]} for i in range(20000)
            ]
        return 200, json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()


@pytest.fixture
def fake_prom():
    fp = FakePrometheus()
    try:
        yield fp
    finally:
        fp.stop()


def _nodes() -> list[NodeInfo]:
    return [NodeInfo(n, allocatable_cpu_m=4000, allocatable_mem_bytes=8 * 2**30) for n in NODES]


# mode -> (fallback reason, refresh failure kind); None: the policy decides
EXPECT = {
    "good": (None, None),
    "nan": ("prometheus_unreachable", "non_finite"),
    "inf": ("prometheus_unreachable", "non_finite"),
    "garbage": ("prometheus_unreachable", "malformed"),
    "wrong_shape": ("prometheus_unreachable", "unusable"),
    "duplicate": ("prometheus_unreachable", "unusable"),
    "http_500": ("prometheus_unreachable", "http_error"),
    "slow": ("prometheus_unreachable", "timeout"),
    "partial": ("metrics_stale", None),
}


def test_a_huge_answer_is_used_for_the_nodes_we_know(fake_prom):
    """20000 extra series per query (about 1 MB each): parsed within a generous timeout, the
    unknown nodes ignored, the policy decides on the three real ones."""
    fake_prom.mode = "huge"
    settings = load_settings(None, {"prometheus.url": fake_prom.url, "prometheus.timeout_seconds": "30"})
    source = PrometheusSource(settings.prometheus, expected_nodes=lambda: NODES)
    decider = Decider.from_settings(
        settings, SchedulerMetrics(), source=source, policy=make_policy("least-loaded", SPEC)
    )
    try:
        decider.refresh()
        choice = decider.decide(
            PodRequest("p", cpu_m=100), (0.1, 2**20, 0, 0, 0, 0), _nodes(), np.ones(len(NODES), dtype=bool)
        )
        assert choice.reason is None and NODES[choice.index] == "pa-1"
    finally:
        source.close()


def test_every_bad_answer_falls_back_and_is_counted(fake_prom):
    settings = load_settings(None, {"prometheus.url": fake_prom.url, "prometheus.timeout_seconds": "0.5"})
    metrics = SchedulerMetrics()
    source = PrometheusSource(settings.prometheus, expected_nodes=lambda: NODES)
    decider = Decider.from_settings(settings, metrics, source=source, policy=make_policy("least-loaded", SPEC))
    sample = metrics.registry.get_sample_value
    pod = PodRequest("p", cpu_m=100, mem_bytes=2**20)
    feasible = np.ones(len(NODES), dtype=bool)
    try:
        for mode, (reason, kind) in [*EXPECT.items(), ("good", (None, None))]:
            fake_prom.mode = mode
            before_fb = sample("drs_fallback_decisions_total", {"reason": reason}) or 0.0 if reason else 0.0
            before_kind = sample("drs_prometheus_errors_by_kind_total", {"kind": kind}) or 0.0 if kind else 0.0
            decider.refresh()
            choice = decider.decide(pod, (0.1, 2**20, 0, 0, 0, 0), _nodes(), feasible)
            assert 0 <= choice.index < len(NODES), mode  # a node is always chosen
            assert choice.reason == reason, mode
            if reason is None:
                assert choice.policy.name == "least-loaded" and NODES[choice.index] == "pa-1", mode  # idlest node
            else:
                assert sample("drs_fallback_decisions_total", {"reason": reason}) == before_fb + 1, mode
            if kind is not None:
                assert sample("drs_prometheus_errors_by_kind_total", {"kind": kind}) == before_kind + 1, mode
    finally:
        source.close()
