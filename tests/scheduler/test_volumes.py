"""Files on volumes the scheduler does not control: a decision journal that is zero-length,
truncated, not SQLite, from a newer schema or unreadable to our user; a full disk while
journalling (a real 64 KiB tmpfs, mounted by the test when it runs as root); a model
store whose newest version is damaged. The scheduler keeps binding, says what is wrong at
most once a minute, and the store's ``current`` pointer is never damaged."""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import uuid
from pathlib import Path

import pytest

from drs_prom.stores.journal import JOURNAL_SCHEMA, Decision, Journal, open_journal
from drs_prom.stores.model_store import ModelStore, ModelWatcher


def _decision(i: int = 0) -> Decision:
    return Decision(f"u{i}", f"p{i}", "ns", [0.0] * 6, ["a"], [True], "a", [1.0], "x", ts=float(i))


def _journal_with_rows(path: Path, n: int = 200) -> None:
    j = Journal(path)
    for i in range(n):
        j.append(_decision(i))
    j._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    j.close()


def test_zero_length_journal_is_a_new_journal(tmp_path):
    path = tmp_path / "j.sqlite"
    path.write_bytes(b"")
    j = open_journal(path)
    assert j is not None and j.append(_decision()) > 0
    j.close()


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_damaged_journal_is_kept_aside_and_a_new_one_started(tmp_path, damage, caplog):
    path = tmp_path / "j.sqlite"
    _journal_with_rows(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3] if damage == "truncated" else b"not a database at all" * 100)
    with caplog.at_level(logging.WARNING, "drs_prom.stores.journal"):
        j = open_journal(path)
    assert j is not None and j.append(_decision()) > 0
    j.close()
    aside = [p for p in tmp_path.glob("j.sqlite.damaged-*") if not p.name.endswith(("-wal", "-shm"))]
    assert len(aside) == 1 and aside[0].stat().st_size > 0  # nothing deleted
    assert len([r for r in caplog.records if "damaged" in r.getMessage()]) == 1


def test_newer_schema_rows_are_read_raw_and_unknown_columns_do_not_stop_appends(tmp_path):
    path = tmp_path / "j.sqlite"
    _journal_with_rows(path, 2)
    db = sqlite3.connect(path)
    with db:  # what a newer drs-prom might have written: an extra column and schema 3 rows
        db.execute("ALTER TABLE decisions ADD COLUMN future TEXT")
        db.execute("UPDATE decisions SET schema = ?, future = 'x' WHERE id = 1", (JOURNAL_SCHEMA + 1,))
    db.close()
    j = open_journal(path)
    assert j is not None
    j.append(_decision(5))
    rows = list(j.since(0.0))
    assert isinstance(rows[0], dict) and rows[0]["schema"] == JOURNAL_SCHEMA + 1  # unknown schema: raw, not guessed
    assert all(isinstance(r, Decision) for r in rows[1:]) and len(rows) == 3
    j.close()


def test_journal_that_cannot_be_written_is_skipped_not_fatal(small_tmpfs, caplog):
    """A journal another user owns cannot be opened for writing by us. File modes do not bind
    root (the suite runs as root here), so the same refusal comes from a read-only mount of
    a real tmpfs: open_journal says so in one line and gives None; the scheduler binds
    without a journal. The file itself is untouched."""
    path = small_tmpfs / "j.sqlite"
    _journal_with_rows(path, 3)
    size = path.stat().st_size
    subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)], check=True)
    with caplog.at_level(logging.WARNING, "drs_prom.stores.journal"):
        assert open_journal(path) is None
    assert [r.getMessage() for r in caplog.records if "cannot be used" in r.getMessage()]
    assert path.stat().st_size == size


def _tmpfs(tmp_path: Path, size: str):
    """A real tmpfs of ``size`` (root only): a disk that really fills up, a mount that can go read-only."""
    mnt = tmp_path / f"tmpfs-{size}"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root; a full disk cannot be produced otherwise here")
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.fixture
def tiny_tmpfs(tmp_path):
    yield from _tmpfs(tmp_path, "256k")  # room for the schema-3 tables, then _fill takes the rest


@pytest.fixture
def small_tmpfs(tmp_path):
    yield from _tmpfs(tmp_path, "4m")


def _fill(directory: Path) -> None:
    """Write until the disk is full (unbuffered, so nothing is left to fail at close)."""
    with open(directory / "filler", "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 1024)
        except OSError:
            pass


def test_model_store_current_survives_a_full_disk(tiny_tmpfs):
    store = ModelStore(tiny_tmpfs / "store", keep=3)
    v1 = store.add(lambda d: (d / "model.keras").write_text("v1"))
    store.promote(v1.name)
    v2 = store.add(lambda d: (d / "model.keras").write_text("v2"))
    _fill(tiny_tmpfs)
    with pytest.raises(OSError):
        store.promote(v2.name)
    assert store.current() == v1.name and (store.current_path() / "model.keras").read_text() == "v1"
    assert not [p for p in store.root.iterdir() if p.name.startswith(".current.")]  # no temp file left
    with pytest.raises(OSError):
        store.add(lambda d: (d / "model.keras").write_text("v3" * 10000))
    assert store.current() == v1.name


def test_watcher_keeps_the_old_model_when_the_new_one_is_damaged(tmp_path, caplog):
    store = ModelStore(tmp_path / "store")
    loads = []

    def loader(d: Path) -> str:
        text = (d / "model.keras").read_text()
        if not text.startswith("model"):
            raise ValueError(f"truncated model file {d / 'model.keras'}")
        loads.append(text)
        return text

    v1 = store.add(lambda d: (d / "model.keras").write_text("model one"))
    store.promote(v1.name)
    w = ModelWatcher(store, loader)
    assert w.reload_if_changed() and w.model == "model one"
    v2 = store.add(lambda d: (d / "model.keras").write_text(""))  # zero-length
    store.promote(v2.name)
    with caplog.at_level(logging.WARNING, "drs_prom.stores.model_store"):
        for _ in range(5):
            assert not w.reload_if_changed()
    assert w.model == "model one" and "truncated" in (w.last_error or "")
    assert len([r for r in caplog.records if "cannot load model" in r.getMessage()]) == 1  # said once


@pytest.mark.integration
def test_scheduler_keeps_binding_with_the_journal_on_a_full_disk(
    core, ns, fake_nodes, make_scheduler, tiny_tmpfs, caplog
):
    from tests.scheduler.conftest import list_pods, pod_body
    from tests.waiting import wait_for

    fake_nodes(f"vol-{uuid.uuid4().hex[:5]}", cpu="8", memory="16Gi")
    journal = Journal(tiny_tmpfs / "journal.sqlite")
    _fill(tiny_tmpfs)
    with caplog.at_level(logging.WARNING, "drs_prom.scheduler.loop"):
        sched = make_scheduler(journal=journal)
        for i in range(12):
            core.create_namespaced_pod(ns, pod_body(f"full-{i}"))
        wait_for(
            lambda: all(p["spec"].get("nodeName") for p in list_pods(core, ns)) and len(list_pods(core, ns)) == 12,
            90,
            "every pod bound with the journal's disk full",
        )
    journal.flush()  # rows are written by the journal's writer thread: wait for its attempt
    failures = sched.metrics.registry.get_sample_value("drs_journal_failures_total") or 0
    assert failures >= 1
    said = [r for r in caplog.records if "journal append failed" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in said]  # once a minute, not once a pod
