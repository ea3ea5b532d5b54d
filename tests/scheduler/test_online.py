"""Settle-delay reward recorder: one snapshot for all settled binds, DRS reward, stale rows skipped."""

from __future__ import annotations

import sqlite3
import time

import pandas as pd

from drs_prom.config import load_settings
from drs_prom.features import FEATURES
from drs_prom.reward import drs_reward
from drs_prom.scheduler.online import RewardRecorder
from drs_prom.state import NodeSnapshot, node_matrix
from drs_prom.types import PodRequest


class Source:
    def __init__(self):
        self.calls = 0
        self.frame = pd.DataFrame([[0.5] * 6, [0.1] * 6], index=["a", "b"], columns=list(FEATURES))

    def snapshot(self):
        self.calls += 1
        return NodeSnapshot(features=self.frame, taken_at=time.time())


def test_rewards_measured_after_settle_delay(tmp_path):
    settings = load_settings(None, {"scheduler.settle_seconds": 0.2})
    src = Source()
    rec = RewardRecorder(settings, src, tmp_path / "t.sqlite")
    try:
        rec._stop.set()  # drive flush() by hand
        for uid in ("u1", "u2"):
            rec.record(PodRequest(name=uid, uid=uid), (1, 2, 3, 4, 5, 6), "a", ["a", "b"])
        rec.record(PodRequest(name="u3", uid="u3"), (1, 2, 3, 4, 5, 6), "a", ["a", "gone"])  # no metrics for 'gone'
        assert rec.flush() == 0 and src.calls == 0  # not settled yet: nothing measured
        time.sleep(0.25)
        assert rec.flush() == 2 and src.calls == 1  # one snapshot for all settled binds; stale row skipped
        rows = (
            sqlite3.connect(tmp_path / "t.sqlite").execute("SELECT pod_uid, node, reward FROM transitions").fetchall()
        )
        want = drs_reward(node_matrix(src.frame, settings.normalisation, ["a", "b"]))
        assert [(u, n) for u, n, _ in rows] == [("u1", "a"), ("u2", "a")] and all(
            abs(r - want) < 1e-9 for *_, r in rows
        )
    finally:
        rec.stop()
