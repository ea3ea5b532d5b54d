"""Each pod's owner, name, labels and image as the controller that makes it would set them.

``Workload.owners`` names every pod's owner ``Kind/name``. The driver creates the pods as their controllers do:

* ``Job/<job>``: a controller ``ownerReference`` to the Job ``<job>``; the pod is named ``<job>-<5 chars>`` (the
  workload's ``<profile>-00001`` names already are);
* ``Deployment/<deploy>``: a controller ``ownerReference`` to its ReplicaSet ``<deploy>-<hash>``, the pod label
  ``pod-template-hash=<hash>`` and the name ``<deploy>-<hash>-<5 chars>``, as the Deployment and ReplicaSet
  controllers name them (the hash: 10 characters of Kubernetes' safe alphabet, the same for every pod of the owner);
* ``Pod/<name>``: a bare pod (a replayed trace's rows, pinned background pods), no ``ownerReference``.

Every pod runs its owner's image, ``registry.example/<image>:1`` (never pulled: the twin kubelet runs nothing); an
owner without one (a bare pod) runs an image of its own name, so no two owners look alike where the simulator says
they are not. Names are deterministic (a hash of the owner and the workload's pod name), so every scheduler of a run
faces the same pods.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from drs_prom.errors import ConfigError
from drs_prom.sim.workload import Workload

SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""k8s.io/apimachinery's rand.SafeEncodeString alphabet (no vowels, no 0, 1, 3): ReplicaSet hashes and the random
suffixes of generated pod names are drawn from it."""
TEMPLATE_HASH_LABEL = "pod-template-hash"
IMAGE_REGISTRY = "registry.example"
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _safe_hash(text: str, n: int) -> str:
    """``n`` characters of SAFE_ALPHABET from a digest of ``text`` (stable across runs and processes)."""
    value = int.from_bytes(hashlib.sha256(text.encode()).digest(), "big")
    out = []
    for _ in range(n):
        value, k = divmod(value, len(SAFE_ALPHABET))
        out.append(SAFE_ALPHABET[k])
    return "".join(out)


def _image(name: str) -> str:
    """``registry.example/<name>:1`` with ``name`` made a valid repository path (lower case, ``[a-z0-9._-]``)."""
    path = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-._") or "app"
    return f"{IMAGE_REGISTRY}/{path}:1"


@dataclass(frozen=True)
class Controller:
    """What owns one owner's pods on the apiserver. ``kind`` "" is a bare pod (no ownerReference)."""

    owner: str
    """``Kind/name`` as the workload names it (the top controller: a Deployment, not its ReplicaSet)."""
    kind: str
    api_version: str
    name: str
    """The controlling object's name: the Job, or the Deployment's ReplicaSet ``<deploy>-<hash>``."""
    image: str
    labels: Mapping[str, str] = field(default_factory=dict)
    """The labels the controller puts on its pods (``pod-template-hash``)."""

    def reference(self, uid: str, external: bool = False) -> list[dict[str, Any]]:
        """The pod's ``ownerReferences``. ``external`` (a ``--kubeconfig`` cluster): the owner is a ConfigMap of the
        same name the driver creates, so the cluster's garbage collector keeps the pod (it would delete the pods of
        a Job or ReplicaSet that does not exist, and a real one would be acted on by its controller)."""
        if not self.kind:
            return []
        version, kind = ("v1", "ConfigMap") if external else (self.api_version, self.kind)
        return [{"apiVersion": version, "kind": kind, "name": self.name, "uid": uid, "controller": True}]


@dataclass(frozen=True)
class PodOwners:
    """Every pod's controller and name on the apiserver, for one workload."""

    controllers: tuple[Controller, ...]
    """One per owner of ``Workload.owners``, in its order."""
    owner: tuple[int, ...]
    """Per workload row, the index of its owner in ``controllers``."""
    names: tuple[str, ...]
    """Per workload row, the pod's name on the apiserver."""

    def of(self, i: int) -> Controller:
        return self.controllers[self.owner[i]]

    def rows(self) -> dict[str, int]:
        """Pod name on the apiserver -> workload row."""
        return {name: i for i, name in enumerate(self.names)}

    def truth(self, wl: Workload) -> dict[str, tuple[tuple[float, ...], float]]:
        """Pod name -> its true demand and full-speed work in ``wl`` (what the twin kubelet runs)."""
        return {name: (tuple(float(x) for x in wl.demand[i]), float(wl.work[i])) for i, name in enumerate(self.names)}

    def replacement_name(self, i: int, attempt: int) -> str | None:
        """The name the controller of row ``i`` gives the pod that replaces an evicted one (``attempt`` counts the
        tries, so one taken already is passed over); None for a bare pod, which nothing replaces."""
        ctl = self.of(i)
        if not ctl.kind:
            return None
        return f"{ctl.name}-{_safe_hash(f'{ctl.owner}/{self.names[i]}/replacement/{attempt}', 5)}"

    def usage_factors(self, wl: Workload) -> dict[str, np.ndarray]:
        """Pod name -> its usage profile over ``wl.usage_times`` (a drifting workload's; empty for one that does not
        drift): what the twin kubelet multiplies its demand by, span by span, as the simulator does."""
        if wl.usage_factor is None:
            return {}
        return {name: wl.usage_factor[i] for i, name in enumerate(self.names)}

    def work(self, wl: Workload) -> dict[str, float]:
        """Pod name -> its full-speed work in ``wl`` (simulated seconds: what the judge's slowdowns divide by)."""
        return {name: float(wl.work[i]) for i, name in enumerate(self.names)}


def _controller(owner: str, image: str) -> Controller:
    kind, _, name = owner.partition("/")
    if kind == "Job":
        return Controller(owner, "Job", "batch/v1", name, _image(image or name))
    if kind == "Deployment":
        h = _safe_hash(owner, 10)
        return Controller(
            owner, "ReplicaSet", "apps/v1", f"{name}-{h}", _image(image or name), {TEMPLATE_HASH_LABEL: h}
        )
    if kind == "Pod":
        return Controller(owner, "", "", name, _image(image or name))
    raise ConfigError(f"owner {owner!r}: the testbed creates the pods of Job/, Deployment/ and Pod/ owners only")


def pod_owners(wl: Workload) -> PodOwners:
    """The controllers of ``wl``'s owners and its pods' names, unique within the run's namespace."""
    index, owner_names, images = wl.owners
    controllers = tuple(_controller(o, img) for o, img in zip(owner_names, images))
    taken: set[str] = set()
    names = []
    for i, (pod, o) in enumerate(zip(wl.names, index.tolist())):
        ctl = controllers[o]
        name = pod
        if ctl.kind and not re.fullmatch(rf"{re.escape(ctl.name)}-[a-z0-9]{{5}}", pod):
            salt = 0
            while name in taken or name == pod:  # five characters, as the controllers' generateName gives
                name = f"{ctl.name}-{_safe_hash(f'{ctl.owner}/{pod}/{salt}', 5)}"
                salt += 1
        if name in taken or len(name) > 253 or not DNS1123_SUBDOMAIN.fullmatch(name):
            raise ConfigError(f"pod {i} of the workload: {name!r} is not a unique DNS-1123 pod name")
        taken.add(name)
        names.append(name)
    return PodOwners(controllers, tuple(int(o) for o in index.tolist()), tuple(names))
