"""Every PromQL expression drs-prom sends, records or charts, in one place.

Over 400 lines because it is the one source of truth for every query, rule, alert and dashboard panel; splitting it would split that source.

Each function returns a string parameterised by the rate window, extra label matchers
(``selector``, e.g. ``job="node"``) and device-exclude regexes, so the scheduler, the
recording rules, the alerts and the Grafana dashboard can never disagree on what "cpu"
means. The per-node queries return every node at once, keyed by the ``nodename`` label of
``node_uname_info`` (works with node_exporter and with exporters/node_exporter.py).

``drs-prom promql rules`` and ``drs-prom promql dashboard`` print the deploy/prometheus
files generated from here; a test checks the checked-in copies are current.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import yaml

from drs_prom.config import GuardrailSettings, PrometheusSettings, Settings, UsageSettings
from drs_prom.features import FEATURES
from drs_prom.usage.owners import escape

NODE_LABEL = "nodename"
"""The label every per-node result is keyed by (``node_uname_info``'s kernel node name)."""

EXPORTER_JOB = "drs-node-exporter"
"""Scrape job of the exporter DaemonSet in deploy/prometheus/prometheus.yml."""

_DEFAULTS = PrometheusSettings()
_GUARD = GuardrailSettings()
_USAGE = UsageSettings()
DEFAULT_NET_EXCLUDE = _DEFAULTS.device_exclude
DEFAULT_DISK_EXCLUDE = _DEFAULTS.disk_device_exclude


def quote(value: str) -> str:
    """A PromQL double-quoted string literal (regexes keep their backslashes)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def matchers(selector: str = "", *extra: str) -> str:
    """``{a="b",c=~"d"}`` from a raw selector string plus extra matchers; ``""`` when empty."""
    parts = [p.strip().strip(",") for p in (selector, *extra)]
    parts = [p for p in parts if p]
    return "{" + ",".join(parts) + "}" if parts else ""


_IDLE = 'mode="idle"'


def _on_node(expr: str, selector: str) -> str:
    """Attach ``nodename`` to a per-instance expression through node_uname_info."""
    return f"{expr} * on(instance, job) group_left({NODE_LABEL}) node_uname_info{matchers(selector)}"


def cpu(window: str, selector: str = "") -> str:
    """Fraction of all CPUs not idle over ``window`` (0..1)."""
    idle = f"rate(node_cpu_seconds_total{matchers(selector, _IDLE)}[{window}])"
    return f"clamp(1 - avg by({NODE_LABEL}) ({_on_node(idle, selector)}), 0, 1)"


def mem(selector: str = "") -> str:
    """Fraction of memory not available (1 - MemAvailable/MemTotal), instantaneous."""
    sel = matchers(selector)
    ratio = f"(1 - node_memory_MemAvailable_bytes{sel} / node_memory_MemTotal_bytes{sel})"
    return f"max by({NODE_LABEL}) ({_on_node(ratio, selector)})"


def _device_rate(metric: str, window: str, selector: str, exclude: str) -> str:
    dev = f"device!~{quote(exclude)}" if exclude else ""
    inner = f"rate({metric}{matchers(selector, dev)}[{window}])"
    return f"sum by({NODE_LABEL}) ({_on_node(inner, selector)})"


def net_rx(window: str, selector: str = "", exclude: str = DEFAULT_NET_EXCLUDE) -> str:
    """Bytes/s received, summed over non-excluded interfaces."""
    return _device_rate("node_network_receive_bytes_total", window, selector, exclude)


def net_tx(window: str, selector: str = "", exclude: str = DEFAULT_NET_EXCLUDE) -> str:
    """Bytes/s transmitted, summed over non-excluded interfaces."""
    return _device_rate("node_network_transmit_bytes_total", window, selector, exclude)


def disk_read(window: str, selector: str = "", exclude: str = DEFAULT_DISK_EXCLUDE) -> str:
    """Bytes/s read, summed over non-excluded block devices (whole disks, not partitions)."""
    return _device_rate("node_disk_read_bytes_total", window, selector, exclude)


def disk_write(window: str, selector: str = "", exclude: str = DEFAULT_DISK_EXCLUDE) -> str:
    """Bytes/s written, summed over non-excluded block devices."""
    return _device_rate("node_disk_written_bytes_total", window, selector, exclude)


def feature_queries(
    window: str,
    selector: str = "",
    net_exclude: str = DEFAULT_NET_EXCLUDE,
    disk_exclude: str = DEFAULT_DISK_EXCLUDE,
) -> dict[str, str]:
    """One query per feature, in FEATURES order."""
    queries = {
        "cpu": cpu(window, selector),
        "mem": mem(selector),
        "net_rx": net_rx(window, selector, net_exclude),
        "net_tx": net_tx(window, selector, net_exclude),
        "disk_read": disk_read(window, selector, disk_exclude),
        "disk_write": disk_write(window, selector, disk_exclude),
    }
    assert tuple(queries) == FEATURES
    return queries


def queries_for(settings: PrometheusSettings) -> dict[str, str]:
    """The six feature queries for one configured Prometheus."""
    return feature_queries(
        settings.window, settings.node_selector, settings.device_exclude, settings.disk_device_exclude
    )


def last_seen(selector: str = "", lookback: str = "10m", step: str = "1s") -> str:
    """Newest sample time (unix s) of each node seen in ``lookback``.

    A subquery rather than ``timestamp(node_uname_info)`` because a dead target gets a
    staleness marker and would simply vanish; this keeps it visible (with its old
    timestamp) for ``lookback`` so it can be reported stale instead of forgotten.
    Resolution is ``step``: ages may read up to one step high.
    """
    return f"max by({NODE_LABEL}) (max_over_time(timestamp(node_uname_info{matchers(selector)})[{lookback}:{step}]))"


def cpu_cores(selector: str = "") -> str:
    """Number of CPUs per node (series of node_cpu_seconds_total with mode=idle)."""
    idle = f"node_cpu_seconds_total{matchers(selector, _IDLE)}"
    return f"count by({NODE_LABEL}) ({_on_node(idle, selector)})"


def mem_total(selector: str = "") -> str:
    """Memory per node in bytes."""
    return f"max by({NODE_LABEL}) ({_on_node(f'node_memory_MemTotal_bytes{matchers(selector)}', selector)})"


def up(job: str = EXPORTER_JOB) -> str:
    """Scrape health of the exporter targets (1 up, 0 down)."""
    return f"up{matchers(f'job={quote(job)}')}"


# ---------------------------------------------------------------------------
# Guardrails (drs_prom.scheduler.decision.guardrails) and promotion judging (drs_prom.ops.promotion_judge):
# each guardrail is a *signal* (an instant expression, one value for the cluster) whose
# average over a range is compared with a threshold. The scheduler, the generated alerts
# and the dashboard all use these strings.

SCHEDULER_JOB = "drs-scheduler"
"""Scrape job of the scheduler's own /metrics (deploy/prometheus/prometheus.yml)."""

GUARDRAILS = ("hot_node", "imbalance", "fallback_rate", "stuck_pods")


def hot_node_signal(window: str, hot: float, selector: str = "") -> str:
    """1 while at least one node's CPU utilisation is above ``hot``, else 0."""
    return f"max(({cpu(window, selector)}) > bool {hot:g})"


def imbalance_signal(window: str, selector: str = "") -> str:
    """Node-relative CPU imbalance: stddev / mean of the nodes' CPU utilisation (0 when idle)."""
    c = cpu(window, selector)
    return f"(stddev({c}) / clamp_min(avg({c}), 0.05))"


def fallback_rate_signal(window: str, job: str = SCHEDULER_JOB) -> str:
    """Share of decisions the fallback made for a reason other than a guardrail trip."""
    sel = f"job={quote(job)}"
    fb = f'sum(rate(drs_fallback_decisions_total{{{sel},reason!="guardrail"}}[{window}]))'
    return f"({fb} or vector(0)) / clamp_min(sum(rate(drs_decisions_total{{{sel}}}[{window}])), 1e-9)"


def stuck_pods_signal(job: str = SCHEDULER_JOB) -> str:
    """Pods queued longer than the configured ``pending_seconds`` (the scheduler counts them)."""
    return f"max(drs_queue_stuck_pods{matchers(f'job={quote(job)}')})"


def guardrail_signals(window: str, hot: float, selector: str = "", job: str = SCHEDULER_JOB) -> dict[str, str]:
    """One signal per guardrail, GUARDRAILS order."""
    out = {
        "hot_node": hot_node_signal(window, hot, selector),
        "imbalance": imbalance_signal(window, selector),
        "fallback_rate": fallback_rate_signal(window, job),
        "stuck_pods": stuck_pods_signal(job),
    }
    assert tuple(out) == GUARDRAILS
    return out


def over_range(signal: str, range_: str, step: str) -> str:
    """The average of a signal over the ``range_`` ending at the evaluation time."""
    return f"avg_over_time(({signal})[{range_}:{step}])"


def agreement_rate(window: str, job: str = SCHEDULER_JOB) -> str:
    """Share of shadow-compared decisions where the model and the heuristic chose the same node."""
    sel = f"job={quote(job)}"
    agree = f'sum(rate(drs_shadow_comparisons_total{{{sel},agree="true"}}[{window}]))'
    return f"({agree} or vector(0)) / clamp_min(sum(rate(drs_shadow_comparisons_total{{{sel}}}[{window}])), 1e-9)"


# ---------------------------------------------------------------------------
# Recording rules, alerts and the dashboard, generated from the functions above.


def _window_suffix(window: str) -> str:
    return "rate" + window


def recorded_names(window: str = _DEFAULTS.window) -> dict[str, str]:
    """Recording-rule name per feature, ``drs:node_<feature>:<unit>_<op>``."""
    w = _window_suffix(window)
    return {
        "cpu": f"drs:node_cpu:ratio_{w}",
        "mem": "drs:node_mem:ratio",
        "net_rx": f"drs:node_net_rx:bytes_{w}",
        "net_tx": f"drs:node_net_tx:bytes_{w}",
        "disk_read": f"drs:node_disk_read:bytes_{w}",
        "disk_write": f"drs:node_disk_write:bytes_{w}",
    }


LAST_SEEN_RULE = "drs:node_last_seen:timestamp_seconds"


@dataclass(frozen=True)
class RuleParams:
    """What the shipped rules are generated for (the config defaults)."""

    window: str = _DEFAULTS.window
    selector: str = _DEFAULTS.node_selector
    net_exclude: str = DEFAULT_NET_EXCLUDE
    disk_exclude: str = DEFAULT_DISK_EXCLUDE
    max_age_seconds: float = _DEFAULTS.max_sample_age_seconds
    job: str = EXPORTER_JOB
    lookback: str = "10m"
    step: str = "10s"
    hot_cpu: float = _GUARD.hot_cpu
    guard_lookback: str = _GUARD.lookback
    guard_step: str = _GUARD.step
    guard_for: str = f"{_GUARD.breach_window_seconds:g}s"
    thresholds: tuple[tuple[str, float], ...] = (
        ("hot_node", _GUARD.hot_node_time),
        ("imbalance", _GUARD.imbalance),
        ("fallback_rate", _GUARD.fallback_rate),
        ("stuck_pods", _GUARD.pending_pods),
    )
    scheduler_job: str = SCHEDULER_JOB
    usage_window: str = _USAGE.rate_window
    cadvisor_selector: str = _USAGE.cadvisor_selector
    usage_interval: str = "30s"

    @classmethod
    def for_settings(cls, settings: Settings) -> RuleParams:
        """The shipped rules, with the per-pod rules for ``settings.usage`` (rate window, cAdvisor selector)."""
        return cls(usage_window=settings.usage.rate_window, cadvisor_selector=settings.usage.cadvisor_selector)


GUARDRAIL_RECORDED = {g: f"drs:guardrail_{g}:signal" for g in GUARDRAILS}
_GUARD_TEXT = {
    "hot_node": "a node was above {hot} CPU for {{ $value | humanizePercentage }} of the last {lookback}",
    "imbalance": "node-relative CPU imbalance (stddev/mean) averaged {{ $value | humanize }} over {lookback}",
    "fallback_rate": "the fallback made {{ $value | humanizePercentage }} of the decisions over {lookback}",
    "stuck_pods": "{{ $value | humanize }} pods on average were queued too long over {lookback}",
}


def guardrail_alerts(p: RuleParams) -> list[dict[str, Any]]:
    """One alert per guardrail (same signal and threshold as the scheduler), plus a tripped
    guardrail and an automatic rollback; promtool-tested in deploy/prometheus/tests/."""
    signals = guardrail_signals(p.window, p.hot_cpu, p.selector, p.scheduler_job)
    out = []
    for name, threshold in p.thresholds:
        out.append(
            {
                "alert": "DrsGuardrail" + "".join(w.capitalize() for w in name.split("_")),
                "expr": f"{over_range(signals[name], p.guard_lookback, p.guard_step)} > {threshold:g}",
                "for": p.guard_for,
                "labels": {"severity": "warning", "guardrail": name},
                "annotations": {
                    "summary": f"drs-prom guardrail {name} breached",
                    "description": _GUARD_TEXT[name]
                    .replace("{hot}", f"{p.hot_cpu:g}")
                    .replace("{lookback}", p.guard_lookback)
                    + f" (threshold {threshold:g}); while the model decides, the scheduler falls back.",
                },
            }
        )
    out.append(
        {
            "alert": "DrsGuardrailTripped",
            "expr": "max by(rule) (drs_guardrail_tripped) == 1",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "the scheduler stopped trusting its model ({{ $labels.rule }})",
                "description": "Guardrail {{ $labels.rule }} was breached for the whole breach window while the "
                "model decided; the fallback heuristic places pods until another model version is loaded.",
            },
        }
    )
    out.append(
        {
            "alert": "DrsModelRolledBack",
            "expr": "increase(drs_model_rollbacks_total[30m]) > 0",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "a promoted model was rolled back automatically",
                "description": "The cluster was worse after the last promotion than before it; the model store "
                "points at the previous version again. See the journal's rollout events and `drs-prom report`.",
            },
        }
    )
    return out


def rule_groups(p: RuleParams = RuleParams()) -> dict[str, Any]:
    """The Prometheus rules file (recording + alerting) as a mapping."""
    names = recorded_names(p.window)
    queries = feature_queries(p.window, p.selector, p.net_exclude, p.disk_exclude)
    recording = [{"record": names[f], "expr": queries[f]} for f in FEATURES]
    recording.append({"record": LAST_SEEN_RULE, "expr": last_seen(p.selector, p.lookback, p.step)})
    age = f"time() - {LAST_SEEN_RULE}"
    max_age = f"{p.max_age_seconds:g}"
    alerts = [
        {
            "alert": "DrsNodeExporterDown",
            "expr": f"{up(p.job)} == 0",
            "for": "1m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "drs node exporter {{ $labels.instance }} is down",
                "description": "Prometheus cannot scrape {{ $labels.instance }} (job {{ $labels.job }}); "
                "drs-prom treats its node as stale and will not place load-sensitive pods by its metrics.",
            },
        },
        {
            "alert": "DrsNodeStale",
            "expr": f"{age} > {max_age}",
            "for": "1m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "node {{ $labels.nodename }} has no fresh metrics",
                "description": "The newest sample of {{ $labels.nodename }} is {{ $value | humanizeDuration }} old "
                f"(more than {max_age}s); the scheduler reports it stale.",
            },
        },
        {
            "alert": "DrsNoNodeMetrics",
            "expr": f"absent(node_uname_info{matchers(p.selector)})",
            "for": "5m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "no node_uname_info series at all",
                "description": "drs-prom has no node metrics; every node is stale and the scheduler uses its fallback.",
            },
        },
    ]
    signals = guardrail_signals(p.window, p.hot_cpu, p.selector, p.scheduler_job)
    guard_recording = [{"record": GUARDRAIL_RECORDED[g], "expr": signals[g]} for g in GUARDRAILS]
    return {
        "groups": [
            {"name": "drs-node-features", "interval": "10s", "rules": recording},
            {"name": "drs-node-alerts", "rules": alerts},
            {"name": "drs-rollout", "interval": "10s", "rules": guard_recording},
            {"name": "drs-rollout-alerts", "rules": guardrail_alerts(p)},
            {
                "name": POD_USAGE_GROUP,
                "interval": p.usage_interval,
                "rules": pod_usage_rules(p.usage_window, p.cadvisor_selector),
            },
        ]
    }


_HEADER = "# Generated by `drs-prom promql rules` from drs_prom/signals/promql.py; do not edit by hand.\n"


def rules_yaml(p: RuleParams = RuleParams()) -> str:
    """The rules file text exactly as checked in at deploy/prometheus/rules/drs.rules.yml."""
    return _HEADER + yaml.safe_dump(rule_groups(p), sort_keys=False, width=1000)


_FEATURE_UNITS = {"cpu": "percentunit", "mem": "percentunit"}
_TITLES = {
    "cpu": "CPU utilisation",
    "mem": "Memory utilisation",
    "net_rx": "Network receive",
    "net_tx": "Network transmit",
    "disk_read": "Disk read",
    "disk_write": "Disk write",
}
GRAFANA_VARS = {"$node": ".*", "${DS_PROMETHEUS}": "prometheus"}
"""Dashboard template variables and the value a test substitutes to run each expression."""


def dashboard(p: RuleParams = RuleParams()) -> dict[str, Any]:
    """Grafana dashboard: the six features per node, sample age, exporter health, the
    rollout of the learned policy (arms, agreement, guardrails, fallbacks, rollbacks) and the scheduler's CPU by
    thread."""
    names = recorded_names(p.window)
    node = f'{NODE_LABEL}=~"$node"'
    ds = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
    panels: list[dict[str, Any]] = []

    def panel(title: str, expr: str, legend: str, unit: str, x: int, y: int, kind: str = "timeseries") -> None:
        panels.append(
            {
                "id": len(panels) + 1,
                "type": kind,
                "title": title,
                "datasource": ds,
                "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": [{"refId": "A", "datasource": ds, "expr": expr, "legendFormat": legend}],
            }
        )

    for i, f in enumerate(FEATURES):
        panel(
            _TITLES[f],
            f"{names[f]}{{{node}}}",
            "{{nodename}}",
            _FEATURE_UNITS.get(f, "Bps"),
            12 * (i % 2),
            8 * (i // 2),
        )
    panel("Newest sample age", f"time() - {LAST_SEEN_RULE}{{{node}}}", "{{nodename}}", "s", 0, 24)
    panel("Exporter targets up", up(p.job), "{{instance}}", "none", 12, 24, "stat")
    # Rollout: which arm decides, how often the arms agree, the guardrails, fallbacks, rollbacks.
    job = f"job={quote(p.scheduler_job)}"
    panel(
        "Decisions per arm and policy",
        f"sum by(arm, policy) (rate(drs_decisions_total{{{job}}}[5m]))",
        "{{arm}} / {{policy}}",
        "ops",
        0,
        32,
    )
    panel("Model / heuristic agreement", agreement_rate("5m", p.scheduler_job), "agreement", "percentunit", 12, 32)
    for i, g in enumerate(GUARDRAILS):
        panel(
            f"Guardrail {g.replace('_', ' ')} (threshold {dict(p.thresholds)[g]:g})",
            over_range(GUARDRAIL_RECORDED[g], p.guard_lookback, p.guard_step),
            g,
            "none",
            12 * (i % 2),
            40 + 8 * (i // 2),
        )
    panel(
        "Fallback decisions by reason",
        f"sum by(reason) (rate(drs_fallback_decisions_total{{{job}}}[5m]))",
        "{{reason}}",
        "ops",
        0,
        56,
    )
    panel(
        "Guardrail trips and rollbacks",
        f"max by(rule) (drs_guardrail_tripped{{{job}}}) or sum(increase(drs_model_rollbacks_total{{{job}}}[30m]))",
        "{{rule}}",
        "none",
        12,
        56,
    )
    # Where the scheduler's CPU goes: a thread that keeps its core busy is the first to fall behind a burst.
    panel(
        "Scheduler CPU by thread (cores)",
        f"sum by(thread) (rate(drs_thread_cpu_seconds_total{{{job}}}[5m]))",
        "{{thread}}",
        "none",
        0,
        64,
    )
    return {
        "__inputs": [{"name": "DS_PROMETHEUS", "label": "Prometheus", "type": "datasource", "pluginId": "prometheus"}],
        "title": "drs-prom node features",
        "uid": "drs-prom-nodes",
        "schemaVersion": 38,
        "version": 1,
        "editable": True,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "10s",
        "tags": ["drs-prom"],
        "templating": {
            "list": [
                {
                    "name": "node",
                    "label": "Node",
                    "type": "query",
                    "datasource": ds,
                    "query": {"query": f"label_values(node_uname_info, {NODE_LABEL})", "refId": "node"},
                    "definition": f"label_values(node_uname_info, {NODE_LABEL})",
                    "includeAll": True,
                    "multi": True,
                    "allValue": ".*",
                    "refresh": 2,
                }
            ]
        },
        "panels": panels,
    }


def dashboard_json(p: RuleParams = RuleParams()) -> str:
    """The dashboard exactly as checked in at deploy/prometheus/grafana/drs-nodes.json."""
    return json.dumps(dashboard(p), indent=2) + "\n"


def dashboard_exprs(board: dict[str, Any]) -> list[str]:
    """Every PromQL expression of a dashboard, template variables substituted for a test run."""
    out = []
    for p in board.get("panels", []):
        for t in p.get("targets", []):
            expr = t["expr"]
            for var, value in GRAFANA_VARS.items():
                expr = expr.replace(var, value)
            out.append(expr)
    return out


# ---------------------------------------------------------------------------
# Per-pod usage from the kubelet's cAdvisor series: recording rules (one series per pod and signal) and the
# history queries drs_prom.signals.pod_usage sends for an owner's pods or for the pods running an image.

POD_LABELS = "namespace, pod"
"""What every per-pod series is keyed by."""

CONTAINERS = 'container!="",container!="POD"'
"""cAdvisor's container-level series: not the pod's own cgroup (container="") nor its sandbox (container="POD")."""

SANDBOX = 'container=~"|POD",interface!="",interface!="lo"'
"""Where cAdvisor reports a pod's network: the pod's cgroup (container="", containerd, CRI-O) or its sandbox
(container="POD", dockershim), once per interface; loopback traffic never leaves the node."""

HISTORY_STAT = "drs_stat"
"""The label a history query's answer carries: a feature name (its mean), ``first`` or ``last`` (seen)."""


def pod_usage_queries(window: str = _USAGE.rate_window, selector: str = _USAGE.cadvisor_selector) -> dict[str, str]:
    """One expression per feature (FEATURES order) giving every pod's usage now: cpu in cores, memory in bytes
    (working set), the rest bytes/s. Container series are summed over the pod's containers; network series are
    taken once per interface (a pod whose cgroup and sandbox both report it would count twice), then summed.

    Counters are read with ``irate`` (the last two samples within ``window``), not ``rate``: what is kept is a mean
    over hours, and ``rate`` divides the increase by the whole window, so it ramps up over a pod's first window
    and down over the window after its end: a pod that ran L seconds reads L / (L + window) of its usage (a
    5-minute Job with a 2m window: 71 %). ``irate`` reads a constant usage exactly from the second sample on, and
    its samples average to the mean over time; a container restart is a counter reset it handles."""
    ctr = matchers(selector, CONTAINERS)

    def summed(expr: str) -> str:
        return f"sum by({POD_LABELS}) ({expr})"

    def network(metric: str) -> str:
        per_interface = f"max by({POD_LABELS}, interface) (irate({metric}{matchers(selector, SANDBOX)}[{window}]))"
        return summed(per_interface)

    queries = {
        "cpu": summed(f"irate(container_cpu_usage_seconds_total{ctr}[{window}])"),
        "mem": summed(f"container_memory_working_set_bytes{ctr}"),
        "net_rx": network("container_network_receive_bytes_total"),
        "net_tx": network("container_network_transmit_bytes_total"),
        "disk_read": summed(f"irate(container_fs_reads_bytes_total{ctr}[{window}])"),
        "disk_write": summed(f"irate(container_fs_writes_bytes_total{ctr}[{window}])"),
    }
    assert tuple(queries) == FEATURES
    return queries


def pod_last_seen(selector: str = _USAGE.cadvisor_selector) -> str:
    """When each pod's newest sample was taken (unix s): recorded, its smallest and largest value over a window
    say when the pod was first and last seen in it."""
    return f"max by({POD_LABELS}) (timestamp(container_cpu_usage_seconds_total{matchers(selector, CONTAINERS)}))"


def pod_images(selector: str = _USAGE.cadvisor_selector) -> str:
    """1 for each pod and image one of its containers runs (the ``image`` label of cAdvisor's series)."""
    sel = matchers(selector, CONTAINERS, 'image!=""')
    return f"group by({POD_LABELS}, image) (container_cpu_usage_seconds_total{sel})"


def pod_recorded_names(window: str = _USAGE.rate_window) -> dict[str, str]:
    """Recording-rule name per feature, ``drs:pod_<feature>:<unit>_irate<window>``."""
    w = "i" + _window_suffix(window)
    return {
        "cpu": f"drs:pod_cpu:cores_{w}",
        "mem": "drs:pod_mem:working_set_bytes",
        "net_rx": f"drs:pod_net_rx:bytes_{w}",
        "net_tx": f"drs:pod_net_tx:bytes_{w}",
        "disk_read": f"drs:pod_disk_read:bytes_{w}",
        "disk_write": f"drs:pod_disk_write:bytes_{w}",
    }


POD_LAST_SEEN_RULE = "drs:pod_last_seen:timestamp_seconds"
POD_IMAGE_RULE = "drs:pod_image:info"
POD_USAGE_GROUP = "drs-pod-usage"


def pod_usage_rules(window: str, selector: str) -> list[dict[str, str]]:
    """The per-pod recording rules: the six features, when each pod was seen, the images it runs."""
    names = pod_recorded_names(window)
    queries = pod_usage_queries(window, selector)
    rules = [{"record": names[f], "expr": queries[f]} for f in FEATURES]
    rules.append({"record": POD_LAST_SEEN_RULE, "expr": pod_last_seen(selector)})
    rules.append({"record": POD_IMAGE_RULE, "expr": pod_images(selector)})
    return rules


def image_regex(spellings: tuple[str, ...]) -> str:
    """An anchored regex matching any of an image's spellings (drs_prom.usage.owners.image_spellings)."""
    return "^(?:" + "|".join(escape(s) for s in spellings) + ")$"


def pod_history(
    namespace: str,
    history: str,
    window: str = _USAGE.rate_window,
    *,
    pods: str = "",
    exclude: str = "",
    image: str = "",
) -> str:
    """One query for the stored usage of pods of ``namespace`` over the ``history`` before its evaluation time,
    read from the recording rules: those whose names match the regex ``pods`` and not ``exclude``, and, when
    ``image`` (a regex, ``image_regex``) is given, that ran a matching image. Per pod one sample per
    ``HISTORY_STAT``: each feature's mean over the time it was seen (its name), ``first`` and ``last`` (when it
    was first and last seen: their difference is how long)."""
    sel = matchers(
        f"namespace={quote(namespace)}",
        f"pod=~{quote(pods)}" if pods else "",
        f"pod!~{quote(exclude)}" if exclude else "",
    )

    def stat(expr: str, name: str) -> str:
        return f'label_replace({expr}, "{HISTORY_STAT}", "{name}", "", "")'

    names = pod_recorded_names(window)
    parts = [stat(f"avg_over_time({names[f]}{sel}[{history}])", f) for f in FEATURES]
    parts.append(stat(f"min_over_time({POD_LAST_SEEN_RULE}{sel}[{history}])", "first"))
    parts.append(stat(f"max_over_time({POD_LAST_SEEN_RULE}{sel}[{history}])", "last"))
    expr = " or ".join(parts)
    if not image:
        return expr
    ran = matchers(f"namespace={quote(namespace)}", f"image=~{quote(image)}")
    return f"({expr}) and on({POD_LABELS}) group by({POD_LABELS}) (max_over_time({POD_IMAGE_RULE}{ran}[{history}]))"
