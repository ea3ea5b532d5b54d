"""Retraining end to end on a real Prometheus TSDB backfilled from a simulator run.

A 3+ hour simulated episode (4 workers, drs-paper applications stretched in time) is
written as node_exporter series with ``promtool tsdb create-blocks-from openmetrics``;
Prometheus serves them; the matching journal is written; ``drs-prom retrain --once`` runs
twice (first half, then the rest); the rebuilt transitions must equal the simulator's
exact load integrals, the bad rows must be skipped and counted by reason, and each run
must end with a stored, gated version promoted exactly when the gate's scores say so.

Over 400 lines because every test here shares one expensive module fixture (the backfilled TSDB).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from drs_prom.config import Settings
from drs_prom.outcomes.reward import settled_reward
from drs_prom.registry import make_policy
from drs_prom.retrain.gate import gate
from drs_prom.retrain.history import fetch_history
from drs_prom.retrain.history_reward import transition_outcome
from drs_prom.retrain.rebuild import load_decisions, rebuild_transitions, reward_delay
from drs_prom.signals.prometheus import PrometheusSource
from drs_prom.signals.state import node_matrix
from drs_prom.sim.backfill import create_blocks, write_openmetrics
from drs_prom.sim.scenario import load_scenario
from drs_prom.sim.trace import REQUEST_COLUMNS, journal_rows, run_sim
from drs_prom.stores.journal import Journal
from drs_prom.stores.model_store import ModelStore
from tests.prom.fixtures import start_prometheus
from tests.specs import SPEC
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

STEP = 10.0  # sample interval of the backfilled series = query step
WINDOW = 40.0  # rate window: a whole number of samples, so rate() is the exact window average
GAP = (4000.0, 4600.0)  # sim seconds during which node 2 was not scraped
GONE_BEFORE_END = 1500.0  # node 3 vanishes this long before the episode ends


def scenario():
    """drs-paper's applications, 10x longer and arriving every ~50 s: ~3.3 h of cluster time."""
    sc = load_scenario("drs-paper")
    profiles = {k: {**v.model_dump(), "work_seconds": v.work_seconds * 10} for k, v in sc.profiles.items()}
    return sc.with_changes(
        metric_window_seconds=WINDOW,
        settle_seconds=20.0,
        profiles=profiles,
        arrivals=[{"pods": 240, "rate_per_second": 0.02, "process": "poisson"}],
    )


PER_NODE = str(Path(__file__).resolve().parents[2] / "models" / "drs-v1.keras")


def settings_for(tmp: Path, url: str, sc) -> Settings:
    return Settings.model_validate(
        {
            "prometheus": {"url": url, "window": f"{WINDOW:g}s", "max_sample_age_seconds": 60, "timeout_seconds": 30},
            "normalisation": sc.norm.model_dump(),
            # the per-node model retraining fine-tunes (the shipped heuristic-guided drs is left as it is)
            "scheduler": {"settle_seconds": 20.0, "journal_path": str(tmp / "journal.sqlite"), "model_path": PER_NODE},
            "retrain": {
                "model_store": str(tmp / "store"),
                "keep_versions": 3,
                "epochs": 3,
                "min_transitions": 32,
                "holdout_fraction": 0.25,
                "query_step_seconds": STEP,
                "lookback_seconds": 86400,
                "sim_benchmark_pods": 40,
                "sim_scenario": str(tmp / "scenario.yaml"),
                "batch_size": 32,
            },
        }
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("retrain-tsdb")
    sc = scenario()
    (tmp / "scenario.yaml").write_text(yaml.safe_dump(json.loads(sc.model_dump_json())))
    run = run_sim(sc, make_policy("least-loaded", SPEC, 0), seed=3, epsilon=0.3)
    tail = 900.0  # the cluster idles on after the last pod, so the last rewards settle
    end = run.duration + tail
    run.epoch = float(np.floor((time.time() - end - 1200.0) / STEP) * STEP)  # blocks well before the head
    times = np.arange(0.0, end + STEP / 2, STEP)
    counters, mem = run.counters(times)
    present = np.ones((len(times), len(run.names)), bool)
    present[(times >= GAP[0]) & (times < GAP[1]), 2] = False
    gone = run.duration - GONE_BEFORE_END
    present[times >= gone, 3] = False
    om = tmp / "history.om"
    samples = write_openmetrics(om, run.nodes(), run.epoch + times, counters, mem, present)
    t0 = time.perf_counter()
    create_blocks(om, tmp / "tsdb")
    promtool_s = time.perf_counter() - t0
    prom = start_prometheus(tmp / "prom", storage_path=tmp / "tsdb", extra_args=["--storage.tsdb.retention.time=100y"])
    print(
        f"\nbackfilled {samples} samples ({run.duration / 3600:.2f} h, {len(run.decisions)} decisions) with promtool in {promtool_s:.1f}s"
    )
    try:
        yield {
            "tmp": tmp,
            "sc": sc,
            "run": run,
            "prom": prom,
            "gone": gone,
            "settings": settings_for(tmp, prom.url, sc),
        }
    finally:
        prom.stop()


def _write_journal(path: Path, rows) -> None:
    j = Journal(path)
    for r in rows:
        j.append(r)
    j.close()


def test_transitions_match_the_simulator(world):
    run, s = world["run"], world["settings"]
    rows = journal_rows(run, "least-loaded")
    j = Journal(":memory:")
    for r in rows:
        j.append(r)
    decisions, skipped = load_decisions(j, 0, float("inf"), 10**6)
    src = PrometheusSource(s.prometheus)
    delay = reward_delay(s)
    history = fetch_history(src, decisions[0].ts - 100, decisions[-1].ts + delay + 100, STEP)
    src.close()
    assert set(history.values) == set(run.names)
    assert history.cores == dict.fromkeys(run.names, 4.0)
    trans, skipped, _cursor = rebuild_transitions(decisions, history, s)
    used = {t.ts for t in trans}
    assert len(trans) > 150

    def clean(t_rel: float) -> bool:
        """Away from the series' edges, where rate() sees a partial window (start, gap end, node gone)."""
        margin = WINDOW + STEP
        return (
            t_rel >= margin
            and not (GAP[0] - delay - 60 <= t_rel < GAP[1] + margin)
            and t_rel < world["gone"] - delay - 60
        )

    errors = []
    for t in trans:
        g = np.floor((t.ts - run.epoch) / STEP) * STEP  # grid point the state was read at
        ga = np.ceil((t.ts - run.epoch + delay) / STEP) * STEP  # first grid point after settling
        want = node_matrix(_frame(run.expected_raw(g, WINDOW), run.names), s.normalisation)
        want_after = node_matrix(_frame(run.expected_raw(ga, WINDOW), run.names), s.normalisation)
        errors.append(
            (
                clean(t.ts - run.epoch),
                float(np.abs(t.ctx.load - want).max()),
                float(np.abs(t.load_after - want_after).max()),
                abs(
                    t.reward
                    - settled_reward(
                        transition_outcome(run.expected_raw(g, WINDOW), run.expected_raw(ga, WINDOW), s), s.reward
                    )
                ),
            )
        )
        assert run.names[t.action] == rows[[r.ts for r in rows].index(t.ts)].chosen
    err = np.array(errors)
    ok = err[:, 0] == 1.0
    assert ok.sum() > 150
    worst_state, worst_after, worst_reward = err[ok, 1:].max(axis=0)
    print(
        f"{int(ok.sum())} clean transitions: max |state - sim| {worst_state:.2e}, |after - sim| {worst_after:.2e}, |reward - sim| {worst_reward:.2e}"
    )
    if (~ok).any():
        print(f"{int((~ok).sum())} at series edges (partial rate windows): max |state - sim| {err[~ok, 1].max():.3f}")
    assert worst_state < 1e-3 and worst_after < 1e-3 and worst_reward < 1e-3

    # what the simulated policy itself saw (window average at the exact decision instant)
    sim_view = [
        np.nanmax(np.abs(d["load"] - t.ctx.load))
        for d in run.decisions
        for t in trans
        if abs(run.epoch + d["t"] - t.ts) < 1e-6
    ]
    print(f"median |state - sim policy's view| {np.median(sim_view):.3f} (grid {STEP:g}s vs exact decision time)")

    # bad data: skipped with its reason, never used
    t_rel = np.array([d.ts - run.epoch for d in decisions])
    in_gap = (t_rel >= GAP[0] + 100) & (t_rel < GAP[1])
    after_gone = t_rel >= world["gone"] + 100
    assert in_gap.sum() > 3 and after_gone.sum() > 10
    for d, g, a in zip(decisions, in_gap, after_gone):
        if g or a:
            assert d.ts not in used
    assert skipped["gap"] >= in_gap.sum()
    assert skipped["node_gone"] >= after_gone.sum()
    assert skipped["no_settled_reward"] >= 1  # decisions just before the gap: their reward falls into it
    missing = [round(d.ts - run.epoch, 1) for d in decisions if clean(d.ts - run.epoch) and d.ts not in used]
    assert not missing, f"clean decisions not used: {missing[:5]}"

    # schema 2: the request columns of the model input are exactly what the simulated policy saw
    from drs_prom.agent.model_inputs import candidate_matrix

    seen = {run.epoch + float(d["t"]): d["requests"] for d in run.decisions}
    assert all(t.node_info for t in trans)
    req_err = max(float(np.abs(candidate_matrix(t.ctx)[:, REQUEST_COLUMNS] - seen[t.ts]).max()) for t in trans)
    assert req_err == 0.0
    # schema-1 rows of the same run: the old fallback (capacity, zero requests) is used, flagged, and skewed
    old = Journal(":memory:")
    for r in journal_rows(run, "least-loaded", schema=1):
        old.append(r)
    old_trans, _, _ = rebuild_transitions(load_decisions(old, 0, float("inf"), 10**6)[0], history, s)
    assert len(old_trans) == len(trans) and not any(t.node_info for t in old_trans)
    old_err = max(float(np.abs(candidate_matrix(t.ctx)[:, REQUEST_COLUMNS] - seen[t.ts]).max()) for t in old_trans)
    print(
        f"request columns vs the sim policy's input: schema 2 max err {req_err:.2e}, schema 1 (zero requests) {old_err:.3f}"
    )
    assert old_err > 0.05


def _frame(raw, names):
    import pandas as pd

    from drs_prom.features import FEATURES

    return pd.DataFrame(raw, index=names, columns=list(FEATURES))


def _cli_once(cfg: Path) -> dict:
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from drs_prom.cli import main; main()",
            "retrain",
            "--once",
            "--json",
            "--config",
            str(cfg),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_retrain_once_twice_gates_and_promotes(world):
    tmp, run, s = world["tmp"], world["run"], world["settings"]
    cfg = tmp / "config.yaml"
    cfg.write_text(yaml.safe_dump(json.loads(s.model_dump_json())))
    rows = journal_rows(run, "least-loaded")
    half = len(rows) // 2
    jpath = Path(s.scheduler.journal_path)
    _write_journal(jpath, rows[:half])
    # a row from an older journal layout and a bind that lost a conflict
    db = sqlite3.connect(jpath)
    db.execute(
        "INSERT INTO decisions (schema, ts, pod_uid, pod_name, namespace, pod_features, candidates, feasible, chosen, scores, policy)"
        " VALUES (0, ?, 'old', 'old', 'default', '{}', 'a,b', '1', 'a', '[]', 'drs')",
        (rows[5].ts + 0.5,),
    )
    db.commit()
    db.close()
    conflict = journal_rows(run, "least-loaded")[6]
    conflict.outcome, conflict.ts = "conflict", conflict.ts + 0.5
    _write_journal(jpath, [conflict])

    # Run 1 is gated against the configured per-node model (the store is empty); a wide margin
    # makes its promotion certain so run 2 has a stored current model to be judged against.
    lenient = tmp / "config-lenient.yaml"
    data = json.loads(s.model_dump_json())
    data["retrain"]["gate_margin"] = 1000.0
    lenient.write_text(yaml.safe_dump(data))
    first = _cli_once(lenient)
    store = ModelStore(s.retrain.model_store, s.retrain.keep_versions)
    print("run 1:", {k: first[k] for k in ("result", "reason", "transitions", "skipped", "scores", "seconds")})
    assert first["skipped"]["old_schema"] == 1 and first["skipped"]["not_bound"] == 1
    assert first["approximated"] == {"no_node_info": 0}  # schema-2 rows: node requests from the journal
    assert first["transitions"] >= 64 and first["trained_on"] + first["held_out"] == first["transitions"]
    assert set(first["scores"]) == {"holdout_td", "sim_reward"}
    assert all(v["current"] is not None for v in first["scores"].values())  # judged against the configured model
    assert first["result"] == "promoted" and first["reason"] == gate(first["scores"], 1000.0).reason
    assert store.current() == first["version"]
    assert (store.current_path() / "model.keras").is_file()

    # run 2 reads rows an older scheduler wrote (schema 1): used with the approximated node input, and counted
    _write_journal(jpath, journal_rows(run, "least-loaded", schema=1)[half:])
    second = _cli_once(cfg)
    print("run 2:", {k: second[k] for k in ("result", "reason", "transitions", "skipped", "scores")})
    assert second["previous"] == first["version"]
    assert second["skipped"].get("old_schema", 0) == 0  # the cursor moved past run 1's rows
    assert second["approximated"] == {"no_node_info": second["transitions"]} and second["transitions"] > 0
    assert set(second["scores"]) == {"holdout_td", "sim_reward"}
    assert all({"candidate", "current"} <= set(v) for v in second["scores"].values())
    verdict = gate(second["scores"], s.retrain.gate_margin)
    assert second["result"] == ("promoted" if verdict.promote else "rejected")
    assert store.current() == (second["version"] if verdict.promote else first["version"])
    assert store.get(second["version"]).status == second["result"]

    # nothing new: no training, nothing stored
    third = _cli_once(cfg)
    assert third["result"] == "insufficient_data" and third["version"] is None
    assert len(store.list()) == 2

    out = subprocess.run(
        [sys.executable, "-c", "from drs_prom.cli import main; main()", "model", "list", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and store.current() in out.stdout


def test_job_in_process_promotes_and_the_scheduler_reloads_without_restart(world):
    """The BackgroundScheduler job runs real retraining on a 1 s interval beside a scheduling loop.

    The loop only calls ModelWatcher.reload_if_changed() each cycle; it must switch to the
    promoted version while it keeps scoring, and triggers during the slow (training) run
    must be dropped, not stacked.
    """
    from apscheduler.triggers.interval import IntervalTrigger
    from prometheus_client import CollectorRegistry

    from drs_prom.ops.retrain_job import RetrainJob
    from drs_prom.policies.contract import choose
    from drs_prom.registry import stored_model_loader
    from drs_prom.retrain.retrain_run import run_once
    from drs_prom.sim.env import SchedulingEnv
    from drs_prom.sim.retrain_checks import SimulatorChecks
    from drs_prom.stores.model_store import ModelWatcher

    tmp, run, base = world["tmp"], world["run"], world["settings"]
    # A wide gate margin: the first run must promote (it is judged against the configured model).
    s = base.model_copy(
        update={
            "retrain": base.retrain.model_copy(update={"model_store": str(tmp / "store-job"), "gate_margin": 1000.0})
        }
    )
    jpath = tmp / "journal-job.sqlite"
    _write_journal(jpath, journal_rows(run, "least-loaded"))
    store = ModelStore(s.retrain.model_store, s.retrain.keep_versions)
    reg = CollectorRegistry()
    source = PrometheusSource(s.prometheus)
    journal = Journal(jpath)
    results = []

    def retrain():
        res = run_once(
            s,
            source,
            journal,
            store,
            registry=reg,
            simulator=SimulatorChecks(s, world["sc"].with_changes(arrivals=[{"pods": 40, "rate_per_second": 0.02}])),
        )
        results.append(res)
        return res

    # the "scheduler": one decision context scored per cycle with whatever model is loaded
    ctx = SchedulingEnv(world["sc"], seed=1).reset()
    watcher = ModelWatcher(store, stored_model_loader(SPEC))
    seen: list[tuple[str | None, int]] = []
    cycles = [0]
    stop = threading.Event()

    def scheduling_loop() -> None:
        while not stop.is_set():
            watcher.reload_if_changed()
            if watcher.model is not None:
                seen.append((watcher.version, choose(watcher.model, ctx)[0]))
            cycles[0] += 1
            time.sleep(0.02)

    loop = threading.Thread(target=scheduling_loop)
    loop.start()
    job = RetrainJob(s.retrain, retrain, registry=reg, trigger=IntervalTrigger(seconds=1))
    job.start()
    try:
        wait_for(
            lambda: job.completed >= 2 and watcher.version is not None,
            300,
            "two runs and a promoted model loaded",
            interval=0.05,
        )
    finally:
        job.shutdown(wait=True)
        stop.set()
        loop.join(10)
        source.close()
        journal.close()
    assert results[0].result == "promoted" and results[1].result == "insufficient_data"
    assert job.max_running == 1 and job.failed == 0
    assert watcher.version == store.current() == results[0].version
    # the loaded model is the promoted one: the same weights as a fresh load of that version
    # (scores are not compared: the policy remembers its own recent binds across calls)
    # (``inner``: the networks behind drs's whole-node reserve)
    served, fresh = watcher.model.inner, stored_model_loader(SPEC)(store.current_path()).inner
    assert len(served.layers) == len(fresh.layers)
    for (k1, b1, a1), (k2, b2, a2) in zip(served.layers, fresh.layers):
        assert a1 == a2 and np.array_equal(k1, k2) and np.array_equal(b1, b2)
    assert seen and {v for v, _ in seen} == {results[0].version}
    assert reg.get_sample_value("drs_retrain_runs_total", {"result": "promoted"}) == 1
    assert reg.get_sample_value("drs_retrain_runs_total", {"result": "insufficient_data"}) >= 1
    assert reg.get_sample_value("drs_retrain_transitions_used") == results[0].transitions
    assert reg.get_sample_value("drs_retrain_last_success_timestamp_seconds") > time.time() - 600
    assert (
        reg.get_sample_value("drs_retrain_eval_score", {"benchmark": "holdout_td", "model": "candidate"})
        == results[0].scores["holdout_td"]["candidate"]
    )


def test_speed_10k_decisions(world):
    """Throughput for 10k decisions over the backfilled hours: journal read, query, rebuild, train.

    Printed, not asserted as wall-clock limits; the ratios compare the stages in one process.
    """
    from drs_prom.retrain.batch import node_batch
    from drs_prom.retrain.candidate import train_candidate

    run, s = world["run"], world["settings"]
    rows = journal_rows(run, "least-loaded")
    rng = np.random.default_rng(0)
    t_lo, t_hi = run.epoch + 60, run.epoch + run.duration - GONE_BEFORE_END - 200
    many = []
    for i, ts in enumerate(np.sort(rng.uniform(t_lo, t_hi, 10_000))):
        r = rows[i % len(rows)]
        r = type(r)(**{**r.__dict__, "ts": float(ts), "pod_uid": f"u{i}", "id": None})
        many.append(r)
    j = Journal(world["tmp"] / "journal-10k.sqlite")
    for r in many:
        j.append(r)
    t0 = time.perf_counter()
    decisions, _ = load_decisions(j, 0, float("inf"), 10**6)
    t_read = time.perf_counter() - t0
    j.close()
    src = PrometheusSource(s.prometheus)
    t0 = time.perf_counter()
    history = fetch_history(src, decisions[0].ts - 70, decisions[-1].ts + reward_delay(s) + 70, STEP)
    t_query = time.perf_counter() - t0
    src.close()
    t0 = time.perf_counter()
    trans, skipped, _ = rebuild_transitions(decisions, history, s)
    t_rebuild = time.perf_counter() - t0
    assert len(trans) >= 9000, skipped
    t0 = time.perf_counter()
    node_batch(trans, 4, s.prometheus.window_seconds)
    t_batch = time.perf_counter() - t0
    one_epoch = s.model_copy(
        update={"retrain": s.retrain.model_copy(update={"epochs": 1, "batch_size": 64, "sim_replay_episodes": 0})}
    )
    trained = train_candidate(None, trans, one_epoch)
    samples = trained.steps * 64
    rebuild_rate = len(trans) / t_rebuild
    e2e_rate = len(trans) / (t_read + t_query + t_rebuild)
    train_rate = len(trans) / trained.seconds
    print(
        f"\n10k decisions: journal read {len(decisions) / t_read:,.0f}/s, Prometheus query {t_query:.2f}s, "
        f"rebuild {rebuild_rate:,.0f} transitions/s (read+query+rebuild {e2e_rate:,.0f}/s), "
        f"learner inputs {len(trans) / t_batch:,.0f}/s, "
        f"training 1 epoch: {train_rate:,.0f} transitions/s ({samples / trained.seconds:,.0f} samples/s, {trained.steps} steps of 64); "
        f"rebuild is {rebuild_rate / train_rate:.1f}x training speed"
    )
    assert trained.steps == int(np.ceil(len(trans) / 64))
