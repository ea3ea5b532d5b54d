"""A real Kubernetes control plane (etcd + kube-apiserver [+ kube-scheduler, kube-controller-manager]) on loopback.

Over 400 lines because it holds the control plane's whole life (start, restart on the same etcd, fake nodes, tokens, kubectl); PKI, processes and builds are already apart.

Binaries come from the packaged recipe ``k8s_recipe/build.sh`` (see build.py). Everything listens on 127.0.0.1
only, on free ports, with state in a temporary directory that ``stop()`` removes. There is
no kubelet, and kube-controller-manager runs only when a test starts it
(``start_kube_controller_manager``, with the controllers it names): Nodes are plain API objects
(``create_fake_node``), bound pods stay Pending unless something (the testbed's twin
kubelet) updates them, namespaces never finish terminating and no ``default``
ServiceAccount is auto-created (the ServiceAccount admission plugin is disabled by default
so pods can be created without one).

Typical use::

    with ControlPlane() as cp:
        cp.create_fake_node("n1", cpu="4", memory="8Gi")
        sched = cp.start_kube_scheduler(SCHED_CONFIG_YAML)
        ...
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from drs_prom.scheduler.watch.kube import kube_timestamp
from drs_prom.scheduler.write.kube_response import drained
from drs_prom.testbed.build import ControlPlaneError, find_bin_dir, how_to_build, missing_binaries
from drs_prom.testbed.controllers import DEFAULT_CONTROLLERS, start_controller_manager
from drs_prom.testbed.pki import kubeconfig as _kubeconfig
from drs_prom.testbed.pki import make_pki
from drs_prom.testbed.process import LOOPBACK, ManagedProcess, free_port, run, wait_http

__all__ = ["TESTBED_TAINT", "ControlPlane", "ControlPlaneError", "can_i", "kubectl"]

# On a cluster the testbed did not start (``external_kubeconfig``), fake nodes carry this taint so
# that the cluster's own DaemonSets and workloads stay off them, and the same key=value as a label;
# the testbed's pods tolerate the taint and select the label, so they never reach a real node.
TESTBED_TAINT = {"key": "drs.io/testbed", "value": "fake-node", "effect": "NoSchedule"}


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
        raise ControlPlaneError(f"kubectl not found at {exe}: {how_to_build()}")
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
        with contextlib.suppress(Exception):
            cp.stop()


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
        external_kubeconfig: str | os.PathLike | None = None,
    ):
        """``external_kubeconfig``: use that cluster instead of starting etcd + kube-apiserver. The
        kubeconfig's user must be allowed to create nodes, namespaces, pods, leases and bindings;
        ``stop()`` deletes every node and namespace this object created there."""
        self.bin_dir = Path(bin_dir) if bin_dir else find_bin_dir()
        missing = missing_binaries(self.bin_dir)
        if missing:
            raise ControlPlaneError(f"{', '.join(missing)} not found in {self.bin_dir}: {how_to_build()}")
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
        self.controller_managers: list[ManagedProcess] = []
        self._started = 0  # processes started so far: each gets its own folder and log, even after one stopped
        self._controller_token = ""
        self.server = ""
        self.admin_token = ""
        self.admin_kubeconfig: Path | None = None
        self.ca_file: Path | None = None
        self.service_account_issuer = ""
        self._ca_pem = b""
        self._lock = threading.Lock()
        self._api_client = None
        self._etcd_prefix = f"/registry-{secrets.token_hex(4)}"  # kept across apiserver restarts
        self.external = Path(external_kubeconfig) if external_kubeconfig else None
        self.created_nodes: list[str] = []
        self.created_namespaces: list[str] = []

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
        if self.external is not None:
            self._attach(self.external)
            return self
        try:
            pki = make_pki(self.workdir)
            self.ca_file, self._ca_pem, self.admin_token = pki.ca_file, pki.ca_pem, pki.admin_token
            self._controller_token = pki.controller_token
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

    def _attach(self, kubeconfig: Path) -> None:
        """Use an existing cluster: its kubeconfig stands in for the admin one."""
        from kubernetes import client

        try:
            doc = yaml.safe_load(kubeconfig.read_text()) or {}
            current = doc.get("current-context")
            ctx = next(c["context"] for c in doc["contexts"] if c["name"] == current)
            self.server = next(c["cluster"]["server"] for c in doc["clusters"] if c["name"] == ctx["cluster"])
        except (OSError, yaml.YAMLError, KeyError, TypeError, StopIteration) as exc:
            self.stop()
            raise ControlPlaneError(
                f"--kubeconfig {os.fspath(kubeconfig)!r}: no usable current context ({exc})"
            ) from None
        self.admin_kubeconfig = kubeconfig
        try:
            client.VersionApi(self.admin_client).get_code()
        except Exception as exc:  # noqa: BLE001 - any failure to reach it is one message
            self.stop()
            raise ControlPlaneError(f"--kubeconfig: the apiserver at {self.server} does not answer: {exc}") from None

    def stop(self) -> None:
        """Stop every process (schedulers, apiserver, etcd) and remove the temp dir; on an external
        cluster, delete the fake nodes and namespaces created there instead of the cluster."""
        with self._lock:
            self._stop_processes()
            if self.external is not None and self._api_client is not None:
                self._delete_created()
            if self._api_client is not None:
                with contextlib.suppress(Exception):
                    self._api_client.close()
                self._api_client = None
            if self.workdir and self.workdir.exists() and not self.keep_workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)
            _LIVE.discard(self)

    def _delete_created(self) -> None:
        from kubernetes import client

        v1 = client.CoreV1Api(self.admin_client)
        for name in self.created_nodes:
            with contextlib.suppress(Exception):
                v1.delete_node(name, _request_timeout=10)
        for ns in self.created_namespaces:
            with contextlib.suppress(Exception):
                v1.delete_namespace(ns, _request_timeout=10)
        self.created_nodes.clear()
        self.created_namespaces.clear()

    def _stop_processes(self) -> None:
        for p in reversed([*self.schedulers, *self.controller_managers]):
            p.stop()
        self.schedulers.clear()
        self.controller_managers.clear()
        if self.apiserver:
            self.apiserver.stop(grace=15)
            self.apiserver = None
        if self.etcd:
            self.etcd.stop()
            self.etcd = None

    # -- etcd --------------------------------------------------------------
    def _etcd_version(self) -> tuple[int, int]:
        proc = run([str(self.bin_dir / "etcd"), "--version"], timeout=20)
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
    def _start_apiserver(self, port: int | None = None) -> None:
        assert self.workdir and self.etcd
        pki = self.workdir / "pki"
        port = port or free_port()
        self.server = f"https://{LOOPBACK}:{port}"
        self.service_account_issuer = self.server
        argv = [
            str(self.bin_dir / "kube-apiserver"),
            f"--etcd-servers=http://{LOOPBACK}:{self.etcd.port}",
            f"--etcd-prefix={self._etcd_prefix}",
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

    def _wait_http(self, proc: ManagedProcess, url: str, ok: Any, timeout: float | None = None, **kw: Any) -> None:
        timeout = self.startup_timeout if timeout is None else timeout
        wait_http(proc, url, ok, timeout, error=ControlPlaneError, **kw)

    def restart_apiserver(self, down_seconds: float = 0.0) -> float:
        """Stop kube-apiserver, stay down ``down_seconds``, start it again on the same port (same
        etcd, so every object survives). Returns the seconds from the stop until /readyz answered."""
        import time

        if self.external is not None:
            raise ControlPlaneError(
                "cannot restart the apiserver of a cluster the testbed did not start (--kubeconfig)"
            )
        assert self.apiserver is not None
        port = self.apiserver.port
        t0 = time.monotonic()
        self.apiserver.stop(grace=15)
        self.apiserver = None
        time.sleep(max(0.0, down_seconds))
        self._start_apiserver(port=port)
        return time.monotonic() - t0

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
            self.created_namespaces.append(name)
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
            **({TESTBED_TAINT["key"]: TESTBED_TAINT["value"]} if self.external is not None else {}),
        }
        spec: dict[str, Any] = {"unschedulable": bool(unschedulable)}
        taints = [*(taints or ()), *([TESTBED_TAINT] if self.external is not None else [])]
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
        from kubernetes.client.rest import ApiException

        try:
            v1.create_node(node)
        except ApiException as e:
            if e.status == 409:
                raise ControlPlaneError(
                    f"node {name!r} already exists; the testbed only creates nodes of its own"
                ) from None
            raise
        self.created_nodes.append(name)
        resources = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "100Gi"}
        resources.update(extra_resources or {})
        now = kube_timestamp(time.time())

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
        drained(v1.patch_node_status(name, status, _preload_content=False))
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
        idx = self._started
        self._started += 1
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
            self._wait_healthz(proc, port, self.schedulers, timeout)
        return proc

    def _wait_healthz(
        self, proc: ManagedProcess, port: int, started: list[ManagedProcess], timeout: float | None
    ) -> None:
        """Wait for a started component's /healthz to say ok; on failure stop it and drop it from ``started``."""
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
            started.remove(proc)
            raise

    # -- kube-controller-manager -------------------------------------------
    def start_kube_controller_manager(
        self, controllers: Iterable[str] = DEFAULT_CONTROLLERS, timeout: float | None = None
    ) -> ManagedProcess:
        """Start the real kube-controller-manager running only ``controllers`` (see testbed.controllers);
        waits for /healthz. Stopped by ``stop()`` (or ``handle.stop()``)."""
        if self.external is not None:
            raise ControlPlaneError("the testbed starts kube-controller-manager only on a control plane of its own")
        assert self.workdir
        proc = start_controller_manager(
            self.bin_dir,
            self.workdir,
            self.server,
            self._ca_pem,
            self._controller_token,
            controllers,
            self._started,
        )
        self._started += 1
        self.controller_managers.append(proc)
        self._wait_healthz(proc, proc.port, self.controller_managers, timeout)
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
        for p in [self.etcd, self.apiserver, *self.schedulers, *self.controller_managers]:
            if p is not None:
                out[p.name] = p.log_path
        return out
