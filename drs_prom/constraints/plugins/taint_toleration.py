"""TaintToleration: a node's NoSchedule and NoExecute taints turn away every pod that does not tolerate them.

A node that is not Ready counts as tainted ``node.kubernetes.io/not-ready:NoSchedule`` (what the node lifecycle
controller would add), so a pod tolerating that taint may still land there. PreferNoSchedule is a score, not a
filter.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from drs_prom.constraints.framework import Filter, Stage
from drs_prom.constraints.matching import tolerates
from drs_prom.constraints.placed import Neighbours
from drs_prom.types import NodeInfo, PodRequest, Taint

NOT_READY_TAINT = Taint(key="node.kubernetes.io/not-ready", effect="NoSchedule")
TAINT_REASON_PREFIX = "node(s) had untolerated taint"


def taint_text(t: Taint) -> str:
    return f"{TAINT_REASON_PREFIX} {{{t.key}: {t.value}}}"


def untolerated_taint(pod: PodRequest, node: NodeInfo) -> Taint | None:
    """First NoSchedule/NoExecute taint the pod does not tolerate (PreferNoSchedule is a score)."""
    taints = list(node.taints)
    if not node.ready:
        taints.append(NOT_READY_TAINT)
    for taint in taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tolerates(tol, taint) for tol in pod.tolerations):
            return taint
    return None


class TaintToleration(Filter):
    name = "TaintToleration"
    stage = Stage.NODE
    order = 20

    def key(self, pod: PodRequest) -> Hashable:
        return pod.tolerations

    def reasons(self, pod: PodRequest, node: NodeInfo, state: object, near: Neighbours) -> Sequence[str]:
        taint = untolerated_taint(pod, node)
        return (taint_text(taint),) if taint is not None else ()


FILTER = TaintToleration()
