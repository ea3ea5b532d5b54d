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
"""

from __future__ import annotations

import copy
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "rules" / "drs.rules.yml"
STARTUP_TIMEOUT = 30.0


class ServerError(RuntimeError):
    """A test server did not start (binary missing, crashed, never ready)."""


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_binary(name: str, *fallbacks: str) -> str:
    for candidate in (name, *fallbacks):
        path = shutil.which(candidate)
        if path:
            return path
    raise ServerError(f"{name} not found on PATH (install it: make test-deps)")


def wait_until(fn: Callable[[], Any], timeout: float = 30.0, what: str = "condition", interval: float = 0.2) -> Any:
    """Poll ``fn`` until it returns something truthy; ServerError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = fn()
            if value:
                return value
        except Exception as exc:  # the thing polled may not be up yet
            last_exc = exc
        time.sleep(interval)
    raise ServerError(
        f"timed out after {timeout:g}s waiting for {what}" + (f" (last error: {last_exc})" if last_exc else "")
    )


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _stop(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)


def _log_tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


@dataclass
class _Proc:
    proc: subprocess.Popen
    log_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        _stop(self.proc)

    def alive(self) -> bool:
        return self.proc.poll() is None


@dataclass
class PrometheusProc(_Proc):
    url: str = ""
    config_path: Path = Path()
    data_dir: Path = Path()
    config: dict[str, Any] = field(default_factory=dict)

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """Instant query through the HTTP API; raises on a non-success answer."""
        import json
        import urllib.parse

        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{urllib.parse.urlencode(params)}", timeout=10) as resp:
            body = json.load(resp)
        if body.get("status") != "success":
            raise ServerError(f"query failed: {expr}: {body}")
        return body["data"]["result"]

    def targets_up(self) -> dict[str, float]:
        """instance -> value of ``up``."""
        return {r["metric"]["instance"]: float(r["value"][1]) for r in self.query("up")}


@dataclass
class ExporterProc(_Proc):
    target: str = ""
    node_name: str = ""

    @property
    def url(self) -> str:
        return f"http://{self.target}/metrics"


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if key == "scrape_configs":
            out.setdefault("scrape_configs", []).extend(copy.deepcopy(value))
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def start_prometheus(
    tmp_path: Path,
    scrape_targets: Sequence[str] | None = None,
    extra_config: dict[str, Any] | None = None,
    rule_files: Sequence[str | Path] = (),
    storage_path: Path | None = None,
    extra_args: Sequence[str] = (),
    scrape_interval: str = "1s",
    timeout: float = STARTUP_TIMEOUT,
) -> PrometheusProc:
    """Start a real Prometheus on a free 127.0.0.1 port; returns once it is ready."""
    binary = find_binary("prometheus")
    tmp_path = Path(tmp_path)
    tmp_path.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config: dict[str, Any] = {
        "global": {
            "scrape_interval": scrape_interval,
            "scrape_timeout": scrape_interval,
            "evaluation_interval": scrape_interval,
        },
        "scrape_configs": [],
    }
    if scrape_targets:
        config["scrape_configs"].append({"job_name": "node", "static_configs": [{"targets": list(scrape_targets)}]})
    if rule_files:
        config["rule_files"] = [str(Path(p).resolve()) for p in rule_files]
    config = _merge(config, extra_config or {})
    config_path = tmp_path / f"prometheus-{port}.yml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    data_dir = Path(storage_path) if storage_path else tmp_path / f"prometheus-data-{port}"
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = tmp_path / f"prometheus-{port}.log"
    cmd = [
        binary,
        f"--config.file={config_path}",
        f"--storage.tsdb.path={data_dir}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
        *extra_args,
    ]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    prom = PrometheusProc(
        proc=proc,
        log_path=log_path,
        url=f"http://127.0.0.1:{port}",
        config_path=config_path,
        data_dir=data_dir,
        config=config,
    )
    try:
        wait_until(
            lambda: _alive_or_raise(prom) and _http_ok(f"{prom.url}/-/ready"),
            timeout,
            f"prometheus at {prom.url} to be ready",
        )
    except ServerError as exc:
        prom.stop()
        raise ServerError(f"{exc}; log: {_log_tail(log_path)}") from None
    return prom


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
