"""Room for the pods that keep coming: how much of the recent pods' room a bind would take.

Policies that spread by load fill every node's request room evenly. When some pods ask for most of a node
(1.8 of 2 cores), evenly spread small pods leave no node with that much room, and the large pods wait while
the cluster idles. On such a cluster uniform random placement, which leaves some nodes emptier by chance,
beat every scoring heuristic of the field. A scheduler sees each pod's requests and the nodes it could
use, so it can count, for the pods it decided recently, how many more copies of each would still fit
(the shape's *slots*) on those nodes, and prefer the bind that removes the smallest share of them.

``RecentShapes`` keeps the shapes (cpu and memory requests, the nodes that were feasible) of the last
pods a policy decided; ``slot_take`` is the pure per-node score term. Node identity is by name, so a
policy that sees a different sample of candidates each time (the scheduler's node sampling) still
compares like with like.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import filterfalse, repeat

import numpy as np

from drs_prom.policies.contract import DecisionContext, node_requests

DEFAULT_SHAPES = 64
"""Pods remembered: about a minute of arrivals on a busy small cluster; enough to see every common shape."""


class RecentShapes:
    """The request shapes of the last ``size`` pods decided and, per shape, the nodes that were feasible for it.

    Feasibility is kept in a bool matrix over a registry of node names (one column per name ever seen);
    the registry is rebuilt when it outgrows the cluster, so node churn cannot grow it without bound.
    """

    def __init__(self, size: int = DEFAULT_SHAPES) -> None:
        if size < 1:
            raise ValueError(f"size must be at least 1, got {size}")
        self.size = size
        self.clear()

    def clear(self) -> None:
        self._cols: dict[str, int] = {}
        self._cpu = np.zeros(self.size)
        self._mem = np.zeros(self.size)
        self._mask = np.zeros((self.size, 0), dtype=bool)
        self._count = 0
        self._next = 0

    def __len__(self) -> int:
        return self._count

    def _columns(self, names: Sequence[str]) -> np.ndarray:
        """Registry column of each name, registering new ones (and growing the mask matrix)."""
        if len(self._cols) + len(names) > max(4 * len(names), 1024):
            self.clear()  # node churn: start over rather than keep columns for nodes long gone
        cols = self._cols
        for name in filterfalse(cols.__contains__, names):  # only the new names reach this loop's body
            cols[name] = len(cols)
        if len(cols) > self._mask.shape[1]:
            grown = np.zeros((self.size, max(2 * self._mask.shape[1], len(cols), 16)), dtype=bool)
            grown[:, : self._mask.shape[1]] = self._mask
            self._mask = grown
        return np.fromiter(map(cols.__getitem__, names), np.intp, len(names))

    def record(self, ctx: DecisionContext) -> None:
        """Remember ``ctx.pod``'s requests and the nodes feasible for it (call once per pod decided)."""
        cols = self._columns(ctx.node_names)
        i = self._next
        self._cpu[i] = float(ctx.pod.cpu_m)
        self._mem[i] = float(ctx.pod.mem_bytes)
        self._mask[i, :] = False
        self._mask[i, cols] = np.asarray(ctx.feasible, bool)
        self._next = (i + 1) % self.size
        self._count = min(self._count + 1, self.size)

    def shapes_with(self, ctx: DecisionContext) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``shapes`` as they would be with ``ctx.pod`` recorded (the pod's own shape counts), recording nothing."""
        names = ctx.node_names
        feasible = np.asarray(ctx.feasible, bool)
        cpu_m, mem_bytes = float(ctx.pod.cpu_m), float(ctx.pod.mem_bytes)
        if len(self._cols) + len(names) > max(4 * len(names), 1024):  # ``record`` would start over
            return np.array([cpu_m]), np.array([mem_bytes]), feasible[None, :].copy()
        k, i = min(self._count + 1, self.size), self._next
        cpu, mem = self._cpu[:k].copy(), self._mem[:k].copy()
        cpu[i], mem[i] = cpu_m, mem_bytes
        cols = np.fromiter(map(self._cols.get, names, repeat(-1)), np.intp, len(names))
        known = cols >= 0
        mask = np.zeros((k, len(names)), dtype=bool)
        if known.any() and self._mask.shape[1]:
            mask[:, known] = self._mask[:k][:, cols[known]]
        mask[i] = feasible
        return cpu, mem, mask

    def shapes(self, ctx: DecisionContext) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(cpu_m (k,), mem_bytes (k,), feasible (k, n) over ``ctx.nodes``) of the remembered shapes."""
        k = self._count
        cols = self._columns(ctx.node_names)
        return self._cpu[:k], self._mem[:k], self._mask[:k][:, cols]


def slot_take(ctx: DecisionContext, cpu_m: np.ndarray, mem_bytes: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """Per node: the mean over shapes of the share of the shape's slots that binding ``ctx.pod`` there removes.

    A shape's slots on a node are how many more pods of that shape its free request room (cpu, memory,
    pod count) admits; its share is over the slots on every node the shape could use (``usable``, (k, n)).
    Taking a node's last slot for a large shape that fits few nodes costs much; taking one of many costs
    little, and nothing where the shape could not go anyway. Zeros when no shape is given.
    """
    n = len(ctx.nodes)
    if len(cpu_m) == 0:
        return np.zeros(n)
    req = node_requests(ctx)
    free_cpu = np.maximum(req[:, 1] - req[:, 0], 0.0)
    free_mem = np.maximum(req[:, 3] - req[:, 2], 0.0)
    free_pods = np.maximum(req[:, 5] - req[:, 4], 0.0)
    cpu = np.maximum(np.asarray(cpu_m, np.float64), 1.0)[:, None]
    mem = np.maximum(np.asarray(mem_bytes, np.float64), 1.0)[:, None]

    def slots(fc: np.ndarray, fm: np.ndarray, fp: np.ndarray) -> np.ndarray:
        """(k, n) slots; in place on one (k, n) array, which halves this term's cost on a large cluster."""
        out = fc[None, :] / cpu
        np.minimum(out, fm[None, :] / mem, out=out)
        np.floor(out, out=out)
        return np.minimum(out, fp[None, :], out=out)

    now = slots(free_cpu, free_mem, free_pods)
    after = slots(
        np.maximum(free_cpu - float(ctx.pod.cpu_m), 0.0),
        np.maximum(free_mem - float(ctx.pod.mem_bytes), 0.0),
        np.maximum(free_pods - 1.0, 0.0),
    )
    usable = np.asarray(usable, bool)
    total = np.maximum(np.where(usable, now, 0.0).sum(axis=1, keepdims=True), 1.0)
    taken = np.subtract(now, after, out=after)
    taken /= total
    return np.asarray(np.where(usable, taken, 0.0).mean(axis=0))
