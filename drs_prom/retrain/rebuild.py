"""Journal rows + node history -> (state, action, reward, next state) transitions. Pure: no I/O, no clients.

``rebuild_transitions`` reads each decision's node features at decision time and after its
settle delay from a ``NodeHistory`` grid; rows with bad data (gaps, stale or vanished nodes,
no settled reward, an unknown journal schema) are skipped and counted, never fatal. Node
requests/allocatable come from the journal (schema 2); schema-1 rows, which lack them, are
used with Prometheus capacity and zero requests and counted as approximated (``no_node_info``).

Rewards go through drs_prom.outcomes.reward.settled_reward on the same ``Outcome`` the simulator
gives, built by drs_prom.retrain.history_reward from the history grid and the journal's pod ends.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from drs_prom.config import Settings
from drs_prom.features import N_FEATURES
from drs_prom.outcomes.reward import settled_reward
from drs_prom.policies.contract import DecisionContext
from drs_prom.retrain.history_reward import (
    ended_between,
    normalise,
    pod_slowdowns,
    run_alone_seconds,
    transition_outcome,
)
from drs_prom.signals.state import pod_matrix
from drs_prom.stores.journal import NODE_KEYS, Decision
from drs_prom.types import NodeInfo, PodRequest


@dataclass
class NodeHistory:
    """Node features over time, raw units, on one time grid.

    ``values[node]``: (T, N_FEATURES) in FEATURES order, NaN where the node had no (fresh) data.
    ``cores``/``mem_bytes``: capacities used to turn pod demand into node fractions.
    """

    times: np.ndarray
    values: dict[str, np.ndarray]
    cores: dict[str, float] = field(default_factory=dict)
    mem_bytes: dict[str, float] = field(default_factory=dict)

    @property
    def end(self) -> float:
        return float(self.times[-1]) if len(self.times) else float("-inf")


def reward_delay(settings: Settings) -> float:
    """Seconds after a decision at which its reward is read.

    The rate() window must lie entirely after the settle delay, otherwise the "after"
    reading still averages load from before the pod arrived.
    """
    return settings.scheduler.settle_seconds + settings.prometheus.window_seconds


class JournalReader(Protocol):
    """What rebuilding reads from the decision journal (drs_prom.stores.journal.Journal)."""

    def since(self, ts: float = ..., until: float | None = ...) -> Iterable[Decision | dict[str, Any]]: ...

    def pod_ends(self, ts: float = ..., until: float | None = ...) -> dict[str, float]: ...


def load_decisions(journal: JournalReader, since: float, until: float, limit: int) -> tuple[list[Decision], Counter]:
    """Decisions in [since, until) that can be used, and counts of the rows left out."""
    skipped: Counter = Counter()
    out: list[Decision] = []
    for row in journal.since(since, until):
        if not isinstance(row, Decision):
            skipped["old_schema"] += 1
            continue
        if row.outcome != "bound":
            skipped["not_bound"] += 1
            continue
        n = len(row.candidates)
        if (
            row.chosen not in row.candidates
            or len(row.feasible) != n
            or len(row.pod_features) != N_FEATURES
            or not all(np.isfinite(v) for v in row.pod_features)
            or (row.nodes is not None and not _nodes_ok(row.nodes, n))
        ):
            skipped["bad_row"] += 1
            continue
        out.append(row)
        if len(out) >= limit:
            break
    return out, skipped


def _nodes_ok(nodes: Any, n: int) -> bool:
    """A journalled ``nodes`` list: one entry per candidate with every NODE_KEYS integer."""
    return (
        isinstance(nodes, list)
        and len(nodes) == n
        and all(
            isinstance(e, dict) and all(isinstance(e.get(k), int) and not isinstance(e.get(k), bool) for k in NODE_KEYS)
            for e in nodes
        )
    )


@dataclass
class Transition:
    """One placement as the learner sees it.

    ``ctx``: the state at decision time; ``action``: index of the chosen node in
    ``ctx.nodes``; ``load_after``: normalised load once it settled; ``next_ctx``: the
    following decision's state (None: nothing to bootstrap from, i.e. done);
    ``node_info``: False when the journal row had no node requests (schema 1) and
    ``ctx.nodes`` was approximated from Prometheus capacity with zero requests.
    """

    decision_id: int | None
    ts: float
    ctx: DecisionContext
    action: int
    reward: float
    load_after: np.ndarray
    next_ctx: DecisionContext | None = None
    node_info: bool = True


class _Lookup:
    """Vectorised reads of the history grid per node (a row is valid when all its features are)."""

    def __init__(self, history: NodeHistory, max_age: float) -> None:
        self.h = history
        self.max_age = max_age
        self.last_valid: dict[str, np.ndarray] = {}
        self.next_valid: dict[str, np.ndarray] = {}
        n = len(history.times)
        idx = np.arange(n)
        for node, vals in history.values.items():
            valid = np.isfinite(vals).all(axis=1)
            self.last_valid[node] = np.maximum.accumulate(np.where(valid, idx, -1)) if n else idx
            self.next_valid[node] = np.flip(np.minimum.accumulate(np.flip(np.where(valid, idx, n)))) if n else idx

    def before(self, node: str, t: float) -> tuple[np.ndarray | None, str | None]:
        """Newest reading at or before ``t`` no older than max_age: (values, None) or (None, reason).

        reason: ``node_gone`` (no series, or none from ``t`` on), ``gap`` (data before and
        after but not near ``t``), ``stale`` (nothing before ``t``).
        """
        lv = self.last_valid.get(node)
        if lv is None or len(lv) == 0:
            return None, "node_gone"
        k = int(np.searchsorted(self.h.times, t, side="right")) - 1
        j = int(lv[k]) if k >= 0 else -1
        if j >= 0 and t - self.h.times[j] <= self.max_age:
            return self.h.values[node][j], None
        later = k + 1 < len(lv) and int(self.next_valid[node][k + 1]) < len(lv)
        if not later:
            return None, "node_gone"
        return None, "gap" if j >= 0 else "stale"

    def after(self, node: str, t: float) -> np.ndarray | None:
        """First reading at or after ``t`` (so its rate window starts after the settle time), within max_age."""
        nv = self.next_valid.get(node)
        if nv is None or len(nv) == 0:
            return None
        k = int(np.searchsorted(self.h.times, t - 1e-6, side="left"))
        if k >= len(nv):
            return None
        j = int(nv[k])
        if j >= len(nv) or self.h.times[j] - t > self.max_age:
            return None
        return self.h.values[node][j]


def decision_nodes(d: Decision, history: NodeHistory) -> list[NodeInfo]:
    """The candidates' NodeInfo as the scheduler saw them.

    Journal schema 2 recorded requests and allocatable per candidate: used exactly.
    Older rows did not: allocatable is Prometheus capacity (cores, MemTotal) and
    requests are zero, which skews the request columns of the model input.
    """
    if d.nodes is not None:
        return [
            NodeInfo(
                name=n,
                allocatable_cpu_m=int(e["allocatable_cpu_m"]),
                allocatable_mem_bytes=int(e["allocatable_mem_bytes"]),
                allocatable_pods=int(e["allocatable_pods"]),
                requested_cpu_m=int(e["requested_cpu_m"]),
                requested_mem_bytes=int(e["requested_mem_bytes"]),
                pod_count=int(e["pod_count"]),
            )
            for n, e in zip(d.candidates, d.nodes)
        ]
    out = []
    for n in d.candidates:
        c, m = history.cores.get(n, float("nan")), history.mem_bytes.get(n, float("nan"))
        out.append(
            NodeInfo(
                name=n,
                allocatable_cpu_m=int(c * 1000) if np.isfinite(c) else 0,
                allocatable_mem_bytes=int(m) if np.isfinite(m) else 0,
            )
        )
    return out


def _context(d: Decision, raw: np.ndarray, history: NodeHistory, settings: Settings) -> DecisionContext:
    norm = settings.normalisation
    load = normalise(raw, settings)
    cores = [history.cores.get(n, float("nan")) for n in d.candidates]
    mem = [history.mem_bytes.get(n, float("nan")) for n in d.candidates]
    pod_load = pod_matrix(d.pod_features, cores, mem, norm)
    nodes = decision_nodes(d, history)
    pod = PodRequest(
        name=d.pod_name,
        namespace=d.namespace,
        uid=d.pod_uid,
        cpu_m=int(d.pod_cpu_m or 0),
        mem_bytes=int(d.pod_mem_bytes or 0),
        demand=tuple(d.pod_features),
        owner=d.owner,
        demand_source=d.demand_source or "",  # journal schema >= 4; older rows do not say
    )
    return DecisionContext(
        pod=pod, nodes=nodes, feasible=np.asarray(d.feasible, bool), load=load, pod_load=pod_load, now=d.ts
    )


def rebuild_transitions(
    decisions: Sequence[Decision],
    history: NodeHistory,
    settings: Settings,
    *,
    ends: Mapping[str, float] | None = None,
    run_alone: Mapping[str, float] | None = None,
    episode_gap_seconds: float | None = None,
) -> tuple[list[Transition], Counter, float | None]:
    """Pure: decisions + history (+ the journal's pod ends) -> transitions, skip counts, and the settled cursor.

    ``ends``: pod uid -> when it ended (Journal.pod_ends); without them no slowdown is seen.
    ``run_alone``: owner -> run time alone (default: ``run_alone_seconds`` of these decisions).
    Each reward is ``settled_reward`` of ``transition_outcome``; the composite kind's
    per-pod and per-time denominators are the decisions read and their span.

    The cursor is the newest decision time up to which every decision was settled
    (used or skipped for good); decisions after it are read again next run.
    ``episode_gap_seconds``: decisions further apart than this are not chained as
    (state, next state); default 10x the reward delay.
    """
    delay = reward_delay(settings)
    gap = episode_gap_seconds if episode_gap_seconds is not None else 10 * delay
    lookup = _Lookup(history, settings.prometheus.max_sample_age_seconds)
    ends = ends or {}
    run_alone = run_alone_seconds(decisions, ends) if run_alone is None else run_alone
    slowdowns = pod_slowdowns(decisions, ends, run_alone)
    horizon = decisions[-1].ts - decisions[0].ts + delay if decisions else 1.0
    skipped: Counter = Counter()
    out: list[Transition] = []
    cursor: float | None = None
    unsettled = False
    contexts: list[DecisionContext | None] = []
    for i, d in enumerate(decisions):
        contexts.append(None)
        if d.ts + delay + lookup.max_age > history.end:
            skipped["no_settled_reward"] += 1  # may still settle: read again next run
            unsettled = True
            continue
        if not unsettled:
            cursor = d.ts
        before, after, why = [], [], None
        for node in d.candidates:
            v, why = lookup.before(node, d.ts)
            if v is None:
                break
            w = lookup.after(node, d.ts + delay)
            if w is None:
                why = "no_settled_reward"
                break
            before.append(v)
            after.append(w)
        if why is not None:
            skipped[why] += 1
            continue
        if not all(
            np.isfinite(history.cores.get(n, np.nan)) and np.isfinite(history.mem_bytes.get(n, np.nan))
            for n in d.candidates
        ):
            skipped["no_capacity"] += 1
            continue
        ctx = _context(d, np.asarray(before), history, settings)
        step_end = decisions[i + 1].ts if i + 1 < len(decisions) else d.ts + delay
        outcome = transition_outcome(
            np.asarray(before),
            np.asarray(after),
            settings,
            ended_between(slowdowns, d.ts, step_end),
            step_end - d.ts,
            len(decisions),
            horizon,
        )
        contexts[-1] = ctx
        out.append(
            Transition(
                decision_id=d.id,
                ts=d.ts,
                ctx=ctx,
                action=d.candidates.index(d.chosen),
                reward=settled_reward(outcome, settings.reward, settings.objectives),
                load_after=outcome.load_after,
                node_info=d.nodes is not None,
            )
        )
    # chain each transition to the next decision's state when it followed closely;
    # a skipped next decision leaves nothing to bootstrap from (done)
    position = {id(c): i for i, c in enumerate(contexts) if c is not None}
    for t in out:
        i = position[id(t.ctx)]
        nxt = contexts[i + 1] if i + 1 < len(contexts) else None
        if nxt is not None and nxt.now - t.ts <= gap:
            t.next_ctx = nxt
    return out, skipped, cursor
