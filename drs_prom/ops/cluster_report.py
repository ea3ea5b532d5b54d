"""``drs-prom report``: what the learned policy did to the cluster, as one HTML page.

Reads the decision journal (arms, shadow choices, fallback reasons, rollout events) and
Prometheus (the guardrail signals of drs_prom.signals.promql over the same period) and writes
``index.html`` plus four PNGs and ``numbers.json`` into one directory:

  decisions.png   decisions per time bin, by arm and by who decided (model, heuristic, fallback)
  agreement.png   share of compared decisions where model and heuristic chose the same node
  cluster.png     node-relative CPU imbalance and hot-node share over time, with promotion,
                  rollback and guardrail-trip markers
  fallbacks.png   fallback decisions by reason

``collect`` (pure over its inputs) computes the numbers; ``plot``/``write_html`` draw them.
Prometheus is optional: without it the cluster plot says so and the rest still renders.
"""

from __future__ import annotations

import html
import json
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from drs_prom.config import Settings, duration_seconds
from drs_prom.errors import ConfigError
from drs_prom.signals import promql
from drs_prom.stores.journal import Decision, Journal, RolloutEvent
from drs_prom.stores.model_store import ModelStore

MARKERS = {
    "promote": ("tab:green", "promotion"),
    "rollback": ("tab:red", "rollback"),
    "guardrail_trip": ("tab:orange", "guardrail trip"),
}


@dataclass
class ReportData:
    since: float
    until: float
    decisions: list[Decision]
    events: list[RolloutEvent]
    promotions: list[dict[str, Any]]
    series: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # name -> (t, value)
    prometheus_error: str | None = None


def who(d: Decision) -> str:
    """``model <version>`` | heuristic | fallback:<reason>: who placed this pod."""
    if d.fallback_reason:
        return f"fallback:{d.fallback_reason}"
    arm = d.arm or "model"
    return f"{arm} {d.model_version}" if arm == "model" and d.model_version else arm


def collect(data: ReportData) -> dict[str, Any]:
    """The numbers behind the page (also written as numbers.json)."""
    bound = [d for d in data.decisions if d.outcome == "bound"]
    compared = [d for d in bound if d.shadow_choice is not None]
    agree = sum(d.shadow_choice == d.chosen for d in compared)
    cf: dict[str, list[float]] = {}
    for d in compared:
        for arm, v in (d.counterfactual or {}).items():
            cf.setdefault(arm, []).append(float(v))
    out: dict[str, Any] = {
        "since": data.since,
        "until": data.until,
        "decisions": len(data.decisions),
        "bound": len(bound),
        "by_arm": dict(Counter(d.arm or "model" for d in bound)),
        "by_decider": dict(Counter(who(d) for d in bound)),
        "by_policy": dict(Counter(d.policy for d in bound)),
        "fallback_reasons": dict(Counter(d.fallback_reason for d in bound if d.fallback_reason)),
        "compared": len(compared),
        "agreement": agree / len(compared) if compared else None,
        "counterfactual_imbalance_mean (estimate)": {a: float(np.mean(v)) for a, v in cf.items()},
        "model_versions": dict(Counter(d.model_version for d in bound if d.model_version)),
        "events": dict(Counter(e.kind for e in data.events)),
        "guardrail_trips": [
            {"ts": e.ts, "version": e.version, "rule": e.detail.get("rule"), "value": e.detail.get("value")}
            for e in data.events
            if e.kind == "guardrail_trip"
        ],
        "verdicts": [
            {"ts": e.ts, "version": e.version, "worse": e.detail.get("worse"), "reasons": e.detail.get("reasons")}
            for e in data.events
            if e.kind == "promotion_verdict"
        ],
        "promotions": [p for p in data.promotions if data.since <= float(p.get("ts", 0)) <= data.until],
    }
    for name, (_t, values) in data.series.items():
        out[f"{name}_mean"] = float(np.nanmean(values)) if len(values) else None
        out[f"{name}_max"] = float(np.nanmax(values)) if len(values) else None
    if data.prometheus_error:
        out["prometheus_error"] = data.prometheus_error
    return out


def _bins(since: float, until: float, n: int = 40) -> np.ndarray:
    return np.linspace(since, max(until, since + 1), n + 1)


@dataclass(frozen=True)
class _Axis:
    """Time axis of the plots: from shortly before the first decision (or the period's
    start), in minutes, or seconds when the span is under five minutes."""

    t0: float
    until: float

    @classmethod
    def of(cls, data: ReportData) -> _Axis:
        stamps = [d.ts for d in data.decisions] + [e.ts for e in data.events]
        if not stamps:
            return cls(data.since, data.until)
        return cls(max(data.since, min(stamps) - 10.0), min(data.until, max(stamps) + 10.0))

    @property
    def unit(self) -> float:
        return 60.0 if self.until - self.t0 > 300 else 1.0

    @property
    def label(self) -> str:
        return (
            f"{'minutes' if self.unit == 60 else 'seconds'} since {time.strftime('%H:%M:%S UTC', time.gmtime(self.t0))}"
        )

    def __call__(self, t: Any) -> Any:
        return (np.asarray(t, dtype=float) - self.t0) / self.unit


def _markers(ax: Any, data: ReportData, axis: _Axis) -> None:
    seen: set[str] = set()
    points = [(float(p["ts"]), p.get("action", "promote"), p.get("version")) for p in data.promotions]
    points += [(e.ts, "guardrail_trip", e.version) for e in data.events if e.kind == "guardrail_trip"]
    for ts, kind, _version in points:
        if not axis.t0 <= ts <= axis.until or kind not in MARKERS:
            continue
        color, label = MARKERS[kind]
        ax.axvline(axis(ts), color=color, ls="--", lw=1.2, label=None if label in seen else label)
        seen.add(label)


def plot(data: ReportData, out: Path) -> dict[str, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths: dict[str, Path] = {}
    bound = [d for d in data.decisions if d.outcome == "bound"]
    axis = _Axis.of(data)
    edges = _bins(axis.t0, axis.until)
    mids = axis((edges[:-1] + edges[1:]) / 2)
    width = (edges[1] - edges[0]) / axis.unit

    fig, ax = plt.subplots(figsize=(9, 3.8))
    groups = sorted({who(d) for d in bound}) or ["model"]
    bottom = np.zeros(len(mids))
    for g in groups:
        counts, _ = np.histogram([d.ts for d in bound if who(d) == g], bins=edges)
        ax.bar(mids, counts, width=width * 0.95, bottom=bottom, label=g)
        bottom += counts
    _markers(ax, data, axis)
    ax.set(xlabel=axis.label, ylabel="pods bound per bin", title="Decisions by arm / decider")
    ax.legend(fontsize=8, loc="upper left")
    paths["decisions"] = _save(fig, out / "decisions.png")

    fig, ax = plt.subplots(figsize=(9, 3.2))
    comp = [d for d in bound if d.shadow_choice is not None]
    if comp:
        ts = np.array([d.ts for d in comp])
        ag = np.array([d.shadow_choice == d.chosen for d in comp], dtype=float)
        idx = np.digitize(ts, edges) - 1
        rate = [ag[idx == i].mean() if (idx == i).any() else np.nan for i in range(len(mids))]
        ax.plot(mids, rate, marker="o", ms=3)
        ax.set_ylim(-0.05, 1.05)
        ax.set_title(f"Model/heuristic agreement per bin (overall {ag.mean():.0%} of {len(comp)} compared)")
    else:
        ax.text(0.5, 0.5, "no shadow comparisons in this period (mode normal)", ha="center", transform=ax.transAxes)
        ax.set_title("Model/heuristic agreement")
    _markers(ax, data, axis)
    ax.set(xlabel=axis.label, ylabel="agreement")
    paths["agreement"] = _save(fig, out / "agreement.png")

    fig, ax = plt.subplots(figsize=(9, 3.8))
    if data.series:
        for name, (t, v) in data.series.items():
            keep = (np.asarray(t) >= axis.t0) & (np.asarray(t) <= axis.until)
            ax.plot(axis(np.asarray(t)[keep]), np.asarray(v)[keep], label=name)
        ax.set_title("Cluster during the period (from Prometheus)")
    else:
        ax.text(
            0.5,
            0.5,
            f"no Prometheus data: {data.prometheus_error or 'not queried'}",
            ha="center",
            transform=ax.transAxes,
            wrap=True,
        )
        ax.set_title("Cluster during the period")
    _markers(ax, data, axis)
    ax.set(xlabel=axis.label, ylabel="value")
    ax.legend(fontsize=8, loc="upper left")
    paths["cluster"] = _save(fig, out / "cluster.png")

    fig, ax = plt.subplots(figsize=(6, 3.2))
    reasons = Counter(d.fallback_reason for d in bound if d.fallback_reason)
    if reasons:
        names = sorted(reasons)
        ax.barh(names, [reasons[n] for n in names], color="tab:orange")
        ax.set_xlabel("decisions")
    else:
        ax.text(0.5, 0.5, "no fallback decisions", ha="center", transform=ax.transAxes)
    ax.set_title("Fallback decisions by reason")
    paths["fallbacks"] = _save(fig, out / "fallbacks.png")
    return paths


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "-" if math.isnan(v) else f"{v:.4g}"
    if isinstance(v, (dict, list)):
        return json.dumps(v, default=str)
    return str(v)


def write_html(numbers: dict[str, Any], images: dict[str, Path], out: Path) -> Path:
    when = f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(numbers['since']))} to " + time.strftime(
        "%Y-%m-%d %H:%M:%S UTC", time.gmtime(numbers["until"])
    )
    rows = "\n".join(
        f"<tr><th>{html.escape(k)}</th><td><code>{html.escape(_fmt(v))}</code></td></tr>" for k, v in numbers.items()
    )
    figs = "\n".join(f'<h2>{html.escape(k)}</h2><img src="{p.name}" alt="{html.escape(k)}">' for k, p in images.items())
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>drs-prom rollout report</title>
<style>body{{font-family:sans-serif;max-width:960px;margin:2em auto}}th{{text-align:left;padding-right:1em}}
td code{{white-space:pre-wrap}}img{{max-width:100%}}</style></head>
<body><h1>drs-prom rollout report</h1><p>{html.escape(when)}. Counterfactual imbalance values are estimates from
each decision's own node state, not measurements.</p>
<table>{rows}</table>
{figs}
</body></html>
"""
    path = out / "index.html"
    path.write_text(page)
    return path


def gather(
    journal: Journal,
    since: float,
    until: float,
    promotions: Sequence[dict[str, Any]] = (),
    query_range: Callable[[str, float, float, float], tuple[np.ndarray, np.ndarray]] | None = None,
    signals: dict[str, str] | None = None,
    step: float = 15.0,
) -> ReportData:
    """Journal rows and events in [since, until), plus each signal from Prometheus when given."""
    rows = [d for d in journal.since(since, until) if isinstance(d, Decision)]
    data = ReportData(since, until, rows, journal.events(since, until), list(promotions))
    if query_range is not None and signals:
        try:
            for name, expr in signals.items():
                data.series[name] = query_range(expr, since, until, step)
        except Exception as exc:  # noqa: BLE001 - the journal half of the report is still worth having
            data.series.clear()
            data.prometheus_error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return data


def prometheus_range(source: Any) -> Callable[[str, float, float, float], tuple[np.ndarray, np.ndarray]]:
    """A range query of one cluster-wide expression through PrometheusSource (its rows are
    keyed by ``nodename``, so the single series is labelled ``nodename="cluster"``)."""
    from datetime import UTC, datetime

    def query(expr: str, start: float, end: float, step: float) -> tuple[np.ndarray, np.ndarray]:
        labelled = f'label_replace({expr}, "nodename", "cluster", "", "")'
        frame = source.query_range(
            labelled, datetime.fromtimestamp(start, tz=UTC), datetime.fromtimestamp(end, tz=UTC), step
        )
        if frame.empty:
            return np.array([]), np.array([])
        col = frame.iloc[:, 0]
        return np.array([t.timestamp() for t in col.index]), col.to_numpy(dtype=float)

    return query


def build(data: ReportData, out_dir: str | Path) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    numbers = collect(data)
    (out / "numbers.json").write_text(json.dumps(numbers, indent=1, default=str) + "\n")
    return write_html(numbers, plot(data, out), out)


def report_since(settings: Settings, since: str, out_dir: str | Path, with_prometheus: bool = True) -> tuple[Path, Any]:
    """``drs-prom report``: the page for the last ``since`` (a duration such as 6h) from the settings' journal,
    model store and (``with_prometheus``) Prometheus; ConfigError (one line) for a bad duration or no journal."""
    span = duration_seconds(since)
    if span <= 0:
        raise ConfigError(f"--since must be a positive duration such as 30m or 6h, got {since!r}")
    if not Path(settings.scheduler.journal_path).is_file():
        raise ConfigError(f"journal not found: {settings.scheduler.journal_path}")
    until = time.time()
    journal = Journal(settings.scheduler.journal_path)
    source = None
    try:
        query = None
        if with_prometheus:
            from drs_prom.signals.prometheus import PrometheusSource

            source = PrometheusSource(settings.prometheus)
            query = prometheus_range(source)
        g, p = settings.rollout.guardrails, settings.prometheus
        sig = promql.guardrail_signals(p.window, g.hot_cpu, p.node_selector, g.scheduler_job)
        data = gather(
            journal,
            until - span,
            until,
            ModelStore(settings.retrain.model_store).history(),
            query,
            {"imbalance (stddev/mean cpu)": sig["imbalance"], "hot node (any node > hot_cpu)": sig["hot_node"]},
            step=max(1.0, span / 600),
        )
        return build(data, out_dir), data
    finally:
        journal.close()
        if source is not None:
            source.close()
