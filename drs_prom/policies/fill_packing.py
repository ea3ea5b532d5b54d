"""How ``drs`` places a pod while the cluster fills: the least fragmentation, no whole node broken where another
node takes the pod, and where one must be broken, not one of the roomiest.

While no pod leaves (drs_prom.policies.filling), every bind is for good, and what counts is what the bind leaves
usable for the pods to come. Per device resource, in turn:

1. **FGD's measure** (drs_prom.policies.fragmentation): keep the nodes whose fragmentation growth is the least (ties
   within ``TIE``), over the recent pods' shapes and the pod's own. This is ``fgd``'s own choice, with the ties left
   to the policy's scores instead of chance.
2. **No whole node broken** (every device free) where a node already broken is left: until a pod asking for a whole
   node is among the recent ones, the measure charges nothing for breaking a whole node, and balance would break the
   emptiest.
3. **Where a whole node must be broken, not one of those with the most cpu free** while another whole node is left:
   the pods that need a whole node need much of its cpu too (on openb 64-120 cores for 8 GPUs, on nodes of 64-128),
   and balance would break the roomiest first. Breaking the node with the least cpu free instead kept whole nodes as
   well but packed the small nodes hot on a replay slice (docs/traces.md).

Every step keeps at least one node; the policy chooses among those left.
"""

from __future__ import annotations

import numpy as np

from drs_prom.policies.contract import DecisionContext, node_requests
from drs_prom.policies.device_fit import pod_devices, whole_nodes
from drs_prom.policies.device_stage import within_band
from drs_prom.policies.fragmentation import ShapeMix, fragmentation_growth, free_of


def packing_keep(ctx: DecisionContext, keep: np.ndarray, resource: str, mix: ShapeMix) -> np.ndarray:
    """Of the nodes ``keep`` marks, those a filling cluster's pod may take for ``resource`` (the module docstring)."""
    pod = ctx.pod
    growth = fragmentation_growth(
        free_of(ctx, resource), mix, pod_devices(pod, resource), int(pod.cpu_m), int(pod.mem_bytes)
    )
    keep = within_band(growth, keep, 0.0)
    whole = whole_nodes(ctx.nodes, resource)
    if (keep & ~whole).any():
        return np.asarray(keep & ~whole)
    req = node_requests(ctx)
    free_cpu = np.where(keep, req[:, 1] - req[:, 0], -np.inf)
    rest = keep & (free_cpu < free_cpu.max())
    return np.asarray(rest if rest.any() else keep)
