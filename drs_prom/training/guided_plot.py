"""Learning curve of a heuristic-guided training run: selection-cluster ratios per checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot_guided(curve: list[dict[str, Any]], path: str | Path) -> Path:
    """PNG: mean composite ratio to capacity-balanced-overload and to kube-default, and the loss, per stage."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    stages = [p["stage"] for p in curve]
    x = list(range(len(curve)))
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    ax1.plot(x, [p["ratio_to_floor"] for p in curve], "o-", label="/ floor (teacher)")
    ax1.plot(x, [p["ratio_to_kube_default"] for p in curve], "s-", label="/ kube-default")
    ax1.axhline(1.0, color="grey", lw=0.8)
    ax1.set_ylabel("composite ratio (held-out)")
    ax1.legend()
    ax1.set_title("drs (heuristic-guided) on held-out generated clusters")
    ax2.plot(x, [p["loss"] for p in curve], "o-", color="tab:red")
    ax2.set_ylabel("large-margin loss")
    ax2.set_xticks(x, stages)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path
