"""The secure side of the HTTP port: TLS contexts and delegated authentication/authorization.

kube-scheduler serves /metrics on a TLS port and asks the apiserver who a bearer token
belongs to (TokenReview) and whether that user may ``get`` the non-resource URL
``/metrics`` (SubjectAccessReview). drs-prom does the same, so a Prometheus with a
ServiceAccount bound to a ClusterRole like ``system:monitoring`` can scrape it and nobody
else can. Both reviews are cached for ``auth_cache_ttl_seconds`` per token (hashed), so a
scrape costs the apiserver nothing most of the time; failures to reach the apiserver are
not cached.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import logging
import os
import ssl
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from drs_prom.config import ServingSettings
from drs_prom.errors import ConfigError
from drs_prom.types import KubeClient

log = logging.getLogger(__name__)

_CACHE_MAX = 1024  # distinct tokens remembered; oldest dropped first


def self_signed_certificate(directory: Path, hosts: tuple[str, ...] = ("localhost", "127.0.0.1")) -> tuple[Path, Path]:
    """A fresh EC P-256 key and a one-year self-signed certificate for ``hosts``, written to
    ``directory`` (key mode 0600). What kube-scheduler does when no certificate is given."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"drs-prom@{int(time.time())}")])
    sans: list[x509.GeneralName] = []
    for h in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / "drs-prom.crt", directory / "drs-prom.key"
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


def tls_context(
    serving: ServingSettings, hosts: tuple[str, ...] = ("localhost", "127.0.0.1")
) -> tuple[ssl.SSLContext | None, Path | None]:
    """The server-side SSLContext the settings ask for and its certificate file
    ((None, None): plain HTTP); ConfigError if the certificate or key is unusable."""
    if serving.tls == "off":
        return None, None
    if serving.tls == "self-signed":
        cert, key = self_signed_certificate(Path(tempfile.mkdtemp(prefix="drs-prom-tls-")), hosts)
        log.info("serving TLS with a self-signed certificate %s", cert)
    else:
        cert, key = Path(serving.cert_file), Path(serving.key_file)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot use TLS certificate {cert} / key {key}: {exc}") from None
    return ctx, cert


@dataclass(frozen=True)
class Verdict:
    """HTTP status for a request to a guarded path: 200 allowed, 401 who are you, 403 not you,
    503 the apiserver could not be asked (not cached)."""

    status: int
    reason: str


class DelegatedAuth:
    """TokenReview + SubjectAccessReview for ``verb`` on a non-resource ``path``, cached per token."""

    def __init__(self, api_client: KubeClient, ttl_seconds: float = 10.0, verb: str = "get") -> None:
        from kubernetes import client

        self.authn = client.AuthenticationV1Api(api_client)
        self.authz = client.AuthorizationV1Api(api_client)
        self.ttl = ttl_seconds
        self.verb = verb
        self._cache: dict[tuple[str, str], tuple[float, Verdict]] = {}
        self._lock = threading.Lock()
        self.reviews = 0  # apiserver round trips made (each token+path at most once per ttl)

    def check(self, authorization: str | None, path: str) -> Verdict:
        if not authorization or not authorization.startswith("Bearer ") or not authorization[7:].strip():
            return Verdict(401, "Unauthorized: a bearer token is required")
        token = authorization[7:].strip()
        key = (hashlib.sha256(token.encode()).hexdigest(), path)
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
            if hit and now - hit[0] < self.ttl:
                return hit[1]
        verdict = self._review(token, path)
        if verdict.status != 503:
            with self._lock:
                if len(self._cache) >= _CACHE_MAX:
                    self._cache.pop(next(iter(self._cache)))
                self._cache[key] = (now, verdict)
        return verdict

    def _review(self, token: str, path: str) -> Verdict:
        from kubernetes import client

        self.reviews += 1
        try:
            tr = self.authn.create_token_review(client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token))).status
            if not tr or not tr.authenticated or not tr.user:
                return Verdict(401, "Unauthorized: the token was not accepted")
            user = tr.user
            sar = self.authz.create_subject_access_review(
                client.V1SubjectAccessReview(
                    spec=client.V1SubjectAccessReviewSpec(
                        user=user.username,
                        uid=user.uid,
                        groups=user.groups,
                        extra=user.extra,
                        non_resource_attributes=client.V1NonResourceAttributes(path=path, verb=self.verb),
                    )
                )
            ).status
        except Exception as exc:  # noqa: BLE001 - ApiException, connection errors: say so, do not cache
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            log.warning("delegated auth for %s unavailable: %s", path, first[:200])
            return Verdict(503, "authorization is unavailable")
        if sar and sar.allowed:
            return Verdict(200, "ok")
        return Verdict(403, f'Forbidden: user "{user.username}" cannot {self.verb} path "{path}"')
