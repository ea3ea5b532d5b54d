"""Automatic rollback: judge a promotion by what it did to the live cluster.

The offline gate (drs_prom.retrain) only shows that a candidate is no worse on held-out
data and in the simulator. After the promotion, ``PromotionJudge`` compares the guardrail
signals (drs_prom.signals.promql.guardrail_signals) averaged over ``rollback.window_seconds``
after the promotion with the same length of time before it; when any is worse by more
than the margin, it rolls the model store back (the running schedulers' hot reload picks
the previous version up) and records the verdict and the rollback in the journal, the
metrics and the log. ``judge`` is the pure part.

The scheduler's rollout watcher (drs_prom.scheduler.decision.rollout) calls ``check`` on the
leader every evaluation round; anything else that can query Prometheus (a retraining
job after it promoted) can call it the same way. A promotion is judged once: the verdict
is a journal event, so a restarted scheduler does not judge it again.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from drs_prom.config import RolloutSettings
from drs_prom.errors import ModelError
from drs_prom.signals import promql
from drs_prom.stores.journal import Journal, RolloutEvent
from drs_prom.stores.model_store import ModelStore

log = logging.getLogger(__name__)

VERDICT = "promotion_verdict"
ROLLBACK = "rollback"


@dataclass(frozen=True)
class Verdict:
    version: str
    worse: bool
    reasons: list[str]
    before: dict[str, float | None]
    after: dict[str, float | None]
    promoted_at: float
    rolled_back_to: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


def _finite(v: float | None) -> bool:
    return v is not None and math.isfinite(v)


def judge(
    before: Mapping[str, float | None], after: Mapping[str, float | None], margin: float, absolute_margin: float
) -> list[str]:
    """Rules on which ``after`` is worse than ``before`` by more than the margins (higher is
    worse for every guardrail signal). A rule without data on either side is not judged."""
    worse = []
    for name, a in after.items():
        b = before.get(name)
        if _finite(a) and _finite(b) and a > b * (1 + margin) + absolute_margin:  # type: ignore[operator]
            worse.append(f"{name} {b:.3g} -> {a:.3g}")
    return worse


def window_values(
    query_at: Callable[[str, float], float | None],
    signals: Mapping[str, str],
    end: float,
    window_seconds: float,
    step: str,
) -> dict[str, float | None]:
    """Each signal averaged over the ``window_seconds`` ending at ``end``."""
    rng = f"{max(1, round(window_seconds))}s"
    out: dict[str, float | None] = {}
    for name, sig in signals.items():
        try:
            out[name] = query_at(promql.over_range(sig, rng, step), end)
        except Exception as exc:  # noqa: BLE001 - no verdict on this rule rather than a wrong one
            log.warning("promotion judge: %s not evaluated: %s", name, exc)
            out[name] = None
    return out


class PromotionJudge:
    """Judges the newest promotion once its after-window has passed (``check``)."""

    def __init__(
        self,
        rollout: RolloutSettings,
        lag_seconds: float,
        store: ModelStore,
        journal: Journal,
        query_at: Callable[[str, float], float | None],
        signals: Mapping[str, str],
        on_verdict: Callable[[Verdict], None] | None = None,
        started_at: float | None = None,
    ) -> None:
        self.rollout = rollout
        self.store = store
        self.journal = journal
        self.query_at = query_at
        self.signals = dict(signals)
        self.on_verdict = on_verdict
        self._judged: set[str] = set()
        # A promotion is judged only when this judge saw its whole before-window (the previous
        # version deciding); a restart in between leaves it unjudged rather than misjudged.
        self.started_at = started_at
        # The after-window starts once the new version can show in the metrics: a hot reload
        # (one state refresh) plus one rate window (``promotion_lag_seconds``).
        self.lag_seconds = lag_seconds

    def pending(self) -> tuple[str, float] | None:
        """(version, promoted_at) of the current version when it was promoted and not judged yet."""
        current = self.store.current()
        promotes = [e for e in self.store.history() if e.get("action") == "promote" and e.get("version") == current]
        if not current or not promotes or current in self._judged:
            return None
        if any(e.version == current for e in self.journal.events(0, kind=VERDICT)):
            self._judged.add(current)
            return None
        return current, float(promotes[-1]["ts"])

    def check(self, now: float) -> Verdict | None:
        """Judge the current version if its window has passed; roll back when it made things worse."""
        rb = self.rollout.rollback
        todo = self.pending()
        if todo is None:
            return None
        version, promoted_at = todo
        after_end = promoted_at + self.lag_seconds + rb.window_seconds
        if now < after_end:
            return None
        self._judged.add(version)
        if self.started_at is not None and promoted_at - rb.window_seconds < self.started_at:
            detail = {
                "worse": False,
                "skipped": "the before-window predates this scheduler",
                "promoted_at": promoted_at,
            }
            self.journal.append_event(RolloutEvent(VERDICT, detail, version=version, ts=now))
            log.info("promotion of %s not judged: it happened before a full window of this scheduler", version)
            return None
        step = self.rollout.guardrails.step
        before = window_values(self.query_at, self.signals, promoted_at, rb.window_seconds, step)
        after = window_values(self.query_at, self.signals, after_end, rb.window_seconds, step)
        reasons = judge(before, after, rb.margin, rb.absolute_margin)
        verdict = Verdict(version, bool(reasons), reasons, before, after, promoted_at)
        detail = {
            "worse": verdict.worse,
            "reasons": reasons,
            "before": before,
            "after": after,
            "promoted_at": promoted_at,
            "window_seconds": rb.window_seconds,
            "after_starts": promoted_at + self.lag_seconds,
            "margin": rb.margin,
            "absolute_margin": rb.absolute_margin,
        }
        self.journal.append_event(RolloutEvent(VERDICT, detail, version=version, ts=now))
        if verdict.worse:
            try:
                to = self.store.rollback()
            except ModelError as exc:
                log.error(
                    "promotion %s made the cluster worse (%s) but cannot be rolled back: %s", version, reasons, exc
                )
                detail["rollback_error"] = str(exc)
            else:
                verdict = Verdict(version, True, reasons, before, after, promoted_at, rolled_back_to=to)
                self.journal.append_event(
                    RolloutEvent(ROLLBACK, {**detail, "rolled_back_to": to, "from": version}, version=to, ts=now)
                )
                log.warning(
                    "rolled back model %s -> %s: worse than before its promotion on %s",
                    version,
                    to,
                    "; ".join(reasons),
                )
        else:
            log.info("promotion of %s kept: no guardrail worse than before it (%s)", version, after)
        if self.on_verdict is not None:
            self.on_verdict(verdict)
        return verdict
