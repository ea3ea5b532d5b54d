"""A trained policy against the heuristics on the benchmark's seeds, summarised for the model's metadata."""

from __future__ import annotations

from typing import Any

from drs_prom.policies.contract import Policy
from drs_prom.registry import PolicySpec, make_policy
from drs_prom.sim.bench import run_bench
from drs_prom.sim.scenario import load_scenario


def benchmark_summary(
    policy: Policy,
    scenario: str,
    seeds: int,
    others: tuple[str, ...] = ("kube-default", "balanced-load", "least-loaded", "random"),
) -> dict[str, Any]:
    """The trained policy against heuristics on bench seeds 0..seeds-1, for the model's metadata."""

    def build(name: str, seed: int, spec: PolicySpec) -> Policy:
        return policy if name == policy.name else make_policy(name, spec, seed)

    report = run_bench(load_scenario(scenario), list(range(seeds)), [*others, policy.name], build, progress=False)
    out: dict[str, Any] = {"scenario": scenario, "seeds": seeds, "policies": {}}
    for row in report.rows:
        if row.skipped:
            continue
        out["policies"][row.policy] = {
            k: {"mean": round(row.mean(k), 4), "ratio_to_kube_default": round(report.ratio(row.policy, k), 4)}
            for k in ("imbalance", "utilisation", "completion_mean", "completion_p95")
        }
    return out
