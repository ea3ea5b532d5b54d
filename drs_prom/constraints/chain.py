"""The filter chain: every registered filter plugin, in kube-scheduler's order, run one way for every caller.

The live scheduler (its node table), the extender, the simulator, preemption and the feasibility check against
kube-scheduler all decide feasibility here, so a filter added once is enforced everywhere:

- ``filter_all``: every node's reasons, the first failing filter's, as kube-scheduler gives them (the
  ``FailedScheduling`` message, the extender's answer, the differential tests);
- ``feasible``: the same verdict as a mask, fast: the NODE stage cached per pod key (``StaticMasks``), the REQUESTS
  stage as one array pass, the PLACED stage only for the filters that have work for the pod and only on the nodes
  the others left;
- ``passes``: one node, PreFilter state made afresh (preemption's what-if checks).

The plugins are the modules of drs_prom.constraints.plugins (found when the chain is first used), plus any
``register``-ed at run time. Pure: records in, masks and reasons out.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache

import numpy as np

from drs_prom.constraints import plugins
from drs_prom.constraints.framework import ClusterHints, Filter, FilterResult, NodeArrays, Rejection, Stage
from drs_prom.constraints.placed import EMPTY, Neighbours
from drs_prom.types import NodeInfo, PodRequest

MAX_STATIC_MASKS = 256
"""Distinct NODE-stage keys remembered per node set (a bound on memory)."""

_registered: list[Filter] = []
NO_HINTS = ClusterHints()


@cache
def _built_in() -> tuple[Filter, ...]:
    """The ``FILTER`` of every module of drs_prom.constraints.plugins."""
    found = []
    for info in sorted(pkgutil.iter_modules(plugins.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{plugins.__name__}.{info.name}")
        plugin = getattr(module, "FILTER", None)
        if not isinstance(plugin, Filter):
            raise TypeError(f"{module.__name__} defines no FILTER (a drs_prom.constraints.framework.Filter)")
        found.append(plugin)
    return tuple(found)


@cache
def _ordered(extra: tuple[Filter, ...]) -> tuple[Filter, ...]:
    every = [*_built_in(), *extra]
    names = Counter(f.name for f in every)
    if twice := [n for n, k in names.items() if k > 1 or not n]:
        raise ValueError(f"filter names must be unique and set: {', '.join(repr(n) for n in twice)}")
    return tuple(sorted(every, key=lambda f: (f.order, f.name)))


def filters() -> tuple[Filter, ...]:
    """Every filter in the chain, in order."""
    return _ordered(tuple(_registered))


@cache
def _staged(chain: tuple[Filter, ...], stage: Stage) -> tuple[Filter, ...]:
    return tuple(f for f in chain if f.stage is stage)


def stage(which: Stage) -> tuple[Filter, ...]:
    """The chain's filters of one stage, in order."""
    return _staged(filters(), which)


def named(name: str) -> Filter:
    """The filter called ``name``; KeyError if there is none."""
    for f in filters():
        if f.name == name:
            return f
    raise KeyError(name)


def register(plugin: Filter) -> None:
    """Add ``plugin`` to the chain of this process (the plugins package's modules are added without it)."""
    _registered.append(plugin)
    filters()  # a duplicate name fails here, not at the next decision
    _staged.cache_clear()


def unregister(name: str) -> None:
    """Take the registered filter ``name`` out of the chain again."""
    _registered[:] = [f for f in _registered if f.name != name]
    _staged.cache_clear()


@contextmanager
def registered(plugin: Filter) -> Iterator[Filter]:
    """``register`` for the length of a ``with`` block."""
    register(plugin)
    try:
        yield plugin
    finally:
        unregister(plugin.name)


# -- the NODE stage, cached ------------------------------------------------------------------


def static_key(pod: PodRequest) -> tuple[Hashable, ...]:
    """What the NODE-stage filters read of ``pod``: pods with equal keys have equal NODE-stage masks."""
    return tuple(f.key(pod) for f in stage(Stage.NODE))


def static_mask(pod: PodRequest, nodes: Sequence[NodeInfo]) -> np.ndarray:
    """The NODE-stage filters over ``nodes``: True where every one passes."""
    node_filters = stage(Stage.NODE)
    return np.array([not any(f.reasons(pod, n, None, EMPTY) for f in node_filters) for n in nodes], dtype=bool).reshape(
        len(nodes)
    )


class StaticMasks:
    """NODE-stage masks of one node set, per ``static_key``: the pods of one workload share one."""

    def __init__(self, nodes: Sequence[NodeInfo]) -> None:
        self.nodes = list(nodes)
        self._masks: dict[tuple[Hashable, ...], np.ndarray] = {}
        self._chain = filters()

    def mask(self, pod: PodRequest) -> np.ndarray:
        if self._chain is not filters():  # a filter was (un)registered since: nothing cached still holds
            self._masks.clear()
            self._chain = filters()
        key = static_key(pod)
        got = self._masks.get(key)
        if got is None:
            if len(self._masks) >= MAX_STATIC_MASKS:
                self._masks.clear()
            got = self._masks[key] = static_mask(pod, self.nodes)
        return got


# -- the mask, fast ------------------------------------------------------------------------


def requests_mask(pod: PodRequest, arrays: NodeArrays) -> np.ndarray:
    """The REQUESTS-stage filters over node arrays (each must have a ``mask``)."""
    ok = np.ones(len(arrays.alloc_pods), dtype=bool)
    for f in stage(Stage.REQUESTS):
        got = f.mask(pod, arrays)
        if got is None:
            raise TypeError(f"filter {f.name} reads requests but has no mask over node arrays")
        ok &= got
    return ok


def placed_needed(pod: PodRequest, hints: ClusterHints) -> tuple[Filter, ...]:
    """The PLACED-stage filters that have work for ``pod``."""
    return tuple(f for f in stage(Stage.PLACED) if f.needed(pod, hints))


def placed_mask(
    pod: PodRequest, nodes: Sequence[NodeInfo], near: Neighbours, candidates: np.ndarray, hints: ClusterHints
) -> np.ndarray:
    """The PLACED-stage filters over ``nodes``, checked only where ``candidates`` is True (the other stages'
    mask); their PreFilter state still covers every node."""
    out = np.array(candidates, dtype=bool)
    todo = placed_needed(pod, hints)
    if not todo or not out.any():
        return out
    states = []
    for f in todo:
        state = f.prefilter(pod, nodes, near)
        if isinstance(state, Rejection):
            return np.zeros(len(nodes), dtype=bool)
        states.append(state)
    for i in np.flatnonzero(out).tolist():
        node = nodes[i]
        if any(f.reasons(pod, node, s, near) for f, s in zip(todo, states)):
            out[i] = False
    return out


def feasible(
    pod: PodRequest,
    static: StaticMasks,
    arrays: NodeArrays,
    near: Callable[[], Neighbours] = lambda: EMPTY,
    hints: ClusterHints = NO_HINTS,
) -> np.ndarray:
    """Every filter of the chain over the node set of ``static`` (whose rows ``arrays`` follow): True where the pod
    may go. ``near`` is called only when a PLACED-stage filter has work for the pod and some node is left."""
    mask: np.ndarray = static.mask(pod) & requests_mask(pod, arrays)
    if mask.any() and placed_needed(pod, hints):
        mask = placed_mask(pod, static.nodes, near(), mask, hints)
    return mask


# -- reasons, as kube-scheduler gives them ---------------------------------------------------


def _prefilter(pod: PodRequest, nodes: Sequence[NodeInfo], near: Neighbours) -> Rejection | dict[str, object]:
    """Each PLACED-stage filter with work for the pod: its state, or the first Rejection."""
    states: dict[str, object] = {}
    for f in placed_needed(pod, ClusterHints(near.has_anti_affinity())):
        state = f.prefilter(pod, nodes, near)
        if isinstance(state, Rejection):
            return state
        states[f.name] = state
    return states


def _first_failing(
    pod: PodRequest, node: NodeInfo, states: dict[str, object], near: Neighbours
) -> tuple[tuple[str, ...], str]:
    """The first failing filter's reasons and name on ``node`` (empty and "" where every filter passes)."""
    for f in filters():
        if f.stage is Stage.PLACED and f.name not in states:
            continue
        why = f.reasons(pod, node, states.get(f.name), near)
        if why:
            return tuple(why), f.name
    return (), ""


def filter_all(pod: PodRequest, nodes: Sequence[NodeInfo], near: Neighbours = EMPTY) -> FilterResult:
    """Reasons for every node (empty: feasible), as kube-scheduler would give them."""
    pre = _prefilter(pod, nodes, near)
    if isinstance(pre, Rejection):
        return FilterResult(
            mask=np.zeros(len(nodes), dtype=bool),
            reasons=tuple((pre.reason,) for _ in nodes),
            prefilter=pre.reason,
            refused=pre.refused,
            failed_by=("",) * len(nodes),
        )
    found = [_first_failing(pod, n, pre, near) for n in nodes]
    reasons = tuple(r for r, _ in found)
    return FilterResult(
        mask=np.array([not r for r in reasons], dtype=bool).reshape(len(nodes)),
        reasons=reasons,
        failed_by=tuple(name for _, name in found),
    )


def passes(pod: PodRequest, nodes: Sequence[NodeInfo], near: Neighbours, index: int) -> bool:
    """Every filter for ``pod`` on ``nodes[index]``, PreFilter state made afresh (preemption's what-if)."""
    pre = _prefilter(pod, nodes, near)
    return not isinstance(pre, Rejection) and not _first_failing(pod, nodes[index], pre, near)[0]


def node_reasons(pod: PodRequest, node: NodeInfo) -> list[str]:
    """The first failing reasons of the filters that read the node alone (NODE and REQUESTS stages): what a pod
    with no inter-pod terms, ports or claims is checked against."""
    for f in filters():
        if f.stage is not Stage.PLACED and (why := f.reasons(pod, node, None, EMPTY)):
            return list(why)
    return []


def node_mask(pod: PodRequest, nodes: Sequence[NodeInfo]) -> np.ndarray:
    """``node_reasons`` over ``nodes``: True where the filters that read the node alone all pass."""
    return np.array([not node_reasons(pod, n) for n in nodes], dtype=bool).reshape(len(nodes))


def failure_message(result: FilterResult) -> str:
    """kube-scheduler's summary: counts per reason, sorted by reason text (or the PreFilter reason)."""
    total = len(result.reasons)
    if result.prefilter:
        return f"0/{total} nodes are available: {result.prefilter}."
    counts = Counter(r for rs in result.reasons for r in rs)
    available = int(result.mask.sum())
    if not counts:
        return f"{available}/{total} nodes are available."
    parts = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))
    return f"{available}/{total} nodes are available: {parts}."
