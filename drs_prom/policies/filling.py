"""Whether the cluster is filling: no pod has left it over the last binds, so what a bind strands stays stranded.

Where pods come and go, the devices a bind strands come free again as their neighbours end, nodes drain to whole,
and balance is the better use of the choice. Where pods stay (long-running services, a cluster being filled), nothing
drains: a GPU left where no later pod fits is lost for good, and a whole node broken by a 1-GPU pod is one fewer for
the pods that need a whole node; packing is what such a cluster needs (docs/traces.md, the fill protocol). The
scheduler can tell the two apart from what it sees at each decision: while nobody leaves, the cluster's requested cpu
and devices grow by at least each pod it binds; once a pod ends anywhere, they fall short of that.

``FillWatch.record`` is told every bind (the context as the filters gave it, before the bind) and compares the
cluster's requests then with the requests after the bind it was told of before. Binds by other schedulers only add
to the requests, so they never count as a departure; a bind that failed after it was recorded does, which errs
towards balance.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from drs_prom.config import FILL_WINDOW
from drs_prom.policies.contract import DecisionContext, node_requests
from drs_prom.policies.device_fit import device_columns, pod_devices

ROUNDING = 0.5
"""A shortfall of the cluster's requests below this (millicores, devices) is rounding, not a pod that left."""


def requested_totals(ctx: DecisionContext, resources: Sequence[str]) -> np.ndarray:
    """The cluster's requested cpu (millicores) over ``ctx.nodes``, then each of ``resources``' requested count."""
    totals = [float(node_requests(ctx)[:, 0].sum())]
    totals += [float(device_columns(ctx.nodes, r)[1].sum()) for r in resources]
    return np.array(totals)


def pod_totals(ctx: DecisionContext, resources: Sequence[str]) -> np.ndarray:
    """What ``ctx.pod`` adds to ``requested_totals`` once bound."""
    return np.array([float(ctx.pod.cpu_m)] + [float(pod_devices(ctx.pod, r)) for r in resources])


class FillWatch:
    """Counts the binds since a pod last left the cluster (see the module docstring)."""

    def __init__(self, window: int = FILL_WINDOW) -> None:
        if window < 0:
            raise ValueError(f"the fill window must not be negative, got {window}")
        self.window = window
        self.since_departure: int | None = None
        """Binds told of since the last departure seen; None while none has been seen."""
        self._expected: np.ndarray | None = None

    @property
    def filling(self) -> bool:
        """Whether no pod left over the last ``window`` binds; a cluster where none has left yet is filling. Never
        with a window of 0."""
        if self.window == 0:
            return False
        return self.since_departure is None or self.since_departure >= self.window

    def record(self, ctx: DecisionContext, resources: Sequence[str]) -> None:
        """Compare the cluster's requests before this bind with those after the one told of before, then expect
        this pod's on top. A change in which resources are watched starts the comparison over."""
        now = requested_totals(ctx, resources)
        before = self._expected
        if before is not None and len(before) == len(now) and bool((now < before - ROUNDING).any()):
            self.since_departure = 0
        elif self.since_departure is not None:
            self.since_departure += 1
        self._expected = now + pod_totals(ctx, resources)
