"""The research package's additions to the shipped code: two model heads and one benchmark reference.

The shipped agent serves only what is registered with it (drs_prom.agent.persistence.register_head),
and the shipped benchmark runs only policies unless a reference run is registered with it
(drs_prom.sim.bench.register_reference). ``register`` adds:

- the top-k correction head (drs_prom_research.corrector), whose network reads the per-node candidate
  rows, so retraining may fine-tune it from history;
- the heuristic-selector head (drs_prom_research.selector), whose network reads cluster features;
- ``clairvoyant`` (drs_prom_research.clairvoyant) for ``drs-prom-research bench --policies``, with
  its migration floor.

Importing drs_prom_research calls it, so a research model loads wherever research code runs.
"""

from __future__ import annotations

from typing import Any

from drs_prom.agent.cluster_context import CLUSTER_FEATURES
from drs_prom.agent.model_inputs import CANDIDATE_COLUMNS
from drs_prom.agent.persistence import Head, register_head
from drs_prom.registry import PolicySpec
from drs_prom.sim.bench import ReferenceRun, register_reference
from drs_prom.sim.env import EpisodeResult
from drs_prom.sim.scenario import Scenario
from drs_prom_research.clairvoyant import CLAIRVOYANT, clairvoyant_run, migration_floor
from drs_prom_research.corrector import BASES, HEAD, TopKCorrection
from drs_prom_research.selector import ARMS, DEFAULT_ARM, SELECTOR, HeuristicSelector


def _correction_valid(head: dict[str, Any]) -> bool:
    k = head.get("k")
    return head.get("base") in BASES and isinstance(k, int) and not isinstance(k, bool) and k >= 1


def _selector_valid(head: dict[str, Any]) -> bool:
    arms = head.get("arms")
    return (
        isinstance(arms, list)
        and all(isinstance(a, str) and a in ARMS for a in arms)
        and DEFAULT_ARM in arms
        and head.get("features") == list(CLUSTER_FEATURES)
    )


CORRECTION_HEAD = Head(
    HEAD, _correction_valid, lambda _head: (len(CANDIDATE_COLUMNS), 1), TopKCorrection.from_head, fine_tunable=True
)
SELECTOR_HEAD = Head(
    SELECTOR, _selector_valid, lambda head: (len(CLUSTER_FEATURES), len(head["arms"])), HeuristicSelector.from_head
)


def _clairvoyant(scenario: Scenario, seed: int, spec: PolicySpec) -> EpisodeResult:
    return clairvoyant_run(scenario, seed, spec=spec)


def register() -> None:
    """Register the research heads with the agent and the clairvoyant reference with the benchmark (idempotent)."""
    register_head(CORRECTION_HEAD)
    register_head(SELECTOR_HEAD)
    register_reference(CLAIRVOYANT, ReferenceRun(_clairvoyant, migration_floor))
