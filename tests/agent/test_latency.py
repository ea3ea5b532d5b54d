"""Decision latency at 4/50/500 nodes, printed as numbers and ratios to balanced-load (not asserted)."""

import numpy as np

from drs_prom.agent import load_policy
from drs_prom.policies.contract import choose
from drs_prom.registry import make_policy
from drs_prom.training.latency import measure, synthetic_context
from tests.specs import SPEC, WINDOW


def test_decision_latency_printed_and_choices_feasible(capsys):
    drs = load_policy(None, WINDOW)
    heur = make_policy("balanced-load", SPEC)
    mine, base = measure(drs, repeats=100), measure(heur, repeats=100)
    with capsys.disabled():
        for n in mine:
            print(
                f"\n[latency] drs {n} nodes: median {mine[n][0]:.0f} us p99 {mine[n][1]:.0f} us "
                f"({mine[n][0] / base[n][0]:.2f}x balanced-load)",
                end="",
            )
        print()
    for n in (4, 50, 500):
        ctx = synthetic_context(n, seed=n)
        idx, scores = choose(drs, ctx)
        assert ctx.feasible[idx] and np.isneginf(scores[~ctx.feasible]).all()
