"""A simulator twin of the user's own cluster, built from what the scheduler journalled.

Retraining from history alone sees only the placements the current model made (off-policy
TD on a few hundred transitions). A twin lets the model *try* other placements on this
cluster's nodes and workload, which is what learning the user's cluster needs
(``retrain.twin``). Everything comes from the journal, nothing from a hand-written scenario:

- **nodes**: every candidate's allocatable CPU, memory and pod slots from the journalled node
  entries (schema >= 2), grouped into node types of identical size and links. Network and disk
  capacities are not in node_exporter's series: a rate that plateaus in the history is taken
  as saturated at that level (``link_capacity``), else the normalisation scale (what the
  policy already treats as full) or the highest rate seen;
- **profiles**: one per owner (the ``top_owners`` most frequent; the rest pooled as ``other``):
  the median of its pods' journalled demand and requests, the spread as demand jitter, and the
  median run time (pod end, ``Journal.pod_ends``, minus its bind) as work, its spread as work
  jitter. Run time under contention is longer than work alone, so the twin errs towards load;
- **where an owner may run**: the node types it was feasible on in at least one decision; a
  type it never was feasible on (taints, selectors, affinity) is excluded with a synthetic
  label its node selector requires, so the twin's filters keep it off;
- **arrivals**: the journalled bind times cut into ``window_seconds`` windows, one Poisson
  phase per window with that window's count and owner mix (bursts and diurnal shape kept,
  exact times re-drawn per seed), gaps for empty windows;
- **idle load** (with the Prometheus ``history`` of the span): what each node carried beyond
  the journalled pods (measured load minus the demand of the pods bound there, over their
  run times, averaged over the rate window as Prometheus does); its 10th percentile becomes
  the node type's idle cpu/memory, and its mean network/disk part a steady background stream
  on that node;
- **metric lag**: the Prometheus rate window of the settings.

Hidden from the twin: link/disk speeds of nodes that never saturated, bursty
background (noisy neighbours, other schedulers' pods), a pod's own demand jitter (the journal
records the estimate the policy saw), and run time alone vs under contention. Modelling the
bursts from the residual was tried and made retraining worse (measured on eval-diurnal-2:
composite 5.29 vs the shipped model's 4.19): the residual of measured minus journalled demand
is dominated by demand jitter and contention, not by the neighbour. ``TwinError`` says why a journal cannot make a twin (too few decisions, no node
entries, no pod ends).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from drs_prom.config import Normalisation
from drs_prom.errors import DrsError
from drs_prom.features import N_FEATURES
from drs_prom.retrain.rebuild import NodeHistory
from drs_prom.sim.scenario import QUANTITY_KEYS, Scenario
from drs_prom.stores.journal import Decision

OTHER = "other"
SET_LABEL = "drs.io/twin-set-"
FEATURE_KEYS = QUANTITY_KEYS


class TwinError(DrsError):
    """The journal cannot describe a twin (one line: what is missing)."""


def _spread(values: np.ndarray, centre: float) -> float:
    """Half the 10-90 % range over the centre, as a uniform +-jitter (bounded below 0.9)."""
    if len(values) < 2 or centre <= 0:
        return 0.0
    lo, hi = np.percentile(values, [10, 90])
    return float(min(0.9, max(0.0, (hi - lo) / (2 * centre))))


PLATEAU = 0.05
"""Share of samples within 2 % of a node's highest rate above which that rate is its capacity (saturated)."""


def link_capacity(values: np.ndarray, scale: np.ndarray) -> tuple[float, ...]:
    """A node's network and disk capacities (rx, tx, read, write) guessed from its history (T, N_FEATURES).

    node_exporter does not give them. A saturated resource reads flat at its capacity, so a rate
    that sits at its maximum in at least ``PLATEAU`` of the samples is taken as full there;
    otherwise the capacity is the normalisation scale, or the highest rate seen if that is more.
    """
    v = np.asarray(values, dtype=np.float64)[:, 2:]
    out = []
    for j in range(4):
        col = v[:, j][~np.isnan(v[:, j])]
        top = float(col.max()) if len(col) else 0.0
        flat = top > 0 and float(np.mean(np.abs(col - top) <= 0.02 * top)) >= PLATEAU
        out.append(top if flat else max(float(scale[j]), top))
    return tuple(out)


def _nodes(decisions: Sequence[Decision]) -> dict[str, tuple[int, int, int]]:
    """node name -> (allocatable cpu_m, memory bytes, pods), from the newest decision that lists it."""
    out: dict[str, tuple[int, int, int]] = {}
    for d in decisions:
        if not d.nodes:
            continue
        for name, entry in zip(d.candidates, d.nodes):
            out[name] = (
                int(entry["allocatable_cpu_m"]),
                int(entry["allocatable_mem_bytes"]),
                int(entry["allocatable_pods"]),
            )
    return out


def _owner(d: Decision, keep: set[str]) -> str:
    owner = d.owner or "unowned"
    return owner if owner in keep else OTHER


def _profile_name(owner: str, used: set[str]) -> str:
    base = "".join(c if c.isalnum() else "-" for c in owner.lower()).strip("-")[:40] or "p"
    name, k = base, 2
    while name in used:
        name, k = f"{base}-{k}", k + 1
    used.add(name)
    return name


def twin_scenario(
    decisions: Sequence[Decision],
    ends: Mapping[str, float],
    norm: Normalisation,
    metric_window_seconds: float,
    *,
    name: str = "twin",
    window_seconds: float = 600.0,
    top_owners: int = 8,
    min_decisions: int = 20,
    max_pods: int | None = None,
    history: NodeHistory | None = None,
) -> Scenario:
    """The twin of the cluster the ``decisions`` were made in (see the module docstring); TwinError if it cannot."""
    bound = sorted((d for d in decisions if d.outcome == "bound"), key=lambda d: d.ts)
    if max_pods is not None:
        bound = bound[-max_pods:]  # the newest workload: what the cluster runs now
    if len(bound) < min_decisions:
        raise TwinError(f"a twin needs at least {min_decisions} bound decisions, the journal has {len(bound)}")
    sizes = _nodes(bound)
    if not sizes:
        raise TwinError("no journalled node entries (journal schema 1): the twin cannot size the nodes")
    runs = {d.pod_uid: ends[d.pod_uid] - d.ts for d in bound if d.pod_uid in ends and ends[d.pod_uid] > d.ts}
    if not runs:
        raise TwinError("no pod ends in the journal (a scheduler before pod-end records): the twin cannot time pods")

    scale = np.array(
        [norm.net_rx_full_bytes, norm.net_tx_full_bytes, norm.disk_read_full_bytes, norm.disk_write_full_bytes]
    )
    links = {node: link_capacity(history.values[node], scale) for node in sizes if history and node in history.values}
    types: dict[tuple[Any, ...], list[str]] = defaultdict(list)
    for node, size in sorted(sizes.items()):
        types[(*size, *links.get(node, scale))].append(node)
    type_of = {node: f"t{i + 1}" for i, nodes in enumerate(types.values()) for node in nodes}

    counts = Counter(d.owner or "unowned" for d in bound)
    keep = {o for o, _ in counts.most_common(top_owners)}
    by_owner: dict[str, list[Decision]] = defaultdict(list)
    for d in bound:
        by_owner[_owner(d, keep)].append(d)

    all_types = set(type_of.values())
    allowed_sets: dict[frozenset[str], str] = {}
    used: set[str] = set()
    profiles: dict[str, dict[str, Any]] = {}
    names: dict[str, str] = {}
    all_runs = np.array(list(runs.values()))
    for owner, ds in sorted(by_owner.items()):
        pname = names[owner] = _profile_name(owner, used)
        demand = np.array([d.pod_features for d in ds], dtype=np.float64)
        centre = np.median(demand, axis=0)
        rel = [_spread(demand[:, k], float(centre[k])) for k in range(demand.shape[1]) if centre[k] > 0]
        own = [runs[d.pod_uid] for d in ds if d.pod_uid in runs]
        times = np.array(own) if own else all_runs
        work = float(np.median(times))
        prof: dict[str, Any] = {
            "weight": float(len(ds)),
            "demand": dict(zip(FEATURE_KEYS, (float(v) for v in centre))),
            "requests": {
                "cpu_m": float(np.median([d.pod_cpu_m or 0 for d in ds])),
                "mem_bytes": float(np.median([d.pod_mem_bytes or 0 for d in ds])),
            },
            "work_seconds": max(work, 1.0),
            "work_jitter": _spread(times, work),
            "demand_jitter": float(np.median(rel)) if rel else 0.0,
        }
        feasible = {type_of[c] for d in ds for c, ok in zip(d.candidates, d.feasible) if ok and c in type_of}
        if feasible and feasible != all_types:
            label = allowed_sets.setdefault(frozenset(feasible), f"{SET_LABEL}{len(allowed_sets) + 1}")
            prof["node_selector"] = {label: "1"}
        profiles[pname] = prof

    twin_name = {node: f"{type_of[node]}-{j + 1}" for nodes in types.values() for j, node in enumerate(nodes)}
    residual = _residuals(history, bound, runs, sizes, metric_window_seconds) if history is not None else {}
    node_types = []
    for (cpu_m, mem, pods, *link), nodes in types.items():
        tname = type_of[nodes[0]]
        labels = {label: "1" for allowed, label in allowed_sets.items() if tname in allowed}
        base = [np.nanpercentile(residual[n][:, :2], 10, axis=0) for n in nodes if n in residual]
        idle = np.clip(np.median(base, axis=0), 0.0, 0.9) if base else np.array([0.02, 0.05])
        node_types.append(
            {
                "name": tname,
                "count": len(nodes),
                "cpu_cores": cpu_m / 1000.0,
                "mem_bytes": float(mem),
                **dict(zip(FEATURE_KEYS[2:], (float(x) for x in link))),
                "allocatable_pods": max(1, pods),
                "labels": labels,
                "idle": {"cpu": float(idle[0]), "mem": float(idle[1])},
            }
        )
    return Scenario.model_validate(
        {
            "name": name,
            "description": (
                f"twin of the journal: {len(bound)} decisions over {(bound[-1].ts - bound[0].ts) / 3600:.1f} h, "
                f"{len(sizes)} nodes of {len(types)} size(s), {len(profiles)} owner profile(s)"
            ),
            "normalisation": norm.model_dump(),
            "metric_window_seconds": metric_window_seconds,
            "nodes": node_types,
            "profiles": profiles,
            "arrivals": _phases(bound, names, keep, window_seconds),
            "background": [b for node, r in residual.items() for b in _background(twin_name[node], r)],
        }
    )


def _residuals(
    history: NodeHistory,
    bound: Sequence[Decision],
    runs: Mapping[str, float],
    sizes: Mapping[str, tuple[int, int, int]],
    window: float,
) -> dict[str, np.ndarray]:
    """node -> (T, N_FEATURES) measured load minus the journalled pods' demand (cpu, memory as node fractions; NaN kept)."""
    t = np.asarray(history.times, dtype=np.float64)
    out: dict[str, np.ndarray] = {}
    by_node: dict[str, list[Decision]] = defaultdict(list)
    for d in bound:
        by_node[d.chosen].append(d)
    median_run = float(np.median(list(runs.values())))
    for node, values in history.values.items():
        if node not in sizes or len(values) != len(t):
            continue
        cores = history.cores.get(node, sizes[node][0] / 1000.0)
        mem = history.mem_bytes.get(node, float(sizes[node][1]))
        expected = np.zeros((len(t), N_FEATURES))
        for d in by_node.get(node, []):
            end = d.ts + runs.get(d.pod_uid, median_run)
            # rates are averages over the window before each sample; memory is a gauge
            share = np.clip(np.minimum(end, t) - np.maximum(d.ts, t - window), 0.0, window) / window
            on = (t >= d.ts) & (t < end)
            f = np.asarray(d.pod_features, dtype=np.float64)
            expected[:, 0] += share * f[0] / max(cores, 1e-9)
            expected[:, 1] += on * f[1] / max(mem, 1.0)
            expected[:, 2:] += share[:, None] * f[None, 2:]
        out[node] = np.asarray(values, dtype=np.float64) - expected
    return out


def _phases(
    bound: Sequence[Decision], names: Mapping[str, str], keep: set[str], window_seconds: float
) -> list[dict[str, Any]]:
    """One Poisson phase per window with decisions: its count, rate and owner mix; empty windows become gaps."""
    t0 = bound[0].ts
    slot = np.floor((np.array([d.ts for d in bound]) - t0) / window_seconds).astype(int)
    phases: list[dict[str, Any]] = []
    last = -1
    for k in np.unique(slot):
        members = [bound[int(i)] for i in np.flatnonzero(slot == k)]
        gap = (k - last - 1) * window_seconds if last >= 0 else 0.0
        last = int(k)
        mix = Counter(names[_owner(d, keep)] for d in members)
        phases.append(
            {
                "pods": len(members),
                "rate_per_second": len(members) / window_seconds,
                "gap_seconds": float(gap),
                "mix": {p: float(c) for p, c in mix.items()},
            }
        )
    return phases


BACKGROUND_STREAMS = 4
BACKGROUND_WORK_SECONDS = 60.0


def _background(twin_node: str, residual: np.ndarray) -> list[dict[str, Any]]:
    """The mean network/disk load a node carried beyond the journalled pods, as a steady background stream.

    ``BACKGROUND_STREAMS`` overlapping background pods on average, so the load is about steady.
    """
    r = np.clip(np.nan_to_num(residual[:, 2:], nan=0.0), 0.0, None)
    mean = r.mean(axis=0) if len(r) else np.zeros(4)
    if not (mean > 0).any():
        return []
    per = mean / BACKGROUND_STREAMS
    return [
        {
            "node": twin_node,
            "demand": {"cpu_cores": 0.0, "mem_bytes": 0.0, **dict(zip(FEATURE_KEYS[2:], (float(x) for x in per)))},
            "rate_per_second": BACKGROUND_STREAMS / BACKGROUND_WORK_SECONDS,
            "work_seconds": BACKGROUND_WORK_SECONDS,
        }
    ]
