"""Who a pod belongs to and how its siblings are named, from the pod's JSON alone (no API reads).

The usage history is kept per top owner (``Kind/name``): the Deployment, not the ReplicaSet of one rollout, so
pods of the next rollout inherit the evidence of the last. Kubernetes' controllers name what they make in a fixed
way, so the top owner and the names of its pods follow from the pod:

- a pod of ReplicaSet ``<deploy>-<hash>`` labelled ``pod-template-hash=<hash>`` belongs to ``Deployment/<deploy>``
  (the Deployment controller names its ReplicaSets so and labels their pods);
- a pod of Job ``<cronjob>-<minutes>`` (8 or more digits: the CronJob controller names a Job by its scheduled
  time in minutes since the epoch) belongs to ``CronJob/<cronjob>``, unless the caller knows better (``parents``);
- any other controller is its own top owner (StatefulSet, DaemonSet, Job, a ReplicaSet without the hash label,
  an operator's kind); a pod without one is ``Pod/<name>``.

``pod_name_regex`` is the regular expression of the names of an owner's pods, as the apiserver and the controllers
make them: ``generateName`` pods get 5 random characters after a base cut to 58 characters, StatefulSet pods an
ordinal. It is escaped and anchored (``^...$``), so ``web``'s regex never matches
pods of ``web-api``, and usable by Python's ``re`` and by PromQL (RE2) alike. Pure: JSON in, strings out.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)

POD_TEMPLATE_HASH = "pod-template-hash"
"""The label the Deployment controller puts on its ReplicaSets' pods: the ReplicaSet's name suffix."""

OWNER_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod")
"""The kinds whose pods ``pod_name_regex`` knows how to name."""

RANDOM = "[a-z0-9]"
"""A character of a generated name's 5-character suffix. The apiserver draws them from its safe alphabet
(k8s.io/apimachinery/pkg/util/rand: no vowels, no 0, 1, 3); any lower-case letter or digit is accepted, as other
tools that name pods like controllers (the testbed's driver, replayed traces) are not bound to it."""
HASH = "[bcdfghjklmnpqrstvwxz0-9]"
"""A character of a pod-template-hash: the safe alphabet (the decimal digits of a 32-bit hash, encoded), or any
digit (hashes were plain decimal before Kubernetes 1.8). No vowel: ``web``'s Deployment never claims the pods of
a Job or DaemonSet ``web-api``."""
MAX_GENERATED_BASE = 58
"""``generateName`` keeps this much of its base (63 - 5 random characters; names.SimpleNameGenerator)."""

_CRONJOB_JOB = re.compile(r"(.+)-([0-9]{8,})")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def pod_name(pod: Mapping[str, Any]) -> str:
    return _text(_mapping(pod.get("metadata")).get("name")) if isinstance(pod, Mapping) else ""


def controller_ref(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(kind, name) of the pod's controlling owner reference (else its first), None without one.

    ValueError (one line) when the references are there but cannot be read (not a list of objects, no kind or
    name): the apiserver never sends such a pod, a hand-made body may."""
    meta = _mapping(pod.get("metadata")) if isinstance(pod, Mapping) else {}
    refs = meta.get("ownerReferences")
    if refs is None or refs == []:
        return None
    if not isinstance(refs, list) or not all(isinstance(r, Mapping) for r in refs):
        raise ValueError(f"ownerReferences is not a list of objects: {str(refs)[:80]!r}")
    ref = next((r for r in refs if r.get("controller") is True), refs[0])
    kind, name = ref.get("kind"), ref.get("name")
    if not (isinstance(kind, str) and kind and isinstance(name, str) and name and "/" not in kind):
        raise ValueError(f"owner reference without a usable kind and name: {str(dict(ref))[:80]!r}")
    return kind, name


def top_owner(pod: Mapping[str, Any], parents: Mapping[str, str] | None = None) -> str:
    """``Kind/name`` of the pod's top controller (see the module docstring); ``Pod/<name>`` for a bare pod and for
    owner references that cannot be read (logged at debug level, never raised).

    ``parents``: what the caller knows of controllers' own owners, ``"Job/x" -> "CronJob/y"`` (from the controller
    objects); it wins over what the names suggest."""
    name = pod_name(pod)
    try:
        ref = controller_ref(pod)
    except ValueError as exc:
        log.debug("pod %s: %s; its owner is taken to be the pod itself", name, exc)
        return f"Pod/{name}"
    if ref is None:
        return f"Pod/{name}"
    kind, owner = ref
    direct = f"{kind}/{owner}"
    if parents and direct in parents:
        return parents[direct]
    if kind == "ReplicaSet":
        labels = _mapping(_mapping(pod.get("metadata")).get("labels"))
        template_hash = _text(labels.get(POD_TEMPLATE_HASH))
        if template_hash and owner.endswith("-" + template_hash) and len(owner) > len(template_hash) + 1:
            return f"Deployment/{owner[: -len(template_hash) - 1]}"
    elif kind == "Job":
        found = _CRONJOB_JOB.fullmatch(owner)
        if found:
            return f"CronJob/{found.group(1)}"
    return direct


def image_of(pod: Mapping[str, Any]) -> str:
    """The image of the pod's first container ("" when it has none that can be read)."""
    spec = _mapping(pod.get("spec")) if isinstance(pod, Mapping) else {}
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        return ""
    return _text(_mapping(containers[0]).get("image")).strip()


def escape(text: str) -> str:
    """``text`` as a literal in a regular expression Python's ``re`` and RE2 read the same way: every character
    but ASCII letters, digits, ``-`` and ``_`` escaped (Kubernetes names only ever need the ``.`` escaped)."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "-_") else re.escape(c) for c in text)


def _generated(base: str) -> str:
    """Names ``generateName: <base>`` gives: the base cut to 58 characters, then 5 random ones."""
    return escape(base[:MAX_GENERATED_BASE]) + RANDOM + "{5}"


def _generated_after(name: str, middle: str, lo: int, hi: int) -> str:
    """Names ``generateName: <name>-<m>-`` gives, where the controller's ``m`` is lo..hi characters of ``middle``:
    when the whole base does not fit in 58 characters, ``m`` is cut and its trailing ``-`` lost."""
    fixed = name + "-"
    room = MAX_GENERATED_BASE - len(fixed)
    if room <= 0:
        return _generated(fixed)
    if hi + 1 <= room:
        part = f"{middle}{{{lo},{hi}}}-"
    elif lo + 1 <= room:
        part = f"(?:{middle}{{{lo},{room - 1}}}-|{middle}{{{room}}})"
    else:
        part = f"{middle}{{{room}}}"
    return escape(fixed) + part + RANDOM + "{5}"


def pod_name_regex(owner: str) -> str | None:
    """The anchored regular expression of the names of ``owner``'s pods (``Kind/name``, as ``top_owner`` gives
    it); None for a kind whose controller's naming is not known (an operator's own kind)."""
    kind, sep, name = owner.partition("/")
    if not sep or not name:
        return None
    if kind == "Deployment":  # ReplicaSet <name>-<hash>, pods generateName <name>-<hash>-
        body = _generated_after(name, HASH, 1, 10)
    elif kind == "CronJob":  # Job <name>-<minutes>, pods generateName <name>-<minutes>-
        body = _generated_after(name, "[0-9]", 8, 10)
    elif kind in ("ReplicaSet", "DaemonSet", "Job"):  # generateName <name>-
        body = _generated(name + "-")
    elif kind == "StatefulSet":  # <name>-<ordinal>
        body = escape(name) + "-(?:0|[1-9][0-9]*)"
    elif kind == "Pod":
        body = escape(name)
    else:
        return None
    return f"^{body}$"


def image_spellings(image: str) -> tuple[str, ...]:
    """The names a container runtime may report for ``image``: as the pod spec writes it, and as the full Docker
    reference containerd reports (``nginx:1.25`` -> ``docker.io/library/nginx:1.25``; no tag: ``:latest``).
    Empty for an empty image."""
    image = image.strip()
    if not image:
        return ()
    name, at, digest = image.partition("@")
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        registry, path = first, rest
    else:
        registry, path = "docker.io", name
    if registry == "docker.io" and "/" not in path:
        path = "library/" + path
    if not at and ":" not in path.rpartition("/")[2]:
        path += ":latest"
    full = f"{registry}/{path}" + (f"@{digest}" if at else "")
    return (image,) if full == image else (image, full)
