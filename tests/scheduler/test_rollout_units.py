"""The pure parts of the rollout: arm assignment, shadow comparison, the breach tracker,
the promotion verdict, journal schema 3, and the arms deciding inside a Decider (node
state is a literal snapshot here; the closed loop is in test_rollout_closed_loop.py)."""

from __future__ import annotations

import math
import sqlite3
import uuid

import numpy as np
import pytest

from drs_prom.config import Settings, load_settings
from drs_prom.errors import ConfigError
from drs_prom.ops.promotion_judge import judge
from drs_prom.scheduler.decision.arms import HEURISTIC, MODEL, AgreementWindow, assign_arm, compare, uid_fraction
from drs_prom.scheduler.decision.decide import Decider
from drs_prom.scheduler.decision.guardrails import BreachTracker, breaches, rules_for
from drs_prom.scheduler.decision.rollout import ArmedDecisions
from drs_prom.scheduler.metrics import SchedulerMetrics
from drs_prom.stores.journal import JOURNAL_SCHEMA, Decision, Journal, RolloutEvent
from drs_prom.types import PodRequest
from tests.scheduler.test_decide import DEMAND, FEASIBLE, NODES, Prefers, Snap
from tests.specs import SPEC


def rollout(**kw):
    return Settings.model_validate({"rollout": kw}).rollout


def test_canary_half_splits_like_a_fair_coin_and_is_deterministic():
    cfg = rollout(mode="canary", canary_share=0.5)
    uids = [str(uuid.UUID(int=i * 7919 + 13, version=4)) for i in range(4000)]
    arms = [assign_arm(cfg, u, "default", {}) for u in uids]
    n_model = arms.count(MODEL)
    # binomial(4000, 0.5): sd = 31.6; 4 sd either side
    assert abs(n_model - 2000) <= 4 * math.sqrt(4000 * 0.25), n_model
    assert arms == [assign_arm(cfg, u, "default", {}) for u in uids]  # a second replica agrees
    assert all(0 <= uid_fraction(u) < 1 for u in uids[:50])


def test_canary_selector_namespace_shadow_and_normal():
    cfg = rollout(mode="canary", canary_share=0.0, canary_namespaces=["team-a"], canary_selector="track=canary,!legacy")
    assert assign_arm(cfg, "u1", "team-a", {}) == MODEL
    assert assign_arm(cfg, "u1", "other", {"track": "canary"}) == MODEL
    assert assign_arm(cfg, "u1", "other", {"track": "canary", "legacy": "1"}) == HEURISTIC
    assert assign_arm(cfg, "u1", "other", {"track": "stable"}) == HEURISTIC
    assert assign_arm(rollout(mode="shadow"), "u1", "team-a", {}) == HEURISTIC
    assert assign_arm(rollout(mode="normal"), "u1", "x", {}) == MODEL


def test_bad_rollout_settings_are_one_line_config_errors(tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_text("rollout:\n  canary_selector: 'a in (b)'\n")
    with pytest.raises(ConfigError, match=r"canary_selector.*bad label selector term"):
        load_settings(bad)
    bad.write_text("rollout:\n  mode: yolo\n")
    with pytest.raises(ConfigError, match=r"rollout\.mode"):
        load_settings(bad)
    bad.write_text("rollout:\n  guardrails:\n    rules: [hot_node, vibes]\n")
    with pytest.raises(ConfigError, match="unknown guardrail rule 'vibes'"):
        load_settings(bad)


def test_shadow_comparison_counterfactual_prefers_the_balanced_choice():
    load = np.array([[0.8, 0, 0, 0, 0, 0], [0.1, 0, 0, 0, 0, 0]])
    pod = np.array([[0.2, 0, 0, 0, 0, 0], [0.2, 0, 0, 0, 0, 0]])
    rec = compare(HEURISTIC, 1, "drs", 0, np.array([1.0, 0.0]), load, pod)
    assert not rec.agree and rec.shadow_index == 0
    assert rec.counterfactual[HEURISTIC] == pytest.approx(0.25)  # std of (0.8, 0.3)
    assert rec.counterfactual[MODEL] == pytest.approx(0.45)  # std of (1.0, 0.1)
    w = AgreementWindow(size=4)
    for a in (True, True, False, False, False, True):
        w.add(a)
    assert w.rate == pytest.approx(0.25)  # the last four: F F F T


def test_breach_tracker_trips_only_after_the_window_while_the_model_decides():
    t = BreachTracker(window_seconds=30)
    assert t.update(0, {"hot_node": True}, True) is None
    assert t.update(20, {"hot_node": True}, False) is None  # fallback deciding: clock restarts
    assert t.update(25, {"hot_node": True}, True) is None
    assert t.update(50, {"hot_node": True}, True) is None
    assert t.update(55, {"hot_node": False, "imbalance": True}, True) is None  # breach interrupted
    assert t.update(60, {"hot_node": True, "imbalance": True}, True) is None
    assert t.update(85, {"hot_node": True, "imbalance": True}, True) == "imbalance"  # since 55


def test_breaches_ignore_missing_data_and_rules_follow_settings():
    s = Settings.model_validate({"rollout": {"guardrails": {"rules": ["imbalance", "hot_node"], "imbalance": 0.5}}})
    rules = rules_for(s.rollout.guardrails, s.prometheus)
    assert [r.name for r in rules] == ["imbalance", "hot_node"] and rules[0].threshold == 0.5
    assert rules[0].expr.startswith("avg_over_time(") and "[2m:10s]" in rules[0].expr
    assert breaches({"imbalance": 0.6, "hot_node": None}, rules) == {"imbalance": True, "hot_node": False}
    assert breaches({"imbalance": float("nan"), "hot_node": 0.9}, rules) == {"imbalance": False, "hot_node": True}


def test_promotion_verdict_needs_data_on_both_sides_and_the_margin():
    before = {"imbalance": 0.3, "hot_node": 0.0, "fallback_rate": None}
    assert judge(before, {"imbalance": 0.34, "hot_node": 0.0, "fallback_rate": 1.0}, 0.2, 0.05) == []
    worse = judge(before, {"imbalance": 1.2, "hot_node": 0.5, "fallback_rate": 1.0}, 0.2, 0.05)
    assert worse == ["imbalance 0.3 -> 1.2", "hot_node 0 -> 0.5"]


def test_schema_2_journal_upgraded_to_3_and_events_round_trip(tmp_path):
    path = tmp_path / "j.sqlite"
    j = Journal(path)
    j.close()
    db = sqlite3.connect(path)  # make it look like a schema-2 file: drop the schema-3 columns and table
    for col in ("arm", "shadow_policy", "shadow_choice", "shadow_scores", "counterfactual"):
        db.execute(f"ALTER TABLE decisions DROP COLUMN {col}")
    db.execute("DROP TABLE rollout_events")
    db.execute(
        "INSERT INTO decisions (schema, ts, pod_uid, pod_name, namespace, pod_features, candidates, feasible, chosen,"
        " scores, policy) VALUES (2, 1.0, 'u', 'old', 'd', '[1,2,3,4,5,6]', '[\"a\"]', '[1]', 'a', '[0.5]', 'drs')"
    )
    db.commit()
    db.close()
    j = Journal(path)
    new = Decision(
        pod_uid="u2",
        pod_name="new",
        namespace="d",
        pod_features=[1, 2, 3, 4, 5, 6],
        candidates=["a", "b"],
        feasible=[True, True],
        chosen="b",
        scores=[0.1, 0.2],
        policy="least-loaded",
        ts=2.0,
        arm=HEURISTIC,
        shadow_policy="drs",
        shadow_choice="a",
        shadow_scores=[1.0, None],
        counterfactual={"heuristic": 0.1, "model": 0.3},
    )
    new.id = j.append(new)
    j.append_event(RolloutEvent("guardrail_trip", {"rule": "imbalance", "value": 1.2}, version="v1", ts=3.0))
    old, back = list(j.since(0))
    assert old.schema == 2 and old.arm is None and old.shadow_scores is None
    assert back == new and back.schema == JOURNAL_SCHEMA == 4
    (ev,) = j.events(0, kind="guardrail_trip")
    assert ev.detail == {"rule": "imbalance", "value": 1.2} and ev.version == "v1" and ev.ts == 3.0
    assert j.events(0, kind="rollback") == []


def test_decider_in_shadow_binds_the_heuristic_and_scores_the_model():
    s = Settings.model_validate({"rollout": {"mode": "shadow"}})
    d = Decider.from_settings(s, SchedulerMetrics(), source=Snap([[0.1] * 6, [0.9] * 6]), policy=Prefers())
    d.refresh()
    pod = PodRequest(name="p", cpu_m=500, mem_bytes=1 << 28, uid="u-1")
    c = d.decide(pod, DEMAND, NODES, FEASIBLE)
    assert c.arm == HEURISTIC and c.policy.name == "capacity-balanced-overload" and c.reason is None
    assert c.index == 0  # the default heuristic arm takes the idle node a; the model wanted b
    assert c.shadow is not None and c.shadow.shadow_index == 1 and not c.shadow.agree
    r = d.metrics.registry
    assert r.get_sample_value("drs_decisions_total", {"policy": "capacity-balanced-overload", "arm": "heuristic"}) == 1
    assert r.get_sample_value("drs_shadow_comparisons_total", {"agree": "false"}) == 1
    assert r.get_sample_value("drs_shadow_agreement_ratio") == 0.0
    assert r.get_sample_value("drs_shadow_counterfactual_imbalance_count", {"arm": "model"}) == 1


def test_decider_normal_mode_is_unchanged_model_decides_with_arm_model():
    d = Decider.from_settings(
        load_settings(None, {}), SchedulerMetrics(), source=Snap([[0.1] * 6, [0.9] * 6]), policy=Prefers()
    )
    d.refresh()
    c = d.decide(PodRequest(name="p", uid="u"), DEMAND, NODES, FEASIBLE)
    assert (c.index, c.policy.name, c.reason, c.arm, c.shadow) == (1, "prefers-b", None, MODEL, None)


def test_shadow_policy_remembers_the_node_actually_bound():
    """A policy that only scored (shadow) must not count its own choice as a recent bind: scoring records nothing,
    and the shadow is told the node actually bound."""
    from drs_prom.policies.contract import DecisionContext, choose
    from drs_prom.registry import make_policy

    shadow = make_policy("least-loaded", SPEC, 0)
    load = np.array([[0.1] * 6, [0.5] * 6])
    pod_load = np.array([[0.2] * 6, [0.2] * 6])
    ctx = DecisionContext(PodRequest(name="p"), NODES, FEASIBLE, load, pod_load, now=100.0)
    first = shadow.score(ctx)
    np.testing.assert_array_equal(shadow.score(ctx), first)  # pure: the same context scores the same
    idx, _ = choose(shadow, ctx, bind=False)
    assert idx == 0 and not shadow.recent.pending(ctx).any()  # its own choice was not remembered
    shadow.bound(ctx, 1)  # node b was bound
    pending = shadow.recent.pending(ctx)
    assert pending[0, 0] == 0 and pending[1, 0] == pytest.approx(0.2)


def test_the_shadow_arm_is_told_the_primary_arms_bind():
    """In shadow mode the model only scores; its memory holds the heuristic arm's bind, whatever it preferred."""
    from drs_prom.policies.contract import DecisionContext
    from drs_prom.registry import make_policy

    heuristic = make_policy("least-loaded", SPEC, 0)
    model = make_policy("balanced-load", SPEC, 0)
    armed = ArmedDecisions(
        load_settings(None, {"rollout.mode": "shadow"}).rollout,
        "least-loaded",
        SchedulerMetrics(),
        lambda _name: heuristic,
        lambda _reason: heuristic,
    )
    load = np.array([[0.1] * 6, [0.5] * 6])
    ctx = DecisionContext(PodRequest(name="p", uid="u"), NODES, FEASIBLE, load, np.full((2, 6), 0.2), now=100.0)
    choice = armed.decide(ctx, None, model, "v1")
    assert choice.policy is heuristic
    np.testing.assert_array_equal(model.recent.pending(ctx), heuristic.recent.pending(ctx))
    assert heuristic.recent.pending(ctx)[choice.index, 0] == pytest.approx(0.2)
