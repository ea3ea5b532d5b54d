"""How often the shipped network makes its guides' choices: is it its teacher, computed by a network?

The network places every pod of held-out generated clusters (generator seeds 500,000 and up, the selection range;
never the packaged scenarios or the evaluation clusters). At each decision, every guide scores the same state (one
memory of the binds the network made), and the decision counts for a guide when the network's node is among that
guide's first choices. Prints the decisions and the share per guide.

    python benchmarks/teacher_agreement.py --model models/drs-v7.keras --clusters 8
"""

from __future__ import annotations

import argparse

import numpy as np

from drs_prom.agent import load_policy
from drs_prom.agent.guided import NO_METRICS, GuidedPolicy
from drs_prom.sim.env import fit_to_scenario, unclipped_env
from drs_prom.sim.generator import training_scenario

SELECTION_BASE = 500_000


def agreement(model: str, key: int, seed: int) -> tuple[int, np.ndarray]:
    """Decisions on generated cluster ``key`` and, per guide, how many of them made that guide's first choice."""
    sc = training_scenario(key)
    policy = fit_to_scenario(load_policy(model, 30.0), sc)
    if not isinstance(policy, GuidedPolicy):
        raise SystemExit(f"{model} is not a heuristic-guided model")
    hits = np.zeros(len(policy.guides.guides))
    decisions = 0
    env = unclipped_env(sc, seed)
    ctx = env.reset(seed)
    while ctx is not None:
        scores, raw = policy.scores_and_guides(ctx)
        feasible = np.asarray(ctx.feasible, bool)
        node = int(np.argmax(scores))
        for g, scores in enumerate(raw):
            s = np.where(feasible & (scores > NO_METRICS), scores, -np.inf)
            hits[g] += s[node] >= s.max() - 1e-12
        decisions += 1
        ctx, _, done = env.step(node)
        if done:
            break
    return decisions, hits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="Model file (default: the shipped one).")
    ap.add_argument("--clusters", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0, help="Bench seed of every cluster's workload.")
    args = ap.parse_args()
    total, hits = 0, None
    for key in range(SELECTION_BASE, SELECTION_BASE + args.clusters):
        n, h = agreement(args.model, key, args.seed)
        total, hits = total + n, h if hits is None else hits + h
    policy = load_policy(args.model, 30.0)
    assert isinstance(policy, GuidedPolicy) and hits is not None
    print(
        f"{total} decisions on {args.clusters} held-out generated clusters; the network's node is the first choice of:"
    )
    for g, h in zip(policy.guides.guides, hits, strict=True):
        print(f"  {g}: {100 * h / total:.1f} %")


if __name__ == "__main__":
    main()
