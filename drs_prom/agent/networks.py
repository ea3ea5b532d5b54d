"""The two Q networks, as small Keras models, and the TensorFlow process setup.

- ``node_scorer``: the shared per-node network of ``drs``: one candidate row in, one
  Q value out, applied to every node, so it serves any cluster size and order.
- ``drs_network``: DRS's network: 6N+6 state in, one hidden layer of 50 ReLU units
  (weights N(0, 0.1)), N Q values out.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from drs_prom.errors import MissingExtraError, ModelError
from drs_prom.extras import TRAIN_MODULES, train_missing_message

_configured = False


def configure_tf(threads: int = 1) -> Any:
    """Import TensorFlow with few threads (the machine is shared); returns the module.

    Thread pools can only be sized before TF's runtime starts, so every agent entry
    point calls this first.
    """
    global _configured
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    try:
        import tensorflow as tf
    except ModuleNotFoundError as exc:  # a base install (no [train] extra): one line, not a traceback
        if exc.name not in TRAIN_MODULES:
            raise
        raise MissingExtraError(train_missing_message("building or fitting a network")) from None

    if not _configured:
        try:
            tf.config.threading.set_inter_op_parallelism_threads(threads)
            tf.config.threading.set_intra_op_parallelism_threads(threads)
        except RuntimeError:  # runtime already initialised by someone else: keep theirs
            pass
        _configured = True
    return tf


def node_scorer(n_inputs: int, hidden: Sequence[int] = (64, 64), seed: int = 0, outputs: int = 1) -> Any:
    """Per-candidate MLP: (batch, n_inputs) -> (batch, 1) Q value (``outputs`` > 1: one value per option, for a head that chooses among options)."""
    configure_tf()
    import keras

    inputs = keras.Input(shape=(n_inputs,), name="candidate")
    x = inputs
    for i, units in enumerate(hidden):
        x = keras.layers.Dense(
            units,
            activation="relu",
            kernel_initializer=keras.initializers.HeUniform(seed=seed + i),
            name=f"hidden_{i}",
        )(x)
    q = keras.layers.Dense(outputs, kernel_initializer=keras.initializers.GlorotUniform(seed=seed + 99), name="q")(x)
    return keras.Model(inputs, q, name="drs_node_scorer")


def drs_network(n_nodes: int, hidden: int = 50, seed: int = 0) -> Any:
    """DRS's DQN: flat state -> one Q per node; weights drawn from N(0, 0.1) as published."""
    configure_tf()
    import keras

    from drs_prom.agent.model_inputs import drs_state_dim

    init = keras.initializers.RandomNormal(mean=0.0, stddev=0.1, seed=seed)
    init2 = keras.initializers.RandomNormal(mean=0.0, stddev=0.1, seed=seed + 1)
    inputs = keras.Input(shape=(drs_state_dim(n_nodes),), name="state")
    x = keras.layers.Dense(hidden, activation="relu", kernel_initializer=init, name="hidden_0")(inputs)
    q = keras.layers.Dense(n_nodes, kernel_initializer=init2, name="q")(x)
    return keras.Model(inputs, q, name="drs_original")


def export_dense(model: Any) -> list[tuple[Any, Any, str]]:
    """(kernel, bias, activation) per Dense layer, as numpy, for the numpy forward pass."""
    layers = []
    for layer in model.layers:
        if not hasattr(layer, "kernel"):
            continue
        kernel, bias = (w.astype("float32") for w in layer.get_weights())
        act = layer.get_config().get("activation", "linear")
        if act not in ("relu", "linear"):
            raise ModelError(f"unsupported activation {act!r} in layer {layer.name} (relu and linear are exported)")
        layers.append((kernel, bias, act))
    return layers
