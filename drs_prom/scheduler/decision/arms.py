"""Which arm decides a pod (model or heuristic), and what the other arm would have done.

Pure functions, no I/O: the scheduler (drs_prom.scheduler.decision.rollout) calls them once per
decision. The arm of a pod depends only on its uid, namespace and labels, so every
replica of the scheduler (and every retry of the same pod) puts a pod in the same arm,
and a ``canary_share`` of 0.5 splits pods like a fair coin (the uid hash is uniform).

Modes (``rollout.mode``):
  ``normal``  the model arm decides every pod (the fallback rules still apply);
  ``shadow``  the heuristic arm decides every pod, the model only scores the same decision;
  ``canary``  the model arm decides pods selected by namespace/label selector, plus a
              ``canary_share`` of the rest by uid hash; the heuristic arm the others.
In shadow and canary the arm that did not decide scores the same input, so the journal
holds both choices and the agreement rate is measured on live traffic.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from drs_prom.config import RolloutSettings, parse_selector
from drs_prom.policies.contract import Policy
from drs_prom.signals.state import imbalance

MODEL = "model"
HEURISTIC = "heuristic"
ARMS = (MODEL, HEURISTIC)


def uid_fraction(uid: str) -> float:
    """A uniform number in [0, 1) from a pod uid (first 8 bytes of its SHA-256)."""
    digest = hashlib.sha256(uid.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def selector_matches(terms: Sequence[tuple[str, str, str]], labels: Mapping[str, str]) -> bool:
    """Kubernetes equality-selector semantics; an empty selector matches nothing here
    (an empty canary selector must not send every pod to the model)."""
    if not terms:
        return False
    for key, op, value in terms:
        have = key in labels
        if op == "exists" and not have:
            return False
        if op == "!exists" and have:
            return False
        if op == "=" and labels.get(key) != value:
            return False
        if op == "!=" and labels.get(key) == value:
            return False
    return True


def assign_arm(cfg: RolloutSettings, uid: str, namespace: str, labels: Mapping[str, str]) -> str:
    """MODEL or HEURISTIC for one pod under ``cfg`` (deterministic)."""
    if cfg.mode == "normal":
        return MODEL
    if cfg.mode == "shadow":
        return HEURISTIC
    if namespace in cfg.canary_namespaces or selector_matches(parse_selector(cfg.canary_selector), labels):
        return MODEL
    return MODEL if uid_fraction(uid) < cfg.canary_share else HEURISTIC


def counterfactual_imbalance(load: np.ndarray, pod_load: np.ndarray, index: int) -> float:
    """Imbalance (sum over features of the std across nodes) if the pod's load were added
    to node ``index`` of the decision's own state: an estimate from what the policy saw,
    not a measurement (nodes without metrics count as empty)."""
    after = np.nan_to_num(np.asarray(load, dtype=np.float64), nan=0.0).copy()
    after[index] += np.nan_to_num(np.asarray(pod_load, dtype=np.float64)[index], nan=0.0)
    return float(imbalance(after))


@dataclass(frozen=True)
class ShadowRecord:
    """Both arms on one decision. ``shadow_*`` is the arm that did not bind."""

    arm: str  # the pod's arm: model | heuristic
    shadow_policy: str
    shadow_index: int
    shadow_scores: np.ndarray
    agree: bool
    counterfactual: dict[str, float]  # arm -> estimated imbalance after that arm's choice


def compare(
    arm: str,
    chosen: int,
    shadow_policy: str,
    shadow_index: int,
    shadow_scores: np.ndarray,
    load: np.ndarray,
    pod_load: np.ndarray,
) -> ShadowRecord:
    """The shadow comparison of one decision (``chosen``: the index that was bound)."""
    other = HEURISTIC if arm == MODEL else MODEL
    cf = {}
    if chosen >= 0:
        cf[arm] = counterfactual_imbalance(load, pod_load, chosen)
    if shadow_index >= 0:
        cf[other] = counterfactual_imbalance(load, pod_load, shadow_index)
    return ShadowRecord(arm, shadow_policy, shadow_index, shadow_scores, chosen == shadow_index, cf)


@dataclass
class Choice:
    """One decision: the node index bound (-1: none feasible), the deciding policy's scores,
    the fallback reason (None when the arm's own policy decided), the pod's arm and, when
    the other arm scored the same decision, the comparison."""

    index: int
    scores: np.ndarray
    policy: Policy
    reason: str | None  # fallback reason, None when the arm's policy decided
    arm: str = MODEL
    shadow: ShadowRecord | None = None
    expected: np.ndarray | None = None
    """The pod's expected load on the chosen node (its ctx.pod_load row): what the cache counts as resident there
    until the pod ends (drs_prom.policies.resident)."""


class AgreementWindow:
    """Share of the last ``size`` compared decisions where both arms chose the same node."""

    def __init__(self, size: int = 200) -> None:
        self._seen: deque[bool] = deque(maxlen=size)

    def add(self, agree: bool) -> float:
        self._seen.append(bool(agree))
        return self.rate

    @property
    def rate(self) -> float:
        return sum(self._seen) / len(self._seen) if self._seen else float("nan")
