"""Research around drs-prom, kept out of the shipped package: references that read the simulated future and
learners that did not ship.

Nothing in ``drs_prom`` imports this package (an import-linter contract in pyproject.toml says so), and the
wheel does not include it; it runs from a source checkout, through the ``drs-prom-research`` command
(drs_prom_research.commands: ``python -m drs_prom_research`` or scripts/drs-prom-research) or the tests under
tests/research.

- ``clairvoyant``     the fortified rollout that reads the true future, and the migration floor;
- ``lookahead``       the same rollout over sampled futures (no more than a scheduler can know);
- ``headroom``        per suite scenario, how much those references gain over the best heuristic;
- ``selector``        ``drs`` as a learned choice among heuristics (a model head), ``selector_run`` its training;
- ``corrector``       ``drs`` as a top-k correction of a heuristic (a model head); ``playout_targets`` labels its
                      decisions, ``correction_fit`` fits it, ``correction_run`` is its training command;
- ``heads``           registers the two heads with the agent and ``clairvoyant`` with the benchmark.

Importing the package registers them (heads.register), so a research model loads wherever research code runs.
"""

from __future__ import annotations

from drs_prom_research.heads import register

register()

__all__ = ["register"]
