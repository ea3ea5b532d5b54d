"""Reading .keras archives of Dense chains without TensorFlow (drs_prom.agent.dense_archive),
checked against Keras's own loading of the same files."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from drs_prom.agent.dense_archive import read_dense_chain
from drs_prom.agent.model_inputs import N_CANDIDATE
from drs_prom.agent.networks import configure_tf, drs_network, export_dense, node_scorer
from drs_prom.agent.persistence import base_metadata, default_model_path, default_original_path, load_model, save_model
from drs_prom.config import Normalisation


def keras_layers(path):
    configure_tf()
    import keras

    return export_dense(keras.saving.load_model(path, compile=False, safe_mode=True))


def assert_same(ours, theirs):
    assert ours is not None and len(ours) == len(theirs)
    for (k, b, act), (k2, b2, act2) in zip(ours, theirs, strict=True):
        assert act == act2 and k.dtype == k2.dtype == np.float32
        np.testing.assert_array_equal(k, k2)
        np.testing.assert_array_equal(b, b2)


@pytest.mark.parametrize(
    "path", [default_model_path(), default_original_path()], ids=["drs-shipped", "drs-original-v1"]
)
def test_shipped_models_read_exactly_as_keras_reads_them(path):
    assert_same(read_dense_chain(path), keras_layers(path))


@pytest.mark.parametrize(
    "make",
    [
        lambda: node_scorer(N_CANDIDATE, (32, 16, 8), seed=5),
        lambda: node_scorer(N_CANDIDATE, (), seed=6),  # a single (linear) layer
        lambda: node_scorer(N_CANDIDATE, (8,), seed=7, outputs=5),  # the selector's shape
        lambda: drs_network(3, seed=2),
    ],
    ids=["three-hidden", "linear", "five-outputs", "drs-original"],
)
def test_freshly_trained_shapes_read_exactly_as_keras_reads_them(tmp_path, make):
    path = tmp_path / "m.keras"
    make().save(path)
    assert_same(read_dense_chain(path), keras_layers(path))


def test_other_graphs_are_left_to_keras(tmp_path):
    configure_tf()
    import keras

    inputs = keras.Input(shape=(N_CANDIDATE,), name="candidate")
    hidden = keras.layers.Dense(8, activation="relu")(inputs)
    hidden = keras.layers.Dropout(0.1)(hidden)  # not a Dense: not a plain chain
    model = keras.Model(inputs, keras.layers.Dense(1)(hidden))
    path = save_model(model, base_metadata("drs", Normalisation()), tmp_path / "d.keras")
    assert read_dense_chain(path) is None
    assert_same(load_model(path).layers, keras_layers(path))  # loaded all the same, through Keras

    inputs = keras.Input(shape=(N_CANDIDATE,), name="candidate")
    a = keras.layers.Dense(8, activation="relu")(inputs)
    skip = keras.layers.Dense(1)(keras.layers.Concatenate()([inputs, a]))  # a skip connection
    path = tmp_path / "s.keras"
    keras.Model(inputs, skip).save(path)
    assert read_dense_chain(path) is None


def test_the_scheduler_loads_the_shipped_model_without_tensorflow():
    code = (
        "import sys; from drs_prom.agent import load_policy; p = load_policy(None, 30.0); "
        "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules, 'TensorFlow imported'; print(p.name)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-500:]
    assert out.stdout.strip() == "drs"
