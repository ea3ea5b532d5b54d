"""Models on disk: ``name.keras`` (Keras v3 zip, safe mode) plus ``name.json`` metadata.

The JSON says what the weights mean (feature schema, input layout, normalisation,
training run, benchmark); loading refuses anything that does not match this code,
with one line. Both files are written to a temp file and renamed, so a crash never
leaves a half-written model where the scheduler would load it. No pickle anywhere.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from drs_prom.agent.dense_archive import read_dense_chain
from drs_prom.agent.guided import GUIDED, GuidedPolicy, head_inputs, valid_guided_head
from drs_prom.agent.model_inputs import CANDIDATE_COLUMNS, CANDIDATE_SCHEMA, drs_state_dim
from drs_prom.agent.numpy_policy import DRSOriginalPolicy, Layers, NodeAgentPolicy
from drs_prom.config import Normalisation
from drs_prom.errors import ConfigError, MissingExtraError, ModelError
from drs_prom.extras import train_missing_message
from drs_prom.features import FEATURE_SCHEMA_VERSION
from drs_prom.policies.contract import Policy

LearnedPolicy = Policy
"""What a model file loads as (LoadedModel.policy): a Policy with ``version`` and ``normalisation`` set."""

FORMAT = "drs-prom-model"
FORMAT_VERSION = 1
POLICIES = ("drs", "drs-original")


@dataclass(frozen=True)
class Head:
    """A kind of ``drs`` model head: how a network's outputs become a choice, named by ``head.kind`` in the JSON.

    The shipped kind is the heuristic-guided network (drs_prom.agent.guided). Other kinds are registered by the
    code that trains them (``register_head``), so this module serves only what has been registered and refuses
    every other head with one line."""

    kind: str
    valid: Callable[[dict[str, Any]], bool]
    """Whether a ``head`` section of this kind is one the policy can serve (its other fields checked)."""
    io_shape: Callable[[dict[str, Any]], tuple[int, int]]
    """(inputs, outputs) the network under a valid ``head`` must have."""
    policy: Callable[..., LearnedPolicy]
    """``policy(layers, head, metric_window_seconds=..., version=..., [name=...])``: the policy it serves as."""
    fine_tunable: bool = False
    """Whether retraining may fine-tune it from history: its network reads the per-node candidate rows the journal
    rebuilds (drs_prom.agent.model_inputs), and the head is kept on the candidate."""


_HEADS: dict[str, Head] = {}


def register_head(head: Head) -> None:
    """Let models with ``head.kind`` load (and be checked) as ``head`` describes."""
    _HEADS[head.kind] = head


def head_kind(kind: object) -> Head | None:
    """The registered head of this kind, None for any other."""
    return _HEADS.get(kind) if isinstance(kind, str) else None


register_head(Head(GUIDED, valid_guided_head, lambda head: (head_inputs(head), 1), GuidedPolicy.from_head))


def default_model_path() -> Path:
    """The shipped model used when settings name none."""
    return Path(__file__).resolve().parents[2] / "models" / "drs-v7.keras"


def default_original_path() -> Path:
    """The shipped DRS-faithful baseline model (4 nodes, drs-paper)."""
    return Path(__file__).resolve().parents[2] / "models" / "drs-original-v1.keras"


def meta_path(model_path: str | Path) -> Path:
    return Path(model_path).with_suffix(".json")


def base_metadata(policy: str, norm: Normalisation, n_nodes: int | None = None) -> dict[str, Any]:
    """The fields load_model checks; training adds its own sections."""
    if policy not in POLICIES:
        raise ConfigError(f"unknown policy {policy!r}; known: {', '.join(POLICIES)}")
    meta: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "policy": policy,
        "feature_schema_version": FEATURE_SCHEMA_VERSION,
        "normalisation": norm.model_dump(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if policy == "drs":
        meta["input_schema"] = CANDIDATE_SCHEMA
        meta["input_columns"] = list(CANDIDATE_COLUMNS)
    else:
        if not n_nodes:
            raise ConfigError("a drs-original model needs its node count")
        meta["n_nodes"] = int(n_nodes)
    return meta


def _atomic_write(path: Path, write: Any, suffix: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a model is not a secret
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_model(model: Any, meta: dict[str, Any], path: str | Path) -> Path:
    """Write ``path`` (.keras) and its .json atomically; returns the model path."""
    path = Path(path)
    if path.suffix != ".keras":
        raise ModelError(f"model path must end in .keras: {path}")
    _atomic_write(path, lambda tmp: model.save(tmp), ".keras")

    def write_json(tmp: str) -> None:
        Path(tmp).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")

    _atomic_write(meta_path(path), write_json, ".json")
    return path


def update_metadata(path: str | Path, **sections: Any) -> None:
    """Merge sections (e.g. benchmark results) into a model's JSON, atomically."""
    meta = read_metadata(path)
    meta.update(sections)
    _atomic_write(
        meta_path(path), lambda tmp: Path(tmp).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n"), ".json"
    )


def read_metadata(path: str | Path) -> dict[str, Any]:
    """Parse and check a model's JSON without touching TensorFlow."""
    mp = meta_path(path)
    try:
        meta = json.loads(mp.read_text())
    except FileNotFoundError:
        raise ModelError(f"model metadata not found: {mp}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelError(f"model metadata {mp} is corrupt: {exc}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ModelError(f"{mp} is not a drs-prom model description")
    if meta.get("format_version") != FORMAT_VERSION:
        raise ModelError(
            f"{mp}: model format {meta.get('format_version')!r} is not supported (expected {FORMAT_VERSION})"
        )
    if meta.get("feature_schema_version") != FEATURE_SCHEMA_VERSION:
        raise ModelError(
            f"{mp}: model built for feature schema {meta.get('feature_schema_version')!r}, "
            f"this drs-prom uses {FEATURE_SCHEMA_VERSION}; retrain it"
        )
    policy = meta.get("policy")
    if policy not in POLICIES:
        raise ModelError(f"{mp}: unknown policy {policy!r}")
    if policy == "drs" and (
        meta.get("input_schema") != CANDIDATE_SCHEMA or meta.get("input_columns") != list(CANDIDATE_COLUMNS)
    ):
        raise ModelError(
            f"{mp}: model inputs (schema {meta.get('input_schema')!r}) differ from this drs-prom's (schema {CANDIDATE_SCHEMA}); retrain it"
        )
    head = meta.get("head")
    if head is not None:
        _check_head(mp, policy, head)
    if policy == "drs-original" and not isinstance(meta.get("n_nodes"), int):
        raise ModelError(f"{mp}: drs-original model without an integer n_nodes")
    try:
        Normalisation.model_validate(meta.get("normalisation"))
    except ValidationError:
        raise ModelError(f"{mp}: invalid normalisation section") from None
    return meta


def _check_head(mp: Path, policy: Any, head: Any) -> None:
    """A ``head`` section names how the network's outputs become a choice; refuse any this code cannot serve."""
    ok = policy == "drs" and isinstance(head, dict)
    margin = head.get("margin") if ok else None
    ok = ok and (margin is None or (isinstance(margin, (int, float)) and not isinstance(margin, bool)))
    kind = head_kind(head.get("kind")) if ok else None
    if kind is None or not kind.valid(head):
        known = " or ".join(repr(k) for k in _HEADS)
        raise ModelError(f"{mp}: invalid head section {repr(head)[:120]} (a {known} head this drs-prom can serve)")


def _io_shape(meta: dict[str, Any]) -> tuple[int, int]:
    """(inputs, outputs) the network of a checked model must have."""
    head = meta.get("head")
    kind = head_kind(head.get("kind")) if isinstance(head, dict) else None
    if kind is not None:
        return kind.io_shape(head)  # type: ignore[arg-type]
    if meta["policy"] == "drs":
        return len(CANDIDATE_COLUMNS), 1
    return drs_state_dim(meta["n_nodes"]), meta["n_nodes"]


@dataclass(frozen=True)
class LoadedModel:
    meta: dict[str, Any]
    layers: list[tuple[Any, Any, str]]
    path: Path

    @property
    def policy_name(self) -> str:
        return str(self.meta["policy"])

    @property
    def normalisation(self) -> Normalisation:
        return Normalisation.model_validate(self.meta["normalisation"])

    @property
    def head(self) -> dict[str, Any] | None:
        """The policy head (a registered ``Head``, e.g. drs_prom.agent.guided) or None for the plain per-node argmax."""
        head = self.meta.get("head")
        return head if isinstance(head, dict) else None

    @property
    def version(self) -> str:
        """File stem and creation time: what the journal and the metrics call this model."""
        return f"{self.path.stem}@{self.meta.get('created', '?')}"

    def policy(
        self, metric_window_seconds: float, version: str | None = None, name: str | None = None
    ) -> LearnedPolicy:
        """The model as a drs_prom.policies.contract.Policy (model_policy), its version ``version`` or the file's."""
        return model_policy(self.layers, self.meta, metric_window_seconds, version or self.version, name)


def model_policy(
    layers: Layers, meta: dict[str, Any], metric_window_seconds: float, version: str, name: str | None = None
) -> LearnedPolicy:
    """A network as a Policy (numpy forward pass) whose recent-bind memory spans ``metric_window_seconds`` (the
    settings' rate window), with its version and input scales set; ``meta``: the model file's metadata
    (``policy``, ``head``, ``normalisation``, ``n_nodes``); ``name``: instead of the policy's registry name
    (a comparison that runs several models side by side).

    A plain network reads load on the scales it was trained on (``normalisation``; None when the metadata
    has none: the cluster's); a head (``register_head``) reads loads relative to each node's capacity like
    the heuristics it builds on, so it takes the cluster's own scales (None).
    A new kind of model head registers a ``Head``; a new plain network is its kind in POLICIES and a branch here.
    """
    head = meta.get("head") if isinstance(meta.get("head"), dict) else None
    norm = Normalisation.model_validate(meta["normalisation"]) if meta.get("normalisation") else None
    named = {"version": version} | ({"name": name} if name else {})
    if head is not None:
        kind = head_kind(head.get("kind"))
        if kind is None:
            raise ModelError(f"model head {head.get('kind')!r} is not one this drs-prom can serve")
        return kind.policy(layers, head, metric_window_seconds=metric_window_seconds, **named)
    if meta["policy"] == "drs":
        return NodeAgentPolicy(layers, metric_window_seconds, normalisation=norm, **named)
    return DRSOriginalPolicy(layers, int(meta["n_nodes"]), normalisation=norm, **named)


def _keras_layers(path: Path) -> list[tuple[Any, Any, str]]:
    """Any other archive: through Keras (imports TensorFlow), in safe mode."""
    from drs_prom.agent.networks import configure_tf, export_dense

    configure_tf()
    import keras

    return export_dense(keras.saving.load_model(path, compile=False, safe_mode=True))


def load_model(path: str | Path | None = None) -> LoadedModel:
    """Load and check a model; every failure is a ModelError with one line."""
    path = Path(path) if path else default_model_path()
    meta = read_metadata(path)
    if not path.is_file():
        raise ModelError(f"model file not found: {path}")
    if not zipfile.is_zipfile(path):
        raise ModelError(f"model file {path} is corrupt (not a .keras archive)")
    try:
        # the networks drs-prom trains are plain Dense chains: read without importing TensorFlow
        layers = read_dense_chain(path) or _keras_layers(path)
    except MissingExtraError:
        raise MissingExtraError(
            train_missing_message(f"model file {path} is not a plain Dense chain; reading it")
        ) from None
    except Exception as exc:  # noqa: BLE001 - h5py/keras raise many types for damaged archives: all become ModelError
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"model file {path} could not be loaded: {first[:200]}") from None
    want_in, want_out = _io_shape(meta)
    if not layers or layers[0][0].shape[0] != want_in or layers[-1][0].shape[1] != want_out:
        raise ModelError(
            f"model file {path} has shape {layers[0][0].shape[0] if layers else '?'}->... which does not match its metadata"
        )
    return LoadedModel(meta=meta, layers=layers, path=path)
