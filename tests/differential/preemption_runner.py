"""Run many generated preemption cases through the oracle and tally agreement, ties and budget violations."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed

from tests.differential.preemption_cases import PreemptionCase, preemption_cases
from tests.differential.preemption_oracle import PreemptionOracle, PreemptionOutcome

_QUIET = {"deadline": None, "database": None, "suppress_health_check": list(HealthCheck), "print_blob": False}


@dataclass
class PreemptionTally:
    outcomes: list[tuple[PreemptionCase, PreemptionOutcome]] = field(default_factory=list)
    undecided: list[tuple[PreemptionCase, str]] = field(default_factory=list)
    """Cases kube-scheduler gave no answer for in time (counted as disagreements)."""

    def add(self, case: PreemptionCase, outcome: PreemptionOutcome) -> None:
        self.outcomes.append((case, outcome))

    @property
    def cases(self) -> int:
        return len(self.outcomes) + len(self.undecided)

    @property
    def agreed(self) -> int:
        return sum(o.agree for _, o in self.outcomes)

    @property
    def disagreements(self) -> list[tuple[PreemptionCase, PreemptionOutcome]]:
        return [(c, o) for c, o in self.outcomes if not o.agree]

    @property
    def avoidable_violations(self) -> list[tuple[PreemptionCase, PreemptionOutcome]]:
        return [(c, o) for c, o in self.outcomes if o.avoidable_violation]

    @property
    def rate(self) -> float:
        return self.agreed / self.cases if self.cases else 0.0

    def summary(self) -> str:
        """The counts a reader needs to judge the rate: how many cases preempted at all, with budgets broken, tied."""
        preempted = sum(bool(o.kube_victims) for _, o in self.outcomes)
        breaking = sum(bool(o.drs and o.drs[0].violations) for _, o in self.outcomes)
        ties = sum(o.tied for _, o in self.outcomes)
        never = sum(c.pod.never for c, _ in self.outcomes)
        victims = [len(o.kube_victims) for _, o in self.outcomes if o.kube_victims]
        seconds = [o.seconds for _, o in self.outcomes]
        return (
            f"cases: {self.cases}, agreed: {self.agreed} ({100 * self.rate:.1f}%), "
            f"kube-scheduler undecided: {len(self.undecided)}\n"
            f"kube-scheduler preempted in {preempted} cases (victims per preemption: mean "
            f"{statistics.fmean(victims) if victims else 0:.2f}, max {max(victims, default=0)}); "
            f"preemptionPolicy Never in {never}\n"
            f"drs-prom's choice breaks a PodDisruptionBudget in {breaking} cases, avoidably in "
            f"{len(self.avoidable_violations)}; tied best candidates in {ties}\n"
            f"per case: mean {statistics.fmean(seconds) if seconds else 0:.2f} s"
        )


def count(oracle: PreemptionOracle, n: int, seed: int) -> PreemptionTally:
    """Run ``n`` generated cases (generation only, no shrinking); every outcome is kept."""
    tally = PreemptionTally()

    @hypothesis_seed(seed)
    @settings(max_examples=n, phases=[Phase.generate], **_QUIET)
    @given(preemption_cases())
    def each(case: PreemptionCase) -> None:
        try:
            tally.add(case, oracle.run(case))
        except TimeoutError as exc:
            tally.undecided.append((case, str(exc)))

    each()
    return tally
