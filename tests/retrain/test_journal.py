"""The decision journal on real SQLite files: round trips, and in-place upgrades of schema-1 and schema-3 files."""

from __future__ import annotations

import dataclasses
import json
import sqlite3

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from drs_prom.config import Settings
from drs_prom.retrain.rebuild import load_decisions
from drs_prom.stores.journal import JOURNAL_SCHEMA, NODE_KEYS, Decision, Journal, node_entries, node_entries_from_values
from drs_prom.types import NodeInfo

# The layout schema-1 builds created, verbatim: files written by them must keep working.
SCHEMA_1_DDL = """
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    schema INTEGER NOT NULL,
    ts REAL NOT NULL,
    pod_uid TEXT NOT NULL,
    pod_name TEXT NOT NULL,
    namespace TEXT NOT NULL,
    owner TEXT,
    pod_features TEXT NOT NULL,
    candidates TEXT NOT NULL,
    feasible TEXT NOT NULL,
    chosen TEXT NOT NULL,
    scores TEXT NOT NULL,
    policy TEXT NOT NULL,
    model_version TEXT,
    fallback_reason TEXT,
    outcome TEXT NOT NULL DEFAULT 'bound'
);
CREATE INDEX IF NOT EXISTS decisions_ts ON decisions(ts);
"""

NODES = [
    NodeInfo(
        "a",
        allocatable_cpu_m=3900,
        allocatable_mem_bytes=15 * 2**30,
        allocatable_pods=110,
        requested_cpu_m=1250,
        requested_mem_bytes=3 * 2**30,
        pod_count=4,
    ),
    NodeInfo(
        "b",
        allocatable_cpu_m=7800,
        allocatable_mem_bytes=31 * 2**30,
        allocatable_pods=250,
        requested_cpu_m=0,
        requested_mem_bytes=0,
        pod_count=0,
    ),
]


def _d2(ts: float) -> Decision:
    return Decision(
        "u2",
        "new",
        "default",
        [0.5, 2e8, 1.0, 2.0, 3.0, 4.0],
        ["a", "b"],
        [True, False],
        "a",
        [0.25, None],
        "drs",
        ts=ts,
        owner="ReplicaSet/web",
        model_version="v7",
        nodes=node_entries(NODES),
        pod_cpu_m=250,
        pod_mem_bytes=2**28,
    )


def test_schema_2_round_trip(tmp_path):
    assert JOURNAL_SCHEMA == 4
    j = Journal(tmp_path / "j.sqlite")
    d = _d2(10.0)
    d.id = j.append(d)
    j.close()
    (back,) = list(Journal(tmp_path / "j.sqlite").since(0))
    assert isinstance(back, Decision) and back == d
    assert back.nodes[0] == {k: getattr(NODES[0], k) for k in NODE_KEYS} and back.nodes[0]["requested_cpu_m"] == 1250
    assert back.pod_cpu_m == 250 and back.pod_mem_bytes == 2**28 and back.schema == 4
    raw = sqlite3.connect(tmp_path / "j.sqlite").execute("SELECT nodes FROM decisions").fetchone()[0]
    assert '"allocatable_pods": 110' in raw  # JSON text, readable with the sqlite3 CLI
    assert raw == json.dumps([{k: int(getattr(n, k)) for k in NODE_KEYS} for n in NODES])  # the fast path's text


def test_schema_1_file_is_upgraded_in_place_and_both_rows_read_back(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript(SCHEMA_1_DDL)
    db.execute(
        "INSERT INTO decisions (schema, ts, pod_uid, pod_name, namespace, owner, pod_features, candidates, feasible, chosen, scores, policy)"
        " VALUES (1, 5.0, 'u1', 'old', 'default', NULL, '[1, 2, 3, 4, 5, 6]', '[\"a\", \"b\"]', '[1, 1]', 'b', '[0.5, null]', 'least-loaded')"
    )
    db.commit()
    db.close()

    j = Journal(path)
    j.append(_d2(10.0))
    j.append(dataclasses.replace(_d2(11.0), schema=99))  # a layout this build does not know: raw dict
    j.close()
    j = Journal(path)  # opening an upgraded file again is a no-op
    rows = list(j.since(0))
    old, new, unknown = rows
    assert isinstance(old, Decision) and old.schema == 1 and old.chosen == "b" and old.feasible == [True, True]
    assert old.nodes is None and old.pod_cpu_m is None and old.pod_mem_bytes is None and old.scores == [0.5, None]
    assert isinstance(new, Decision) and new.nodes == node_entries(NODES) and new.pod_cpu_m == 250
    assert isinstance(unknown, dict) and unknown["schema"] == 99
    cols = [r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(decisions)")]
    assert cols.count("nodes") == 1 and {"pod_cpu_m", "pod_mem_bytes"} <= set(cols)
    # retraining takes both readable rows; only the unknown layout is skipped
    used, skipped = load_decisions(j, 0, 100, 10)
    assert [r.ts for r in used] == [5.0, 10.0] and skipped == {"old_schema": 1}


def test_schema_3_file_gains_the_demand_source_and_retraining_reads_both_rows(tmp_path):
    """A file written before schema 4 (no demand_source column) is upgraded in place: its rows read back with
    demand_source None, new rows keep theirs, and rebuilding takes both (the source rides on the PodRequest)."""
    from drs_prom.retrain.rebuild import NodeHistory, _context

    path = tmp_path / "j3.sqlite"
    Journal(path).close()
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE decisions DROP COLUMN demand_source")
    db.execute(
        "INSERT INTO decisions (schema, ts, pod_uid, pod_name, namespace, owner, pod_features, candidates, feasible,"
        " chosen, scores, policy) VALUES (3, 5.0, 'u1', 'old', 'default', 'ReplicaSet/web-7d9f8',"
        " '[1, 2, 3, 4, 5, 6]', '[\"a\", \"b\"]', '[1, 1]', 'b', '[0.5, null]', 'least-loaded')"
    )
    db.commit()
    db.close()
    j = Journal(path)
    j.append(dataclasses.replace(_d2(10.0), owner="Deployment/web", demand_source="owner"))
    j.close()
    j = Journal(path)
    old, new = j.since(0)
    assert isinstance(old, Decision) and old.schema == 3 and old.demand_source is None
    assert isinstance(new, Decision) and new.schema == 4 and new.demand_source == "owner"
    assert new.owner == "Deployment/web"
    used, skipped = load_decisions(j, 0, 100, 10)
    assert [r.ts for r in used] == [5.0, 10.0] and not skipped
    history = NodeHistory(np.array([0.0]), {}, {"a": 4.0, "b": 4.0}, {"a": 8.0 * 2**30, "b": 8.0 * 2**30})
    raw = np.zeros((2, 6))
    pods = [_context(d, raw, history, Settings()).pod for d in used]
    assert [(p.demand_source, p.owner) for p in pods] == [("", "ReplicaSet/web-7d9f8"), ("owner", "Deployment/web")]


def test_rows_with_broken_node_info_are_bad_rows(tmp_path):
    j = Journal(tmp_path / "j.sqlite")
    short = _d2(1.0)
    short.nodes = short.nodes[:1]  # not aligned with the candidates
    j.append(short)
    missing = _d2(2.0)
    missing.nodes = [{k: v for k, v in e.items() if k != "requested_cpu_m"} for e in missing.nodes]
    j.append(missing)
    j.append(_d2(3.0))
    used, skipped = load_decisions(j, 0, 100, 10)
    assert [r.ts for r in used] == [3.0] and skipped == {"bad_row": 2}


def test_writer_defers_rows_while_the_scheduler_is_busy_and_flush_never_waits(tmp_path):
    import threading

    from tests.waiting import wait_for

    j = Journal(tmp_path / "j.sqlite")
    busy = threading.Event()
    busy.set()
    j.busy = busy.is_set
    built = []

    def row(i: int):
        def build() -> Decision:
            built.append(i)
            return dataclasses.replace(_d2(float(i)), pod_uid=f"u{i}")

        return build

    for i in range(3):
        j.append_later(row(i))
    wait_for(lambda: j._writer is not None and j._writer.is_alive(), 10, "writer started")
    assert not built and j.backlog() >= 2  # held back (and not even built) while pods wait
    j.flush()  # a flush writes at once, busy or not
    assert sorted(built) == [0, 1, 2] and j.backlog() == 0
    j.append_later(row(3))
    busy.clear()  # the burst is over: written without a flush
    wait_for(lambda: sorted(built) == [0, 1, 2, 3], 30, "row written once idle")
    wait_for(lambda: len(list(j.since(0))) == 4, 30, "4 rows in the file")
    j.close()


def test_pod_ends_are_written_by_the_writer_first_end_wins_and_survive_reopening(tmp_path):
    path = tmp_path / "j.sqlite"
    j = Journal(path)
    j.pod_ended("u1", 100.0)
    j.pod_ended("u2", 250.0)
    j.pod_ended("u1", 300.0)  # a second event for the same pod (deleted after Succeeded): the first end counts
    assert j.backlog() == 0  # ends are not decision rows
    assert j.pod_ends() == {"u1": 100.0, "u2": 250.0}
    assert j.pod_ends(200.0) == {"u2": 250.0} and j.pod_ends(0.0, 200.0) == {"u1": 100.0}
    j.close()
    again = Journal(path)
    assert again.pod_ends() == {"u1": 100.0, "u2": 250.0}
    again.close()


def test_a_file_from_before_pod_ends_gains_the_table(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(SCHEMA_1_DDL)
    j = Journal(path)
    assert j.pod_ends() == {}
    j.pod_ended("u", 1.0)
    assert j.pod_ends() == {"u": 1.0}
    j.close()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2**50), min_size=6, max_size=6), min_size=0, max_size=40))
def test_node_entries_text_is_json_dumps_of_the_entries_from_either_source(rows):
    """The journal writes ``json_text`` instead of json.dumps(entries): it must be the same text,
    whether the entries came from NodeInfo objects or from the scheduler's node-table arrays."""
    infos = [
        NodeInfo(f"n{i}", *r[:3], requested_cpu_m=r[3], requested_mem_bytes=r[4], pod_count=r[5])
        for i, r in enumerate(rows)
    ]
    from_infos = node_entries(infos)
    from_values = node_entries_from_values(np.array(rows, dtype=np.int64).reshape(len(rows), 6))
    assert from_infos == from_values == [dict(zip(NODE_KEYS, r)) for r in rows]
    assert from_values.json_text == from_infos.json_text == json.dumps(list(from_values))


_JSON_ITEM = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**70), 2**70),
    st.text(max_size=5),
)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(_JSON_ITEM, max_size=12),
    st.dictionaries(st.text(max_size=4), st.floats(allow_nan=True, allow_infinity=True), max_size=4),
)
def test_json_columns_read_back_as_json_dumps_kept_them(tmp_path_factory, values, counterfactual):
    """The JSON columns are written with orjson where its text reads back the same values; NaN and the infinities
    (which orjson would write as null) and ints beyond 64 bits go through json.dumps: every value reads back as
    json.dumps kept it (compared as json.dumps' text, so NaN equals NaN)."""
    j = Journal(tmp_path_factory.mktemp("j") / "j.sqlite")
    d = dataclasses.replace(_d2(1.0), scores=values, shadow_scores=values, counterfactual=counterfactual)
    j.append(d)
    (back,) = list(j.since(0))
    j.close()
    assert isinstance(back, Decision)
    assert json.dumps(back.scores) == json.dumps(back.shadow_scores) == json.dumps(json.loads(json.dumps(values)))
    assert json.dumps(back.counterfactual) == json.dumps(json.loads(json.dumps(counterfactual)))
