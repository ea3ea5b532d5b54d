"""The benchmark's picture: utilisation and imbalance over time, one line per policy (first seed)."""

from __future__ import annotations

from pathlib import Path

from drs_prom.sim.report import BenchReport

SMOOTH_SAMPLES = 6
"""Plotted lines are moving means over this many samples (raw series are in the JSON)."""


def _moving_mean(values: list[float], k: int) -> list[float]:
    """Trailing mean over up to ``k`` samples (same length as the input)."""
    out, acc = [], 0.0
    for i, v in enumerate(values):
        acc += v
        if i >= k:
            acc -= values[i - k]
        out.append(acc / min(i + 1, k))
    return out


def plot_report(report: BenchReport, path: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_u, ax_i) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    smooth = SMOOTH_SAMPLES
    for row in report.rows:
        if row.skipped or not row.runs:
            continue
        run = row.runs[0]
        ax_u.plot(
            run.series_t,
            _moving_mean(run.series_utilisation, smooth),
            label=f"{row.policy} (mean {row.mean('utilisation'):.3f})",
            lw=1.2,
        )
        ax_i.plot(
            run.series_t,
            _moving_mean(run.series_imbalance, smooth),
            label=f"{row.policy} (mean {row.mean('imbalance'):.3f})",
            lw=1.2,
        )
    seed = report.seeds[0] if report.seeds else 0
    ax_u.set_ylabel(f"mean utilisation\n(used / capacity, {smooth}-sample mean)")
    ax_i.set_ylabel(f"load imbalance\n(sum of per-feature std, {smooth}-sample mean)")
    ax_i.set_xlabel("simulated seconds")
    ax_u.set_title(
        f"{report.scenario}: {report.n_nodes} nodes, {report.pods} pods; lines: seed {seed}, legend: mean of {len(report.seeds)} seeds"
    )
    for ax in (ax_u, ax_i):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    out = Path(path)
    tmp = out.with_name(out.stem + ".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(out)
    return out


def plot_pareto(bench: dict, path: str | Path) -> Path:
    """One point per policy: DRS imbalance (x) against p95 pod slowdown (y), mean over seeds with
    error bars of +-1 std over seeds; both lower is better, so the front is to the lower left."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7, 5))
    for name, row in bench["policies"].items():
        runs = row.get("runs") or []
        if not runs:
            continue
        x = np.array([r["objectives"]["drs_imbalance"] for r in runs])
        y = np.array([r["objectives"]["slowdown_p95"] for r in runs])
        ax.errorbar(x.mean(), y.mean(), xerr=x.std(), yerr=y.std(), fmt="o", capsize=3, label=name)
        ax.annotate(name, (x.mean(), y.mean()), fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel("DRS imbalance (capped usage, time average)")
    ax.set_ylabel("p95 pod slowdown (completion / run time alone)")
    ax.set_title(
        f"{bench['scenario']}: {bench['n_nodes']} nodes, {bench['pods']} pods, {len(bench['seeds'])} seeds "
        "(bars: +-1 std over seeds)",
        fontsize=9,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    out = Path(path)
    tmp = out.with_name(out.stem + ".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(out)
    return out
