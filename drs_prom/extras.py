"""Optional dependency groups: what the base install leaves out and the one line that says how to add it.

``pip install drs-prom`` serves (``run``, ``extender``), exports, reads state and benchmarks without
TensorFlow: the shipped models are plain Dense chains read with h5py and scored with numpy. Training
(``train``) and retraining (``retrain``) build and fit Keras networks, so they need
``pip install 'drs-prom[train]'`` (about 1.5 GB more). Each such command calls ``require_train`` before
any work, so a base install fails in one line with the fix instead of a traceback half-way through.
"""

from __future__ import annotations

import importlib.util

from drs_prom.errors import MissingExtraError

TRAIN_MODULES = ("tensorflow", "keras")
"""What the ``train`` extra installs (tensorflow-cpu provides ``tensorflow``)."""

TRAIN_INSTALL = "pip install 'drs-prom[train]'"


def train_missing_message(what: str) -> str:
    """The one line a command prints when TensorFlow/Keras are absent."""
    return f"{what} needs TensorFlow and Keras, which the base install leaves out: {TRAIN_INSTALL}"


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it (TensorFlow takes seconds to import)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that fails, or a module with no spec
        return False


def require_train(what: str) -> None:
    """MissingExtraError (one line, exit 2 from the CLI) unless TensorFlow and Keras are installed."""
    if not all(_installed(m) for m in TRAIN_MODULES):
        raise MissingExtraError(train_missing_message(what))
