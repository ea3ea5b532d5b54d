"""Settings, grouped by concern, validated once at load.

Every field has a default that works on the embedded simulator, so an empty file (or
no file) is a valid configuration. Units are in the field names or descriptions.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

from drs_prom.errors import ConfigError


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_DURATION_UNITS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, "y": 31536000.0}


def duration_seconds(text: str) -> float:
    """Prometheus duration (``30s``, ``1m30s``) in seconds."""
    return sum(float(n) * _DURATION_UNITS[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)", text))


class PrometheusSettings(_Section):
    """Where the PromQL API is and how to reach it.

    Any store that serves Prometheus' HTTP query API works: Prometheus, Thanos Query,
    Grafana Mimir / Cortex (path_prefix ``/prometheus``, tenant header ``X-Scope-OrgID``),
    VictoriaMetrics single-node (its ``-http.pathPrefix``) or cluster
    (``/select/<tenant>/prometheus``), usually behind an auth proxy: hence bearer-token and
    basic auth, a private CA and extra headers.
    """

    url: str = Field("http://127.0.0.1:9090", description="Base URL of the Prometheus HTTP API.")
    path_prefix: str = Field(
        "",
        description="Path before /api/v1 on that host, e.g. /prometheus (Mimir) or /select/0/prometheus (VM cluster).",
    )
    bearer_token: SecretStr = Field(SecretStr(""), description="Sent as 'Authorization: Bearer ...'.")
    bearer_token_file: str = Field(
        "", description="File holding the bearer token, re-read on every request (rotated service-account tokens)."
    )
    basic_auth_username: str = Field("", description="HTTP basic auth user.")
    basic_auth_password: SecretStr = Field(SecretStr(""), description="HTTP basic auth password.")
    basic_auth_password_file: str = Field("", description="File holding the basic auth password (a mounted Secret).")
    ca_file: str = Field("", description="PEM CA bundle that signed the server's certificate (private CA).")
    insecure_skip_verify: bool = Field(False, description="Do not verify the server's certificate (testing only).")
    headers: dict[str, str] = Field(
        default_factory=dict, description="Extra request headers, e.g. {X-Scope-OrgID: team-a} for Mimir/Cortex."
    )
    timeout_seconds: float = Field(
        5.0, gt=0, description="Per-request timeout; a slow Prometheus must not stall binding."
    )
    window: str = Field("30s", description="Range for rate() windows; at least 4x the scrape interval.")
    max_sample_age_seconds: float = Field(
        60.0, gt=0, description="A node whose newest sample is older than this is stale."
    )
    node_selector: str = Field("", description='Extra PromQL label matchers for node series, e.g. job="node".')
    device_exclude: str = Field(
        "^(lo|veth.*|docker.*|cni.*|flannel.*|cali.*|cilium.*|lxc.*|virbr.*|br-.*|tunl.*|vxlan.*|genev.*|ifb.*|kube-ipvs.*)$",
        description="Network devices left out of node traffic, like node_exporter's device-exclude flag.",
    )
    disk_device_exclude: str = Field(
        r"^(z?ram|loop|fd|sr|dm-|md|(h|s|v|xv)d[a-z]|nvme\d+n\d+p|mmcblk\d+p)\d+$",
        description="Block devices left out of disk IO: virtual devices and partitions (their whole disk is counted).",
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value.rstrip("/")

    @field_validator("path_prefix")
    @classmethod
    def _path_prefix(cls, value: str) -> str:
        value = value.rstrip("/")
        if value and (not value.startswith("/") or "?" in value or "#" in value):
            raise ValueError("must be a URL path starting with '/', e.g. /prometheus")
        if value.endswith("/api/v1"):
            raise ValueError("must stop before /api/v1 (the client appends it)")
        return value

    @field_validator("headers", mode="before")
    @classmethod
    def _headers(cls, value: Any) -> Any:
        """From an env variable the headers come as text: ``Name=value,Other=value``."""
        if isinstance(value, str):
            pairs = [p for p in value.split(",") if p.strip()]
            if any("=" not in p for p in pairs):
                raise ValueError("as text, must be Name=value pairs separated by commas")
            return {k.strip(): v.strip() for k, v in (p.split("=", 1) for p in pairs)}
        return value

    @field_validator("bearer_token_file", "basic_auth_password_file", "ca_file")
    @classmethod
    def _readable_file(cls, value: str) -> str:
        if value and not os.access(value, os.R_OK):
            raise ValueError(f"file {value} does not exist or is not readable")
        return value

    @model_validator(mode="after")
    def _one_auth(self) -> PrometheusSettings:
        bearer = bool(self.bearer_token.get_secret_value() or self.bearer_token_file)
        basic_pw = bool(self.basic_auth_password.get_secret_value() or self.basic_auth_password_file)
        if self.bearer_token.get_secret_value() and self.bearer_token_file:
            raise ValueError("set bearer_token or bearer_token_file, not both")
        if self.basic_auth_password.get_secret_value() and self.basic_auth_password_file:
            raise ValueError("set basic_auth_password or basic_auth_password_file, not both")
        if basic_pw and not self.basic_auth_username:
            raise ValueError("basic_auth_password needs basic_auth_username")
        if bearer and self.basic_auth_username:
            raise ValueError("set bearer-token auth or basic auth, not both")
        if self.ca_file and self.insecure_skip_verify:
            raise ValueError("ca_file and insecure_skip_verify contradict each other; set one")
        if (self.ca_file or self.insecure_skip_verify) and not self.url.startswith("https://"):
            raise ValueError("ca_file / insecure_skip_verify need an https:// url")
        return self

    @property
    def api_url(self) -> str:
        """The base the client appends /api/v1/... to: url plus path_prefix."""
        return self.url + self.path_prefix

    @field_validator("window")
    @classmethod
    def _duration(cls, value: str) -> str:
        if not re.fullmatch(r"(\d+(ms|s|m|h))+", value):
            raise ValueError("must be a Prometheus duration such as 30s or 1m")
        return value

    @property
    def window_seconds(self) -> float:
        """The rate() window in seconds: how long new load takes to show fully in the metrics."""
        return duration_seconds(self.window)


class Normalisation(_Section):
    """Scales that map raw features onto 0..1 (DRS mapped onto 0..100 and capped).

    cpu and mem are already fractions of each node's own capacity (Prometheus gives cores
    and MemTotal), so their scales only say how much of a node counts as full. Network and
    disk capacity are not in node_exporter's series, so their scales are per-cluster
    settings: the defaults are a 1 GbE link and an SSD-class disk; set them to your nodes'.
    """

    cpu_full: float = Field(1.0, gt=0, le=1, description="CPU utilisation that reads as 1.0 (DRS: 0.25, i.e. x4).")
    mem_full: float = Field(1.0, gt=0, le=1, description="Memory utilisation that reads as 1.0.")
    net_rx_full_bytes: float = Field(125e6, gt=0, description="Receive rate that reads as 1.0 (1 GbE; DRS: 40 KB/s).")
    net_tx_full_bytes: float = Field(125e6, gt=0, description="Transmit rate that reads as 1.0.")
    disk_read_full_bytes: float = Field(200e6, gt=0, description="Disk read rate that reads as 1.0 (DRS: 10240 KB/s).")
    disk_write_full_bytes: float = Field(200e6, gt=0, description="Disk write rate that reads as 1.0.")
    clip: bool = Field(True, description="Cap every feature at 1.0 as DRS did.")

    @classmethod
    def drs_paper(cls) -> Normalisation:
        """The scales of the DRS prototype, for reproducing its numbers."""
        return cls(
            cpu_full=0.25,
            net_rx_full_bytes=40 * 1024,
            net_tx_full_bytes=40 * 1024,
            disk_read_full_bytes=10240 * 1024,
            disk_write_full_bytes=10240 * 1024,
        )


class SchedulerSettings(_Section):
    scheduler_name: str = Field("drs-scheduler", description="Pods with this spec.schedulerName are ours.")
    namespace: str = Field("", description="Only watch this namespace; empty watches all.")
    model_path: str = Field("", description="Model (.keras + .json) to load; empty uses the shipped default.")
    fallback: str = Field("least-loaded", description="Heuristic used when metrics or the model are unavailable.")
    state_refresh_seconds: float = Field(5.0, gt=0, description="How often node state is re-read from Prometheus.")
    journal_path: str = Field("drs-journal.sqlite", description="SQLite decision journal (WAL).")
    metrics_listen: str = Field("0.0.0.0:10259", description="host:port for /metrics, /healthz, /readyz.")
    leader_election: bool = Field(True, description="Hold a Lease so that only one replica binds.")
    lease_name: str = Field("drs-scheduler", description="Lease object name.")
    lease_namespace: str = Field("kube-system", description="Lease namespace.")
    lease_duration_seconds: float = Field(15.0, gt=0)
    renew_deadline_seconds: float = Field(10.0, gt=0)
    retry_period_seconds: float = Field(2.0, gt=0)
    backoff_initial_seconds: float = Field(1.0, gt=0, description="First retry delay for a pod that fits nowhere.")
    backoff_max_seconds: float = Field(60.0, gt=0)
    online_learning: bool = Field(False, description="Record transitions and learn while scheduling.")
    settle_seconds: float = Field(5.0, ge=0, description="Delay before a decision's reward is measured (DRS: 5 s).")


class RetrainSettings(_Section):
    enabled: bool = Field(False, description="Run the retraining job inside the scheduler process.")
    interval_seconds: float = Field(3600.0, gt=0, description="Interval trigger; ignored when cron is set.")
    cron: str = Field("", description="Crontab expression (5 fields) instead of an interval.")
    model_store: str = Field("models/store", description="Directory of versioned models and the 'current' pointer.")
    keep_versions: int = Field(5, ge=1, description="Versions kept for rollback.")
    gate_margin: float = Field(
        0.02, ge=0, description="A candidate may be at most this much worse (relative) and still be promoted."
    )
    epochs: int = Field(20, ge=1)
    sim_replay_episodes: int = Field(0, ge=0, description="Simulator episodes mixed into each retrain.")
    misfire_grace_seconds: float = Field(
        300.0, gt=0, description="A run that could not start on time may still start this late; later ones are dropped."
    )
    lookback_seconds: float = Field(
        7 * 86400.0,
        gt=0,
        description="How far back the first run reads the journal (later runs start at the saved cursor).",
    )
    max_decisions: int = Field(50000, ge=1, description="Decisions read per run; the rest wait for the next run.")
    min_transitions: int = Field(
        64, ge=1, description="Fewer usable transitions than this: no training, the cursor stays."
    )
    holdout_fraction: float = Field(
        0.2, gt=0, lt=1, description="Newest share of the transitions kept out of training to gate the candidate."
    )
    query_step_seconds: float = Field(5.0, gt=0, description="query_range resolution; at most the scrape interval.")
    batch_size: int = Field(64, ge=1)
    sim_benchmark_pods: int = Field(
        200, ge=0, description="Pods in the seeded simulator run of the gate; 0 gates on held-out data only."
    )
    sim_scenario: str = Field(
        "drs-paper", description="Scenario of the gate's benchmark run and of the replay episodes."
    )
    seed: int = Field(0, description="Seed of training and of the gate's simulator run.")


class RewardSettings(_Section):
    """How a placement is rewarded (drs_prom.reward); DRS used only the imbalance term."""

    imbalance_weight: float = Field(
        1.0, ge=0, description="Weight of DRS's term: the sum over features of the std across nodes."
    )
    imbalance_mode: str = Field(
        "delta",
        pattern="^(delta|absolute)$",
        description="delta: imbalance before minus after (same per-step optimum, lower variance); absolute: -(after) as DRS.",
    )
    utilisation_weight: float = Field(
        0.1, ge=0, description="Weight of mean cluster utilisation after the action (work done, not delayed)."
    )
    slowdown_weight: float = Field(
        0.5,
        ge=0,
        description="Weight of the running pods' mean slowdown above 1 (contention stretches completion time).",
    )


class Settings(_Section):
    prometheus: PrometheusSettings = PrometheusSettings()
    normalisation: Normalisation = Normalisation()
    scheduler: SchedulerSettings = SchedulerSettings()
    retrain: RetrainSettings = RetrainSettings()
    reward: RewardSettings = RewardSettings()


ENV_PREFIX = "DRS_PROM_"


def load_settings(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> Settings:
    """Read YAML (if given), apply ``DRS_PROM_PROMETHEUS_URL``-style env and explicit overrides.

    Overrides are dotted keys (``{"prometheus.url": ...}``). Raises ConfigError with one line.
    """
    data: dict[str, Any] = {}
    if path:
        try:
            loaded = yaml.safe_load(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"config file not found: {path}") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {str(exc).splitlines()[0]}") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"config file {path} must be a mapping at the top level")
        data = loaded or {}
    flat: dict[str, Any] = {}
    for key, value in os.environ.items():
        if key.startswith(ENV_PREFIX):
            section, _, field = key[len(ENV_PREFIX) :].lower().partition("_")
            if field and section in Settings.model_fields:
                flat[f"{section}.{field}"] = value
    flat.update(overrides or {})
    for dotted, value in flat.items():
        if value is None:
            continue
        section, _, field = dotted.partition(".")
        data.setdefault(section, {})
        if isinstance(data[section], dict):
            data[section][field] = value
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"] if p != "__root__")
        raise ConfigError(f"invalid config: {where}: {err['msg']}" + (f" (in {path})" if path else "")) from None
