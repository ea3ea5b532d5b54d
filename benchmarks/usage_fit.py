"""How the shipped usage model (models/usage-v1.json) was fitted: on generated training clusters only.

Each training cluster (generator seeds 0 and up, owners drawn as the guided learner's clusters draw them) is played
once by kube-default; the pods it ran become estimation cases (drs_prom.usage.fit.replay: each pod at its start,
with what the stored series held of its owner and its image then) and the usage model with the lowest mean error
over the signals is chosen (drs_prom.usage.fit.fit), its cold-start traffic prior left at 0 (a shipped model cannot
know a cluster's traffic scale; the retraining job's refit learns it from the cluster's own series). The check reports the errors of the fitted model, the default
parameters and the field's estimators on held-out generator seeds (SELECTION_SEED_BASE and up), for pods whose
owner had history and for cold starts. Named scenarios and the evaluation clusters are never used.

    python benchmarks/usage_fit.py --clusters 48 --check 12 --out models/usage-v1.json
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drs_prom.sim.env import SchedulingEnv, sim_policy
from drs_prom.sim.generator import TRAINING_OWNER_PROBABILITY, GeneratorParams, training_scenario
from drs_prom.sim.usage_history import MIN_SEEN_SECONDS, pod_table
from drs_prom.training.guided_run import SELECTION_SEED_BASE
from drs_prom.usage.estimator import UsageModel, save_usage_model
from drs_prom.usage.fit import Case, anchor_estimators, compare, errors, fit, format_comparison, learned, replay

PARAMS = GeneratorParams(owner_probability=TRAINING_OWNER_PROBABILITY)


def cluster_cases(seed: int) -> list[Case]:
    """The estimation cases of one training cluster played by kube-default."""
    sc = training_scenario(seed, PARAMS)
    env = SchedulingEnv(sc, seed=seed, information="told")  # the placements do not depend on any estimate
    env.run(sim_policy("kube-default", sc, seed), seed=seed)
    return replay(pod_table(env.cluster), lag=max(MIN_SEEN_SECONDS, sc.metric_window_seconds))


def gather(seeds: list[int], workers: int) -> list[Case]:
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return [c for part in pool.map(cluster_cases, seeds) for c in part]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clusters", type=int, default=48, help="training clusters (generator seeds 0..N-1)")
    ap.add_argument("--check", type=int, default=12, help="held-out clusters (SELECTION_SEED_BASE and up)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default="", help="write the fitted model here (JSON)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    train = gather(list(range(args.clusters)), args.workers)
    # the prior's traffic stays 0: the generated clusters' scale says nothing of the clusters the model ships to
    model = fit(
        train, fitted_on=f"generated training clusters 0-{args.clusters - 1} (benchmarks/usage_fit.py)", io_prior=False
    )
    check = gather([SELECTION_SEED_BASE + k for k in range(args.check)], args.workers)
    model = replace(model, errors=errors(learned(model), check))
    print(f"fitted on {len(train)} pods of {args.clusters} clusters, checked on {len(check)} pods of {args.check}")
    print(
        f"quantile {model.quantile}, half-life {model.half_life_pods} pods, prior {model.prior_pods} pods, "
        f"cpu ratio {model.cpu_ratio:.3f}, mem ratio {model.mem_ratio:.3f}, io per pod {model.io_per_pod}"
    )
    print(
        format_comparison(
            compare(check, {**anchor_estimators(model), "drs-prom (default parameters)": learned(UsageModel())})
        )
    )
    if args.out:
        print(f"wrote {save_usage_model(model, args.out)}")
    print(f"{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
