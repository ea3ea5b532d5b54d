"""Decision latency of a policy at several cluster sizes (median and p99), against baselines.

    python -m drs_prom.training.latency [model.keras]

Timed: ``choose(policy, ctx)`` (features + forward pass + masked argmax) on synthetic
contexts; printed next to the same measurement for a heuristic and for the Keras model
called through a compiled tf.function, so the numbers read as ratios on the machine that measures them.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from drs_prom.agent import load_model
from drs_prom.agent.model_inputs import candidate_matrix
from drs_prom.agent.networks import configure_tf
from drs_prom.features import N_FEATURES
from drs_prom.policies.contract import DecisionContext, Policy, PolicyBase, choose
from drs_prom.registry import configured_spec, make_policy
from drs_prom.types import NodeInfo, PodRequest


def synthetic_context(n: int, seed: int = 0) -> DecisionContext:
    rng = np.random.default_rng(seed)
    nodes = [
        NodeInfo(
            f"node-{i}", 4000, 16 << 30, requested_cpu_m=int(rng.integers(0, 3000)), pod_count=int(rng.integers(0, 20))
        )
        for i in range(n)
    ]
    return DecisionContext(
        pod=PodRequest("p", cpu_m=500, mem_bytes=512 << 20),
        nodes=nodes,
        feasible=rng.random(n) < 0.9,
        load=rng.uniform(0, 1, (n, N_FEATURES)).astype(np.float32),
        pod_load=np.tile(rng.uniform(0, 0.3, N_FEATURES), (n, 1)).astype(np.float32),
    )


def time_calls(fn: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """(median, p99) in microseconds over ``repeats`` calls after a warm-up."""
    for _ in range(min(20, repeats)):
        fn()
    samples = np.empty(repeats)
    for k in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples[k] = time.perf_counter() - t0
    return float(np.median(samples) * 1e6), float(np.percentile(samples, 99) * 1e6)


def measure(policy: Policy, sizes: Sequence[int] = (4, 50, 500), repeats: int = 300) -> dict[int, tuple[float, float]]:
    """(median, p99) microseconds of ``choose(policy, ctx)`` per cluster size, on one synthetic context each."""
    out = {}
    for n in sizes:
        ctx = synthetic_context(n)
        out[n] = time_calls(partial(choose, policy, ctx), repeats)
    return out


def main(argv: Sequence[str] = ()) -> None:
    loaded = load_model(argv[0] if argv else None)
    spec = configured_spec()
    policy = loaded.policy(spec.metric_window_seconds)
    tf = configure_tf()
    import keras

    model = keras.saving.load_model(loaded.path, compile=False)
    call = tf.function(lambda x: model(x, training=False), reduce_retracing=True)

    class TFPolicy(PolicyBase):
        name = "drs (tf.function)"

        def score(self, ctx: DecisionContext) -> np.ndarray:
            return call(candidate_matrix(ctx)).numpy()[:, 0]

    # TF last: its thread pool keeps spinning after calls and would slow whatever runs next.
    rows = [
        (policy.name + " (numpy)", policy),
        ("balanced-load", make_policy("balanced-load", spec)),
        ("kube-default", make_policy("kube-default", spec)),
        ("drs (tf.function)", TFPolicy()),
    ]
    print(f"{'policy':<22}" + "".join(f"{f'{n} nodes med/p99 us':>26}" for n in (4, 50, 500)))
    for name, pol in rows:
        if loaded.policy_name != "drs" and name.startswith("drs (tf"):
            continue
        res = measure(pol)
        print(f"{name:<22}" + "".join(f"{f'{m:.0f} / {p:.0f}':>26}" for m, p in res.values()))


if __name__ == "__main__":
    main(sys.argv[1:])
