"""The DQN agents (``drs`` and DRS's ``drs-original``): the learning pieces, persistence and inference.

- ``networks``: the Keras networks; ``dqn``: one learning step (DQN, DRS's DQN); ``replay``: buffers;
- ``features``: the per-node candidate rows and DRS's flat state; ``persistence``: save/load ``.keras``
  + JSON metadata, and the model heads it serves (``register_head``); ``policy``: the numpy inference policies;
- ``guided``: the heuristic-guided ``drs`` head of the shipped model; ``cluster_context``: the cluster features
  it reads beside each node's row.

The training loop, plots and benchmark summaries are in drs_prom.training (above the simulator).
Importing this package does not import TensorFlow; only training and loading a ``.keras``
file do. Inference is a numpy forward pass.
"""

from __future__ import annotations

from pathlib import Path

from drs_prom.agent.persistence import (
    LearnedPolicy,
    default_model_path,
    default_original_path,
    load_model,
    model_policy,
    read_metadata,
)

__all__ = [
    "LearnedPolicy",
    "default_model_path",
    "default_original_path",
    "load_model",
    "load_policy",
    "model_policy",
    "read_metadata",
]


def load_policy(path: str | Path | None, metric_window_seconds: float, version: str | None = None) -> LearnedPolicy:
    """The model at ``path`` (None: the shipped ``drs`` model) as a Policy; ModelError if unusable.

    Callers outside the agent build policies through drs_prom.registry.make_policy, which
    passes the settings' rate window; the policy carries ``version`` (file stem and creation
    time) for the journal and ``normalisation``: the scales its inputs were trained on, which
    the caller must use to build ``ctx.load`` (None: the cluster's own scales). ``version``
    names the model instead (a model store's version directory).
    """
    return load_model(path).policy(metric_window_seconds, version)
