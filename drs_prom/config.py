"""Settings, grouped by concern, validated once at load.

Over 400 lines because every settings section lives here, validated at load, each field with its unit and reason.

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

from drs_prom.devices import DISK_DEVICE_EXCLUDE, NET_DEVICE_EXCLUDE
from drs_prom.errors import ConfigError


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_DURATION_UNITS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, "y": 31536000.0}


def duration_seconds(text: str) -> float:
    """Prometheus duration (``30s``, ``1m30s``) in seconds."""
    return sum(float(n) * _DURATION_UNITS[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)", text))


_SELECTOR_TERM = re.compile(r"^\s*(!?)([A-Za-z0-9._/-]+)\s*(?:(==|=|!=)\s*([A-Za-z0-9._-]*))?\s*$")


def parse_selector(text: str) -> tuple[tuple[str, str, str], ...]:
    """A Kubernetes equality label selector (``a=b,c!=d,e,!f``) as (key, op, value) terms.

    ``op`` is ``=``, ``!=``, ``exists`` or ``!exists``. Set-based terms (``in``/``notin``)
    are not supported; a term that does not parse raises ValueError naming it.
    """
    terms = []
    for raw in (t for t in text.split(",") if t.strip()):
        m = _SELECTOR_TERM.match(raw)
        if not m or (m.group(1) and m.group(3)):
            raise ValueError(f"bad label selector term {raw.strip()!r}")
        neg, key, op, value = m.groups()
        if op is None:
            terms.append((key, "!exists" if neg else "exists", ""))
        else:
            terms.append((key, "!=" if op == "!=" else "=", value or ""))
    return tuple(terms)


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
        NET_DEVICE_EXCLUDE,
        description="Network devices left out of node traffic, like node_exporter's device-exclude flag.",
    )
    disk_device_exclude: str = Field(
        DISK_DEVICE_EXCLUDE,
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
        if duration_seconds(value) <= 0:  # rate(x[0s]) is refused by Prometheus on every refresh
            raise ValueError("must be longer than zero")
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
    Nodes whose bandwidth differs from these say so with labels (drs_prom.signals.link_capacity).
    """

    cpu_full: float = Field(1.0, gt=0, le=1, description="CPU utilisation that reads as 1.0 (DRS: 0.25, i.e. x4).")
    mem_full: float = Field(1.0, gt=0, le=1, description="Memory utilisation that reads as 1.0.")
    net_rx_full_bytes: float = Field(125e6, gt=0, description="Receive rate that reads as 1.0 (1 GbE; DRS: 40 KB/s).")
    net_tx_full_bytes: float = Field(125e6, gt=0, description="Transmit rate that reads as 1.0.")
    disk_read_full_bytes: float = Field(200e6, gt=0, description="Disk read rate that reads as 1.0 (DRS: 10240 KB/s).")
    disk_write_full_bytes: float = Field(200e6, gt=0, description="Disk write rate that reads as 1.0.")
    clip: bool = Field(True, description="Cap every feature at 1.0 as DRS did.")

    @property
    def full_values(self) -> tuple[float, ...]:
        """The raw value at which each feature reads as 1.0, in drs_prom.features.FEATURES order."""
        return (
            self.cpu_full,
            self.mem_full,
            self.net_rx_full_bytes,
            self.net_tx_full_bytes,
            self.disk_read_full_bytes,
            self.disk_write_full_bytes,
        )

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


WHOLE_NODE_RESERVE = 1
"""Whole device nodes ``drs`` holds back per device resource by default (drs_prom.policies.whole_reserve). One is what
a pod asking for a whole node needs when it comes: on openb such pods come once in a few hundred and each holds its
node for hours, and a node that drains to whole while the reserve is short joins it."""


FILL_WINDOW = 1000
"""Binds without a pod leaving after which ``drs`` counts the cluster as filling and packs its devices
(drs_prom.policies.filling): as many pods as the recent shapes FGD's measure weighs (drs_prom.policies.fragmentation),
and more than a busy cluster binds between two pods ending."""


class SchedulerSettings(_Section):
    scheduler_name: str = Field("drs-scheduler", description="Pods with this spec.schedulerName are ours.")
    namespace: str = Field("", description="Only watch this namespace; empty watches all.")
    model_path: str = Field("", description="Model (.keras + .json) to load; empty uses the shipped default.")
    fallback: str = Field(
        "capacity-balanced-overload",
        description="Heuristic used when the model is unavailable or a guardrail tripped, and the shadow heuristic "
        "unless rollout.heuristic names another (the strongest heuristic of `drs-prom bench --suite`).",
    )
    state_refresh_seconds: float = Field(5.0, gt=0, description="How often node state is re-read from Prometheus.")
    whole_node_reserve: int = Field(
        WHOLE_NODE_RESERVE,
        ge=0,
        description="Whole device nodes (every nvidia.com/gpu or other device free) the model keeps per device "
        "resource for the pods that ask for a whole node: other pods go there only where nothing else fits; 0 turns "
        "the reserve off. Only nodes with the most devices and more than one count.",
    )
    fill_window: int = Field(
        FILL_WINDOW,
        ge=0,
        description="Binds without any pod leaving the cluster after which the model counts it as filling and packs "
        "device pods by fragmentation instead of keeping the whole-node reserve (a cluster where no pod has left yet "
        "is filling); 0: never. Only clusters with device resources are affected.",
    )
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
    settle_seconds: float = Field(5.0, ge=0, description="Delay before a decision's reward is measured (DRS: 5 s).")
    percentage_of_nodes_to_score: int = Field(
        0,
        ge=0,
        le=100,
        description="As kube-scheduler's percentageOfNodesToScore: stop filtering after this share of nodes "
        "is found feasible and score only those (never fewer than 100 nodes). 0 = kube-scheduler's adaptive "
        "default (50% minus 1% per 125 nodes, at least 5%); 100 = score every node.",
    )
    client_qps: float = Field(
        50.0,
        ge=0,
        description="Binds per second, and as many events in a bucket of their own (kube-scheduler's two "
        "clientsets), as kube-scheduler's clientConnection.qps; 0 = no limit.",
    )
    client_burst: int = Field(
        100, ge=1, description="Binds (and events) allowed at once above client_qps (clientConnection.burst)."
    )
    bind_workers: int = Field(
        16, ge=1, description="Binds in flight at once (the binding cycle runs off the scheduling thread)."
    )
    volume_bind_timeout_seconds: float = Field(
        600.0,
        gt=0,
        description="How long a pod with claims waiting for their first consumer waits for them to bind after "
        "its node was chosen (kube-scheduler's VolumeBinding bindTimeoutSeconds); then it is retried with backoff.",
    )
    volume_bind_workers: int = Field(
        16, ge=1, description="Pods waiting at once for their claims to bind before their own bind."
    )
    write_process: bool = Field(
        True,
        description="Make the binding cycle's API writes (Bindings, Events) from a child process, so their "
        "HTTP work runs on another core than the scheduling loop; false = in-process. Writing falls back to "
        "in-process by itself if the child cannot start or dies, and stays in-process where the scheduler has "
        "fewer than 2 CPUs (affinity or a CPU limit): there the child has no core of its own.",
    )

    @model_validator(mode="before")
    @classmethod
    def _removed(cls, data: Any) -> Any:
        if isinstance(data, dict) and "online_learning" in data:
            raise ValueError(
                "online_learning was removed (it recorded transitions nothing read); delete the key: "
                "the scheduler journals every decision and retraining (the retrain section) learns from it"
            )
        return data


_MATCHER = r"""\s*[A-Za-z_][A-Za-z0-9_]*\s*(=~|!~|!=|=)\s*("([^"\\]|\\.)*"|'([^'\\]|\\.)*')\s*"""
_MATCHERS = re.compile(rf"({_MATCHER}(,{_MATCHER})*)?,?\s*")


class UsageSettings(_Section):
    """What a pending pod will use (drs_prom.usage, drs_prom.scheduler.decision.pod_demand).

    In order: the ``drs.io/demand`` annotation (when trusted), the ``drs.io/profile`` annotation, then an estimate
    from the stored usage of the pod's owner's earlier pods, of other owners' pods running its image, or its
    requests. The stored usage is Prometheus' per-pod recording rules over the kubelet's cAdvisor series
    (``drs-prom promql rules``: group ``drs-pod-usage``); a decision never waits for it: a background thread keeps
    a cache of the owners of pending pods, and an owner not cached yet is estimated from its requests.
    """

    history: bool = Field(
        True, description="Read the pods' stored usage from Prometheus; false: annotations and requests only."
    )
    history_seconds: float = Field(
        6 * 3600.0, ge=60, description="How far back the stored usage of an owner's pods is read (6 hours)."
    )
    rate_window: str = Field(
        "2m",
        description="Range of the per-pod recording rules' irate() (the last two samples within it): at least 2x, "
        "better 4x, the cAdvisor scrape interval. The rule names carry it (drs:pod_cpu:cores_irate2m): regenerate "
        "the rules when it changes.",
    )
    cadvisor_selector: str = Field(
        'metrics_path!="/metrics/resource"',
        description="Extra PromQL label matchers for the cAdvisor series in the recording rules. The default "
        "works with a plain scrape and with kube-prometheus-stack's kubelet job (which may also scrape the "
        'kubelet\'s /metrics/resource, whose container_* series would count twice); e.g. job="kubelet". '
        "Regenerate the rules when it changes (drs-prom promql rules --config).",
    )
    refresh_seconds: float = Field(
        300.0, gt=0, description="How often the stored usage of an owner with pending pods is read again."
    )
    ttl_seconds: float = Field(
        1800.0,
        gt=0,
        description="How long a read is used when it cannot be refreshed (Prometheus down); then the pod's "
        "requests answer.",
    )
    cache_size: int = Field(10000, ge=1, description="Owners and images whose stored usage is kept in memory.")
    queue_size: int = Field(
        1000, ge=1, description="Owners waiting to be read; beyond it a new owner is estimated from its requests."
    )
    model_path: str = Field(
        "",
        description="Usage model (JSON, drs_prom.usage.estimator.UsageModel) the estimate is made with; empty uses "
        "the shipped models/usage-v1.json (its default parameters where the file is absent).",
    )
    trust_annotations: bool = Field(
        True,
        description="A drs.io/demand annotation sets the pod's demand; false: it is ignored and the estimate "
        "answers (pods whose authors cannot be trusted to state their load).",
    )
    refit: bool = Field(
        True,
        description="Refit the usage model on the cluster's stored series at every retraining run "
        "(drs_prom.ops.usage_refit); a refit is promoted only if it predicts the newest pods at least as well.",
    )
    refit_holdout_seconds: float = Field(
        3600.0, gt=0, description="The newest pods a refit is judged on (not fitted on): those started this long ago."
    )
    model_store: str = Field(
        "",
        description="Directory of refitted usage models and their 'current' pointer; empty: 'usage' inside "
        "retrain.model_store. Read by the scheduler (a promoted refit replaces the model in service) unless "
        "model_path names a fixed model.",
    )

    @field_validator("rate_window")
    @classmethod
    def _duration(cls, value: str) -> str:
        if not re.fullmatch(r"(\d+(ms|s|m|h))+", value) or duration_seconds(value) <= 0:
            raise ValueError("must be a Prometheus duration longer than zero, such as 2m")
        return value

    @field_validator("cadvisor_selector")
    @classmethod
    def _matchers(cls, value: str) -> str:
        if not _MATCHERS.fullmatch(value):
            raise ValueError('must be PromQL label matchers without braces, e.g. job="kubelet",metrics_path!="x"')
        return value

    @field_validator("model_path")
    @classmethod
    def _readable(cls, value: str) -> str:
        if value and not os.access(value, os.R_OK):
            raise ValueError(f"file {value} does not exist or is not readable")
        return value

    @model_validator(mode="after")
    def _ttl(self) -> UsageSettings:
        if self.ttl_seconds < self.refresh_seconds:
            raise ValueError("ttl_seconds must be at least refresh_seconds (a read would expire before its refresh)")
        return self


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
    twin: bool = Field(
        False,
        description="Replay episodes and the gate's simulator run use a twin of this cluster built from the "
        "journal and Prometheus history (drs_prom.sim.twin) instead of sim_scenario; sim_scenario if no twin "
        "can be built.",
    )
    twin_window_seconds: float = Field(
        600.0, gt=0, description="The twin's arrival phases: one per window of this many seconds of the journal."
    )
    twin_teacher: str = Field(
        "capacity-balanced-overload",
        description="In the twin, warm-start from this heuristic's episodes and keep its rank (DQfD); '' for none.",
    )
    twin_teacher_episodes: int = Field(5, ge=0, description="Teacher episodes in the twin.")
    twin_imitate_steps: int = Field(10000, ge=0, description="Large-margin steps on them before the TD steps.")
    twin_max_pods: int = Field(
        500, ge=20, description="The twin's episode: the newest this many decisions of the journal (its workload)."
    )
    gate_seeds: int = Field(
        10,
        ge=2,
        description="With a twin, the candidate and every gate heuristic replay this many paired seeds of it; the "
        "candidate is promoted only if the paired 95 % interval against the best heuristic stays within "
        "gate_inferiority_margin.",
    )
    gate_heuristics: list[str] = Field(
        default_factory=lambda: [
            "capacity-balanced-overload",
            "capacity-balanced",
            "balanced-load",
            "least-loaded",
            "kube-default",
        ],
        min_length=1,
        description="Heuristics the twin's gate compares the candidate with; the best on the twin is the bar.",
    )
    gate_inferiority_margin: float = Field(
        0.03,
        ge=0,
        description="Upper end of the paired interval of (candidate - best heuristic) / best heuristic allowed "
        "(0.03 = the candidate may be at most 3 % worse, as the bench's 'inferior' flag).",
    )
    seed: int = Field(0, description="Seed of training and of the gate's simulator run.")


class RewardSettings(_Section):
    """How a placement is rewarded (drs_prom.outcomes.reward), in training, retraining and the twin alike.

    ``kind`` picks the reward; the weights below are the ``shaped`` reward's. DRS used only
    the imbalance of the settled cluster (``kind: drs``).
    """

    kind: str = Field(
        "shaped",
        pattern="^(shaped|composite|drs)$",
        description="shaped: the weighted terms below; composite: the step's share of minus the objectives' "
        "composite score (the objectives section's weights); drs: DRS's minus the settled imbalance, x100.",
    )

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
        description="Weight of the mean slowdown above 1 of the pods that finished during the step "
        "(contention stretches completion time).",
    )


class GuardrailSettings(_Section):
    """Live-cluster limits a deciding model must keep (drs_prom.scheduler.decision.guardrails).

    Each rule is one PromQL value from drs_prom.signals.promql compared with its threshold; a rule
    breached for ``breach_window_seconds`` in a row while the model decides switches the
    scheduler to ``scheduler.fallback`` (fallback reason ``guardrail``) until another model
    version is loaded or the process restarts. ``rules`` lists the rules in force.
    """

    enabled: bool = Field(False, description="Evaluate the guardrails while the model decides.")
    rules: list[str] = Field(
        default_factory=lambda: ["hot_node", "imbalance", "fallback_rate", "stuck_pods"],
        description="Rules in force: hot_node, imbalance, fallback_rate, stuck_pods.",
    )
    evaluate_seconds: float = Field(10.0, gt=0, description="How often the rules are queried.")
    breach_window_seconds: float = Field(60.0, ge=0, description="How long a breach must last before the trip.")
    lookback: str = Field("2m", description="Range the time-based rules average over (PromQL duration).")
    step: str = Field("10s", description="Subquery resolution of the time-based rules.")
    hot_cpu: float = Field(0.9, gt=0, le=1, description="A node is hot while its CPU utilisation is above this.")
    hot_node_time: float = Field(0.5, ge=0, le=1, description="Max share of the lookback any node may spend hot.")
    imbalance: float = Field(0.8, ge=0, description="Max node-relative CPU imbalance, stddev/mean across nodes.")
    fallback_rate: float = Field(
        0.5, ge=0, le=1, description="Max share of decisions made by the fallback for other reasons."
    )
    pending_seconds: float = Field(120.0, ge=0, description="A pod queued longer than this counts as stuck.")
    pending_pods: float = Field(0.0, ge=0, description="Max pods queued longer than pending_seconds (on average).")
    scheduler_job: str = Field("drs-scheduler", description="Prometheus job that scrapes the scheduler's /metrics.")

    @field_validator("lookback", "step")
    @classmethod
    def _duration(cls, value: str) -> str:
        if not re.fullmatch(r"(\d+(ms|s|m|h))+", value):
            raise ValueError("must be a Prometheus duration such as 30s or 2m")
        return value

    @field_validator("rules")
    @classmethod
    def _known_rules(cls, value: list[str]) -> list[str]:
        known = ("hot_node", "imbalance", "fallback_rate", "stuck_pods")
        bad = [r for r in value if r not in known]
        if bad:
            raise ValueError(f"unknown guardrail rule {bad[0]!r}; known: {', '.join(known)}")
        return value


class RollbackSettings(_Section):
    """Automatic rollback of a promotion that made the live cluster worse (drs_prom.ops.promotion_judge)."""

    enabled: bool = Field(False, description="Judge every promotion and roll back a harmful one.")
    window_seconds: float = Field(
        900.0, gt=0, description="Compare this long after the promotion with as long before it."
    )
    margin: float = Field(
        0.2, ge=0, description="Worse means after > before * (1 + margin) + absolute_margin on any guardrail value."
    )
    absolute_margin: float = Field(0.05, ge=0, description="Slack for values near zero.")


class RolloutSettings(_Section):
    """How much the model is trusted (drs_prom.scheduler.decision.arms): normal, shadow or canary."""

    mode: str = Field(
        "normal",
        pattern="^(normal|shadow|canary)$",
        description="normal: the model decides; shadow: the heuristic binds, the model only scores; "
        "canary: the model decides for a share of pods or the selected ones.",
    )
    heuristic: str = Field("", description="Policy of the heuristic arm; empty uses scheduler.fallback.")
    canary_share: float = Field(0.1, ge=0, le=1, description="Share of pods (by uid hash) the model decides in canary.")
    canary_namespaces: list[str] = Field(
        default_factory=list, description="Pods in these namespaces always go to the model arm in canary."
    )
    canary_selector: str = Field("", description="Label selector (a=b,c!=d,e) whose pods go to the model arm.")
    guardrails: GuardrailSettings = GuardrailSettings()
    rollback: RollbackSettings = RollbackSettings()

    @field_validator("canary_selector")
    @classmethod
    def _selector(cls, value: str) -> str:
        parse_selector(value)  # raises ValueError naming the bad term
        return value


class ServingSettings(_Section):
    """The HTTP(S) port of /metrics, /healthz, /readyz and the extender verbs.

    Like kube-scheduler's secure port: TLS with a configured or self-generated certificate,
    optional delegated authentication/authorization of /metrics (TokenReview, then a
    SubjectAccessReview for ``get`` on the non-resource URL ``/metrics``), while /healthz
    and /readyz stay open for probes. ``tls: off`` serves plain HTTP, for clusters that
    terminate TLS elsewhere (a mesh sidecar or a proxy).
    """

    tls: str = Field(
        "off",
        pattern="^(off|self-signed|files)$",
        description="off: plain HTTP; self-signed: generate a certificate at start; files: cert_file/key_file.",
    )
    cert_file: str = Field("", description="PEM certificate (chain) when tls is files.")
    key_file: str = Field("", description="PEM private key when tls is files.")
    authenticate_metrics: bool = Field(
        False, description="Require a bearer token allowed to get /metrics (TokenReview + SubjectAccessReview)."
    )
    auth_cache_ttl_seconds: float = Field(
        10.0, ge=0, description="How long a token's review is reused (kube-scheduler's default is 10s)."
    )
    max_body_bytes: int = Field(
        8 * 2**20,
        ge=1024,
        description="Largest extender request accepted (413 above); use nodeCacheCapable on large clusters.",
    )
    request_timeout_seconds: float = Field(
        10.0, gt=0, description="Time a client has to send one whole request (headers and body): slow clients are cut."
    )
    max_connections: int = Field(
        128,
        ge=1,
        description="Connections served at once; more wait in the listen queue up to one request timeout, then are closed.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> ServingSettings:
        if self.tls == "files" and not (self.cert_file and self.key_file):
            raise ValueError("tls: files needs cert_file and key_file")
        if self.tls != "files" and (self.cert_file or self.key_file):
            raise ValueError("cert_file/key_file are only read with tls: files")
        if self.authenticate_metrics and self.tls == "off":
            raise ValueError("authenticate_metrics sends bearer tokens: it needs tls (self-signed or files)")
        return self


class ObjectiveSettings(_Section):
    """What the benchmark, the default reward, checkpoint selection and the clairvoyant reference minimise.

    drs_prom.outcomes.objectives defines each objective; the composite score (lower is better) is
    ``sum(weight * objective)`` over the weights below, with utilisation entering negatively.
    The defaults weigh what users feel (pod slowdown: mean, tail and SLO misses) above how the
    cluster looks (overload, hot nodes, imbalance of demand over capacity); DRS's own imbalance
    of capped usage is reported but weighted 0, because it can be lowered by overloading nodes.
    """

    slo_slowdown: float = Field(
        1.5, gt=1, description="A pod misses its SLO when (completion incl. queueing) / (run time alone) exceeds this."
    )
    hot_fraction: float = Field(
        0.8, gt=0, description="A node is hot while its demand exceeds this fraction of its own capacity."
    )
    slowdown_mean_weight: float = Field(1.0, ge=0, description="Weight of the mean pod slowdown (>= 1).")
    slowdown_p95_weight: float = Field(0.5, ge=0, description="Weight of the p95 pod slowdown (>= 1).")
    slo_miss_weight: float = Field(1.0, ge=0, description="Weight of the share of pods over the slowdown SLO (0..1).")
    overload_weight: float = Field(
        1.0, ge=0, description="Weight of overload: mean over nodes and time of demand/capacity above 1 (uncapped)."
    )
    hot_weight: float = Field(0.25, ge=0, description="Weight of hot-node time (share of node-seconds hot).")
    demand_imbalance_weight: float = Field(
        0.25, ge=0, description="Weight of the imbalance of demand over each node's own capacity (sum of stds)."
    )
    drs_imbalance_weight: float = Field(
        0.0, ge=0, description="Weight of DRS's imbalance (capped usage on the scenario's scales)."
    )
    utilisation_weight: float = Field(0.0, ge=0, description="Weight of mean utilisation (subtracted: more is better).")

    @field_validator("hot_fraction")
    @classmethod
    def _hot(cls, value: float) -> float:
        if value > 4:
            raise ValueError("must be a fraction of capacity, at most 4")
        return value

    @property
    def weights(self) -> dict[str, float]:
        """Objective name -> weight (utilisation's is applied with a minus sign)."""
        return {
            "slowdown_mean": self.slowdown_mean_weight,
            "slowdown_p95": self.slowdown_p95_weight,
            "slo_miss": self.slo_miss_weight,
            "overload": self.overload_weight,
            "hot_time": self.hot_weight,
            "demand_imbalance": self.demand_imbalance_weight,
            "drs_imbalance": self.drs_imbalance_weight,
            "utilisation": -self.utilisation_weight,
        }


class RebalanceSettings(_Section):
    """The rebalancer, ``drs-prom rebalance`` (drs_prom.rebalance; its decisions are drs_prom.moves, which the
    simulator runs too): every ``interval_seconds`` it finds the nodes hot for a sustained ``window``, picks the pod
    whose move relieves each most, checks with the filters and the policy of the scheduler that owns the pod that a
    clearly better node would take its replacement, and moves it: a Deployment's pod replacement first (``surge``),
    any other through the Eviction API (PodDisruptionBudgets hold). Shadow first: in ``dry-run`` it logs, counts and
    journals what it would move and moves nothing.

    A node is hot, per signal against its own capacity (cpu, memory, network and disk, as the objectives' hot
    fraction), when the ``quantile`` of the signal over ``window`` is above ``hot_above`` on some signal, and stays
    hot until every signal's quantile is below ``cool_below`` (hysteresis). ``guardrails`` are the scheduler's
    PromQL limits (by default imbalance and stuck pods): one breached for ``breach_window_seconds`` while the
    rebalancer evicts stops its evictions (it goes on in dry-run) until the process restarts.
    """

    mode: str = Field(
        "dry-run",
        pattern="^(dry-run|evict)$",
        description="dry-run: log, count and journal the moves, evict nothing (shadow); evict: evict them.",
    )
    interval_seconds: float = Field(60.0, gt=0, description="How often the rebalancer looks (seconds).")
    window: str = Field(
        "10m", description="How long a node must stay hot: the range its signals' quantiles are taken over."
    )
    step: str = Field("30s", description="Resolution of the window's samples (PromQL subquery step).")
    quantile: float = Field(
        0.5,
        gt=0,
        lt=1,
        description="Quantile of each signal over the window that must pass the thresholds: 0.5 = more than half of "
        "the window; lower is stricter (0.2: hot for 80 % of the window).",
    )
    target_quantile: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="Quantile of each signal over the window at which a move's target must have room (its busier "
        "moments: a node whose load comes and goes is no target while it comes); None: the same as quantile.",
    )
    hot_above: float = Field(
        0.8, gt=0, le=4, description="A node becomes hot when a signal's quantile exceeds this share of its capacity."
    )
    cool_below: float = Field(
        0.7, gt=0, le=4, description="A hot node stops being hot once every signal's quantile is below this share."
    )
    margin: float = Field(
        0.05,
        ge=0,
        le=1,
        description="A move's target, with the pod on it, must stay at least this share of its capacity below "
        "hot_above and below the hot node's bottleneck: a clearly better node.",
    )
    max_per_node: int = Field(2, ge=0, description="Evictions per hot node per interval.")
    max_moves_to_cool: int = Field(
        3,
        ge=1,
        description="A hot node is relieved only if moving at most this many of its movable pods would bring it "
        "below hot_above; a node hot with load nothing may move (Jobs, DaemonSets, other tenants) is left alone, "
        "since moving pods off it would only spread the heat.",
    )
    max_per_namespace: int = Field(2, ge=0, description="Evictions per namespace per interval.")
    max_per_interval: int = Field(5, ge=0, description="Evictions in the whole cluster per interval.")
    cooldown_seconds: float = Field(
        300.0, ge=0, description="No pod of an owner (a Deployment, StatefulSet, Job) is moved again within this."
    )
    min_age_seconds: float = Field(600.0, ge=0, description="Pods younger than this are never moved.")
    allow_local_storage: bool = Field(
        False, description="Move pods with an emptyDir volume (its data is lost with the pod)."
    )
    move_jobs: bool = Field(
        False,
        description="Move pods of Jobs too; by default they are left to end (their load goes with them, and an "
        "evicted Job pod starts its work again).",
    )
    max_priority: int = Field(
        1_000_000_000,
        description="Pods of a higher priority are never moved; system-node-critical and system-cluster-critical "
        "(2000001000, 2000000000) never are, whatever this says.",
    )
    namespaces: list[str] = Field(default_factory=list, description="Only move pods of these namespaces; empty: all.")
    exclude_namespaces: list[str] = Field(
        default_factory=lambda: ["kube-system"], description="Never move pods of these namespaces."
    )
    drs_policy: str = Field(
        "drs",
        description="Policy that predicts where scheduler.scheduler_name puts a replacement (the model; "
        "scheduler.fallback when it cannot be loaded).",
    )
    other_policy: str = Field(
        "kube-default",
        description="Policy that predicts where any other scheduler (kube-scheduler) puts a replacement.",
    )
    refill_aware: bool = Field(
        True,
        description="Move a pod of a scheduler that places by requests (any but scheduler.scheduler_name: "
        "kube-scheduler scores requests, not load) only if the move still relieves its node once the requests it "
        "frees are taken again by new pods carrying the cluster's usage per request; otherwise that scheduler, "
        "seeing the room, refills the node with as much load as the move took off it.",
    )
    surge: bool = Field(
        True,
        description="Move a Deployment's pod by making its replacement first: the Deployment gets one replica more "
        "(the pod marked with the lowest controller.kubernetes.io/pod-deletion-cost), and once every replica is "
        "ready it gets its count back and the ReplicaSet removes the marked pod; the Deployment never runs short "
        "and the pod's work is not held up by a restart. Pods of other controllers, and Deployments that are rolling "
        "out, paused or scaled by a HorizontalPodAutoscaler, are evicted.",
    )
    surge_timeout_seconds: float = Field(
        600.0,
        gt=0,
        description="A surge whose replicas are not all ready within this is taken back: the Deployment gets its "
        "count back with the mark removed, so the ReplicaSet removes the replica that did not start, and the pod stays.",
    )
    taint_hot_nodes: bool = Field(
        False,
        description="Put a PreferNoSchedule taint on a hot node while it stays hot (kube-scheduler and drs-prom's "
        "scheduler then prefer other nodes for replacements and new pods); off by default.",
    )
    taint_key: str = Field("drs.io/hot", description="Key of that taint.")
    journal_path: str = Field(
        "drs-rebalance-journal.sqlite", description="SQLite journal of the moves made or, in dry-run, proposed."
    )
    metrics_listen: str = Field("0.0.0.0:10260", description="host:port for /metrics, /healthz, /readyz.")
    guardrails: GuardrailSettings = Field(
        default_factory=lambda: GuardrailSettings(enabled=True, rules=["imbalance", "stuck_pods"])
    )

    @field_validator("window", "step")
    @classmethod
    def _duration(cls, value: str) -> str:
        if not re.fullmatch(r"(\d+(ms|s|m|h))+", value) or duration_seconds(value) <= 0:
            raise ValueError("must be a Prometheus duration longer than zero, such as 10m")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> RebalanceSettings:
        if self.cool_below >= self.hot_above:
            raise ValueError("cool_below must be below hot_above (the hysteresis)")
        if duration_seconds(self.step) > duration_seconds(self.window):
            raise ValueError("step must not be longer than window")
        return self

    @property
    def window_seconds(self) -> float:
        return duration_seconds(self.window)

    @property
    def step_seconds(self) -> float:
        return duration_seconds(self.step)


class Settings(_Section):
    prometheus: PrometheusSettings = PrometheusSettings()
    normalisation: Normalisation = Normalisation()
    scheduler: SchedulerSettings = SchedulerSettings()
    usage: UsageSettings = UsageSettings()
    retrain: RetrainSettings = RetrainSettings()
    reward: RewardSettings = RewardSettings()
    rollout: RolloutSettings = RolloutSettings()
    serving: ServingSettings = ServingSettings()
    objectives: ObjectiveSettings = ObjectiveSettings()
    rebalance: RebalanceSettings = RebalanceSettings()


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
        except OSError as exc:  # a directory, unreadable (permissions), I/O error
            raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"config file {path} is not UTF-8 text") from None
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
        # a key is the user's text: repr() one that is not a plain printable word, so the error stays on one line
        where = ".".join(str(p) if str(p).isprintable() else repr(p) for p in err["loc"] if p != "__root__")
        # a message may quote the user's value (a file name): its control characters escaped, for the same reason
        msg = "".join(c if c.isprintable() else repr(c)[1:-1] for c in err["msg"])
        raise ConfigError(f"invalid config: {where}: {msg}" + (f" (in {path})" if path else "")) from None
