"""Properties of what the scheduler reads from files a user or another process wrote:
settings YAML (and DRS_PROM_* variables), scenario YAML, journal rows, model metadata
and the model store's version metadata. The contract everywhere: a value, or the
module's one-line error (ConfigError / ModelError); never another exception, and a
journal never stops yielding because one row is damaged."""

from __future__ import annotations

import functools
import inspect
import json
import math
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from drs_prom.config import Settings, load_settings
from drs_prom.errors import ConfigError, ModelError
from drs_prom.stores.journal import Decision, Journal
from drs_prom.stores.model_store import ModelStore

scalars = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats() | st.text(max_size=8)
yaml_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
)
FIELDS = {name: list(section.annotation.model_fields) for name, section in Settings.model_fields.items()}
settings_docs = st.dictionaries(
    st.sampled_from(list(FIELDS) + ["bogus"]),
    st.dictionaries(st.sampled_from([f for fields in FIELDS.values() for f in fields] + ["x"]), scalars, max_size=3)
    | scalars,
    max_size=3,
)


def per_input_dir(fn: Callable[..., None]) -> Callable[..., None]:
    """Pass a new empty directory as the first argument of every generated input
    (pytest's tmp_path is one directory for all of a test's inputs)."""

    @functools.wraps(fn)
    def wrapper(*args: object, **kwargs: object) -> None:
        d = Path(tempfile.mkdtemp(prefix="drs-prop-"))
        try:
            fn(d, *args, **kwargs)
        finally:
            shutil.rmtree(d, ignore_errors=True)

    sig = inspect.signature(fn)
    wrapper.__signature__ = sig.replace(parameters=list(sig.parameters.values())[1:])  # type: ignore[attr-defined]
    return wrapper


@given(settings_docs | yaml_values, st.sampled_from(["text", "bytes", "dir"]))
@example({"prometheus": {"window": "0s"}}, "text")  # accepted: rate(x[0s]) is an invalid query on every refresh
@example({}, "bytes")  # a file that is not UTF-8 raised UnicodeDecodeError, not ConfigError
@example({}, "dir")  # a directory raised IsADirectoryError
@example({"\n": None}, "text")  # a key with a line break made the one-line error two lines
@example({"prometheus": {"bearer_token_file": "\n"}}, "text")  # so did a value that the message quotes
@per_input_dir
def test_settings_file_is_settings_or_config_error(tmp_path: Path, doc: object, how: str) -> None:
    path = tmp_path / "drs.yaml"
    if how == "dir":
        path.mkdir(exist_ok=True)
    elif how == "bytes":
        path.write_bytes(b"\xff\xfe" + yaml.safe_dump(doc).encode("utf-16-le"))
    else:
        path.write_text(yaml.safe_dump(doc))
    try:
        got = load_settings(path)
    except ConfigError as exc:
        assert "\n" not in str(exc)
        return
    assert isinstance(got, Settings)
    assert got.prometheus.window_seconds > 0


@given(
    st.dictionaries(
        st.sampled_from(
            [
                "prometheus.url",
                "prometheus.window",
                "scheduler.metrics_listen",
                "normalisation.cpu_full",
                "retrain.epochs",
                "nope.x",
            ]
        ),
        st.text(max_size=12),
        max_size=3,
    )
)
def test_overrides_are_settings_or_config_error(overrides: dict[str, str]) -> None:
    try:
        load_settings(None, overrides)
    except ConfigError as exc:
        assert "\n" not in str(exc)


@given(yaml_values)
def test_scenario_text_is_scenario_or_config_error(doc: object) -> None:
    from drs_prom.sim.scenario import Scenario, parse_scenario

    try:
        got = parse_scenario(yaml.safe_dump(doc))
    except ConfigError as exc:
        assert "\n" not in str(exc)
        return
    assert isinstance(got, Scenario)


names = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
floats = st.floats(allow_nan=False)
decisions = st.builds(
    Decision,
    pod_uid=names,
    pod_name=names,
    namespace=names,
    pod_features=st.lists(floats, min_size=6, max_size=6),
    candidates=st.lists(names, max_size=4),
    feasible=st.lists(st.booleans(), max_size=4),
    chosen=names,
    scores=st.lists(st.none() | floats, max_size=4),
    policy=names,
    ts=st.floats(0, 2e9),
    owner=st.none() | names,
    model_version=st.none() | names,
    fallback_reason=st.none() | names,
    nodes=st.none() | st.lists(st.fixed_dictionaries({"allocatable_cpu_m": st.integers(0, 2**62)}), max_size=3),
)


@given(decisions)
@per_input_dir
def test_journal_rows_round_trip(tmp_path: Path, d: Decision) -> None:
    j = Journal(tmp_path / "j.sqlite")
    try:
        d.id = j.append(d)
        got = [r for r in j.since(0.0) if isinstance(r, Decision) and r.id == d.id]
        assert got == [d]
    finally:
        j.close()


garbage_rows = st.fixed_dictionaries(
    {
        "schema": st.sampled_from([1, 2, 3, 99, -1]),
        "pod_features": st.sampled_from(["[1,2,3,4,5,6]", "[1,", "", "null", "NaN", "{}"]),
        "candidates": st.sampled_from(['["a"]', "not json", "[]"]),
        "feasible": st.sampled_from(["[true]", "[", "null", "5"]),
        "scores": st.sampled_from(["[1.0]", "[-Infinity]", "x"]),
    }
)


@given(st.lists(garbage_rows, min_size=1, max_size=4))
@example([{"schema": 2, "pod_features": "[1,", "candidates": "[]", "feasible": "[]", "scores": "[]"}])
@per_input_dir
def test_journal_reader_survives_damaged_rows(tmp_path: Path, rows: list[dict[str, object]]) -> None:
    """Rows another process (or a bad disk) wrote: each comes back as a Decision or a raw dict,
    and a good row after a damaged one is still read."""
    path = tmp_path / "j.sqlite"
    j = Journal(path)
    try:
        db = sqlite3.connect(path)
        with db:
            for r in rows:
                db.execute(
                    "INSERT INTO decisions (schema, ts, pod_uid, pod_name, namespace, pod_features, candidates,"
                    " feasible, chosen, scores, policy) VALUES (?, 1.0, 'u', 'p', 'ns', ?, ?, ?, 'a', ?, 'x')",
                    (r["schema"], r["pod_features"], r["candidates"], r["feasible"], r["scores"]),
                )
        db.close()
        good = j.append(Decision("u", "p", "ns", [0.0] * 6, ["a"], [True], "a", [1.0], "x", ts=2.0))
        out = list(j.since(0.0))
        assert len(out) == len(rows) + 1
        assert all(isinstance(r, (Decision, dict)) for r in out)
        assert isinstance(out[-1], Decision) and out[-1].id == good
    finally:
        j.close()


@given(
    yaml_values
    | st.fixed_dictionaries(
        {"format": st.just("drs-prom-model")},
        optional={
            "format_version": scalars,
            "feature_schema_version": scalars,
            "policy": st.sampled_from(["drs", "drs-original", "x"]),
            "n_nodes": scalars,
            "normalisation": yaml_values,
        },
    )
)
@per_input_dir
def test_model_metadata_is_dict_or_model_error(tmp_path: Path, meta: object) -> None:
    from drs_prom.agent.persistence import meta_path, read_metadata

    model = tmp_path / "m.keras"
    meta_path(model).write_text(json.dumps(meta))
    try:
        got = read_metadata(model)
    except ModelError as exc:
        assert "\n" not in str(exc)
        return
    assert isinstance(got, dict)


@given(yaml_values, st.booleans())
@example({"created": "yesterday"}, True)  # float("yesterday") broke list(), so prune() and promote() raised
@example({"created": [1]}, False)
@example({"created": math.nan}, False)
@per_input_dir
def test_model_store_survives_any_version_metadata(tmp_path: Path, meta: object, truncated: bool) -> None:
    store = ModelStore(tmp_path / "store", keep=2)
    good = store.add(lambda d: (d / "model.keras").write_text("m"))
    store.promote(good.name)
    bad = store.add(lambda d: (d / "model.keras").write_text("m"))
    text = json.dumps(meta)
    (bad.path / "version.json").write_text(text[: len(text) // 2] if truncated else text)
    versions = store.list()  # never raises on a damaged version.json
    assert [v.name for v in versions] == [good.name, bad.name]
    assert all(math.isfinite(v.created) for v in versions)
    store.add(lambda d: (d / "model.keras").write_text("m"))
    store.prune()
    assert store.current() == good.name  # the pointer is untouched by a damaged neighbour
