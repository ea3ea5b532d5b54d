"""Logging for the command line: quiet libraries by default, text or JSON lines on stderr.

TensorFlow prints C++ start-up lines (absl, oneDNN, CUDA probing, CPU feature guard) and
Keras/absl Python warnings the first time a model loads. To a newcomer they read like
errors, and in a cluster they are unparseable noise between the JSON log lines. The C++
side reads ``TF_CPP_MIN_LOG_LEVEL`` only once, at import, so ``quiet_libraries`` must run
before anything imports TensorFlow: the CLI calls it while parsing flags.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import warnings
from datetime import UTC, datetime
from typing import Any

LOG_FORMATS = ("text", "json")
_TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_NOISY_LOGGERS = ("absl", "tensorflow", "h5py", "matplotlib", "urllib3", "kubernetes.client.rest")
_NOISY_MODULES = r"(keras|tensorflow|absl|google\.protobuf|h5py|tf_keras)(\..*)?"
# Values we set ourselves, so --verbose can undo them without clobbering a user's own export.
_OURS: dict[str, str] = {}


def quiet_libraries(verbose: bool = False) -> None:
    """Silence TensorFlow/absl/Keras start-up output unless ``verbose``.

    A value the user exported (e.g. ``TF_CPP_MIN_LOG_LEVEL=0``) always wins: only values this
    function set are changed back by ``verbose``.
    """
    wanted = {"TF_CPP_MIN_LOG_LEVEL": "0" if verbose else "3", "KERAS_BACKEND": "tensorflow"}
    # Level 3 hides absl's C++ log lines, the oneDNN banner, the CPU-feature guard and the
    # CUDA-probe warnings (all INFO/WARNING) and keeps real C++ errors... only FATAL: the Python
    # side still raises for every failure, so nothing is lost.
    for key, value in wanted.items():
        if key not in os.environ or _OURS.get(key) == os.environ[key]:
            os.environ[key] = value
            _OURS[key] = value
    if verbose:
        warnings.filterwarnings("default", module=_NOISY_MODULES)
        for name in _NOISY_LOGGERS:
            logging.getLogger(name).setLevel(logging.NOTSET)
        return
    warnings.filterwarnings("ignore", module=_NOISY_MODULES)
    for name in _NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, RFC 3339), level, logger, msg, and the traceback if any.

    Log shippers (Loki, Fluent Bit, Cloud Logging) parse these fields without a regex.
    """

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure_logging(log_format: str = "text", verbose: bool = False) -> None:
    """Root logger on stderr in ``log_format``; DEBUG when ``verbose``, else INFO."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, got {log_format!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(_TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    quiet_libraries(verbose)
