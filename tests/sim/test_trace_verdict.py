"""benchmarks/trace_verdict.py on a literal ``bench --trace`` result: the candidate is judged against the best other
policy of the run, whatever it is (random here), and against kube-default for harm (the benchmark itself is a
command, never run in the suite)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load():
    spec = importlib.util.spec_from_file_location("trace_verdict", BENCH / "trace_verdict.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(per_policy: dict[str, tuple[list[float], float]]) -> dict:
    """policy -> (composite per seed, p95 slowdown of every seed)."""
    policies = {
        name: {"runs": [{"seed": s, "composite": c, "summary": {"slowdown_p95": p95}} for s, c in enumerate(comp)]}
        for name, (comp, p95) in per_policy.items()
    }
    policies["drs-original"] = "skipped: fixed node count"
    return {"policies": policies}


def test_the_candidate_is_judged_against_the_best_other_policy_and_kube_default():
    tv = _load()
    run = _run(
        {
            "kube-default": ([1.7, 1.7, 1.7], 1.0),
            "random": ([1.50, 1.55, 1.60], 1.0),  # the best other policy, not a heuristic of the suite
            "fgd": ([1.56, 1.56, 1.60], 1.0),
            "drs": ([1.51, 1.56, 1.61], 1.0),
        }
    )
    v = tv.verdict(run, "drs")
    assert v["best"] == "random" and v["seeds"] == 3
    # (drs - random) / mean(random) = +0.01 / 1.55 on every seed: a zero-width interval
    assert v["vs_best"].mean == pytest.approx(0.01 / 1.55) and v["vs_best"].high == pytest.approx(0.01 / 1.55)
    assert v["non_inferior"] and not v["harm"]
    assert v["composite_ratio"] == pytest.approx(1.56 / 1.7)
    # a p95 slowdown 1.1x kube-default's is harm, whatever the composite
    slow = _run({"kube-default": ([1.7] * 3, 1.0), "random": ([1.6] * 3, 1.0), "drs": ([1.5, 1.5, 1.5], 1.1)})
    assert tv.verdict(slow, "drs")["harm"]
    # more than 3 % behind the best is inferior
    behind = _run({"kube-default": ([1.7] * 3, 1.0), "random": ([1.5] * 3, 1.0), "drs": ([1.6, 1.6, 1.6], 1.0)})
    assert not tv.verdict(behind, "drs")["non_inferior"]
