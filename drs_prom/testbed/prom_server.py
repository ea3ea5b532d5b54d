"""A real Prometheus (the Debian ``prometheus`` binary) on 127.0.0.1 with a temp data dir.

Used by the testbed (scraping the simulated nodes with the project's recording rules) and by
the test fixtures. ``start_prometheus`` returns once ``/-/ready`` answers (bounded); the
process is a ``ManagedProcess`` (own process group, stopped at exit and on Ctrl-C), and
``restart()`` brings it back on the same port and data dir after a fault.
"""

from __future__ import annotations

import copy
import json
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from drs_prom.errors import DrsError
from drs_prom.testbed.process import LOOPBACK, ManagedProcess, free_port

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "rules" / "drs.rules.yml"
STARTUP_TIMEOUT = 30.0


class ServerError(DrsError, RuntimeError):
    """A server did not start (binary missing, crashed, never ready) or a query failed."""


def find_binary(name: str, *fallbacks: str) -> str:
    for candidate in (name, *fallbacks):
        path = shutil.which(candidate)
        if path:
            return path
    raise ServerError(f"{name} not found on PATH (install it: make test-deps)")


RANGE_QUERY_TIMEOUT = 180.0
"""Seconds a range query over a run may take (a 40-node, 10-minute run on a host at load 30 took over 30)."""


def wait_until(fn: Callable[[], Any], timeout: float = 30.0, what: str = "condition", interval: float = 0.2) -> Any:
    """Poll ``fn`` until it returns something truthy; ServerError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = fn()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - the thing polled may not be up yet
            last_exc = exc
        time.sleep(interval)
    raise ServerError(
        f"timed out after {timeout:g}s waiting for {what}" + (f" (last error: {last_exc})" if last_exc else "")
    )


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def log_tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


def merge_config(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``extra`` over ``base``; ``scrape_configs`` are appended, nested mappings merged."""
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if key == "scrape_configs":
            out.setdefault("scrape_configs", []).extend(copy.deepcopy(value))
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_config(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@dataclass
class PrometheusProc:
    managed: ManagedProcess
    argv: list[str]
    url: str = ""
    config_path: Path = Path()
    data_dir: Path = Path()
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def proc(self) -> Any:
        return self.managed.popen

    @property
    def log_path(self) -> Path:
        return self.managed.log_path

    @property
    def pid(self) -> int:
        return self.managed.pid

    def alive(self) -> bool:
        return self.managed.alive()

    def stop(self) -> None:
        self.managed.stop()

    def kill(self) -> None:
        """SIGKILL (a fault: no clean TSDB shutdown; the WAL replays on restart)."""
        self.managed.kill()

    def restart(self, timeout: float = STARTUP_TIMEOUT) -> None:
        """Start the same binary again on the same port and data dir (after stop/kill)."""
        if self.managed.alive():
            self.managed.stop()
        self.managed = ManagedProcess("prometheus", self.argv, self.managed.log_path)
        _wait_ready(self, timeout)

    def _get(self, path: str, params: dict[str, str], timeout: float = 30.0) -> Any:
        with urllib.request.urlopen(f"{self.url}{path}?{urllib.parse.urlencode(params)}", timeout=timeout) as resp:
            body = json.load(resp)
        if body.get("status") != "success":
            raise ServerError(f"query failed: {params}: {body}")
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """Instant query through the HTTP API; raises on a non-success answer."""
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return list(self._get("/api/v1/query", params)["result"])

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """Range query (``values`` per series); raises on a non-success answer. Allowed more time than an instant
        query: the judge asks for every node over a whole run, which a Prometheus short of CPU answers slowly."""
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        return list(self._get("/api/v1/query_range", params, timeout=RANGE_QUERY_TIMEOUT)["result"])

    def targets_up(self) -> dict[str, float]:
        """instance -> value of ``up``."""
        return {r["metric"]["instance"]: float(r["value"][1]) for r in self.query("up")}


def _wait_ready(prom: PrometheusProc, timeout: float) -> None:
    def ready() -> bool:
        if not prom.alive():
            raise ServerError(f"prometheus exited with {prom.proc.returncode}; log: {log_tail(prom.log_path)}")
        return http_ok(f"{prom.url}/-/ready")

    try:
        wait_until(ready, timeout, f"prometheus at {prom.url} to be ready")
    except ServerError as exc:
        prom.stop()
        raise ServerError(f"{exc}; log: {log_tail(prom.log_path)}") from None


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
    """Start a real Prometheus on a free 127.0.0.1 port; returns once it is ready.

    ``scrape_targets`` ("host:port") become one static job ``node``; ``extra_config`` is merged
    into the generated config (its ``scrape_configs`` are appended)."""
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
    config = merge_config(config, extra_config or {})
    config_path = tmp_path / f"prometheus-{port}.yml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    data_dir = Path(storage_path) if storage_path else tmp_path / f"prometheus-data-{port}"
    data_dir.mkdir(parents=True, exist_ok=True)
    argv = [
        binary,
        f"--config.file={config_path}",
        f"--storage.tsdb.path={data_dir}",
        f"--web.listen-address={LOOPBACK}:{port}",
        "--log.level=warn",
        *extra_args,
    ]
    managed = ManagedProcess("prometheus", argv, tmp_path / f"prometheus-{port}.log")
    prom = PrometheusProc(
        managed=managed,
        argv=argv,
        url=f"http://{LOOPBACK}:{port}",
        config_path=config_path,
        data_dir=data_dir,
        config=config,
    )
    _wait_ready(prom, timeout)
    return prom
