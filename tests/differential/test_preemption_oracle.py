"""drs-prom's preemption victims equal the real kube-scheduler's on generated cases (a small run; the
command benchmarks/differential_preemption.py runs hundreds), and it never breaks a PodDisruptionBudget
when a choice without one existed."""

from __future__ import annotations

import pytest

from tests.differential.preemption_oracle import PreemptionOracle
from tests.differential.preemption_runner import count

pytestmark = pytest.mark.integration

CASES = 20


@pytest.fixture(scope="module")
def preemption_oracle(control_plane):
    with PreemptionOracle(control_plane) as oracle:
        yield oracle


def test_victims_match_kube_scheduler(preemption_oracle):
    tally = count(preemption_oracle, CASES, seed=7)
    assert tally.cases == CASES
    # the cases must exercise preemption, not only pods that fit at once
    assert sum(bool(o.kube_victims) for _, o in tally.outcomes) >= CASES // 5, tally.summary()
    shown = "\n".join(f"{c!r}\n{o.describe()}" for c, o in tally.disagreements)
    assert not tally.disagreements and not tally.undecided, f"{tally.summary()}\n{shown}\n{tally.undecided}"
    assert not tally.avoidable_violations, tally.summary()
