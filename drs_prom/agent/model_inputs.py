"""Model inputs built from a DecisionContext: pure numpy, no TensorFlow.

Two layouts:
- ``candidate_matrix``: one row per node for the shared per-node Q network (``drs``),
  so the same weights score a 4-node or a 500-node cluster in any order.
- ``drs_state``: DRS's flat vector, 6 features x N nodes + 6 pod features, on 0..100.
"""

from __future__ import annotations

import numpy as np

from drs_prom.features import DRS_SCALE, N_FEATURES
from drs_prom.policies.array_math import mean_along, nan_as, std_along
from drs_prom.policies.contract import DecisionContext, node_requests

CANDIDATE_SCHEMA = 2
"""Bumped when the columns of candidate_matrix change; models record it."""

CANDIDATE_COLUMNS: tuple[str, ...] = (
    *(f"load_{i}" for i in range(N_FEATURES)),  # metrics + recent binds they do not show yet
    *(f"recent_{i}" for i in range(N_FEATURES)),  # the recent-binds part alone
    *(f"pod_{i}" for i in range(N_FEATURES)),
    *(f"after_{i}" for i in range(N_FEATURES)),
    *(f"dev_{i}" for i in range(N_FEATURES)),  # load minus cluster mean
    *(f"dstd_{i}" for i in range(N_FEATURES)),  # n x change of this feature's std if placed here
    *(f"std_{i}" for i in range(N_FEATURES)),  # cluster std now (context)
    "cpu_req_after",
    "mem_req_after",
    "pods_after",
    "stale",
)
N_CANDIDATE = len(CANDIDATE_COLUMNS)


def _clean_load(load: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """NaN rows (stale metrics) read as fully loaded, never as idle, plus a stale flag."""
    load = np.asarray(load, dtype=np.float64)
    stale = np.isnan(load).any(axis=1)
    return np.where(np.isnan(load), 1.0, load), stale


def candidate_matrix(ctx: DecisionContext, recent: np.ndarray | None = None) -> np.ndarray:
    """(n_nodes, N_CANDIDATE) float32: what each node would look like with the pod on it.

    ``recent``: (n, N_FEATURES) load of our own recent binds that the metrics do not show yet
    (recent_binds.RecentBinds); added to the metrics so that a burst of decisions inside
    one rate window does not herd onto the node that merely looks idle.

    ``dstd`` is n times the exact change of each feature's std across nodes when the
    pod's load is added to that node alone, which is what DRS's reward measures (the
    factor n keeps it on one scale for any cluster size); the network still
    learns how much each feature and the request pressure matter.
    """
    load, stale = _clean_load(ctx.load)
    pod = nan_as(ctx.pod_load, 0.0)
    n = len(load)
    rec = np.zeros_like(load) if recent is None else np.asarray(recent, dtype=np.float64)
    load = np.minimum(load + rec, 2.0)
    after = np.minimum(load + pod, 2.0)  # not clipped at 1: piling onto a full node must show
    mean = mean_along(load, 0)
    std = std_along(load, 0)
    # var after placing on i: only row i changes, by d = after_i - load_i.
    d = after - load
    sq = (load**2).sum(axis=0)
    tot = load.sum(axis=0)
    var_after = (sq + (after**2 - load**2)) / n - ((tot + d) / n) ** 2
    # Times n: the change shrinks like 1/n, so scaling makes 4- and 500-node rows comparable.
    dstd = (np.sqrt(np.maximum(var_after, 0.0)) - std) * n
    r = node_requests(ctx)
    cpu_req = (r[:, 0] + ctx.pod.cpu_m) / np.maximum(r[:, 1], 1.0)
    mem_req = (r[:, 2] + ctx.pod.mem_bytes) / np.maximum(r[:, 3], 1.0)
    pods = (r[:, 4] + 1.0) / np.maximum(r[:, 5], 1.0)
    out = np.concatenate(
        [
            load,
            np.minimum(rec, 2.0),
            pod,
            after,
            load - mean,
            dstd,
            np.broadcast_to(std, (n, N_FEATURES)),
            np.minimum(cpu_req, 2.0)[:, None],
            np.minimum(mem_req, 2.0)[:, None],
            np.minimum(pods, 2.0)[:, None],
            stale[:, None].astype(np.float64),
        ],
        axis=1,
    )
    return out.astype(np.float32)


def drs_state(ctx: DecisionContext) -> np.ndarray:
    """DRS's state: node features row by row, then the pod's 6 features, all on 0..100.

    DRS's pod features were per-application constants; ours are the pod's expected
    load, taken from the first node (DRS's workers were identical).
    """
    load, _ = _clean_load(ctx.load)
    pod = nan_as(ctx.pod_load, 0.0)
    vec = np.concatenate([load.reshape(-1), pod[0] if len(pod) else np.zeros(N_FEATURES)])
    return (vec * DRS_SCALE).astype(np.float32)


def drs_state_dim(n_nodes: int) -> int:
    return N_FEATURES * n_nodes + N_FEATURES
