"""The DQN agents (``drs`` and DRS's ``drs-original``): the learning pieces, persistence and inference.

- ``networks``: the Keras networks; ``dqn``: one learning step (DQN, DRS's DQN); ``replay``: buffers;
- ``features``: the per-node candidate rows and DRS's flat state; ``persistence``: save/load ``.keras``
  + JSON metadata; ``policy``: the numpy inference policies.

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
    read_metadata,
)

__all__ = ["LearnedPolicy", "default_model_path", "default_original_path", "load_model", "load_policy", "read_metadata"]


def load_policy(path: str | Path | None = None) -> LearnedPolicy:
    """The model at ``path`` (default: the shipped ``drs`` model) as a Policy; ModelError if unusable.

    The policy carries ``version`` (file stem and creation time) for the journal and
    ``normalisation``: the scales its inputs were trained on, which the caller must use
    to build ``ctx.load`` (a model trained on other scales reads every node wrongly).
    """
    loaded = load_model(path)
    policy = loaded.policy()
    policy.version = f"{loaded.path.stem}@{loaded.meta.get('created', '?')}"
    # A top-k correction reads loads relative to each node's capacity, like its base heuristic: it uses
    # the cluster's own scales (unclipped), not the ones recorded at training.
    policy.normalisation = None if loaded.head else loaded.normalisation
    return policy
