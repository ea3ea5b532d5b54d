"""The decision journal: every placement, appended to SQLite (WAL) for retraining.

Over 400 lines because the schema, its upgrades, the row codec and the background writer (batches, deferral while the scheduler is busy) belong to one file format.

One row per decision. Feature vectors and per-node scores are JSON text so the table
stays readable with the sqlite3 CLI; ``schema`` lets retraining skip rows written by
an unknown layout instead of crashing on them.

Schema 2 adds what the model saw per candidate node besides metrics (requests and
allocatable at decision time, ``nodes``) and the pod's own requests, so retraining
rebuilds the same input the scheduler scored. Older files are upgraded in place on
open (nullable columns added); their schema-1 rows read back with ``nodes=None``.

Schema 3 adds the rollout (drs_prom.scheduler.decision.arms): the pod's ``arm`` (model | heuristic)
and, when the other arm scored the same decision (shadow/canary), its policy, choice and
score vector plus the counterfactual imbalance estimate of both choices. The
``rollout_events`` table records guardrail trips, promotion verdicts and rollbacks with
their reasons, for ``drs-prom report`` and for people reading the file.

Schema 4 adds where the pod's demand (``pod_features``) came from, ``demand_source``: an annotation, a profile,
or the usage estimate's source (owner, similar, requests, default; drs_prom.scheduler.decision.pod_demand). From
schema 4 on, ``owner`` is the pod's top owner (a Deployment, not its ReplicaSet; ``Pod/<name>`` for a bare pod);
older rows name the direct controller, or none. Rows of schemas 1 to 3 read back with ``demand_source=None``.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import operator
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, overload

import numpy as np
import orjson

from drs_prom.types import NodeInfo

log = logging.getLogger(__name__)

BATCH_ROWS = 500
DEFER_ROWS = 2000
"""While ``Journal.busy()`` says pods wait to be scheduled, the writer holds back up to this many rows..."""
DEFER_SECONDS = 10.0
"""...or rows this old: building a row (JSON of every candidate) costs more CPU than the decision
itself at 1000 nodes, and it shares the scheduler's GIL, so a burst is scheduled first and
journalled right after. ``flush``/``close`` never wait."""
"""Rows per write transaction of the background writer."""

JOURNAL_SCHEMA = 4

# Columns added after schema 1, by the schema that introduced them: created on new files
# and ALTER TABLE-added (nullable) to older ones, so their rows stay readable.
_ADDED_COLUMNS: dict[int, tuple[tuple[str, str], ...]] = {
    2: (
        ("nodes", "TEXT"),  # JSON list aligned with candidates, NODE_KEYS per entry
        ("pod_cpu_m", "INTEGER"),  # the pod's requests
        ("pod_mem_bytes", "INTEGER"),
    ),
    3: (
        ("arm", "TEXT"),  # model | heuristic; null before schema 3
        ("shadow_policy", "TEXT"),  # the arm that did not bind, when it scored the decision
        ("shadow_choice", "TEXT"),  # node it would have chosen
        ("shadow_scores", "TEXT"),  # JSON list aligned with candidates (null for -inf)
        ("counterfactual", "TEXT"),  # JSON {arm: estimated imbalance after that arm's choice}
    ),
    4: (("demand_source", "TEXT"),),  # annotation | profile | owner | similar | requests | default; null before 4
}

# NodeInfo fields journalled per candidate (schema >= 2).
NODE_KEYS = (
    "allocatable_cpu_m",
    "allocatable_mem_bytes",
    "allocatable_pods",
    "requested_cpu_m",
    "requested_mem_bytes",
    "pod_count",
)

# Every schema up to JOURNAL_SCHEMA is read back as a Decision (missing columns are None).
_READABLE = frozenset(range(1, JOURNAL_SCHEMA + 1))

_DDL = """
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    schema INTEGER NOT NULL,
    ts REAL NOT NULL,                -- unix seconds when the bind was issued
    pod_uid TEXT NOT NULL,
    pod_name TEXT NOT NULL,
    namespace TEXT NOT NULL,
    owner TEXT,                      -- kind/name of the top owner (schema >= 4; before: the direct one, if any)
    pod_features TEXT NOT NULL,      -- JSON list, FEATURES order, absolute units
    candidates TEXT NOT NULL,        -- JSON list of node names considered (feasible first)
    feasible TEXT NOT NULL,          -- JSON list of bools aligned with candidates
    chosen TEXT NOT NULL,            -- node name bound to
    scores TEXT NOT NULL,            -- JSON list aligned with candidates (null for -inf)
    policy TEXT NOT NULL,            -- e.g. drs, least-loaded
    model_version TEXT,
    fallback_reason TEXT,            -- null when the model decided
    outcome TEXT NOT NULL DEFAULT 'bound'  -- bound | conflict | gone | failed
{added});
CREATE INDEX IF NOT EXISTS decisions_ts ON decisions(ts);
CREATE TABLE IF NOT EXISTS rollout_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,                -- unix seconds
    kind TEXT NOT NULL,              -- guardrail_trip | promotion_verdict | rollback | ...
    version TEXT,                    -- model version concerned, if any
    detail TEXT NOT NULL             -- JSON: rule, values, thresholds, reason
);
CREATE INDEX IF NOT EXISTS rollout_events_ts ON rollout_events(ts);
CREATE TABLE IF NOT EXISTS pod_ends (
    pod_uid TEXT PRIMARY KEY,        -- a pod this cache saw bound and then end
    ts REAL NOT NULL                 -- unix seconds when it was seen Succeeded, Failed or deleted
);
""".replace("{added}", "".join(f"    , {name} {kind}\n" for cols in _ADDED_COLUMNS.values() for name, kind in cols))


_NODE_VALUES = operator.attrgetter(*NODE_KEYS)
_NODE_JSON = "{" + ", ".join(f'"{k}": %d' for k in NODE_KEYS) + "}"  # json.dumps' own separators


class NodeEntries(Sequence[dict[str, int]]):
    """``node_entries``' result: the per-candidate records (NODE_KEYS, ints) of an (n, len(NODE_KEYS)) int64 array,
    with their JSON text formatted straight from the ints (exactly ``json.dumps(list(entries))``, several times
    cheaper for a thousand candidates). The dicts are built only when read: the scheduler's rows are only written,
    and building a hundred of them took 0.075 ms, a quarter of a row's CPU at a hundred candidates."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = np.asarray(values, dtype=np.int64).reshape(-1, len(NODE_KEYS))
        self._entries: list[dict[str, int]] | None = None

    @functools.cached_property
    def json_text(self) -> str:
        rows = self.values
        return "[" + _entries_template(len(rows)) % tuple(rows.ravel().tolist()) + "]"  # one formatting call

    def entries(self) -> list[dict[str, int]]:
        if self._entries is None:
            self._entries = [dict(zip(NODE_KEYS, v)) for v in self.values.tolist()]
        return self._entries

    def __len__(self) -> int:
        return len(self.values)

    @overload
    def __getitem__(self, i: int) -> dict[str, int]: ...
    @overload
    def __getitem__(self, i: slice) -> list[dict[str, int]]: ...
    def __getitem__(self, i: int | slice) -> dict[str, int] | list[dict[str, int]]:
        return self.entries()[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NodeEntries):
            return bool(np.array_equal(self.values, other.values))
        return isinstance(other, list) and self.entries() == other

    __hash__ = None  # type: ignore[assignment]  # mutable-looking, like the list it stands for

    def __repr__(self) -> str:
        return f"NodeEntries({self.entries()!r})"


def node_entries(nodes: Sequence[NodeInfo]) -> NodeEntries:
    """The journalled per-candidate record of ``nodes`` (NODE_KEYS, ints)."""
    # ints (truncated, as int() does) converted in one numpy call, not one int() per value
    return node_entries_from_values(np.array([_NODE_VALUES(n) for n in nodes], dtype=np.int64))


def node_entries_from_values(values: np.ndarray) -> NodeEntries:
    """``node_entries`` from an (n, len(NODE_KEYS)) array already in NODE_KEYS order, as the
    scheduler's node table has them: no pass over NodeInfo objects."""
    return NodeEntries(values)


@functools.lru_cache(maxsize=64)
def _entries_template(n: int) -> str:
    return ", ".join([_NODE_JSON] * n)


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
    nodes: Sequence[dict[str, int]] | None = None  # node_entries(...) aligned with candidates; None before schema 2
    pod_cpu_m: int | None = None
    pod_mem_bytes: int | None = None
    arm: str | None = None  # schema >= 3
    shadow_policy: str | None = None
    shadow_choice: str | None = None
    shadow_scores: list[float | None] | None = None
    counterfactual: dict[str, float] | None = None
    demand_source: str | None = None  # schema >= 4: where pod_features came from
    schema: int = JOURNAL_SCHEMA
    id: int | None = None


_JSON_FIELDS = ("pod_features", "candidates", "feasible", "scores", "nodes", "shadow_scores", "counterfactual")


@dataclass(frozen=True)
class PodEnd:
    """A bound pod seen ending: with its decision's ``ts`` this gives how long pods of an owner run
    (the retraining twin's work per profile, drs_prom.sim.twin)."""

    pod_uid: str
    ts: float


@dataclass
class RolloutEvent:
    """Something the rollout machinery did, and why (``detail``)."""

    kind: str
    detail: dict[str, Any]
    version: str | None = None
    ts: float = field(default_factory=time.time)
    id: int | None = None


_DECISION_FIELDS = frozenset(Decision.__dataclass_fields__)


def _decode(raw: dict[str, Any]) -> Decision | None:
    """A row as a Decision, or None when its JSON columns are damaged."""
    row = {k: v for k, v in raw.items() if k in _DECISION_FIELDS}  # columns a newer version added are not ours
    try:
        for key in _JSON_FIELDS:
            row[key] = None if row.get(key) is None else json.loads(row[key])
        for key in ("pod_features", "candidates", "feasible", "scores"):
            if not isinstance(row[key], list):
                return None
        if row["nodes"] is not None and not isinstance(row["nodes"], list):
            return None
        row["feasible"] = [bool(v) for v in row["feasible"]]
        return Decision(**row)
    except (ValueError, TypeError):
        return None


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
        self._upgrade()
        self._queue: queue.SimpleQueue[Decision | Callable[[], Decision] | PodEnd | threading.Event | None] = (
            queue.SimpleQueue()
        )
        self._writer: threading.Thread | None = None
        self.on_write_failure: Callable[[Exception, int], None] | None = None
        """Called by the background writer with the error and the rows lost (the scheduler counts them)."""
        self.busy: Callable[[], bool] | None = None
        """True while the scheduler has pods waiting: the writer defers (DEFER_ROWS, DEFER_SECONDS)."""
        self._flushing = 0  # flush() calls waiting: no deferral then
        self._unwritten = 0  # rows appended and not yet written (or given up on)
        self._count_lock = threading.Lock()  # not self._lock: that one is held while SQLite writes

    def _upgrade(self) -> None:
        """Add the columns of newer schemas to a file created by an older one."""
        have = {row[1] for row in self._db.execute("PRAGMA table_info(decisions)")}
        with self._db:
            for cols in _ADDED_COLUMNS.values():
                for name, kind in cols:
                    if name not in have:
                        try:
                            self._db.execute(f"ALTER TABLE decisions ADD COLUMN {name} {kind}")
                        except sqlite3.OperationalError as exc:  # another process upgraded it first
                            if "duplicate column" not in str(exc):
                                raise

    def append(self, decision: Decision) -> int:
        cols, values = _row(decision)
        with self._lock, self._db:
            cur = self._db.execute(f"INSERT INTO decisions ({cols}) VALUES ({_marks(cols)})", values)
        return int(cur.lastrowid or 0)

    def append_later(self, decision: Decision | Callable[[], Decision]) -> None:
        """Queue a row for the background writer (the scheduler's hot path never waits on
        SQLite). A callable is called in the writer thread, so building the row (JSON of
        every candidate) is off the hot path too. ``flush``/``close`` write everything queued."""
        self._start_writer()
        with self._count_lock:
            self._unwritten += 1
        self._queue.put(decision)

    def _start_writer(self) -> None:
        if self._writer is None:
            with self._lock:
                if self._writer is None:
                    self._writer = threading.Thread(target=self._write_loop, name="drs-journal", daemon=True)
                    self._writer.start()

    def pod_ended(self, pod_uid: str, ts: float | None = None) -> None:
        """Record that a bound pod ended (written by the writer thread, like decisions; the first end counts)."""
        self._start_writer()
        self._queue.put(PodEnd(pod_uid, time.time() if ts is None else ts))

    def pod_ends(self, ts: float = 0.0, until: float | None = None) -> dict[str, float]:
        """pod uid -> when it ended, for ends in [ts, until)."""
        if self._writer is not None and threading.current_thread() is not self._writer:
            self.flush()
        query = "SELECT pod_uid, ts FROM pod_ends WHERE ts >= ?" + (" AND ts < ?" if until is not None else "")
        with self._lock:
            rows = self._db.execute(query, (ts,) if until is None else (ts, until)).fetchall()
        return {str(uid): float(t) for uid, t in rows}

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until every queued row is written."""
        if self._writer is not None:
            done = threading.Event()
            with self._lock:
                self._flushing += 1
            try:
                self._queue.put(done)
                done.wait(timeout)
            finally:
                with self._lock:
                    self._flushing -= 1

    def backlog(self) -> int:
        """Rows appended and not yet written, including the batch being built (drs_journal_backlog_rows)."""
        return self._unwritten

    def _defer(self, first: object) -> None:
        """Hold rows back while the scheduler is busy, within DEFER_ROWS and DEFER_SECONDS."""
        busy = self.busy
        if busy is None or first is None or isinstance(first, threading.Event):
            return
        since = time.monotonic()
        while (
            not self._flushing
            and self._queue.qsize() < DEFER_ROWS
            and time.monotonic() - since < DEFER_SECONDS
            and busy()
        ):
            time.sleep(0.05)

    def _write_loop(self) -> None:
        while True:
            batch = [self._queue.get()]
            self._defer(batch[0])
            while len(batch) < BATCH_ROWS:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            rows: dict[str, list[tuple]] = {}
            ends: list[tuple[str, float]] = []
            marks: list[threading.Event] = []
            stop = False
            for item in batch:
                if item is None:
                    stop = True
                elif isinstance(item, threading.Event):
                    marks.append(item)
                elif isinstance(item, PodEnd):
                    ends.append((item.pod_uid, item.ts))
                else:
                    try:
                        cols, values = _row(item() if callable(item) else item)
                        rows.setdefault(cols, []).append(values)
                    except Exception:
                        log.exception("journal row could not be built; dropped")
            try:
                with self._lock, self._db:
                    for cols, batch_rows in rows.items():
                        self._db.executemany(f"INSERT INTO decisions ({cols}) VALUES ({_marks(cols)})", batch_rows)
                    self._db.executemany("INSERT OR IGNORE INTO pod_ends (pod_uid, ts) VALUES (?, ?)", ends)
            except Exception as exc:  # noqa: BLE001 - writer boundary: a full disk must not stop binding
                lost = sum(map(len, rows.values()))
                if self.on_write_failure is not None:
                    self.on_write_failure(exc, lost)  # the scheduler counts it and says so once a minute
                else:
                    log.warning("journal write of %d rows failed: %s", lost, exc)
            done_rows = sum(1 for item in batch if item is not None and not isinstance(item, (threading.Event, PodEnd)))
            with self._count_lock:
                self._unwritten -= done_rows
            for m in marks:
                m.set()
            if stop:
                return

    def since(self, ts: float = 0.0, until: float | None = None) -> Iterator[Decision | dict]:
        """Decisions with ``ts`` in [ts, until); rows of an unknown schema, or damaged ones
        (JSON that does not parse or has the wrong shape), come back as raw dicts, so one bad
        row never stops a reader."""
        if self._writer is not None and threading.current_thread() is not self._writer:
            self.flush()
        query = (
            "SELECT * FROM decisions WHERE ts >= ?" + (" AND ts < ?" if until is not None else "") + " ORDER BY ts, id"
        )
        args: tuple = (ts,) if until is None else (ts, until)
        with self._lock:
            cur = self._db.execute(query, args)
            names = [c[0] for c in cur.description]
            rows = cur.fetchall()
        for values in rows:
            raw: dict[str, Any] = dict(zip(names, values))
            if raw.get("schema") not in _READABLE:
                yield raw
                continue
            decision = _decode(raw)
            yield raw if decision is None else decision

    def append_event(self, event: RolloutEvent) -> int:
        with self._lock, self._db:
            cur = self._db.execute(
                "INSERT INTO rollout_events (ts, kind, version, detail) VALUES (?, ?, ?, ?)",
                (event.ts, event.kind, event.version, json.dumps(event.detail, sort_keys=True, default=str)),
            )
        return int(cur.lastrowid or 0)

    def events(self, ts: float = 0.0, until: float | None = None, kind: str | None = None) -> list[RolloutEvent]:
        """Rollout events with ``ts`` in [ts, until), oldest first, optionally of one kind."""
        query = "SELECT id, ts, kind, version, detail FROM rollout_events WHERE ts >= ?"
        args: list[Any] = [ts]
        if until is not None:
            query += " AND ts < ?"
            args.append(until)
        if kind is not None:
            query += " AND kind = ?"
            args.append(kind)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY ts, id", tuple(args)).fetchall()
        return [RolloutEvent(kind=k, detail=json.loads(d), version=v, ts=t, id=i) for i, t, k, v, d in rows]

    def close(self) -> None:
        """Write what is queued, then close (a clean shutdown loses no row)."""
        if self._writer is not None:
            self._flushing += 1  # write at once what is queued
            self._queue.put(None)
            self._writer.join(60)
        with self._lock:
            self._db.close()


def open_journal(path: str | Path) -> Journal | None:
    """The journal at ``path`` for a long-running scheduler, which must start whatever the volume holds.

    A damaged file (truncated, not SQLite) is moved aside to ``<path>.damaged-<unix time>``
    (kept, nothing deleted) and a new one started; a file that cannot be opened at all
    (permissions, read-only volume) gives None: the scheduler binds without a journal.
    Each case is one warning line.
    """
    try:
        return Journal(path)
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError):  # cannot open / read-only / locked: not damage
            log.warning("decision journal %s cannot be used (%s); scheduling without a journal", path, exc)
            return None
        aside = f"{path}.damaged-{int(time.time())}"
        try:
            os.replace(path, aside)
            for suffix in ("-wal", "-shm"):
                if os.path.exists(f"{path}{suffix}"):
                    os.replace(f"{path}{suffix}", f"{aside}{suffix}")
        except OSError as move:
            log.warning(
                "decision journal %s is damaged (%s) and cannot be moved aside (%s); no journal", path, exc, move
            )
            return None
        log.warning("decision journal %s is damaged (%s); kept as %s, starting a new one", path, exc, aside)
        try:
            return Journal(path)
        except (sqlite3.Error, OSError) as again:
            log.warning("decision journal %s cannot be created (%s); scheduling without a journal", path, again)
            return None
    except OSError as exc:
        log.warning("decision journal %s cannot be used (%s); scheduling without a journal", path, exc)
        return None


_COLUMNS = tuple(f.name for f in fields(Decision) if f.name != "id")


def _row(decision: Decision) -> tuple[str, tuple]:
    # a shallow read of the fields: dataclasses.asdict deep-copies every list and dict
    row = {name: getattr(decision, name) for name in _COLUMNS}
    for key in _JSON_FIELDS:
        value = row[key]
        row[key] = None if value is None else value.json_text if isinstance(value, NodeEntries) else _json_text(value)
    return ", ".join(row), tuple(row.values())


def _json_text(value: Any) -> str:
    """``value`` (a list of names, flags, numbers and nulls, or a dict of numbers) as JSON: orjson's text, which
    reads back the same (its floats are the shortest that round-trip, as Python's); ``json.dumps`` where a float is
    NaN or infinite, which orjson would write as null (the journal keeps them as ``json.dumps`` does) or where
    orjson refuses a value. The candidates, flags and scores of a thousand nodes cost several times less."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:  # orjson.JSONEncodeError: an int beyond 64 bits, a key that is not a string
        return json.dumps(value)
    if "null" in text and _non_finite(value):
        return json.dumps(value)
    return text


def _non_finite(value: Any) -> bool:
    items = value.values() if isinstance(value, dict) else value
    return any(isinstance(x, float) and not math.isfinite(x) for x in items)


def _marks(cols: str) -> str:
    return ", ".join("?" for _ in cols.split(", "))
