"""Learning the user's own cluster: does ``drs-prom retrain`` on one cluster's history beat the shipped model there?

A generated cluster no training or evaluation uses; hours of its history, scheduled by the
shipped model, backfilled into a real Prometheus (promtool) with the matching journal;
``retrain`` (twin on) once per retraining seed; then the promoted models, the shipped one and
the heuristics on future workloads of that cluster (paired seeds). See
drs_prom.testbed.own_cluster.py. Numbers are printed (and written with ``--json``).

    python benchmarks/retrain_on_history.py --hours 3 --eval-seeds 10 --json /tmp/own.json
"""

from __future__ import annotations

import argparse
import json
import logging

from drs_prom.testbed.own_cluster import CLUSTER_SEED, demonstrate, format_report
from drs_prom.testbed.process import handle_termination, stop_all


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cluster-seed", type=int, default=CLUSTER_SEED, help="Generator seed of the cluster.")
    ap.add_argument("--hours", type=float, default=3.0, help="Simulated hours of history.")
    ap.add_argument("--eval-seeds", type=int, default=10, help="Future workloads benchmarked (seeds 1000..).")
    ap.add_argument("--retrain-seeds", default="0,1,2", help="Comma-separated retraining seeds.")
    ap.add_argument(
        "--episodes", type=int, default=20, help="Twin episodes per retraining (retrain.sim_replay_episodes)."
    )
    ap.add_argument("--epochs", type=int, default=10, help="retrain.epochs.")
    ap.add_argument("--imitate-steps", type=int, default=10000, help="retrain.twin_imitate_steps.")
    ap.add_argument("--json", dest="json_path", default=None, help="Write the report here.")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    with handle_termination():
        try:
            report = demonstrate(
                cluster_seed=args.cluster_seed,
                hours=args.hours,
                eval_seeds=args.eval_seeds,
                retrain_seeds=[int(s) for s in args.retrain_seeds.split(",") if s.strip()],
                episodes=args.episodes,
                epochs=args.epochs,
                imitate_steps=args.imitate_steps,
            )
        finally:
            stop_all()
    print(format_report(report))
    print(f"seconds: {report.seconds}")
    if args.json_path:
        with open(args.json_path, "w") as fh:
            json.dump(report.as_dict(), fh, indent=1)


if __name__ == "__main__":
    main()
