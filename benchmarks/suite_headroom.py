"""Clairvoyant headroom over the best heuristic, per suite scenario (drs_prom.sim.headroom).

How much a policy that knew the future would gain over each scenario's best heuristic, beside
the per-seed heuristic oracle and the shipped drs; with --samples, also how much of it a rollout that plans
on sampled futures (no more than a scheduler can know) gets. Numbers are printed (and written with --json).

    python benchmarks/suite_headroom.py --seeds 2 --top-k 3 --max-pods 330 --jobs 2 --json /tmp/headroom.json
    python benchmarks/suite_headroom.py --seeds 2 --samples 3 --only heterogeneous,eval-burst-3 --json /tmp/look.json
    python benchmarks/suite_headroom.py --seeds 2 --samples 12 --gate 2 --only drs-paper --json /tmp/gated.json
    python benchmarks/suite_headroom.py --seeds 2 --samples 12 --gate 2 --veil --only drs-paper --json /tmp/veil.json
"""

from __future__ import annotations

import argparse
import json

from drs_prom.sim.bench import shipped_model
from drs_prom.sim.headroom import format_headroom, run_headroom
from drs_prom.sim.suite import resolve_scenario, suite_names


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=2, help="Seeds 0..N-1 (the suite's).")
    ap.add_argument("--top-k", type=int, default=3, help="Nodes the rollout branches on per decision.")
    ap.add_argument("--only", default=None, help="Comma-separated scenarios (default: the suite's).")
    ap.add_argument(
        "--max-pods", type=int, default=None, help="Skip scenarios with more pods (the rollout costs pods^2)."
    )
    ap.add_argument(
        "--samples", type=int, default=0, help="Also the look-ahead rollout over this many sampled futures (0: not)."
    )
    ap.add_argument(
        "--gate",
        type=float,
        default=0.0,
        help="Look-ahead leaves the heuristic only when its paired saving exceeds this many standard errors.",
    )
    ap.add_argument(
        "--veil",
        action="store_true",
        help="Look-ahead also draws the present pods' run time and unstarted pods' demand (knows only their law).",
    )
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", dest="json_path", default=None)
    args = ap.parse_args()
    names = suite_names(args.only.split(",") if args.only else None)
    sizes = {n: resolve_scenario(n).n_pods for n in names}
    skipped = [n for n in names if args.max_pods and sizes[n] > args.max_pods]
    names = sorted((n for n in names if n not in skipped), key=lambda n: sizes[n])
    model_path, _ = shipped_model()

    def echo(row: dict) -> None:
        print(
            f"{row['scenario']}: best {row['best_heuristic']} {row['best_heuristic_composite']:.3f}, "
            f"clairvoyant {row['clairvoyant_composite']:.3f} (headroom {100 * row['headroom']:.1f} %), "
            + (
                f"look-ahead (gate {row['gate']:g}{', veiled' if row['veil'] else ''}) {100 * row['lookahead_gain']:.1f} %, "
                if row["samples"]
                else ""
            )
            + f"drs {100 * row['drs_gap']:+.1f} %, "
            f"{row['wall_seconds']:.0f} s",
            flush=True,
        )

    rows = run_headroom(
        names, list(range(args.seeds)), args.top_k, model_path, args.jobs, echo, args.samples, args.gate, args.veil
    )
    print(format_headroom(rows))
    if skipped:
        print(f"not measured (more than {args.max_pods} pods): {', '.join(skipped)}")
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump({"top_k": args.top_k, "rows": rows, "skipped": skipped}, f, indent=1)


if __name__ == "__main__":
    main()
