"""Learning-curve pictures of a training run: the DQN loop's episodes (``plot_curve``) and the guided learner's
selection-cluster ratios per checkpoint (``plot_guided``); matplotlib is imported only when drawing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from drs_prom.training.episodes import TrainResult


def plot_curve(result: TrainResult, path: str | Path, title: str) -> Path:
    """Learning curve PNG: episode return and mean imbalance per episode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    ep = np.arange(1, len(result.returns) + 1)
    ax1.plot(ep, result.returns, lw=1)
    ax1.set_ylabel("episode return")
    ax1.set_title(title)
    ax2.plot(ep, result.imbalance, lw=1, color="tab:red")
    ax2.set_ylabel("mean imbalance")
    ax2.set_xlabel("episode")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


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
