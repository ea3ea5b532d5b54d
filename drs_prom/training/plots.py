"""Learning-curve pictures of a training run (matplotlib, imported only when drawing)."""

from __future__ import annotations

from pathlib import Path

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
