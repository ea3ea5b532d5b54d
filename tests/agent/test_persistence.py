"""Save/load round trips and refusals (real Keras files, real corruption)."""

import json
import zipfile

import numpy as np
import pytest

from drs_prom.agent import load_policy
from drs_prom.agent.model_inputs import N_CANDIDATE
from drs_prom.agent.networks import drs_network, node_scorer
from drs_prom.agent.numpy_policy import forward
from drs_prom.agent.persistence import base_metadata, load_model, meta_path, read_metadata, save_model, update_metadata
from drs_prom.config import Normalisation
from drs_prom.errors import ModelError
from tests.specs import WINDOW


@pytest.fixture(scope="module")
def scorer():
    return node_scorer(N_CANDIDATE, (16,), seed=3)


@pytest.fixture
def saved(tmp_path, scorer):
    return save_model(scorer, base_metadata("drs", Normalisation()), tmp_path / "m.keras")


def test_round_trip_keeps_weights_and_numpy_forward_matches_keras(saved, scorer):
    loaded = load_model(saved)
    x = np.random.default_rng(0).uniform(0, 1, (7, N_CANDIDATE)).astype(np.float32)
    np.testing.assert_allclose(forward(loaded.layers, x), scorer(x).numpy(), rtol=1e-5, atol=1e-5)
    assert loaded.policy_name == "drs" and loaded.normalisation == Normalisation()
    assert load_policy(saved, WINDOW).version.startswith("m@")


def test_writes_are_atomic_no_temp_files_left(saved):
    assert sorted(p.name for p in saved.parent.iterdir()) == ["m.json", "m.keras"]


def test_drs_original_round_trip(tmp_path):
    net = drs_network(4, seed=1)
    path = save_model(net, base_metadata("drs-original", Normalisation.drs_paper(), n_nodes=4), tmp_path / "o.keras")
    loaded = load_model(path)
    assert loaded.meta["n_nodes"] == 4 and loaded.normalisation == Normalisation.drs_paper()
    assert loaded.layers[0][0].shape == (30, 50)
    # DRS's N(0, 0.1) initialisation
    assert abs(float(loaded.layers[0][0].std()) - 0.1) < 0.02


def test_update_metadata_merges_sections(saved):
    update_metadata(saved, benchmark={"x": 1})
    meta = read_metadata(saved)
    assert meta["benchmark"] == {"x": 1} and meta["policy"] == "drs"


def _one_line(exc: pytest.ExceptionInfo) -> str:
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_missing_model_is_a_model_error(tmp_path):
    with pytest.raises(ModelError) as exc:
        load_model(tmp_path / "nope.keras")
    assert "not found" in _one_line(exc)


def test_feature_schema_mismatch_is_refused(saved):
    meta = json.loads(meta_path(saved).read_text())
    meta["feature_schema_version"] = 999
    meta_path(saved).write_text(json.dumps(meta))
    with pytest.raises(ModelError) as exc:
        load_model(saved)
    assert "feature schema 999" in _one_line(exc)


def test_input_columns_mismatch_is_refused(saved):
    meta = json.loads(meta_path(saved).read_text())
    meta["input_columns"] = meta["input_columns"][:-1]
    meta_path(saved).write_text(json.dumps(meta))
    with pytest.raises(ModelError) as exc:
        load_model(saved)
    assert "retrain" in _one_line(exc)


def test_corrupt_json_is_refused(saved):
    meta_path(saved).write_text('{"format": "drs-prom-model", ')
    with pytest.raises(ModelError) as exc:
        load_model(saved)
    assert "corrupt" in _one_line(exc)


def test_truncated_keras_file_is_refused(saved):
    data = saved.read_bytes()
    saved.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError) as exc:
        load_model(saved)
    assert str(saved) in _one_line(exc)


def test_keras_archive_with_damaged_weights_is_refused(saved, tmp_path):
    bad = tmp_path / "bad.keras"
    with zipfile.ZipFile(saved) as src, zipfile.ZipFile(bad, "w") as dst:
        for item in src.infolist():
            payload = src.read(item)
            dst.writestr(item, payload[:64] if item.filename.endswith(".h5") else payload)
    meta_path(bad).write_text(meta_path(saved).read_text())
    with pytest.raises(ModelError) as exc:
        load_model(bad)
    assert "could not be loaded" in _one_line(exc)


def test_metadata_shape_must_match_weights(tmp_path):
    net = drs_network(4, seed=1)
    path = save_model(net, base_metadata("drs-original", Normalisation(), n_nodes=5), tmp_path / "o.keras")
    with pytest.raises(ModelError) as exc:
        load_model(path)
    assert "does not match" in _one_line(exc)


def test_non_keras_suffix_is_refused(tmp_path, scorer):
    with pytest.raises(ModelError):
        save_model(scorer, base_metadata("drs", Normalisation()), tmp_path / "m.h5")
