"""The weights of a .keras archive holding a plain chain of Dense layers, read without TensorFlow.

Why: the scheduler needs only the weights of the small networks drs-prom trains, for its numpy
forward pass, but ``keras.saving.load_model`` imports TensorFlow first: about 500 MB of RSS, 4 s of
start-up and some 350 000 objects for the garbage collector, in a process that never runs a
TensorFlow op. A Keras 3 archive is a zip of ``config.json`` (the layer graph) and
``model.weights.h5`` (HDF5, read here with h5py, which Keras itself uses for it). A graph that is
exactly InputLayer -> Dense -> ... -> Dense (relu or linear, with bias) is read here; anything
else returns None and is loaded through Keras. Nothing in the archive is executed or unpickled.

Weights are stored under ``layers/<name>/vars/{0,1}`` where ``<name>`` is the layer class in
snake case, numbered per class in the order of the model's layers (``dense``, ``dense_1``, ...),
which is how Keras 3's saving library names them; tests compare the result with Keras's own load.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

Layers = list[tuple[np.ndarray, np.ndarray, str]]

_ACTIVATIONS = ("relu", "linear")


def _dense_chain(config: Any) -> list[dict[str, Any]] | None:
    """The Dense layer configs in order, if the graph is a plain chain from one input to one output."""
    if not isinstance(config, dict) or config.get("class_name") not in ("Functional", "Sequential"):
        return None
    inner = config.get("config") or {}
    layers = inner.get("layers")
    if not isinstance(layers, list) or len(layers) < 2 or layers[0].get("class_name") != "InputLayer":
        return None
    dense = layers[1:]
    previous = layers[0].get("name") or (layers[0].get("config") or {}).get("name")
    for layer in dense:
        cfg = layer.get("config") or {}
        if layer.get("class_name") != "Dense" or cfg.get("activation") not in _ACTIVATIONS or not cfg.get("use_bias"):
            return None
        if config.get("class_name") == "Functional":
            inbound = layer.get("inbound_nodes") or []
            history = [a.get("config", {}).get("keras_history", [None])[0] for n in inbound for a in n.get("args", [])]
            if history != [previous]:
                return None
        previous = layer.get("name") or cfg.get("name")
    if config.get("class_name") == "Functional" and (inner.get("output_layers") or [None])[0] != previous:
        return None
    return dense


def read_dense_chain(path: str | Path) -> Layers | None:
    """(kernel, bias, activation) per Dense layer, as ``export_dense`` gives them; None when the
    archive is not a plain Dense chain (then Keras must load it). Damaged archives raise."""
    import h5py  # Keras's own dependency for this file

    with zipfile.ZipFile(path) as archive:
        chain = _dense_chain(json.loads(archive.read("config.json")))
        if chain is None:
            return None
        weights = archive.read("model.weights.h5")
    out: Layers = []
    with h5py.File(io.BytesIO(weights), "r") as h5:
        for n, layer in enumerate(chain):
            group = h5.get(f"layers/dense{'' if n == 0 else f'_{n}'}/vars")
            if group is None or set(group.keys()) != {"0", "1"}:
                return None
            kernel = np.asarray(group["0"], dtype=np.float32)
            bias = np.asarray(group["1"], dtype=np.float32)
            units = (layer.get("config") or {}).get("units")
            if kernel.ndim != 2 or bias.shape != (kernel.shape[1],) or kernel.shape[1] != units:
                return None
            if out and out[-1][0].shape[1] != kernel.shape[0]:
                return None
            out.append((kernel, bias, str(layer["config"]["activation"])))
    return out
