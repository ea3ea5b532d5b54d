"""A directory of versioned models with one atomically swapped ``current`` pointer.

Layout::

    <root>/versions/<version>/      one model per directory (whatever files the saver wrote)
    <root>/versions/<version>/version.json   store metadata: created, status, eval scores
    <root>/current                  text file naming the promoted version (temp + rename)
    <root>/promotions.jsonl         append-only log of promotions and rollbacks

Why a pointer file: a promotion is one ``os.replace`` of a tiny file, so a reader (the
running scheduler) sees either the old version or the new one, never a half-written
model; the version directories themselves are complete before they get their final
name (they are written under ``.staging-*`` and renamed).
"""

from __future__ import annotations

import builtins
import contextlib
import json
import logging
import math
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from drs_prom.errors import ModelError

log = logging.getLogger(__name__)

_VERSION_RE = re.compile(r"^v(\d{6})-\d{8}T\d{6}Z$")
VERSION_META = "version.json"
MODEL_FILE = "model.keras"
"""The model inside each version directory (its metadata is model.json beside it)."""

T = TypeVar("T")


@dataclass(frozen=True)
class VersionInfo:
    """One stored model version and what the store knows about it."""

    name: str
    path: Path
    created: float
    status: str  # candidate | promoted | rejected
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def number(self) -> int:
        m = _VERSION_RE.match(self.name)
        return int(m.group(1)) if m else -1


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old or the new content, never a mix."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


class ModelStore:
    """Versioned models under ``root``; keeps the newest ``keep`` versions plus the current one."""

    def __init__(self, root: str | Path, keep: int = 5) -> None:
        if keep < 1:
            raise ValueError("keep must be at least 1")
        self.root = Path(root)
        self.keep = keep
        self.versions_dir = self.root / "versions"
        self.pointer = self.root / "current"
        self.log_path = self.root / "promotions.jsonl"
        self._lock = threading.Lock()

    # -- writing -----------------------------------------------------------------------

    def add(self, save: Callable[[Path], None], meta: dict[str, Any] | None = None) -> VersionInfo:
        """Create a new version: ``save(dir)`` writes the model files into a staging dir.

        The directory gets its final name only after ``save`` returned, so a crash while
        saving leaves a ``.staging-*`` directory (removed by the next ``add``), never a
        broken version.
        """
        self.versions_dir.mkdir(parents=True, exist_ok=True)
        self._clean_staging()
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=self.versions_dir))
        try:
            save(staging)
            with self._lock:
                number = max((v.number for v in self._scan()), default=0) + 1
                name = f"v{number:06d}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
                info = {"created": time.time(), "status": "candidate", **(meta or {})}
                (staging / VERSION_META).write_text(json.dumps(info, indent=1, sort_keys=True, default=str))
                final = self.versions_dir / name
                os.replace(staging, final)
                _fsync_dir(self.versions_dir)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return self.get(name)

    def set_status(self, version: str, status: str, **extra: Any) -> None:
        """Record a verdict (promoted/rejected) and optional scores in the version's metadata."""
        path = self._dir(version) / VERSION_META
        data = self._read_meta(path)
        data.update(extra)
        data["status"] = status
        _atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True, default=str))

    def promote(self, version: str, *, reason: str = "promote") -> None:
        """Make ``version`` current with one atomic pointer swap, then prune old versions."""
        self._dir(version)  # raises ModelError when absent
        with self._lock:
            previous = self._read_pointer()
            self.root.mkdir(parents=True, exist_ok=True)
            _atomic_write_text(self.pointer, version + "\n")
            with open(self.log_path, "a") as fh:
                fh.write(
                    json.dumps({"ts": time.time(), "action": reason, "version": version, "previous": previous}) + "\n"
                )
        if reason == "promote":
            self.set_status(version, "promoted", promoted_at=time.time())
        log.info("model store %s: %s %s (was %s)", self.root, reason, version, previous)
        self.prune()

    def rollback(self, version: str | None = None) -> str:
        """Point ``current`` at ``version``, or at the version promoted before the current one."""
        if version is None:
            current = self.current()
            history = [e["version"] for e in self._promotions() if e.get("action") == "promote"]
            present = {v.name for v in self.list()}
            earlier = [v for v in history if v != current and v in present]
            if current in history:
                before = history[: len(history) - 1 - history[::-1].index(current)]
                earlier = [v for v in before if v != current and v in present]
            if not earlier:
                raise ModelError(f"no earlier promoted version to roll back to in {self.root}")
            version = earlier[-1]
        self.promote(version, reason="rollback")
        return version

    def prune(self) -> list[str]:
        """Delete all but the newest ``keep`` versions; the current one is always kept."""
        current = self.current()
        versions = self.list()
        keep = {v.name for v in versions[-self.keep :]}
        if current:
            keep.add(current)
        removed = []
        for v in versions:
            if v.name not in keep:
                shutil.rmtree(v.path, ignore_errors=True)
                removed.append(v.name)
        return removed

    # -- reading -----------------------------------------------------------------------

    def list(self) -> list[VersionInfo]:
        """Every complete version, oldest first."""
        return sorted(self._scan(), key=lambda v: v.number)

    def get(self, version: str) -> VersionInfo:
        return self._info(self._dir(version))

    def history(self) -> builtins.list[dict[str, Any]]:
        """The promotions log, oldest first: ``{ts, action: promote|rollback, version, previous}``."""
        return self._promotions()

    def current(self) -> str | None:
        """Name of the promoted version, or None when nothing was promoted yet."""
        return self._read_pointer()

    def current_path(self) -> Path | None:
        name = self.current()
        return None if name is None else self._dir(name)

    def state(self) -> dict[str, Any]:
        """Small JSON state next to the models (e.g. the retrain cursor)."""
        path = self.root / "state.json"
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable %s: %s", path, exc)
            return {}

    def save_state(self, state: dict[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        _atomic_write_text(self.root / "state.json", json.dumps(state, indent=1, sort_keys=True))

    # -- internals ---------------------------------------------------------------------

    def _dir(self, version: str) -> Path:
        if not _VERSION_RE.match(version or ""):
            raise ModelError(f"not a model version name: {version!r}")
        path = self.versions_dir / version
        if not path.is_dir():
            raise ModelError(f"model version {version} not found in {self.versions_dir}")
        return path

    def _scan(self) -> builtins.list[VersionInfo]:
        if not self.versions_dir.is_dir():
            return []
        out = []
        for entry in self.versions_dir.iterdir():
            if entry.is_dir() and _VERSION_RE.match(entry.name):
                out.append(self._info(entry))
        return out

    def _info(self, path: Path) -> VersionInfo:
        """A version as the store knows it; a damaged version.json reads as an unknown candidate
        (a stray value there must not stop list(), prune() or a promotion of another version)."""
        meta = self._read_meta(path / VERSION_META)
        created = meta.get("created", 0.0)
        try:
            created = float(created)
        except (TypeError, ValueError):
            created = 0.0
        if not math.isfinite(created):
            created = 0.0
        return VersionInfo(path.name, path, created, str(meta.get("status", "candidate")), meta)

    @staticmethod
    def _read_meta(path: Path) -> dict[str, Any]:
        try:
            data = json.loads(path.read_text())
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def _read_pointer(self) -> str | None:
        try:
            name = self.pointer.read_text().strip()
        except FileNotFoundError:
            return None
        return name or None

    def _promotions(self) -> builtins.list[dict[str, Any]]:
        try:
            lines = self.log_path.read_text().splitlines()
        except FileNotFoundError:
            return []
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def _clean_staging(self) -> None:
        for entry in self.versions_dir.glob(".staging-*"):
            if time.time() - entry.stat().st_mtime > 3600:
                shutil.rmtree(entry, ignore_errors=True)


class ModelWatcher(Generic[T]):
    """Hot reload for the running scheduler: ``reload_if_changed()`` swaps in a newly promoted model.

    Call it from the scheduling loop (it costs one small file read when nothing changed).
    ``loader(version_dir)`` builds the object the scheduler uses (e.g. an AgentPolicy);
    if loading fails the old model stays in use and the failure is logged, so a bad
    promotion never stops scheduling.
    """

    def __init__(self, store: ModelStore, loader: Callable[[Path], T], min_interval_seconds: float = 0.0) -> None:
        self.store = store
        self.loader = loader
        self.min_interval = min_interval_seconds
        self.version: str | None = None
        self.model: T | None = None
        self.last_error: str | None = None
        self._failed: str | None = None
        self._checked = 0.0
        self._lock = threading.Lock()

    def reload_if_changed(self) -> bool:
        """True when a different version was loaded by this call."""
        now = time.monotonic()
        if self.min_interval and now - self._checked < self.min_interval:
            return False
        self._checked = now
        try:
            name = self.store.current()
        except OSError as exc:
            self.last_error = f"cannot read model pointer: {exc}"
            return False
        if name is None or name == self.version or name == self._failed:
            return False
        with self._lock:
            if name == self.version:
                return False
            try:
                model = self.loader(self.store.get(name).path)
            except Exception as exc:  # noqa: BLE001 - reload boundary: logged, kept in last_error; keep serving the old model
                self._failed = name
                self.last_error = f"cannot load model {name}: {exc}"
                log.warning("%s; keeping %s", self.last_error, self.version)
                return False
            self.model, self.version, self._failed, self.last_error = model, name, None, None
        log.info("loaded model version %s from %s", name, self.store.root)
        return True
