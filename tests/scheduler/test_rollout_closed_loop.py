"""Shadow mode, a 50% canary, a guardrail trip and an automatic rollback in a closed loop:
real kube-apiserver, real Prometheus scraping simulated nodes and the scheduler itself,
binds mirrored into the simulation (tests/scheduler/closed_loop.py). Windows are seconds
long so that each test runs in well under a minute."""

from __future__ import annotations

import json
import math
import threading
import time
from collections import Counter

import numpy as np
import pytest
from click.testing import CliRunner

from drs_prom.agent.persistence import load_model
from drs_prom.cli import cli
from drs_prom.registry import stored_model_loader
from drs_prom.scheduler.decision.arms import HEURISTIC, MODEL, assign_arm
from drs_prom.signals import promql
from drs_prom.stores.model_store import MODEL_FILE, ModelStore, ModelWatcher
from tests.scheduler.closed_loop import balancing_model, piling_model, start_loop
from tests.scheduler.conftest import journalled, scheduled_message
from tests.specs import SPEC, WINDOW
from tests.waiting import wait_for


def bound_row(r) -> bool:
    """A journal row of a pod this scheduler bound."""
    return r.outcome == "bound"


pytestmark = pytest.mark.integration


@pytest.fixture
def loop(tmp_path, fake_nodes):
    yield from start_loop(tmp_path, fake_nodes)


def _policy(path, version):
    return load_model(path).policy(WINDOW, version)


def _report(sched, loop, tmp_path, store=None):
    """`drs-prom report` on the run just made; returns its numbers."""
    out = tmp_path / "report"
    config = tmp_path / "report-settings.yaml"  # the scheduler's rate window, so the plots show what it saw
    config.write_text(f"prometheus:\n  window: {sched.settings.prometheus.window}\n")
    args = [
        "report",
        "--since",
        "10m",
        "--config",
        str(config),
        "--journal",
        sched.journal.path,
        "--prometheus",
        loop.prom.url,
        "--out",
        str(out),
    ]
    args += ["--store", str(store.root if store else tmp_path / "no-store")]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    for name in ("index.html", "decisions.png", "agreement.png", "cluster.png", "fallbacks.png", "numbers.json"):
        assert (out / name).stat().st_size > 0, name
    numbers = json.loads((out / "numbers.json").read_text())
    assert "prometheus_error" not in numbers and numbers["imbalance (stddev/mean cpu)_max"] is not None
    return numbers


def _lease_events(core, reason):
    data = json.loads(
        core.list_namespaced_event(
            "drs-system", field_selector=f"involvedObject.kind=Lease,reason={reason}", _preload_content=False
        ).data
    )
    return data["items"]


def test_shadow_mode_binds_like_the_heuristic_and_journals_both_choices(core, ns, loop, make_scheduler, tmp_path):
    bad = _policy(piling_model(tmp_path / "pile.keras"), "pile-1")
    sched = make_scheduler(
        source=loop.source, policy=bad, recorder=loop.mirror, overrides=loop.overrides(mode="shadow")
    )
    for i in range(30):
        loop.create(core, ns, f"s{i:03d}")
        time.sleep(0.1)
    placed = wait_for(lambda: loop.all_bound(core, ns), 60, "30 pods bound")
    rows = journalled(sched, 30, bound_row)
    assert len(rows) == 30
    for r in rows:
        assert (r.arm, r.policy, r.fallback_reason, r.model_version) == (
            HEURISTIC,
            "capacity-balanced-overload",
            None,
            None,
        )
        # the bound node is the heuristic's own argmax: the model's scores did not move it
        best = max((s, -i) for i, s in enumerate(r.scores) if s is not None)
        assert r.chosen == r.candidates[-best[1]]
        assert r.shadow_policy == "drs" and r.shadow_choice in loop.nodes
        assert len(r.shadow_scores) == len(r.candidates) and set(r.counterfactual) == {HEURISTIC, MODEL}
        assert r.chosen == placed[r.pod_name]
    # the piling model would have put (nearly) everything on one node; the heuristic spread them
    shadow_nodes = Counter(r.shadow_choice for r in rows)
    bound_nodes = Counter(r.chosen for r in rows)
    agree = sum(r.chosen == r.shadow_choice for r in rows)
    # the heuristic reads lagging metrics plus its recent-bind memory: when metrics arrive late one node takes more
    # (11 and 13 of 30 seen in CI), but every node gets pods and none takes half
    assert len(bound_nodes) == 4 and max(bound_nodes.values()) < 15
    # the model wants the most loaded node, the heuristic the least loaded: they rarely agree
    assert agree < 15, agree
    for r in rows:  # the journalled shadow choice is the model's own argmax
        best = max((s, -i) for i, s in enumerate(r.shadow_scores) if s is not None)
        assert r.shadow_choice == r.candidates[-best[1]]
    print(
        f"\nshadow: bound per node {dict(bound_nodes)}; model would have chosen {dict(shadow_nodes)}; agree {agree}/30"
    )
    reg = sched.metrics.registry
    assert (reg.get_sample_value("drs_shadow_comparisons_total", {"agree": "true"}) or 0) == agree
    assert (reg.get_sample_value("drs_shadow_comparisons_total", {"agree": "false"}) or 0) == 30 - agree
    assert (
        reg.get_sample_value("drs_decisions_total", {"policy": "capacity-balanced-overload", "arm": "heuristic"}) == 30
    )
    msg = scheduled_message(core, ns, "s000")
    assert "by capacity-balanced-overload" in msg and "arm heuristic; model drs would pick " in msg
    numbers = _report(sched, loop, tmp_path)
    assert numbers["compared"] == 30 and numbers["agreement"] == agree / 30 and numbers["by_arm"] == {"heuristic": 30}
    # the agreement rate as Prometheus computes it from the scraped counters (generated PromQL)
    expr = promql.agreement_rate("30s")
    (rate,) = wait_for(lambda: (v,) if (v := loop.query(expr)) is not None else None, 20, "agreement in Prometheus")
    assert 0 <= rate <= 1 and (agree > 0 or rate == 0)
    wait_for(lambda: sched.bound_count == 30, 10, "30 binds counted")  # counted when the response arrives
    assert len(loop.mirror.bound) == 30


def test_canary_half_splits_decisions_within_binomial_bounds(core, ns, loop, make_scheduler, tmp_path):
    good = _policy(balancing_model(tmp_path / "bal.keras"), "bal-1")
    sched = make_scheduler(
        source=loop.source, policy=good, recorder=loop.mirror, overrides=loop.overrides(mode="canary", canary_share=0.5)
    )
    n = 120
    for i in range(n):
        loop.create(core, ns, f"c{i:03d}")
    wait_for(lambda: loop.all_bound(core, ns), 90, f"{n} pods bound")
    rows = journalled(sched, n, bound_row)
    arms = Counter(r.arm for r in rows)
    sd = math.sqrt(n * 0.25)
    print(f"\ncanary 50%: {dict(arms)} of {n} (binomial sd {sd:.1f})")
    assert abs(arms[MODEL] - n / 2) <= 4 * sd and arms[MODEL] + arms[HEURISTIC] == n
    for r in rows:  # each pod in the arm its uid hashes to, decided by that arm's policy
        assert r.arm == assign_arm(sched.settings.rollout, r.pod_uid, ns, {})
        assert r.policy == ("drs" if r.arm == MODEL else "capacity-balanced-overload") and r.fallback_reason is None
        assert r.shadow_policy == ("capacity-balanced-overload" if r.arm == MODEL else "drs")
    reg = sched.metrics.registry
    assert reg.get_sample_value("drs_decisions_total", {"policy": "drs", "arm": "model"}) == arms[MODEL]
    assert (
        reg.get_sample_value("drs_decisions_total", {"policy": "capacity-balanced-overload", "arm": "heuristic"})
        == arms[HEURISTIC]
    )
    model_pod = next(r.pod_name for r in rows if r.arm == MODEL)
    msg = scheduled_message(core, ns, model_pod)
    assert "by drs;" in msg and "arm model; heuristic capacity-balanced-overload would pick" in msg


GUARD = {
    "enabled": True,
    "evaluate_seconds": 1,
    "breach_window_seconds": 4,
    "lookback": "6s",
    "step": "1s",
    "imbalance": 0.8,
    "hot_node_time": 0.5,
}


def test_piling_model_trips_the_guardrail_and_falls_back_without_losing_pods(core, ns, loop, make_scheduler, tmp_path):
    bad = _policy(piling_model(tmp_path / "pile.keras"), "pile-1")
    sched = make_scheduler(
        source=loop.source, policy=bad, recorder=loop.mirror, overrides=loop.overrides(guardrails=GUARD)
    )
    t0 = time.time()
    stop = threading.Event()
    feeder = threading.Thread(target=loop.feed, args=(core, ns, "g", 3.0, stop, 150), daemon=True)
    feeder.start()
    try:
        trip = wait_for(lambda: sched.journal.events(0, kind="guardrail_trip"), 60, "a guardrail trip")[0]
        time.sleep(3)  # some pods after the trip
    finally:
        stop.set()
        feeder.join(10)
    placed = wait_for(lambda: loop.all_bound(core, ns), 60, "every created pod bound")
    assert len(placed) == len(loop.created)  # 0 pods lost
    wait_for(lambda: sched.bound_count == len(loop.created), 10, "every bind counted")
    d = trip.detail
    assert d["rule"] in ("imbalance", "hot_node") and d["value"] > d["threshold"] and trip.version == "pile-1"
    held = trip.ts - d["breached_since"]
    assert held >= GUARD["breach_window_seconds"]
    rows = sorted(journalled(sched, len(loop.created), bound_row), key=lambda r: r.ts)
    before = [r for r in rows if r.ts < trip.ts]
    after = [r for r in rows if r.ts > trip.ts + 0.5]  # a decision already in flight may straddle the trip
    first_fb = next(r.ts for r in rows if r.fallback_reason == "guardrail")
    print(
        f"\nguardrail {d['rule']}={d['value']:.2f} > {d['threshold']}: breached {held:.1f}s (window "
        f"{GUARD['breach_window_seconds']}s), tripped {trip.ts - t0:.1f}s after start, first fallback decision "
        f"{first_fb - d['breached_since']:.1f}s after the breach began; {len(before)} model / {len(after)} fallback pods; "
        f"per node before {dict(Counter(r.chosen for r in before))} after {dict(Counter(r.chosen for r in after))}"
    )
    assert before and {(r.policy, r.fallback_reason) for r in before} == {("drs", None)}
    assert Counter(r.chosen for r in before).most_common(1)[0][1] == len(before)  # it piled onto one node
    assert after and {(r.policy, r.fallback_reason, r.arm) for r in after} == {
        ("capacity-balanced-overload", "guardrail", MODEL)
    }
    assert len({r.chosen for r in after}) >= 3  # the fallback spreads again
    reg = sched.metrics.registry
    assert reg.get_sample_value("drs_guardrail_tripped", {"rule": d["rule"]}) == 1
    assert reg.get_sample_value("drs_guardrail_trips_total", {"rule": d["rule"]}) == 1
    assert reg.get_sample_value("drs_fallback_decisions_total", {"reason": "guardrail"}) == sum(
        r.fallback_reason == "guardrail" for r in rows
    )
    ev = [e for e in _lease_events(core, "GuardrailTripped") if "pile-1" in e["message"]]
    assert ev and ev[0]["type"] == "Warning"
    numbers = _report(sched, loop, tmp_path)
    assert numbers["bound"] == len(loop.created) and numbers["fallback_reasons"]["guardrail"] == len(after) + sum(
        1 for r in rows if trip.ts <= r.ts <= trip.ts + 0.5 and r.fallback_reason == "guardrail"
    )
    assert numbers["guardrail_trips"][0]["rule"] == d["rule"]


def test_bad_promotion_is_rolled_back_automatically(core, ns, loop, make_scheduler, tmp_path):
    import shutil

    store = ModelStore(tmp_path / "store")

    def add(path):
        def save(d):
            shutil.copy(path, d / MODEL_FILE)
            shutil.copy(path.with_suffix(".json"), d / "model.json")

        info = store.add(save)
        store.promote(info.name)
        return info.name

    good = add(balancing_model(tmp_path / "bal.keras"))
    watcher = ModelWatcher(store, stored_model_loader(SPEC))
    watcher.reload_if_changed()

    def loader():
        watcher.reload_if_changed()
        return watcher.model

    window = 8
    sched = make_scheduler(
        source=loop.source,
        policy=watcher.model,
        model_loader=loader,
        recorder=loop.mirror,
        overrides={
            **loop.overrides(
                guardrails={"evaluate_seconds": 1, "step": "1s"},
                rollback={"enabled": True, "window_seconds": window, "margin": 0.2, "absolute_margin": 0.1},
            ),
            "retrain.model_store": str(store.root),
        },
    )
    stop = threading.Event()
    feeder = threading.Thread(target=loop.feed, args=(core, ns, "r", 2.0, stop, 120, "200m"), daemon=True)
    feeder.start()
    try:
        # the first version was promoted before this scheduler ran: not judged (no before-window seen)
        v1 = wait_for(lambda: sched.journal.events(0, kind="promotion_verdict"), 60, "the first version passed")[0]
        assert v1.version == good and v1.detail["skipped"] and not v1.detail["worse"]
        time.sleep(max(0.0, 2 * window - (time.time() - v1.detail["promoted_at"])))  # the balancing model places
        bad = add(piling_model(tmp_path / "pile.keras"))  # the retraining job promotes a bad candidate
        wait_for(lambda: sched.decider.model_version == bad, 15, "hot reload of the bad version")
        verdict = wait_for(
            lambda: [e for e in sched.journal.events(0, kind="promotion_verdict") if e.version == bad],
            4 * window + 10,
            "a verdict on the bad version",
        )[0]
        print(
            f"\nrollback: before {verdict.detail['before']} after {verdict.detail['after']} -> {verdict.detail['reasons']}"
        )
        assert verdict.detail["worse"], verdict.detail
        # the verdict is journalled before the store is rolled back, and the rollback's own event after that
        (rb,) = wait_for(lambda: sched.journal.events(0, kind="rollback"), 15, "the rollback event")
        wait_for(lambda: sched.decider.model_version == good, 15, "hot reload of the rolled-back version")
        time.sleep(2)
    finally:
        stop.set()
        feeder.join(10)
    wait_for(lambda: loop.all_bound(core, ns), 60, "every created pod bound")
    assert rb.detail["from"] == bad and rb.detail["rolled_back_to"] == good
    assert store.current() == good and [e["action"] for e in store.history()] == ["promote", "promote", "rollback"]
    rows = sorted(journalled(sched, len(loop.created), bound_row), key=lambda r: r.ts)
    by_bad = [r for r in rows if r.model_version == bad]
    # the bad version piled (onto the next node too once the first was full by requests)
    assert by_bad and Counter(r.chosen for r in by_bad).most_common(1)[0][1] >= min(len(by_bad), 12)
    assert any(r.model_version == good and r.ts > rb.ts for r in rows)  # the good one decides again
    reg = sched.metrics.registry
    assert reg.get_sample_value("drs_model_rollbacks_total") == 1
    assert reg.get_sample_value("drs_promotion_verdicts_total", {"verdict": "rolled_back"}) == 1
    assert [e for e in _lease_events(core, "ModelRolledBack") if bad in e["message"]]
    np.testing.assert_array_equal(sorted(loop.mirror.bound), sorted(loop.created))
    numbers = _report(sched, loop, tmp_path, store)
    assert numbers["events"]["rollback"] == 1 and [p["action"] for p in numbers["promotions"]] == [
        "promote",
        "promote",
        "rollback",
    ]
    assert set(numbers["model_versions"]) == {good, bad}
