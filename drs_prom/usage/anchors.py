"""The field's usage estimators, as anchors to measure drs-prom's against (never used to schedule).

- ``requests``: the pod uses what it requests (what kube-scheduler's scores assume), no I/O;
- ``koordinator``: Koordinator's load-aware scheduling estimator for a pod without usage data: requests x 85 %
  CPU and x 70 % memory (its ``estimatedScalingFactors`` defaults), no I/O;
- ``vpa``: the Vertical Pod Autoscaler recommender's target for the pod's owner: the 90th percentile of a
  histogram of usage samples whose weights halve every 24 hours, plus its 15 % safety margin and its floors
  (25 millicores, 250 MiB); CPU and memory only, and requests where the owner has no history (VPA recommends
  nothing for an owner it has not seen).

Pure: the same ``PodUsage`` the estimator reads (each stored pod's mean usage, weighted by how long it was seen,
as VPA weighs its samples by time).
"""

from __future__ import annotations

import numpy as np

from drs_prom.usage.estimator import Demand
from drs_prom.usage.history import PodUsage

KOORDINATOR_CPU, KOORDINATOR_MEM = 0.85, 0.70
VPA_HALF_LIFE_SECONDS = 24 * 3600.0
VPA_PERCENTILE = 0.9
VPA_MARGIN = 0.15
VPA_MIN_CPU_CORES = 0.025
VPA_MIN_MEM_BYTES = 250 * 2**20


def requests_as_usage(cpu_m: int, mem_bytes: int) -> Demand:
    return (cpu_m / 1000.0, float(mem_bytes), 0.0, 0.0, 0.0, 0.0)


def koordinator(cpu_m: int, mem_bytes: int) -> Demand:
    return (KOORDINATOR_CPU * cpu_m / 1000.0, KOORDINATOR_MEM * float(mem_bytes), 0.0, 0.0, 0.0, 0.0)


def vpa(cpu_m: int, mem_bytes: int, own: PodUsage | None, now: float) -> Demand:
    """VPA's target for the owner's pods (requests where it has no history)."""
    usage = own.valid() if own is not None else PodUsage.empty()
    if not len(usage):
        return requests_as_usage(cpu_m, mem_bytes)
    w = usage.seconds * np.exp2(-np.maximum(now - usage.last_seen, 0.0) / VPA_HALF_LIFE_SECONDS)
    if not w.sum() > 0:
        return requests_as_usage(cpu_m, mem_bytes)
    out = []
    for col, floor in ((0, VPA_MIN_CPU_CORES), (1, VPA_MIN_MEM_BYTES)):
        x = usage.mean[:, col]
        order = np.argsort(x, kind="stable")
        cum = np.cumsum(w[order])
        value = float(x[order][int((cum >= VPA_PERCENTILE * cum[-1]).argmax())])
        out.append(max(value * (1.0 + VPA_MARGIN), floor))
    return (out[0], out[1], 0.0, 0.0, 0.0, 0.0)
