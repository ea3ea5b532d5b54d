"""The benchmark's pictures: utilisation and imbalance over time, one line per policy (its first seed's run, the
legend's numbers the mean over seeds), and imbalance against tail slowdown, one point per policy."""

from __future__ import annotations

from pathlib import Path

from drs_prom.sim.bench_results import BenchReport

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


COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#000000",
    "#b8860b",
)
"""Twelve colours no two of which look alike (matplotlib's tab10, black, dark goldenrod): one per policy."""

LINE_STYLES = ("-", "--", "-.", ":")
"""Cycled beside the colours, so neighbours in the legend differ in both and a grey print still tells them apart."""


def policy_styles(names: list[str]) -> dict[str, dict[str, object]]:
    """Policy -> matplotlib line keywords: a colour of its own (up to 12 policies) and a line style; the learned
    policies (drs*) drawn thicker, since they are what the picture is about."""
    return {
        name: {
            "color": COLOURS[i % len(COLOURS)],
            "linestyle": LINE_STYLES[i % len(LINE_STYLES)],
            "lw": 2.2 if name.startswith("drs") else 1.3,
        }
        for i, name in enumerate(names)
    }


def plot_report(report: BenchReport, path: str | Path) -> Path:
    """Utilisation and imbalance over time, one line per policy; one legend, right of both panels, off the data."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [row for row in report.rows if not row.skipped and row.runs]
    styles = policy_styles([row.policy for row in rows])
    fig, (ax_u, ax_i) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    smooth = SMOOTH_SAMPLES
    for row in rows:
        run = row.runs[0]
        label = f"{row.policy}: utilisation {row.mean('utilisation'):.3f}, imbalance {row.mean('imbalance'):.3f}"
        ax_u.plot(run.series_t, _moving_mean(run.series_utilisation, smooth), label=label, **styles[row.policy])
        ax_i.plot(run.series_t, _moving_mean(run.series_imbalance, smooth), **styles[row.policy])
    seed = report.seeds[0] if report.seeds else 0
    ax_u.set_ylabel(f"mean utilisation\n(used / capacity, {smooth}-sample mean)")
    ax_i.set_ylabel(f"load imbalance\n(sum of per-feature std, {smooth}-sample mean)")
    ax_i.set_xlabel("simulated seconds")
    ax_u.set_title(
        f"{report.scenario}: {report.n_nodes} nodes, {report.pods} pods; lines: seed {seed}'s run, "
        f"numbers: mean of {len(report.seeds)} seed{'s' if len(report.seeds) != 1 else ''}; thick: learned (drs)",
        fontsize=9,
    )
    for ax in (ax_u, ax_i):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.legend(
        loc="center left",
        bbox_to_anchor=(1.0, 0.5),
        fontsize=8,
        title=f"policy (drs: the shipped model unless --model): mean of {len(report.seeds)} "
        f"seed{'s' if len(report.seeds) != 1 else ''}",
        title_fontsize=8,
        frameon=False,
        handlelength=3,
    )
    out = Path(path)
    tmp = out.with_name(out.stem + ".tmp.png")
    fig.savefig(tmp, dpi=110, bbox_inches="tight")  # "tight" grows the canvas to the legend beside the panels
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

    fig, ax = plt.subplots(figsize=(9, 5))
    shown = [name for name, row in bench["policies"].items() if row.get("runs")]
    styles = policy_styles(shown)
    markers = "osD^vP*Xph<>"
    for i, name in enumerate(shown):
        runs = bench["policies"][name]["runs"]
        x = np.array([r["objectives"]["drs_imbalance"] for r in runs])
        y = np.array([r["objectives"]["slowdown_p95"] for r in runs])
        ax.errorbar(
            x.mean(),
            y.mean(),
            xerr=x.std(),
            yerr=y.std(),
            fmt=markers[i % len(markers)],
            capsize=3,
            label=name,
            color=styles[name]["color"],
        )
        ax.annotate(name, (x.mean(), y.mean()), fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel("DRS imbalance (capped usage, time average)")
    ax.set_ylabel("p95 pod slowdown (completion / run time alone)")
    ax.set_title(
        f"{bench['scenario']}: {bench['n_nodes']} nodes, {bench['pods']} pods, {len(bench['seeds'])} seeds "
        "(bars: +-1 std over seeds)",
        fontsize=9,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    out = Path(path)
    tmp = out.with_name(out.stem + ".tmp.png")
    fig.savefig(tmp, dpi=100, bbox_inches="tight")
    plt.close(fig)
    tmp.replace(out)
    return out
