"""Certificates and credentials for a throwaway control plane on 127.0.0.1.

A self-signed CA (2 days), the apiserver's serving certificate for the loopback and
in-cluster names, the service-account signing key pair and a static admin token in
``system:masters``; plus kubeconfig documents for a token user. Uses the ``openssl`` CLI.
"""

from __future__ import annotations

import base64
import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drs_prom.testbed.build import ControlPlaneError
from drs_prom.testbed.process import run

CLUSTER_NAME = "drs-test"


@dataclass(frozen=True)
class Pki:
    dir: Path
    ca_file: Path
    ca_pem: bytes
    admin_token: str
    controller_token: str = ""
    """Bearer token of ``system:kube-controller-manager`` (the identity RBAC's bootstrap roles expect)."""

    def file(self, name: str) -> Path:
        return self.dir / name


def _openssl(cwd: Path, *args: str) -> None:
    if shutil.which("openssl") is None:
        raise ControlPlaneError("openssl CLI not found (needed to generate test certificates)")
    proc = run(["openssl", *args], cwd=str(cwd))
    if proc.returncode != 0:
        raise ControlPlaneError(f"openssl {' '.join(args[:2])} failed: {proc.stderr.strip()}")


def make_pki(workdir: Path) -> Pki:
    """Create ``workdir/pki`` with ca.crt/key, apiserver.crt/key, sa.key/pub and tokens.csv (admin and controller manager)."""
    pki = workdir / "pki"
    pki.mkdir()

    def o(*args: str) -> None:
        _openssl(workdir, *args)

    o(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-keyout", str(pki / "ca.key"), "-out", str(pki / "ca.crt"), "-subj", "/CN=drs-test-ca",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
    )  # fmt: skip
    ext = pki / "serving.ext"
    ext.write_text(
        "basicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,"
        "DNS:kubernetes.default,DNS:kubernetes.default.svc\n"
    )
    o(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(pki / "apiserver.key"),
        "-out", str(pki / "apiserver.csr"), "-subj", "/CN=kube-apiserver",
    )  # fmt: skip
    o(
        "x509", "-req", "-in", str(pki / "apiserver.csr"), "-CA", str(pki / "ca.crt"),
        "-CAkey", str(pki / "ca.key"), "-CAcreateserial", "-days", "2",
        "-out", str(pki / "apiserver.crt"), "-extfile", str(ext),
    )  # fmt: skip
    o("genrsa", "-out", str(pki / "sa.key"), "2048")
    o("rsa", "-in", str(pki / "sa.key"), "-pubout", "-out", str(pki / "sa.pub"))
    token, controller = secrets.token_hex(24), secrets.token_hex(24)
    # token,user,uid,"group1,group2"
    (pki / "tokens.csv").write_text(
        f'{token},admin,admin-uid,"system:masters"\n{controller},system:kube-controller-manager,kcm-uid\n'
    )
    os.chmod(pki / "tokens.csv", 0o600)
    ca = pki / "ca.crt"
    return Pki(dir=pki, ca_file=ca, ca_pem=ca.read_bytes(), admin_token=token, controller_token=controller)


def kubeconfig(server: str, ca_pem: bytes, user: str, token: str, namespace: str | None = None) -> dict[str, Any]:
    """A kubeconfig document authenticating ``user`` with a bearer token."""
    ctx: dict[str, Any] = {"cluster": CLUSTER_NAME, "user": user}
    if namespace:
        ctx["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": CLUSTER_NAME,
                "cluster": {"server": server, "certificate-authority-data": base64.b64encode(ca_pem).decode()},
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": CLUSTER_NAME, "context": ctx}],
        "current-context": CLUSTER_NAME,
        "preferences": {},
    }
