"""Compatibility re-export: the control-plane harness now lives in ``drs_prom.testbed``
(build, process, pki, controlplane), where ``drs-prom testbed`` uses it too."""

from drs_prom.testbed.build import (
    ControlPlaneError,
    build_binaries,
    default_cache_dir,
    find_bin_dir,
    k8s_version,
)
from drs_prom.testbed.controlplane import ControlPlane, can_i, kubectl
from drs_prom.testbed.process import LOOPBACK, ManagedProcess, free_port

__all__ = [
    "LOOPBACK",
    "ControlPlane",
    "ControlPlaneError",
    "ManagedProcess",
    "build_binaries",
    "can_i",
    "default_cache_dir",
    "find_bin_dir",
    "free_port",
    "k8s_version",
    "kubectl",
]
