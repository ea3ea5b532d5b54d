"""kube-controller-manager for the harness: the real controllers that turn API objects into status.

Only the controllers a test asks for run (by default PDB status, Deployments, ReplicaSets, garbage collection and
PersistentVolume binding); the node-lifecycle controller never does, since the harness's nodes have no
kubelet and it would taint and evict them. The manager authenticates as ``system:kube-controller-manager``
(a static token from the harness PKI) and runs each controller under its own ServiceAccount
(``--use-service-account-credentials``), so the bootstrap RBAC roles apply as on a real cluster. No cloud
provider, loopback only; whoever starts it stops it (``ControlPlane.stop`` stops every one it started).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import yaml

from drs_prom.testbed.pki import kubeconfig
from drs_prom.testbed.process import LOOPBACK, ManagedProcess, free_port

DEFAULT_CONTROLLERS = (
    "disruption-controller",
    "deployment-controller",
    "replicaset-controller",
    "garbage-collector-controller",
    "persistentvolume-binder-controller",
)
USER = "system:kube-controller-manager"


def controller_kubeconfig(path: Path, server: str, ca_pem: bytes, token: str) -> Path:
    """Write the manager's own kubeconfig (mode 0600) and return its path."""
    path.write_text(yaml.safe_dump(kubeconfig(server, ca_pem, USER, token)))
    os.chmod(path, 0o600)
    return path


def controller_manager_argv(
    bin_dir: Path, workdir: Path, kubeconfig_path: Path, port: int, controllers: Iterable[str]
) -> list[str]:
    """The command line: only ``controllers``, no leader election, serving on a loopback port."""
    names = list(controllers)
    if not names:
        raise ValueError("kube-controller-manager needs at least one controller")
    return [
        str(bin_dir / "kube-controller-manager"),
        f"--kubeconfig={kubeconfig_path}",
        f"--authentication-kubeconfig={kubeconfig_path}",
        f"--authorization-kubeconfig={kubeconfig_path}",
        f"--controllers={','.join(names)}",
        "--use-service-account-credentials=true",
        "--leader-elect=false",
        f"--bind-address={LOOPBACK}",
        f"--secure-port={port}",
        f"--cert-dir={workdir / 'certs'}",
        # PDB status and ReplicaSets react within a second instead of the defaults' batching.
        "--concurrent-replicaset-syncs=2",
        "--v=1",
    ]


def start_controller_manager(
    bin_dir: Path, workdir: Path, server: str, ca_pem: bytes, token: str, controllers: Iterable[str], index: int
) -> ManagedProcess:
    """Start kube-controller-manager (not yet waited for: the caller waits on ``/healthz`` at ``.port``)."""
    cdir = workdir / f"controller-manager-{index}"
    cdir.mkdir()
    path = controller_kubeconfig(cdir / "kubeconfig", server, ca_pem, token)
    port = free_port()
    argv = controller_manager_argv(bin_dir, cdir, path, port, controllers)
    proc = ManagedProcess(f"kube-controller-manager-{index}", argv, workdir / f"kube-controller-manager-{index}.log")
    proc.port = port
    return proc
