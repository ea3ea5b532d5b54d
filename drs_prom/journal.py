"""The decision journal: every placement, appended to SQLite (WAL) for retraining.

One row per decision. Feature vectors and per-node scores are JSON text so the table
stays readable with the sqlite3 CLI; ``schema`` lets retraining skip rows written by
an older layout instead of crashing on them.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator

JOURNAL_SCHEMA = 1

_DDL = """
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    schema INTEGER NOT NULL,
    ts REAL NOT NULL,                -- unix seconds when the bind was issued
    pod_uid TEXT NOT NULL,
    pod_name TEXT NOT NULL,
    namespace TEXT NOT NULL,
    owner TEXT,                      -- kind/name of the controlling owner, if any
    pod_features TEXT NOT NULL,      -- JSON list, FEATURES order, absolute units
    candidates TEXT NOT NULL,        -- JSON list of node names considered (feasible first)
    feasible TEXT NOT NULL,          -- JSON list of bools aligned with candidates
    chosen TEXT NOT NULL,            -- node name bound to
    scores TEXT NOT NULL,            -- JSON list aligned with candidates (null for -inf)
    policy TEXT NOT NULL,            -- e.g. drs, least-loaded
    model_version TEXT,
    fallback_reason TEXT,            -- null when the model decided
    outcome TEXT NOT NULL DEFAULT 'bound'  -- bound | conflict | gone | failed
);
CREATE INDEX IF NOT EXISTS decisions_ts ON decisions(ts);
"""


@dataclass
class Decision:
    pod_uid: str
    pod_name: str
    namespace: str
    pod_features: list[float]
    candidates: list[str]
    feasible: list[bool]
    chosen: str
    scores: list[float | None]
    policy: str
    ts: float = field(default_factory=time.time)
    owner: str | None = None
    model_version: str | None = None
    fallback_reason: str | None = None
    outcome: str = "bound"
    schema: int = JOURNAL_SCHEMA
    id: int | None = None


_JSON_FIELDS = ("pod_features", "candidates", "feasible", "scores")


class Journal:
    """Thread-safe append/read access to one journal file."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=10.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_DDL)

    def append(self, decision: Decision) -> int:
        row = asdict(decision)
        row.pop("id")
        for key in _JSON_FIELDS:
            row[key] = json.dumps(row[key])
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        with self._lock, self._db:
            cur = self._db.execute(f"INSERT INTO decisions ({cols}) VALUES ({marks})", tuple(row.values()))
        return int(cur.lastrowid or 0)

    def since(self, ts: float = 0.0, until: float | None = None) -> Iterator[Decision | dict]:
        """Decisions with ``ts`` in [ts, until); rows of another schema come back as raw dicts."""
        query = "SELECT * FROM decisions WHERE ts >= ?" + (" AND ts < ?" if until is not None else "") + " ORDER BY ts, id"
        args: tuple = (ts,) if until is None else (ts, until)
        with self._lock:
            cur = self._db.execute(query, args)
            names = [c[0] for c in cur.description]
            rows = cur.fetchall()
        for values in rows:
            raw = dict(zip(names, values))
            if raw.get("schema") != JOURNAL_SCHEMA:
                yield raw
                continue
            for key in _JSON_FIELDS:
                raw[key] = json.loads(raw[key])
            raw["feasible"] = [bool(v) for v in raw["feasible"]]
            yield Decision(**raw)

    def close(self) -> None:
        with self._lock:
            self._db.close()
