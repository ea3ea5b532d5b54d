"""One retraining run, step by step: journal -> Prometheus history -> transitions -> candidate -> gate -> store.

1. ``read_journal``: decisions after the saved cursor whose reward has settled;
2. ``query_history``: node features over that span (``query_range``), read at each decision
   time and after its settle delay;
3. ``rebuild_transitions`` (pure, drs_prom.retrain.rebuild): skipped rows counted by reason;
4. ``train_candidate``: a copy of the current model on the older transitions (plus simulator replay);
   a model that cannot be fine-tuned (the heuristic-guided network, a selector) is challenged, with a
   twin only, by a fresh per-node network trained on the twin;
5. ``gate_scores`` + ``gate``: candidate vs current on the newest, held-out transitions and, with
   a simulator, on a short seeded run; ``publish``: promote (atomic pointer swap in the model
   store) only if the candidate is not worse by ``gate_margin``, else keep it as rejected. With a
   twin, the candidate must also be non-inferior to the best heuristic there (paired seeds, the
   bench's interval, ``gate_inferiority_margin``), not only no worse than the current model.

The simulator is injected (``simulator=``, a RetrainSimulator) by drs_prom.ops.retrain_job.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from drs_prom.agent import default_model_path, load_model
from drs_prom.agent.numpy_policy import Layers
from drs_prom.agent.persistence import base_metadata, head_kind, save_model
from drs_prom.config import Settings
from drs_prom.errors import DrsError, ModelError
from drs_prom.retrain.batch import max_nodes, node_batch
from drs_prom.retrain.candidate import RetrainSimulator, Trained, train_candidate
from drs_prom.retrain.gate import GateVerdict, gate, non_inferior, td_score
from drs_prom.retrain.history import HistorySource, NodeHistory, fetch_history
from drs_prom.retrain.outcome import RetrainMetrics, RetrainResult, record
from drs_prom.retrain.rebuild import JournalReader, Transition, load_decisions, rebuild_transitions, reward_delay
from drs_prom.stores.journal import Decision
from drs_prom.stores.model_store import MODEL_FILE, ModelStore

log = logging.getLogger(__name__)


def run_once(
    settings: Settings,
    source: HistorySource,
    journal: JournalReader,
    store: ModelStore,
    *,
    now: float | None = None,
    registry: CollectorRegistry | None = None,
    simulator: RetrainSimulator | None = None,
) -> RetrainResult:
    """One retraining run; never raises for bad data or an unreachable Prometheus (result "error").

    ``simulator``: replay experience and the gate's simulator score (drs_prom.sim.retrain_checks);
    without one, the gate uses the held-out transitions only.
    """
    metrics = RetrainMetrics.get(registry)
    t0 = time.perf_counter()
    try:
        res = _run(settings, source, journal, store, time.time() if now is None else now, simulator)
    except DrsError as exc:
        res = RetrainResult("error", reason=str(exc))
    except Exception as exc:  # counted and re-raised: a bug must be visible, the job wrapper contains it
        record(metrics, RetrainResult("error", reason=f"{type(exc).__name__}: {exc}"), time.perf_counter() - t0)
        raise
    record(metrics, res, time.perf_counter() - t0)
    cur = store.current()
    if cur:
        metrics.current.set(store.get(cur).number)
    log.info("%s", res.summary())
    return res


@contextmanager
def _timed(seconds: dict[str, float], step: str) -> Iterator[None]:
    t = time.perf_counter()
    yield
    seconds[step] = time.perf_counter() - t


def _run(
    settings: Settings,
    source: HistorySource,
    journal: JournalReader,
    store: ModelStore,
    now: float,
    simulator: RetrainSimulator | None,
) -> RetrainResult:
    rs = settings.retrain
    secs: dict[str, float] = {}
    with _timed(secs, "journal"):
        decisions, skipped, capped = read_journal(settings, journal, store, now)
    res = RetrainResult("insufficient_data", decisions=len(decisions), skipped=dict(skipped), seconds=secs)
    if not decisions:
        res.reason = "no new decisions in the journal"
        return res

    with _timed(secs, "query"):
        history = query_history(settings, source, decisions, now)
    with _timed(secs, "rebuild"):
        ends = journal.pod_ends(decisions[0].ts)  # the slowdowns of the rewards, and the twin's run times
        trans, more, settled = rebuild_transitions(decisions, history, settings, ends=ends)
    skipped.update(more)
    res.skipped, res.transitions = dict(skipped), len(trans)
    res.approximated = {"no_node_info": sum(not x.node_info for x in trans)}

    needed = max(rs.min_transitions, 2)
    if len(trans) < needed:
        res.reason = f"{len(trans)} usable transitions, need {needed}"
        if capped:  # a full batch of unusable rows must not block the cursor forever
            res.cursor = advance_cursor(store, decisions, settled)
        return res

    train, held = split_holdout(trans, rs.holdout_fraction)
    res.trained_on, res.held_out = len(train), len(held)
    current = current_model(store, settings)
    res.previous = store.current()
    if current.unsupported and not (simulator is not None and rs.twin):
        res.result, res.reason = "unsupported", current.unsupported
        return res

    twin, twin_sim = "", None
    if simulator is not None and rs.twin:
        with _timed(secs, "twin"):
            twin_sim, twin = simulator.fitted(decisions, ends, history)
        log.info("retraining twin: %s", twin)
    if current.unsupported and twin_sim is None:
        res.result, res.reason = "unsupported", f"{current.unsupported}; {twin}"
        return res
    # a model that cannot be fine-tuned (heuristic-guided, selector) is challenged by a fresh per-node network
    # trained on the twin, and the gate judges the two on the twin like any other candidate and current model
    start, head = (None, None) if current.unsupported else (current.layers, current.head)
    with _timed(secs, "train"):
        if twin_sim is not None:
            # the twin's transitions show every placement's outcome; the journal's only the current model's, and they built the twin
            trained = train_candidate(start, [], settings, twin_sim, teach=True)
        else:
            trained = train_candidate(start, train, settings, simulator)
    secs["train_steps"] = float(trained.steps)
    with _timed(secs, "gate"):
        versus: dict[str, Any] | None = None
        if twin_sim is not None:
            scores = twin_gate_scores(trained, head, current, trans, held, settings, twin_sim)
            verdict = gate({"twin_composite": scores["twin_composite"]}, rs.gate_margin)
            # asked whatever the first verdict: the run reports where the candidate stands against the heuristic
            # the scheduler would fall back to, and a candidate above it is never promoted
            versus = twin_sim.versus_best_heuristic(trained.layers, head)
            against = non_inferior(versus, rs.gate_inferiority_margin)
            verdict = GateVerdict(verdict.promote and against.promote, f"{verdict.reason}; {against.reason}")
        else:
            scores = gate_scores(trained, current.layers, trans, held, settings, simulator, current.head)
            verdict = gate(scores, rs.gate_margin)
    res.scores = scores

    meta = candidate_metadata(settings, trained, current, head, decisions, train, held, skipped, res.approximated)
    if twin:
        meta["training"]["twin"] = twin
    meta["gate"] = {"scores": scores, "margin": rs.gate_margin, "promote": verdict.promote, "reason": verdict.reason}
    if versus is not None:
        meta["gate"]["versus_best_heuristic"] = versus | {"margin": rs.gate_inferiority_margin}
    if current.note:
        meta["gate"]["current_note"] = current.note
    res.version = store_candidate(store, trained, meta, {"scores": scores, "transitions": len(train)})
    res.result = publish(store, res.version, verdict)
    res.reason = verdict.reason
    res.cursor = advance_cursor(store, decisions, settled)
    return res


# -- the steps ------------------------------------------------------------------------------


def read_journal(
    settings: Settings, journal: JournalReader, store: ModelStore, now: float
) -> tuple[list[Decision], Counter[str], bool]:
    """Usable decisions after the store's cursor, at most ``max_decisions``; skip counts; whether it was capped.

    Only decisions whose reward can have settled by ``now`` are read.
    """
    rs = settings.retrain
    state = store.state()
    cursor_ts = float(state.get("cursor_ts", now - rs.lookback_seconds))
    cursor_id = int(state.get("cursor_id", -1))
    until = now - reward_delay(settings) - settings.prometheus.max_sample_age_seconds
    decisions, skipped = load_decisions(journal, cursor_ts, until, rs.max_decisions + 1)
    decisions = [d for d in decisions if (d.ts, d.id or 0) > (cursor_ts, cursor_id)]
    capped = len(decisions) > rs.max_decisions
    return decisions[: rs.max_decisions], skipped, capped


def query_history(settings: Settings, source: HistorySource, decisions: list[Decision], now: float) -> NodeHistory:
    """Node features from just before the first decision to just after the last one settled."""
    max_age = settings.prometheus.max_sample_age_seconds
    step = settings.retrain.query_step_seconds
    start = decisions[0].ts - max_age - step
    end = min(now, decisions[-1].ts + reward_delay(settings) + max_age + step)
    return fetch_history(source, start, end, step)


def advance_cursor(store: ModelStore, decisions: list[Decision], settled: float | None) -> float | None:
    """Move the store's cursor to the newest settled decision; its time, or None when none settled."""
    last = [d for d in decisions if settled is not None and d.ts <= settled]
    if not last:
        return None
    store.save_state({**store.state(), "cursor_ts": last[-1].ts, "cursor_id": last[-1].id or 0})
    return last[-1].ts


def split_holdout(trans: list[Transition], fraction: float) -> tuple[list[Transition], list[Transition]]:
    """Oldest for training, newest held out (time order: the gate asks "does it handle what comes next")."""
    k = min(len(trans) - 1, max(1, round(len(trans) * fraction)))
    return trans[: len(trans) - k], trans[len(trans) - k :]


@dataclass(frozen=True)
class CurrentModel:
    """The model the scheduler runs now: its weights (None: none usable), where they came from, why others were not."""

    layers: Layers | None
    name: str | None
    note: str
    head: dict[str, Any] | None = None
    """The policy head (drs_prom.agent.persistence.Head, one that is ``fine_tunable``) the weights serve under;
    the candidate keeps it."""
    unsupported: str = ""
    """Why the running model cannot be fine-tuned from history (a guided network reads the heuristics' scores
    and cluster features, not only the per-node rows the journal rebuilds). Without a twin the run then trains
    nothing; with one, a fresh per-node network is trained there and gated against this model (``layers`` and
    ``head`` are then its own, for the gate's twin runs only)."""


def current_model(store: ModelStore, settings: Settings) -> CurrentModel:
    """Weights of the model the scheduler runs now: the store's current, else the configured, else the shipped."""
    path = store.current_path()
    candidates: list[tuple[Path | str, str | None]] = []
    if path is not None:
        candidates.append((path / MODEL_FILE, store.current()))
    if settings.scheduler.model_path:
        candidates.append((settings.scheduler.model_path, "configured"))
    candidates.append((default_model_path(), "shipped"))
    notes = []
    for p, name in candidates:
        try:
            loaded = load_model(p)
        except ModelError as exc:
            notes.append(str(exc))
            continue
        if loaded.policy_name != "drs":
            notes.append(f"{p} is a {loaded.policy_name} model; only drs models are retrained")
            continue
        kind = head_kind(loaded.head.get("kind")) if loaded.head else None
        if loaded.head and (kind is None or not kind.fine_tunable):
            why = (
                f"{p} is a {loaded.head.get('kind')} drs model: it is trained on generated clusters "
                "(drs-prom train --learner guided); "
                "fine-tuning from history applies to per-node drs models on the candidate columns"
            )
            return CurrentModel(list(loaded.layers), name, why, loaded.head, unsupported=why)
        return CurrentModel(list(loaded.layers), name, "", loaded.head)
    return CurrentModel(None, None, "; ".join(notes))


def gate_scores(
    trained: Trained,
    current: Layers | None,
    trans: list[Transition],
    held: list[Transition],
    settings: Settings,
    simulator: RetrainSimulator | None,
    head: dict[str, Any] | None = None,
) -> dict[str, dict[str, float]]:
    """Candidate (and current) scores: minus the TD error on the held-out transitions, and the simulator reward."""
    batch = node_batch(held, max_nodes(trans), settings.prometheus.window_seconds)
    scores: dict[str, dict[str, float]] = {"holdout_td": {"candidate": td_score(trained.layers, batch, trained.gamma)}}
    if current is not None:
        scores["holdout_td"]["current"] = td_score(current, batch, trained.gamma)
    if settings.retrain.sim_benchmark_pods and simulator is not None:
        scores["sim_reward"] = {"candidate": simulator.score(trained.layers, head)}
        if current is not None:
            scores["sim_reward"]["current"] = simulator.score(current, head)
    return scores


def twin_gate_scores(
    trained: Trained,
    head: dict[str, Any] | None,
    current: CurrentModel,
    trans: list[Transition],
    held: list[Transition],
    settings: Settings,
    twin: RetrainSimulator,
) -> dict[str, dict[str, float]]:
    """With a twin, the gate is the composite objective on a workload of the twin neither model trained on
    (``twin_composite``, minus the composite: higher is better); ``head``: the candidate's, the current model
    runs under its own. The held-out TD error is reported, not gated on: its rewards cannot see slowdown, so it
    measures how well Q values match them, not placements (and a model that is not per-node has none)."""
    per_node = None if current.unsupported else current.layers
    scores = gate_scores(trained, per_node, trans, held, settings, None, head)
    scores["twin_composite"] = {"candidate": twin.composite(trained.layers, head)}
    if current.layers is not None:
        scores["twin_composite"]["current"] = twin.composite(current.layers, current.head)
    return scores


def candidate_metadata(
    settings: Settings,
    trained: Trained,
    current: CurrentModel,
    head: dict[str, Any] | None,
    decisions: list[Decision],
    train: list[Transition],
    held: list[Transition],
    skipped: Counter[str],
    approximated: dict[str, int],
) -> dict[str, Any]:
    """The candidate's model metadata: how it was trained (the gate's verdict is added by the caller);
    ``head``: the candidate's (the current model's when fine-tuned from it, none for a fresh network)."""
    meta = base_metadata("drs", settings.normalisation)
    if head:
        meta["head"] = dict(head)
    if current.unsupported:
        started = f"fresh network, challenging {current.name}"
    else:
        started = current.name if current.layers is not None and current.name else "fresh network"
    meta["training"] = {
        "kind": "retrain",
        "started_from": started,
        "transitions": len(train),
        "held_out": len(held),
        "sim_transitions": trained.sim_transitions,
        "steps": trained.steps,
        "seconds": round(trained.seconds, 2),
        "hidden": list(trained.hidden),
        "journal_span": [decisions[0].ts, decisions[-1].ts],
        "skipped": dict(skipped),
        "approximated": dict(approximated),
    }
    return meta


def store_candidate(store: ModelStore, trained: Trained, meta: dict[str, Any], summary: dict[str, Any]) -> str:
    """Save the candidate as a new store version (status candidate); its version name."""

    def write(directory: Path) -> None:
        save_model(trained.model, meta, directory / MODEL_FILE)

    return store.add(write, summary).name


def publish(store: ModelStore, version: str, verdict: GateVerdict) -> str:
    """Promote ``version`` or mark it rejected, as the verdict says; the run's result."""
    if verdict.promote:
        store.promote(version)
        return "promoted"
    store.set_status(version, "rejected", reason=verdict.reason)
    return "rejected"
