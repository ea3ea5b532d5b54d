"""Run many generated cases through the oracle and count the disagreements.

``count`` runs every case (Hypothesis generation only, no shrinking) and keeps going after a
disagreement, so a run says how many there are; ``minimal`` lets Hypothesis shrink the first
disagreement it meets to a smallest case and returns its report.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed

from tests.differential.cases import Case, cases
from tests.differential.oracle import Oracle, Outcome

_QUIET = {
    "deadline": None,
    "database": None,
    "suppress_health_check": list(HealthCheck),
    "print_blob": False,
}


@dataclass
class Tally:
    cases: int = 0
    disagreements: list[tuple[Case, Outcome]] = field(default_factory=list)
    refused: int = 0
    """Cases whose pod drs-prom refused outright as needing what it does not check (Outcome.refused)."""
    seconds: list[float] = field(default_factory=list)
    feasible_counts: list[int] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    """kube-scheduler's FailedScheduling message of each case where it found no node."""

    def add(self, case: Case, outcome: Outcome) -> None:
        self.cases += 1
        self.seconds.append(outcome.seconds)
        self.feasible_counts.append(len(outcome.kube))
        if outcome.kube_message:
            self.messages.append(outcome.kube_message)
        if outcome.refused and not outcome.agree:
            self.refused += 1
        elif not outcome.agree:
            self.disagreements.append((case, outcome))

    def timing(self) -> str:
        if not self.seconds:
            return "no cases"
        s = sorted(self.seconds)
        return (
            f"per case: mean {statistics.fmean(s) * 1000:.0f} ms, p50 {s[len(s) // 2] * 1000:.0f} ms, "
            f"p95 {s[int(len(s) * 0.95)] * 1000:.0f} ms, max {s[-1] * 1000:.0f} ms"
        )

    def coverage(self) -> str:
        """How often kube-scheduler found no node, some nodes, every node: a run that only ever
        sees one kind of answer tests little."""
        total = len(self.feasible_counts) or 1
        none = sum(1 for c in self.feasible_counts if c == 0)
        return f"kube-scheduler found no feasible node in {none}/{total} cases"


def report(case: Case, outcome: Outcome) -> str:
    return f"{case!r}\ndiffers on:\n{outcome.describe()}"


def count(oracle: Oracle, n: int, seed: int, features: frozenset[str]) -> Tally:
    """Run ``n`` generated cases with ``features``; every disagreement is kept."""
    tally = Tally()

    @hypothesis_seed(seed)
    @settings(max_examples=n, phases=[Phase.generate], **_QUIET)
    @given(cases(features))
    def each(case: Case) -> None:
        tally.add(case, oracle.run(case))

    each()
    return tally


class Disagreement(AssertionError):
    pass


def minimal(oracle: Oracle, n: int, seed: int, features: frozenset[str]) -> str | None:
    """Hypothesis' smallest disagreeing case found in ``n`` cases, as a report (None: all agreed)."""
    found: list[str] = []

    @hypothesis_seed(seed)
    @settings(max_examples=n, phases=[Phase.generate, Phase.shrink], **_QUIET)
    @given(cases(features))
    def each(case: Case) -> None:
        outcome = oracle.run(case)
        if not outcome.consistent:
            found.append(report(case, outcome))  # the last one appended is the shrunk one
            raise Disagreement(found[-1])

    try:
        each()
    except Disagreement:
        return found[-1]
    return None
