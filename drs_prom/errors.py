"""The small error vocabulary caught at each loop boundary and turned into one log line."""

from __future__ import annotations


class DrsError(Exception):
    """Base class: every message is one line a user can act on."""


class ConfigError(DrsError):
    """The configuration file or a flag is invalid."""


class MetricsError(DrsError):
    """Prometheus is unreachable, answered an error, timed out, or returned unusable data."""


class ModelError(DrsError):
    """A model file is missing, corrupt, or was built for another feature schema."""
