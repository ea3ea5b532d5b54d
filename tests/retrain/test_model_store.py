"""Versioned store: atomic promotion, pruning, rollback, and the scheduler-side hot reload."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from drs_prom.errors import ModelError
from drs_prom.stores.model_store import ModelStore, ModelWatcher


def _save(text: str):
    def save(d: Path) -> None:
        (d / "model.keras").write_text(text)

    return save


def test_add_promote_keeps_n_and_current(tmp_path):
    store = ModelStore(tmp_path, keep=2)
    names = [store.add(_save(f"m{i}")).name for i in range(4)]
    assert [v.number for v in store.list()] == [1, 2, 3, 4]
    store.promote(names[0])
    # keep=2 newest plus the current one, even though it is the oldest
    assert [v.name for v in store.list()] == [names[0], names[2], names[3]]
    assert store.current() == names[0]
    assert (store.current_path() / "model.keras").read_text() == "m0"
    assert store.get(names[0]).status == "promoted"


def test_failed_save_leaves_no_version(tmp_path):
    store = ModelStore(tmp_path)

    def boom(d: Path) -> None:
        (d / "model.keras").write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        store.add(boom)
    assert store.list() == []
    assert not list((tmp_path / "versions").glob(".staging-*"))


def test_rollback_to_previous_and_named(tmp_path):
    store = ModelStore(tmp_path, keep=5)
    v = [store.add(_save(str(i))).name for i in range(3)]
    for name in v:
        store.promote(name)
    assert store.rollback() == v[1]
    assert store.current() == v[1]
    assert store.rollback() == v[0]
    with pytest.raises(ModelError, match="no earlier promoted version"):
        store.rollback()
    assert store.rollback(v[2]) == v[2] and store.current() == v[2]
    with pytest.raises(ModelError, match="not found"):
        store.rollback("v000099-20260101T000000Z")
    actions = [json.loads(x)["action"] for x in (tmp_path / "promotions.jsonl").read_text().splitlines()]
    assert actions == ["promote"] * 3 + ["rollback"] * 3


def test_pointer_swap_is_atomic_for_concurrent_readers(tmp_path):
    """Readers hammering current() during 200 promotions never see an empty or partial name."""
    store = ModelStore(tmp_path, keep=200)
    names = [store.add(_save(str(i))).name for i in range(4)]
    store.promote(names[0])
    seen: set = set()
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            seen.add(ModelStore(tmp_path).current())

    readers = [threading.Thread(target=read) for _ in range(2)]
    for r in readers:
        r.start()
    for i in range(200):
        store.promote(names[i % 4])
    stop.set()
    for r in readers:
        r.join()
    assert seen <= set(names)


def test_watcher_reloads_only_on_change_and_survives_bad_model(tmp_path):
    store = ModelStore(tmp_path)
    loads = []

    def loader(d: Path) -> str:
        text = (d / "model.keras").read_text()
        if text == "corrupt":
            raise ModelError("model file is corrupt")
        loads.append(text)
        return text

    w = ModelWatcher(store, loader)
    assert w.reload_if_changed() is False and w.model is None  # nothing promoted yet
    a = store.add(_save("a")).name
    store.promote(a)
    assert w.reload_if_changed() is True and w.model == "a" and w.version == a
    assert w.reload_if_changed() is False and loads == ["a"]
    bad = store.add(_save("corrupt")).name
    store.promote(bad)
    assert w.reload_if_changed() is False
    assert w.model == "a" and "corrupt" in (w.last_error or "")
    assert w.reload_if_changed() is False  # a failed version is not retried every cycle
    store.rollback(a)
    b = store.add(_save("b")).name
    store.promote(b)
    assert w.reload_if_changed() is True and w.model == "b" and w.last_error is None
