"""Real Prometheus and real exporters on 127.0.0.1, for any test that needs metrics.

Plain functions (usable from any fixture, any scope) and ready-made fixtures:

* ``start_prometheus(tmp_path, scrape_targets, extra_config, rule_files, storage_path,
  extra_args, scrape_interval="1s") -> PrometheusProc``: a real Debian ``prometheus`` on a
  free loopback port with a temp data dir; returns once ``/-/ready`` answers (bounded).
  ``scrape_targets`` ("host:port") become one static job ``node``; ``extra_config`` is
  merged into the generated config (its ``scrape_configs`` are appended). ``.url``,
  ``.query(expr)``, ``.stop()``.
* ``start_node_exporter_real() -> ExporterProc``: Debian ``prometheus-node-exporter``
  limited to the cpu, meminfo, netdev, diskstats and uname collectors.
* ``start_drs_exporter(node_name) -> ExporterProc``: our exporter as a subprocess
  (``python -m drs_prom export``, i.e. ``drs-prom export``). ExporterProc has ``.target`` ("127.0.0.1:port"),
  ``.url`` (its /metrics), ``.node_name``, ``.pid``, ``.stop()``.
* ``wait_until(fn, timeout, what)``: poll until ``fn()`` is truthy, else fail with ``what``.
* Fixtures: ``node_exporter_real``, ``drs_exporter`` (session); ``prometheus_both``
  (session: 1 s scrapes of both exporters, drs rules loaded, both targets up);
  ``prometheus_factory`` (function: call it like ``start_prometheus`` minus tmp_path,
  everything it started is stopped at teardown).

A missing binary FAILS the test with one line (never a skip): CI must have them.
``start_prometheus`` and ``PrometheusProc`` live in drs_prom.testbed.prom_server (the testbed
command starts the same Prometheus); they are re-exported here.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from drs_prom.signals.pod_usage import Samples
from drs_prom.testbed.process import free_port
from drs_prom.testbed.prom_server import (
    RULES,
    STARTUP_TIMEOUT,
    PrometheusProc,
    ServerError,
    find_binary,
    start_prometheus,
    wait_until,
)
from drs_prom.testbed.prom_server import http_ok as _http_ok
from drs_prom.testbed.prom_server import log_tail as _log_tail

REPO = Path(__file__).resolve().parents[2]

__all__ = [
    "REPO",
    "RULES",
    "ExporterProc",
    "PrometheusProc",
    "ServerError",
    "free_port",
    "start_drs_exporter",
    "start_node_exporter_real",
    "start_prometheus",
    "wait_until",
]


def _stop(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)


@dataclass
class _Proc:
    proc: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        _stop(self.proc)

    def alive(self) -> bool:
        return self.proc.poll() is None


@dataclass
class ExporterProc(_Proc):
    target: str = ""
    node_name: str = ""

    @property
    def url(self) -> str:
        return f"http://{self.target}/metrics"


def _alive_or_raise(p: _Proc) -> bool:
    if not p.alive():
        raise ServerError(f"process exited with {p.proc.returncode}; log: {_log_tail(p.log_path)}")
    return True


def _start_exporter(
    cmd: list[str], port: int, node_name: str, log_path: Path, timeout: float, env: dict[str, str] | None = None
) -> ExporterProc:
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    exp = ExporterProc(proc=proc, log_path=log_path, target=f"127.0.0.1:{port}", node_name=node_name)
    try:
        wait_until(lambda: _alive_or_raise(exp) and _http_ok(exp.url), timeout, f"exporter at {exp.url}")
    except ServerError as exc:
        exp.stop()
        raise ServerError(f"{exc}; log: {_log_tail(log_path)}") from None
    return exp


def start_node_exporter_real(log_dir: Path, timeout: float = STARTUP_TIMEOUT) -> ExporterProc:
    """Debian's prometheus-node-exporter with only the collectors drs-prom reads."""
    binary = find_binary("prometheus-node-exporter", "node_exporter")
    port = free_port()
    cmd = [
        binary,
        f"--web.listen-address=127.0.0.1:{port}",
        "--collector.disable-defaults",
        "--collector.cpu",
        "--collector.meminfo",
        "--collector.netdev",
        "--collector.diskstats",
        "--collector.uname",
        "--log.level=warn",
    ]
    return _start_exporter(cmd, port, socket.gethostname(), Path(log_dir) / f"node-exporter-{port}.log", timeout)


def start_drs_exporter(
    log_dir: Path, node_name: str = "drs-test-node", extra_args: Sequence[str] = (), timeout: float = STARTUP_TIMEOUT
) -> ExporterProc:
    """Our exporter in a subprocess, exactly as ``drs-prom export`` runs it."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "drs_prom",
        "export",
        "--listen",
        f"127.0.0.1:{port}",
        "--node-name",
        node_name,
        *extra_args,
    ]
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return _start_exporter(cmd, port, node_name, Path(log_dir) / f"drs-exporter-{port}.log", timeout, env)


def _or_fail(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except ServerError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def node_exporter_real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExporterProc]:
    exp = _or_fail(lambda: start_node_exporter_real(tmp_path_factory.mktemp("node-exporter")))
    try:
        yield exp
    finally:
        exp.stop()


@pytest.fixture(scope="session")
def drs_exporter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExporterProc]:
    exp = _or_fail(lambda: start_drs_exporter(tmp_path_factory.mktemp("drs-exporter")))
    try:
        yield exp
    finally:
        exp.stop()


@pytest.fixture(scope="session")
def prometheus_both(
    tmp_path_factory: pytest.TempPathFactory, node_exporter_real: ExporterProc, drs_exporter: ExporterProc
) -> Iterator[PrometheusProc]:
    """Prometheus scraping both exporters every 1 s with the drs rules; both targets up."""
    prom = _or_fail(
        lambda: start_prometheus(
            tmp_path_factory.mktemp("prometheus-both"),
            scrape_targets=[node_exporter_real.target, drs_exporter.target],
            rule_files=[RULES],
        )
    )
    try:
        targets = {node_exporter_real.target, drs_exporter.target}
        _or_fail(
            lambda: wait_until(
                lambda: all(prom.targets_up().get(t) == 1.0 for t in targets), 30, "both exporters to be up"
            )
        )
        yield prom
    finally:
        prom.stop()


@pytest.fixture
def prometheus_factory(tmp_path: Path) -> Iterator[Callable[..., PrometheusProc]]:
    """``prometheus_factory(scrape_targets=[...], ...)``; all started are stopped after the test."""
    started: list[PrometheusProc] = []

    def make(*args: Any, **kwargs: Any) -> PrometheusProc:
        prom = _or_fail(lambda: start_prometheus(tmp_path / f"p{len(started)}", *args, **kwargs))
        started.append(prom)
        return prom

    try:
        yield make
    finally:
        for prom in started:
            prom.stop()


class Counted:
    """A Prometheus client (``Samples``) that counts the queries it passes on and their lengths: how many reads the
    usage history made (tests/prom/test_pod_usage.py, benchmarks/usage_history_cost.py)."""

    def __init__(self, source: Samples) -> None:
        self.source, self.queries, self.lengths = source, 0, [0]

    def samples(self, query: str, at: float | None = None) -> list[tuple[dict[str, str], float]]:
        self.queries += 1
        self.lengths.append(len(query))
        return self.source.samples(query, at)
