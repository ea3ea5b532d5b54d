"""A real Kubernetes control plane (etcd + kube-apiserver [+ kube-scheduler]) on loopback.

Binaries come from ``tests/k8s/build.sh`` (kube-apiserver, kube-scheduler, kubectl and
etcd built from the versions pinned in ``tests/k8s/go.mod``). Everything listens on
127.0.0.1 only, on free ports, with state in a temporary directory that ``stop()``
removes. There is no kubelet and no kube-controller-manager: Nodes are plain API
objects (``create_fake_node``), bound pods stay Pending, namespaces never finish
terminating and no ``default`` ServiceAccount is auto-created (the ServiceAccount
admission plugin is disabled by default so pods can be created without one).

Typical use::

    cp = ControlPlane(bin_dir)          # or ControlPlane() to locate build.sh's output
    cp.start()
    try:
        cp.create_fake_node("n1", cpu="4", memory="8Gi")
        sched = cp.start_kube_scheduler(SCHED_CONFIG_YAML)
        ...
    finally:
        cp.stop()

Only the standard library, ``openssl`` (CLI, for certificates), PyYAML and the
``kubernetes`` python client are used.
"""

from __future__ import annotations

import atexit
import base64
import datetime as _dt
import json
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
BUILD_SH = HERE / "build.sh"
LOOPBACK = "127.0.0.1"

__all__ = [
    "ControlPlane",
    "ControlPlaneError",
    "ManagedProcess",
    "build_binaries",
    "can_i",
    "find_bin_dir",
    "free_port",
    "k8s_version",
    "kubectl",
]


class ControlPlaneError(RuntimeError):
    """Raised when a control-plane process fails to start or becomes unhealthy."""


# ---------------------------------------------------------------------------
# binaries
# ---------------------------------------------------------------------------


def k8s_version() -> str:
    """The ``k8s.io/kubernetes`` version pinned in tests/k8s/go.mod (e.g. ``v1.35.4``)."""
    text = (HERE / "go.mod").read_text()
    m = re.search(r"^require\s+k8s\.io/kubernetes\s+(v\S+)", text, re.MULTILINE) or re.search(
        r"^\s*k8s\.io/kubernetes\s+(v\S+)", text, re.MULTILINE
    )
    if not m:
        raise ControlPlaneError("cannot find k8s.io/kubernetes version in tests/k8s/go.mod")
    return m.group(1)


def default_cache_dir() -> Path:
    env = os.environ.get("DRS_K8S_CACHE")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "drs-prom" / f"k8s-{k8s_version()}"


def find_bin_dir() -> Path:
    """Where build.sh puts the binaries ($DRS_K8S_BIN overrides). Does not build."""
    env = os.environ.get("DRS_K8S_BIN")
    return Path(env) if env else default_cache_dir() / "bin"


def build_binaries(timeout: float = 3600.0, log_path: str | os.PathLike | None = None) -> Path:
    """Run build.sh (fast no-op when already built) and return the bin dir.

    Raises ControlPlaneError with a one-line reason on failure.
    """
    log_file = Path(log_path) if log_path else Path(tempfile.gettempdir()) / "drs-prom-k8s-build.log"
    try:
        with open(log_file, "wb") as err:
            proc = subprocess.run(
                ["bash", str(BUILD_SH)],
                stdout=subprocess.PIPE,
                stderr=err,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
                cwd=str(HERE),
            )
    except subprocess.TimeoutExpired:
        raise ControlPlaneError(f"build.sh timed out after {timeout:.0f}s (log: {log_file})") from None
    except OSError as e:
        raise ControlPlaneError(f"cannot run build.sh: {e}") from None
    if proc.returncode != 0:
        tail = [ln for ln in log_file.read_text(errors="replace").splitlines() if ln.strip()]
        why = next((ln for ln in reversed(tail) if "ERROR" in ln), tail[-1] if tail else "no output")
        raise ControlPlaneError(f"build.sh failed rc={proc.returncode}: {why.strip()} (log: {log_file})")
    lines = [ln for ln in proc.stdout.decode(errors="replace").splitlines() if ln.strip()]
    if not lines:
        raise ControlPlaneError(f"build.sh printed no bin dir (log: {log_file})")
    bin_dir = Path(lines[-1].strip())
    missing = [b for b in ("kube-apiserver", "kube-scheduler", "kubectl", "etcd") if not (bin_dir / b).exists()]
    if missing:
        raise ControlPlaneError(f"build.sh succeeded but {bin_dir} lacks {', '.join(missing)}")
    return bin_dir


# ---------------------------------------------------------------------------
# small utilities
# ---------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def _tail(path: Path, n: int = 40) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-n:])


def _run(cmd: Sequence[str], timeout: float = 60.0, **kw: Any) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, check=False, **kw)


def _die_with_parent() -> None:  # runs in the child between fork and exec
    """Linux: have the kernel SIGTERM the child when the test process dies, even by
    SIGKILL (a backstop for atexit, which does not run then)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except Exception:
        pass


class ManagedProcess:
    """A child process whose output goes to a log file; stop() is bounded."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None):
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self.popen = subprocess.Popen(
            self.argv,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env) if env is not None else None,
            start_new_session=True,  # our signals go to it alone, not to pytest
            preexec_fn=_die_with_parent if os.name == "posix" and os.uname().sysname == "Linux" else None,
        )
        self.port: int | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, n: int = 40) -> str:
        self._log.flush()
        return _tail(self.log_path, n)

    def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM, wait up to ``grace`` seconds, then SIGKILL (bounded)."""
        if self.popen.poll() is None:
            try:
                self.popen.send_signal(signal.SIGTERM)
                self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                try:
                    self.popen.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            except ProcessLookupError:
                pass
        try:
            self._log.close()
        except Exception:
            pass
        return self.popen.returncode

    def __repr__(self) -> str:
        return f"<ManagedProcess {self.name} pid={self.pid} port={self.port} alive={self.alive()}>"


def _kubeconfig(server: str, ca_pem: bytes, user: str, token: str, namespace: str | None = None) -> dict:
    ctx: dict[str, Any] = {"cluster": "drs-test", "user": user}
    if namespace:
        ctx["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "drs-test",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                },
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "drs-test", "context": ctx}],
        "current-context": "drs-test",
        "preferences": {},
    }


# ---------------------------------------------------------------------------
# kubectl helpers (module-level so other tests can use them directly)
# ---------------------------------------------------------------------------


def kubectl(
    *args: str,
    kubeconfig: str | os.PathLike,
    input: str | None = None,
    timeout: float = 60.0,
    check: bool = False,
    bin_dir: str | os.PathLike | None = None,
) -> subprocess.CompletedProcess:
    """Run the built kubectl with ``--kubeconfig``; returns CompletedProcess (text mode)."""
    exe = Path(bin_dir) / "kubectl" if bin_dir else find_bin_dir() / "kubectl"
    if not exe.exists():
        raise ControlPlaneError(f"kubectl not found at {exe}; run tests/k8s/build.sh")
    cmd = [str(exe), f"--kubeconfig={os.fspath(kubeconfig)}", *args]
    proc = subprocess.run(
        cmd,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "KUBECONFIG": os.fspath(kubeconfig)},
    )
    if check and proc.returncode != 0:
        raise ControlPlaneError(
            f"kubectl {' '.join(args)} failed rc={proc.returncode}: {proc.stderr.strip() or proc.stdout.strip()}"
        )
    return proc


def can_i(
    verb: str,
    resource: str,
    kubeconfig: str | os.PathLike,
    namespace: str | None = None,
    subresource: str | None = None,
    bin_dir: str | os.PathLike | None = None,
) -> bool:
    """``kubectl auth can-i VERB RESOURCE [-n NS] [--subresource=SUB]`` as a bool.

    ``resource`` may be ``pods``, ``pods/binding``, ``deployments.apps`` or
    ``nodes/status``. Raises ControlPlaneError when kubectl gives neither yes nor no
    (e.g. the credentials are rejected).
    """
    args = ["auth", "can-i", verb, resource]
    if namespace is not None:
        args += ["-n", namespace]
    if subresource:
        args.append(f"--subresource={subresource}")
    proc = kubectl(*args, kubeconfig=kubeconfig, bin_dir=bin_dir)
    answer = proc.stdout.strip().splitlines()[-1].strip().lower() if proc.stdout.strip() else ""
    if answer == "yes" and proc.returncode == 0:
        return True
    if answer == "no":
        return False
    raise ControlPlaneError(
        f"kubectl auth can-i {verb} {resource} gave rc={proc.returncode} "
        f"stdout={proc.stdout.strip()!r} stderr={proc.stderr.strip()!r}"
    )


# ---------------------------------------------------------------------------
# the control plane
# ---------------------------------------------------------------------------

_LIVE: weakref.WeakSet[ControlPlane] = weakref.WeakSet()


def _stop_all_at_exit() -> None:
    for cp in list(_LIVE):
        try:
            cp.stop()
        except Exception:
            pass


atexit.register(_stop_all_at_exit)


class ControlPlane:
    """etcd + kube-apiserver on 127.0.0.1 with RBAC, plus optional kube-schedulers.

    Attributes after ``start()``: ``server`` (https URL), ``admin_kubeconfig`` (path),
    ``admin_token``, ``ca_file``, ``workdir``, ``etcd``/``apiserver`` (ManagedProcess),
    ``service_account_issuer``.
    """

    SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"

    def __init__(
        self,
        bin_dir: str | os.PathLike | None = None,
        *,
        workdir_parent: str | os.PathLike | None = None,
        startup_timeout: float = 90.0,
        authorization_mode: str = "Node,RBAC",
        disable_admission_plugins: Iterable[str] = ("ServiceAccount",),
        extra_apiserver_args: Iterable[str] = (),
        keep_workdir: bool = False,
    ):
        self.bin_dir = Path(bin_dir) if bin_dir else find_bin_dir()
        for b in ("etcd", "kube-apiserver", "kube-scheduler", "kubectl"):
            if not (self.bin_dir / b).exists():
                raise ControlPlaneError(f"{b} not found in {self.bin_dir}; run tests/k8s/build.sh")
        self.startup_timeout = startup_timeout
        self.authorization_mode = authorization_mode
        self.disable_admission_plugins = list(disable_admission_plugins)
        self.extra_apiserver_args = list(extra_apiserver_args)
        self.keep_workdir = keep_workdir or os.environ.get("DRS_K8S_KEEP") == "1"
        self._workdir_parent = workdir_parent
        self.workdir: Path | None = None
        self.etcd: ManagedProcess | None = None
        self.apiserver: ManagedProcess | None = None
        self.schedulers: list[ManagedProcess] = []
        self.server = ""
        self.admin_token = ""
        self.admin_kubeconfig: Path | None = None
        self.ca_file: Path | None = None
        self.service_account_issuer = ""
        self._ca_pem = b""
        self._lock = threading.Lock()
        self._api_client = None

    # -- context manager ---------------------------------------------------
    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> ControlPlane:
        if self.apiserver is not None:
            return self
        self.workdir = Path(tempfile.mkdtemp(prefix="drs-k8s-", dir=self._workdir_parent))
        _LIVE.add(self)
        try:
            self._make_certs()
            last: Exception | None = None
            for _attempt in range(3):  # retry only on port races
                try:
                    self._start_etcd()
                    self._start_apiserver()
                    last = None
                    break
                except ControlPlaneError as e:
                    last = e
                    if "address already in use" not in str(e):
                        raise
                    self._stop_processes()
            if last:
                raise last
            self._write_admin_kubeconfig()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every process (schedulers, apiserver, etcd) and remove the temp dir."""
        with self._lock:
            self._stop_processes()
            if self._api_client is not None:
                try:
                    self._api_client.close()
                except Exception:
                    pass
                self._api_client = None
            if self.workdir and self.workdir.exists() and not self.keep_workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)
            _LIVE.discard(self)

    def _stop_processes(self) -> None:
        for p in reversed(self.schedulers):
            p.stop()
        self.schedulers.clear()
        if self.apiserver:
            self.apiserver.stop(grace=15)
            self.apiserver = None
        if self.etcd:
            self.etcd.stop()
            self.etcd = None

    # -- certificates ------------------------------------------------------
    def _openssl(self, *args: str) -> None:
        if shutil.which("openssl") is None:
            raise ControlPlaneError("openssl CLI not found (needed to generate test certificates)")
        proc = _run(["openssl", *args], cwd=str(self.workdir))
        if proc.returncode != 0:
            raise ControlPlaneError(f"openssl {' '.join(args[:2])} failed: {proc.stderr.strip()}")

    def _make_certs(self) -> None:
        assert self.workdir
        pki = self.workdir / "pki"
        pki.mkdir()
        o = self._openssl
        o(
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-keyout",
            str(pki / "ca.key"),
            "-out",
            str(pki / "ca.crt"),
            "-subj",
            "/CN=drs-test-ca",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        )
        ext = pki / "serving.ext"
        ext.write_text(
            "basicConstraints=CA:FALSE\n"
            "keyUsage=critical,digitalSignature,keyEncipherment\n"
            "extendedKeyUsage=serverAuth\n"
            "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,"
            "DNS:kubernetes.default,DNS:kubernetes.default.svc\n"
        )
        o(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(pki / "apiserver.key"),
            "-out",
            str(pki / "apiserver.csr"),
            "-subj",
            "/CN=kube-apiserver",
        )
        o(
            "x509",
            "-req",
            "-in",
            str(pki / "apiserver.csr"),
            "-CA",
            str(pki / "ca.crt"),
            "-CAkey",
            str(pki / "ca.key"),
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            str(pki / "apiserver.crt"),
            "-extfile",
            str(ext),
        )
        o("genrsa", "-out", str(pki / "sa.key"), "2048")
        o("rsa", "-in", str(pki / "sa.key"), "-pubout", "-out", str(pki / "sa.pub"))
        self.ca_file = pki / "ca.crt"
        self._ca_pem = self.ca_file.read_bytes()
        self.admin_token = secrets.token_hex(24)
        # token,user,uid,"group1,group2"
        (pki / "tokens.csv").write_text(f'{self.admin_token},admin,admin-uid,"system:masters"\n')
        os.chmod(pki / "tokens.csv", 0o600)

    # -- etcd --------------------------------------------------------------
    def _etcd_version(self) -> tuple[int, int]:
        proc = _run([str(self.bin_dir / "etcd"), "--version"], timeout=20)
        m = re.search(r"etcd Version:\s*(\d+)\.(\d+)", proc.stdout)
        return (int(m.group(1)), int(m.group(2))) if m else (0, 0)

    def _start_etcd(self) -> None:
        assert self.workdir
        data = self.workdir / "etcd-data"
        shutil.rmtree(data, ignore_errors=True)
        client, peer = free_port(), free_port()
        argv = [
            str(self.bin_dir / "etcd"),
            "--name=drs-test",
            f"--data-dir={data}",
            f"--listen-client-urls=http://{LOOPBACK}:{client}",
            f"--advertise-client-urls=http://{LOOPBACK}:{client}",
            f"--listen-peer-urls=http://{LOOPBACK}:{peer}",
            f"--initial-advertise-peer-urls=http://{LOOPBACK}:{peer}",
            f"--initial-cluster=drs-test=http://{LOOPBACK}:{peer}",
            "--initial-cluster-state=new",
            "--log-level=warn",
        ]
        if self._etcd_version() >= (3, 5):
            argv.append("--unsafe-no-fsync")
        env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD")}
        self.etcd = ManagedProcess("etcd", argv, self.workdir / "etcd.log", env=env)
        self.etcd.port = client
        self._wait_http(self.etcd, f"http://{LOOPBACK}:{client}/health", ok=lambda b: b'"health":"true"' in b)

    # -- kube-apiserver ----------------------------------------------------
    def _start_apiserver(self) -> None:
        assert self.workdir and self.etcd
        pki = self.workdir / "pki"
        port = free_port()
        self.server = f"https://{LOOPBACK}:{port}"
        self.service_account_issuer = self.server
        argv = [
            str(self.bin_dir / "kube-apiserver"),
            f"--etcd-servers=http://{LOOPBACK}:{self.etcd.port}",
            f"--etcd-prefix=/registry-{secrets.token_hex(4)}",
            f"--bind-address={LOOPBACK}",
            f"--advertise-address={LOOPBACK}",
            f"--secure-port={port}",
            f"--cert-dir={self.workdir / 'apiserver-certs'}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            # front-proxy settings, published in kube-system/extension-apiserver-authentication
            # for delegated authn (kube-scheduler); nothing here uses the front proxy.
            f"--requestheader-client-ca-file={pki / 'ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--token-auth-file={pki / 'tokens.csv'}",
            f"--service-account-issuer={self.service_account_issuer}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--authorization-mode={self.authorization_mode}",
            f"--service-cluster-ip-range={self.SERVICE_CLUSTER_IP_RANGE}",
            "--allow-privileged=true",
            "--enable-priority-and-fairness=false",
            "--profiling=false",
            "--endpoint-reconciler-type=none",
            "--v=1",
        ]
        if self.disable_admission_plugins:
            argv.append(f"--disable-admission-plugins={','.join(self.disable_admission_plugins)}")
        argv += self.extra_apiserver_args
        self.apiserver = ManagedProcess("kube-apiserver", argv, self.workdir / "kube-apiserver.log")
        self.apiserver.port = port
        self._wait_http(
            self.apiserver,
            f"{self.server}/readyz",
            ok=lambda b: b.strip() == b"ok",
            token=self.admin_token,
            cafile=self.ca_file,
        )

    # -- waiting -----------------------------------------------------------
    def _wait_http(
        self,
        proc: ManagedProcess,
        url: str,
        ok,
        token: str | None = None,
        cafile: Path | None = None,
        insecure: bool = False,
        timeout: float | None = None,
    ) -> None:
        timeout = self.startup_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        ctx = None
        if url.startswith("https"):
            if insecure:
                ctx = ssl.create_default_context()
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            else:
                ctx = ssl.create_default_context(cafile=str(cafile) if cafile else None)
        last = ""
        while time.monotonic() < deadline:
            if not proc.alive():
                raise ControlPlaneError(
                    f"{proc.name} exited with rc={proc.popen.returncode} during startup "
                    f"(log {proc.log_path}):\n{proc.log_tail()}"
                )
            req = urllib.request.Request(url)
            if token:
                req.add_header("Authorization", f"Bearer {token}")
            try:
                with urllib.request.urlopen(req, timeout=5, context=ctx) as resp:
                    body = resp.read()
                    if ok(body):
                        return
                    last = f"HTTP {resp.status}: {body[:200]!r}"
            except urllib.error.HTTPError as e:
                last = f"HTTP {e.code}: {e.read()[:300]!r}"
            except Exception as e:  # connection refused, TLS not up yet, ...
                last = repr(e)
            time.sleep(0.3)
        raise ControlPlaneError(
            f"{proc.name} not ready at {url} within {timeout:.0f}s (last: {last}) "
            f"(log {proc.log_path}):\n{proc.log_tail()}"
        )

    # -- kubeconfigs & clients ---------------------------------------------
    def _write_admin_kubeconfig(self) -> None:
        assert self.workdir
        self.admin_kubeconfig = self.workdir / "admin.kubeconfig"
        cfg = _kubeconfig(self.server, self._ca_pem, "admin", self.admin_token)
        self.admin_kubeconfig.write_text(yaml.safe_dump(cfg))
        os.chmod(self.admin_kubeconfig, 0o600)

    def api_client(self, kubeconfig: str | os.PathLike | None = None):
        """A new ``kubernetes.client.ApiClient`` for ``kubeconfig`` (admin by default)."""
        from kubernetes import config as kconfig

        return kconfig.new_client_from_config(config_file=os.fspath(kubeconfig or self.admin_kubeconfig))

    @property
    def admin_client(self):
        """A shared admin ApiClient (closed by stop())."""
        if self._api_client is None:
            self._api_client = self.api_client()
        return self._api_client

    def create_namespace(self, name: str, labels: Mapping[str, str] | None = None) -> None:
        """Create a namespace (no error if it exists)."""
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        v1 = client.CoreV1Api(self.admin_client)
        try:
            v1.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=dict(labels or {}))))
        except ApiException as e:
            if e.status != 409:
                raise

    def make_sa_kubeconfig(self, namespace: str, sa_name: str, expiration_seconds: int = 3600) -> Path:
        """Ensure namespace + ServiceAccount exist, mint a token with the TokenRequest API
        and write a kubeconfig that authenticates as that ServiceAccount. Returns its path."""
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        assert self.workdir
        self.create_namespace(namespace)
        v1 = client.CoreV1Api(self.admin_client)
        try:
            v1.create_namespaced_service_account(
                namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=sa_name))
            )
        except ApiException as e:
            if e.status != 409:
                raise
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": int(expiration_seconds)},
        }
        # _preload_content=False: read the raw JSON (avoids client-model quirks).
        resp = v1.create_namespaced_service_account_token(sa_name, namespace, body, _preload_content=False)
        token = json.loads(resp.data)["status"]["token"]
        path = self.workdir / f"sa-{namespace}-{sa_name}.kubeconfig"
        user = f"system:serviceaccount:{namespace}:{sa_name}"
        path.write_text(yaml.safe_dump(_kubeconfig(self.server, self._ca_pem, user, token, namespace)))
        os.chmod(path, 0o600)
        return path

    # -- nodes -------------------------------------------------------------
    def create_fake_node(
        self,
        name: str,
        cpu: str = "4",
        memory: str = "8Gi",
        pods: str = "110",
        labels: Mapping[str, str] | None = None,
        taints: Sequence[Mapping[str, Any]] | None = None,
        unschedulable: bool = False,
        extra_resources: Mapping[str, str] | None = None,
    ) -> dict:
        """Create a KWOK-style Node (no kubelet) and patch its status: capacity ==
        allocatable, a Ready=True condition and the usual pressure conditions False.

        ``taints`` are dicts like ``{"key": "k", "value": "v", "effect": "NoSchedule"}``.
        Returns the node as a dict (API JSON)."""
        from kubernetes import client

        v1 = client.CoreV1Api(self.admin_client)
        all_labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
            **dict(labels or {}),
        }
        spec: dict[str, Any] = {"unschedulable": bool(unschedulable)}
        if taints:
            spec["taints"] = [dict(t) for t in taints]
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": all_labels,
                "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            },
            "spec": spec,
        }
        v1.create_node(node)
        resources = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "100Gi"}
        resources.update(extra_resources or {})
        now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

        def cond(t: str, status: str, reason: str) -> dict:
            return {
                "type": t,
                "status": status,
                "reason": reason,
                "message": reason,
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }

        status = {
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [
                    cond("Ready", "True", "KubeletReady"),
                    cond("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                    cond("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                    cond("PIDPressure", "False", "KubeletHasSufficientPID"),
                ],
                "addresses": [{"type": "InternalIP", "address": LOOPBACK}, {"type": "Hostname", "address": name}],
                "nodeInfo": {
                    "architecture": "amd64",
                    "operatingSystem": "linux",
                    "kubeletVersion": "fake",
                    "kubeProxyVersion": "fake",
                    "containerRuntimeVersion": "fake://0",
                    "osImage": "fake",
                    "kernelVersion": "fake",
                    "machineID": name,
                    "systemUUID": name,
                    "bootID": name,
                },
                "phase": "Running",
            }
        }
        v1.patch_node_status(name, status, _preload_content=False)
        # The TaintNodesByCondition admission plugin adds node.kubernetes.io/not-ready
        # to every new Node; the node lifecycle controller (absent here) would drop it
        # once Ready. Put back exactly the requested taints.
        resp = v1.patch_node(name, {"spec": {"taints": spec.get("taints")}}, _preload_content=False)
        return json.loads(resp.data)

    # -- kube-scheduler ----------------------------------------------------
    def start_kube_scheduler(
        self,
        config_yaml: str,
        extra_args: Iterable[str] = (),
        wait_ready: bool = True,
        timeout: float | None = None,
    ) -> ManagedProcess:
        """Start the real kube-scheduler with a KubeSchedulerConfiguration (v1) YAML.

        ``clientConnection.kubeconfig`` defaults to the admin kubeconfig and
        ``leaderElection.leaderElect`` to false when the YAML does not set them. The
        secure port is a free port on 127.0.0.1 (``handle.port``); waits for /healthz.
        The returned handle is stopped by ``stop()`` (or call ``handle.stop()``)."""
        assert self.workdir and self.admin_kubeconfig
        cfg = yaml.safe_load(config_yaml) or {}
        if not isinstance(cfg, dict):
            raise ControlPlaneError("config_yaml must be a KubeSchedulerConfiguration mapping")
        cfg.setdefault("apiVersion", "kubescheduler.config.k8s.io/v1")
        cfg.setdefault("kind", "KubeSchedulerConfiguration")
        cc = cfg.setdefault("clientConnection", {}) or {}
        cfg["clientConnection"] = cc
        cc.setdefault("kubeconfig", str(self.admin_kubeconfig))
        le = cfg.setdefault("leaderElection", {}) or {}
        cfg["leaderElection"] = le
        le.setdefault("leaderElect", False)
        idx = len(self.schedulers)
        sdir = self.workdir / f"scheduler-{idx}"
        sdir.mkdir()
        cfg_path = sdir / "config.yaml"
        cfg_path.write_text(yaml.safe_dump(cfg))
        port = free_port()
        argv = [
            str(self.bin_dir / "kube-scheduler"),
            f"--config={cfg_path}",
            f"--bind-address={LOOPBACK}",
            f"--secure-port={port}",
            f"--cert-dir={sdir / 'certs'}",
            f"--authentication-kubeconfig={self.admin_kubeconfig}",
            f"--authorization-kubeconfig={self.admin_kubeconfig}",
            "--v=2",
            *extra_args,
        ]
        proc = ManagedProcess(f"kube-scheduler-{idx}", argv, self.workdir / f"kube-scheduler-{idx}.log")
        proc.port = port
        self.schedulers.append(proc)
        if wait_ready:
            try:
                self._wait_http(
                    proc,
                    f"https://{LOOPBACK}:{port}/healthz",
                    ok=lambda b: b.strip() == b"ok",
                    insecure=True,
                    timeout=timeout,
                )
            except BaseException:
                proc.stop()
                self.schedulers.remove(proc)
                raise
        return proc

    # -- convenience -------------------------------------------------------
    def kubectl(
        self, *args: str, kubeconfig: str | os.PathLike | None = None, **kw: Any
    ) -> subprocess.CompletedProcess:
        return kubectl(*args, kubeconfig=kubeconfig or self.admin_kubeconfig, bin_dir=self.bin_dir, **kw)

    def can_i(
        self,
        verb: str,
        resource: str,
        kubeconfig: str | os.PathLike | None = None,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> bool:
        return can_i(
            verb,
            resource,
            kubeconfig or self.admin_kubeconfig,
            namespace=namespace,
            subresource=subresource,
            bin_dir=self.bin_dir,
        )

    def logs(self) -> dict[str, Path]:
        """Log files of the processes started so far, by name."""
        out = {}
        for p in [self.etcd, self.apiserver, *self.schedulers]:
            if p is not None:
                out[p.name] = p.log_path
        return out
