"""``drs-prom-research train-correction``: label generated clusters, fit the top-k correction, save model + JSON + PNG.

A research learner: its models were not shipped (models/README.md, "Other learners tried"). Its JSON says which
generator seeds were labelled, which held-out generator seeds chose the checkpoint and the
margin, and that the named scenarios and the 20 evaluation clusters were used by neither.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

from drs_prom.agent.model_inputs import N_CANDIDATE
from drs_prom.agent.persistence import base_metadata, save_model
from drs_prom.config import Normalisation
from drs_prom.sim.generator import EVAL_CLUSTERS, EVAL_SEED_BASE
from drs_prom_research.correction_fit import FitConfig, FitResult, fit
from drs_prom_research.corrector import TopKCorrection
from drs_prom_research.playout_targets import Samples, label_training_clusters, load_samples, save_samples

SELECTION_SEED_BASE = 500_000
"""Held-out generator seeds for checkpoint/margin selection start here (labelling uses seeds below it)."""


def plot_selection(result: FitResult, path: str | Path, title: str) -> Path:
    """Learning curve: held-out composite / base heuristic per checkpoint, one line per margin."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    epochs = [p["epoch"] for p in result.curve]
    margins = sorted({m for p in result.curve for m in p["ratio_by_margin"]})
    for m in margins:
        ax1.plot(epochs, [p["ratio_by_margin"][m] for p in result.curve], marker="o", lw=1, label=f"margin {m}")
    ax1.axhline(1.0, color="grey", lw=1, ls="--", label="base heuristic")
    ax1.set_ylabel("composite / base (held out)")
    ax1.set_title(title)
    ax1.legend(fontsize=7)
    ax2.plot(epochs, [p["loss"] for p in result.curve], marker="o", lw=1, color="tab:red")
    ax2.set_ylabel("training loss")
    ax2.set_xlabel("epoch")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def _json_margin(m: float) -> float | None:
    return None if math.isinf(m) else float(m)


def save_correction(
    result: FitResult,
    out: str | Path,
    samples: Samples,
    label_seeds: Sequence[int],
    cfg: FitConfig,
    base: str,
    k: int,
    decisions: int,
    command: str,
    label_seconds: float,
) -> Path:
    """Write the network (one block-ensemble Dense stack) + JSON (head, data, separation) + curve PNG."""
    from drs_prom.agent.networks import configure_tf, node_scorer

    configure_tf()
    hidden = tuple(int(kernel.shape[1]) for kernel, _, _ in result.layers[:-1])
    model = node_scorer(N_CANDIDATE, hidden)
    weights = []
    for kernel, bias, _ in result.layers:
        weights += [kernel, bias]
    model.set_weights(weights)
    meta = base_metadata("drs", Normalisation())
    meta["head"] = TopKCorrection(
        result.layers, base, k, result.margin, metric_window_seconds=0.0
    ).head  # only its head
    curve = [
        {**p, "ratio_by_margin": {str(m): round(r, 5) for m, r in p["ratio_by_margin"].items()}} for p in result.curve
    ]
    meta["training"] = {
        "learner": "rollout",
        "command": command,
        "config": asdict(cfg) | {"k": k, "decisions_per_cluster": decisions, "base": base},
        "labelled_decisions": len(samples),
        "label_seconds": round(label_seconds, 1),
        "fit_seconds": round(result.seconds, 1),
        "selection": result.selection | {"margin": _json_margin(result.selection["margin"])},
        "curve": curve,
    }
    meta["data"] = {
        "trained_on": f"generated clusters, generator seeds {min(label_seeds)}..{max(label_seeds)} (TRAIN_SEEDS)",
        "checkpoint_selection": f"generated clusters, generator seeds {min(result.selection['seeds'])}.."
        f"{max(result.selection['seeds'])} (TRAIN_SEEDS, disjoint from the labelled ones)",
        "never_used": "every packaged named scenario and the evaluation clusters "
        f"({len(EVAL_CLUSTERS)} at generator seeds {EVAL_SEED_BASE}+): evaluation only",
    }
    meta["benchmark"] = {}
    path = save_model(model, meta, out)
    plot_selection(result, Path(out).with_suffix(".png"), f"drs top-{k} correction over {base}")
    return path


def run_rollout_training(
    out: str | Path,
    clusters: int = 800,
    decisions: int = 8,
    k: int = 3,
    base: str = "capacity-balanced-overload",
    selection_clusters: int = 30,
    cfg: FitConfig | None = None,
    workers: int = 2,
    samples_path: str | Path | None = None,
    progress: bool = True,
    command: str = "",
    echo: Callable[[str], None] = print,
) -> Path:
    """Label ``clusters`` generated clusters (or reuse ``samples_path`` if it exists), fit, select, save."""
    import time

    cfg = cfg or FitConfig()
    label_seeds = list(range(clusters))
    selection_seeds = [SELECTION_SEED_BASE + i for i in range(selection_clusters)]
    t0 = time.monotonic()
    if samples_path and Path(samples_path).exists():
        samples = load_samples(str(samples_path))
        label_seeds = sorted({int(c) for c in samples.cluster})
        echo(f"reusing {len(samples)} labelled decisions from {samples_path}")
    else:
        samples = label_training_clusters(label_seeds, base, k, decisions, workers=workers, progress=progress)
        if samples_path:
            save_samples(samples, str(samples_path))
    label_s = time.monotonic() - t0
    echo(f"labelled {len(samples)} decisions on {len(label_seeds)} generated clusters in {label_s:.0f} s")
    result = fit(samples, cfg, selection_seeds, base, k, progress=progress, echo=echo)
    path = save_correction(result, out, samples, label_seeds, cfg, base, k, decisions, command, label_s)
    echo(
        f"selected epoch {result.epoch}, margin {result.margin}: held-out composite {result.selection['ratio_to_base']:.4f}"
        f" x {base}'s -> {path}"
    )
    return path
