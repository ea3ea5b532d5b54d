"""The small error vocabulary caught at each loop boundary and turned into one log line."""

from __future__ import annotations


class DrsError(Exception):
    """Base class: every message is one line a user can act on."""


class ConfigError(DrsError):
    """The configuration file or a flag is invalid."""


class MetricsError(DrsError):
    """Prometheus is unreachable, answered an error, timed out, or returned unusable data.

    ``kind`` says which, for counting (drs_prometheus_errors_by_kind_total): timeout,
    unreachable, http_error, malformed (not Prometheus' JSON), unusable (JSON of the wrong
    shape), non_finite (NaN/Inf samples), or other.
    """

    def __init__(self, message: str, kind: str = "other") -> None:
        super().__init__(message)
        self.kind = kind


class ModelError(DrsError):
    """A model file is missing, corrupt, or was built for another feature schema."""


class MissingExtraError(DrsError):
    """A command needs an optional dependency group that is not installed (e.g. TensorFlow for training)."""
