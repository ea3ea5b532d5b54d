"""The ``drs-prom-research`` command: the references and learners that are not shipped, from a source checkout.

``drs-prom`` shows shipped things only. Here:

- ``bench``             ``drs-prom bench`` with the research references registered: ``--policies clairvoyant``
                        adds the rollout that reads the future (and the migration floor);
- ``headroom``          per suite scenario, how much the clairvoyant (and, with ``--samples``, the look-ahead over
                        sampled futures) gains over the best heuristic (drs_prom_research.headroom);
- ``train-selector``    the heuristic selector (drs_prom_research.selector_run);
- ``train-correction``  the top-k correction of a heuristic (drs_prom_research.correction_run).

Each learner has its own command and its own defaults (the numbers its documented runs used).
"""

from __future__ import annotations

import copy
import json
import shlex
import sys
from typing import Any

import click

import drs_prom_research
from drs_prom.cli import bench_cmd
from drs_prom.errors import DrsError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def research() -> None:
    """drs-prom-research: references that read the simulated future, and learners that did not ship."""
    drs_prom_research.register()


def main() -> None:
    """Entry point: a DrsError becomes one line on stderr and exit code 2, never a traceback."""
    try:
        research(standalone_mode=True, prog_name="drs-prom-research")
    except DrsError as exc:
        click.echo(f"drs-prom-research: error: {exc}", err=True)
        sys.exit(2)


def _bench_with_references() -> click.Command:
    """``drs-prom bench`` itself, its ``--policies`` help naming the reference this package registers."""
    cmd = copy.copy(bench_cmd)
    cmd.params = [copy.copy(p) for p in bench_cmd.params]
    for param in cmd.params:
        if param.name == "policies" and isinstance(param, click.Option):
            param.help = (
                f"{param.help} 'clairvoyant' adds a rollout that reads the future from the simulator, to show what "
                "is reachable (slow: ~15 s a seed), and the migration floor where the scenario has one."
            )
    return cmd


research.add_command(_bench_with_references(), "bench")


@research.command("headroom")
@click.option("--seeds", default=2, show_default=True, type=click.IntRange(1), help="Seeds 0..N-1 (the suite's).")
@click.option("--top-k", default=3, show_default=True, type=click.IntRange(1), help="Nodes the rollout branches on.")
@click.option("--only", default=None, help="Comma-separated scenarios (default: the suite's).")
@click.option(
    "--max-pods", default=None, type=click.IntRange(1), help="Skip scenarios with more pods (the rollout costs pods^2)."
)
@click.option(
    "--samples",
    default=0,
    show_default=True,
    type=click.IntRange(0),
    help="Also the look-ahead rollout over this many sampled futures (0: not).",
)
@click.option(
    "--gate",
    default=0.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Look-ahead leaves the heuristic only when its paired saving exceeds this many standard errors.",
)
@click.option(
    "--veil",
    is_flag=True,
    help="Look-ahead also draws the present pods' run time and unstarted pods' demand (knows only their law).",
)
@click.option("--jobs", default=2, show_default=True, type=click.IntRange(1, 64), help="Scenarios in parallel.")
@click.option("--json", "json_path", default=None, type=click.Path(dir_okay=False), help="Also write the rows here.")
def headroom_cmd(
    seeds: int,
    top_k: int,
    only: str | None,
    max_pods: int | None,
    samples: int,
    gate: float,
    veil: bool,
    jobs: int,
    json_path: str | None,
) -> None:
    """How much foresight gains over each suite scenario's best heuristic, beside the per-seed heuristic oracle
    and the shipped drs (docs/headroom.md)."""
    from drs_prom.sim.bench import shipped_model
    from drs_prom.sim.suite import resolve_scenario, suite_names
    from drs_prom_research.headroom import format_headroom, run_headroom

    names = suite_names([n.strip() for n in only.split(",") if n.strip()] if only else None)
    sizes = {n: resolve_scenario(n).n_pods for n in names}
    skipped = [n for n in names if max_pods and sizes[n] > max_pods]
    names = sorted((n for n in names if n not in skipped), key=lambda n: sizes[n])
    model_path, _ = shipped_model()

    def echo(row: dict[str, Any]) -> None:
        look = (
            f"look-ahead (gate {row['gate']:g}{', veiled' if row['veil'] else ''}) {100 * row['lookahead_gain']:.1f} %, "
            if row["samples"]
            else ""
        )
        click.echo(
            f"{row['scenario']}: best {row['best_heuristic']} {row['best_heuristic_composite']:.3f}, "
            f"clairvoyant {row['clairvoyant_composite']:.3f} (headroom {100 * row['headroom']:.1f} %), "
            f"{look}drs {100 * row['drs_gap']:+.1f} %, {row['wall_seconds']:.0f} s"
        )

    rows = run_headroom(names, list(range(seeds)), top_k, model_path, jobs, echo, samples, gate, veil)
    click.echo(format_headroom(rows))
    if skipped:
        click.echo(f"not measured (more than {max_pods} pods): {', '.join(skipped)}")
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"top_k": top_k, "rows": rows, "skipped": skipped}, f, indent=1)


def _command_line() -> str:
    """What the model's JSON records as the command that made it."""
    return "drs-prom-research " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def _out_option(default: str) -> Any:
    return click.option(
        "--out", "out_path", default=default, show_default=True, help="Model path (.keras; .json beside it)."
    )


def _check_training(out_path: str) -> None:
    """One line, before any work, for a wrong path or a base install without TensorFlow."""
    from drs_prom.errors import ConfigError
    from drs_prom.extras import require_train

    if not out_path.endswith(".keras"):
        raise ConfigError(f"--out must end in .keras: {out_path}")
    require_train("drs-prom-research training")


@research.command("train-selector")
@_out_option("out/research/selector.keras")
@click.option("--clusters", default=400, show_default=True, type=click.IntRange(1, 100_000), help="Clusters labelled.")
@click.option(
    "--decisions", default=10, show_default=True, type=click.IntRange(1, 1000), help="Decisions sampled per cluster."
)
@click.option("--members", default=5, show_default=True, type=click.IntRange(1, 16), help="Ensemble members.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seeds the weights.")
@click.option(
    "--labels",
    "labels_path",
    default=None,
    type=click.Path(dir_okay=False),
    help=".npz of labelled clusters, reused if it exists, else written.",
)
@click.option("--no-progress", is_flag=True)
def train_selector_cmd(
    out_path: str, clusters: int, decisions: int, members: int, seed: int, labels_path: str | None, no_progress: bool
) -> None:
    """Train the heuristic selector: a Q-network choosing among heuristics per cluster state, from the paired
    composite scores of every heuristic on generated clusters (drs_prom_research.selector_run)."""
    _check_training(out_path)
    from drs_prom_research.selector_run import SelectorConfig, run_selector_training

    run_selector_training(
        out_path,
        clusters=clusters,
        decisions=decisions,
        cfg=SelectorConfig(members=members, seed=seed),
        labels_path=labels_path,
        progress=not no_progress,
        command=_command_line(),
        echo=click.echo,
    )


@research.command("train-correction")
@_out_option("out/research/correction.keras")
@click.option("--clusters", default=800, show_default=True, type=click.IntRange(1, 100_000), help="Clusters labelled.")
@click.option(
    "--decisions", default=8, show_default=True, type=click.IntRange(1, 1000), help="Decisions labelled per cluster."
)
@click.option("--members", default=3, show_default=True, type=click.IntRange(1, 16), help="Ensemble members.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seeds the weights.")
@click.option(
    "--samples",
    "samples_path",
    default=None,
    type=click.Path(dir_okay=False),
    help=".npz of labelled decisions, reused if it exists, else written.",
)
@click.option("--no-progress", is_flag=True)
def train_correction_cmd(
    out_path: str, clusters: int, decisions: int, members: int, seed: int, samples_path: str | None, no_progress: bool
) -> None:
    """Train the top-k correction of capacity-balanced-overload from rollout labels on generated clusters
    (drs_prom_research.correction_run)."""
    _check_training(out_path)
    from drs_prom_research.correction_fit import FitConfig
    from drs_prom_research.correction_run import run_rollout_training

    run_rollout_training(
        out_path,
        clusters=clusters,
        decisions=decisions,
        cfg=FitConfig(members=members, seed=seed),
        samples_path=samples_path,
        progress=not no_progress,
        command=_command_line(),
        echo=click.echo,
    )


if __name__ == "__main__":  # python -m drs_prom_research.commands
    main()
