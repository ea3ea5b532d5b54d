"""Online-learning transitions (off by default): reward measured a settle delay after each bind.

DRS measured its reward 5 s after the action. Here each bind is recorded; a worker
thread, every ``settle_seconds``, takes ONE snapshot for all binds that have settled
and stores (pod, node, candidates, demand, load after, reward) in SQLite for the
retraining job. The policy itself is not updated in-process: retraining promotes new
models through the model store, which keeps a bad update from reaching binding.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from drs_prom.config import Settings
from drs_prom.reward import drs_reward
from drs_prom.state import MetricsSource, node_matrix

log = logging.getLogger(__name__)

_DDL = """
CREATE TABLE IF NOT EXISTS transitions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,            -- bind time (unix s)
    measured_at REAL NOT NULL,   -- snapshot time of the reward
    pod_uid TEXT NOT NULL,
    node TEXT NOT NULL,
    candidates TEXT NOT NULL,    -- JSON list of node names, the rows of load_after
    demand TEXT NOT NULL,        -- JSON list, FEATURES order, absolute units
    load_after TEXT NOT NULL,    -- JSON (n, 6) normalised
    reward REAL NOT NULL         -- DRS reward: -(sum of per-feature std across nodes)
);
"""


class RewardRecorder:
    def __init__(self, settings: Settings, source: MetricsSource, path: str | Path) -> None:
        self.settings = settings
        self.source = source
        self.settle = settings.scheduler.settle_seconds
        self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=10.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_DDL)
        self._pending: list[tuple[float, str, str, list[str], list[float]]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="drs-reward", daemon=True)
        self._thread.start()

    def record(self, pod: Any, demand: Sequence[float], node: str, candidates: Sequence[str]) -> None:
        with self._lock:
            self._pending.append((time.time(), pod.uid, node, list(candidates), [float(v) for v in demand]))

    def flush(self) -> int:
        """Measure every settled bind with one snapshot; returns rows written."""
        now = time.time()
        with self._lock:
            due = [p for p in self._pending if now - p[0] >= self.settle]
            self._pending = [p for p in self._pending if now - p[0] < self.settle]
        if not due:
            return 0
        try:
            snap = self.source.snapshot()
        except Exception as exc:  # noqa: BLE001 - one measurement: logged with the number of transitions dropped
            log.info("reward measurement skipped (%s); %d transitions dropped", exc, len(due))
            return 0
        rows = []
        for ts, uid, node, names, demand in due:
            load = node_matrix(snap.features, self.settings.normalisation, names)
            if load.size == 0 or bool(np.isnan(load).any()):
                continue  # a stale node: no honest reward
            rows.append(
                (
                    ts,
                    snap.taken_at,
                    uid,
                    node,
                    json.dumps(names),
                    json.dumps(demand),
                    json.dumps(load.tolist()),
                    drs_reward(load),
                )
            )
        with self._db:
            self._db.executemany(
                "INSERT INTO transitions (ts, measured_at, pod_uid, node, candidates, demand, load_after, reward)"
                " VALUES (?,?,?,?,?,?,?,?)",
                rows,
            )
        return len(rows)

    def _run(self) -> None:
        while not self._stop.wait(max(self.settle, 0.5)):
            try:
                self.flush()
            except Exception:
                log.exception("reward recorder failed")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._db.close()
