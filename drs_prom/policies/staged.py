"""A policy behind a stage: the stage narrows the nodes a decision may take, the policy chooses among those left.

A stage answers what a balancing policy cannot weigh (which nodes to keep whole for the pods that need a whole
device node, which binds strand devices) and leaves the rest to the policy's own scores. The wrapper keeps the
Policy contract whole: it scores only the nodes the stage kept (-inf elsewhere), tells the stage and the policy of
every bind as the filters gave it (the narrowing never reaches the policy's memories), and is otherwise the inner
policy, its name with the stage's suffix (``drs+devices``) or, for a stage that is part of the policy as it ships
(``drs`` keeps a whole device node in reserve, drs_prom.policies.whole_reserve), its name unchanged.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from drs_prom.config import Normalisation
from drs_prom.policies.contract import BindMemory, DecisionContext, Policy


class Stage(Protocol):
    """Narrows a decision before the policy scores it."""

    def narrow(self, ctx: DecisionContext) -> DecisionContext:
        """``ctx`` with fewer feasible nodes, or ``ctx`` itself (the same object) where it keeps every one.
        Records nothing: scoring stays pure."""
        ...

    def record(self, ctx: DecisionContext) -> None:
        """Remember a decided pod (``ctx`` as the filters gave it), if the stage keeps a memory."""
        ...


class Staged:
    """``inner`` behind ``stage``; named ``inner.name + suffix``. Everything else of the contract is ``inner``'s."""

    def __init__(self, inner: Policy, stage: Stage, suffix: str = "") -> None:
        self.inner = inner
        self.stage = stage
        self.suffix = suffix

    @property
    def name(self) -> str:
        return self.inner.name + self.suffix

    @property
    def version(self) -> str:
        return self.inner.version

    @property
    def normalisation(self) -> Normalisation | None:
        return self.inner.normalisation

    @property
    def reads_unclipped_load(self) -> bool:
        return self.inner.reads_unclipped_load

    @property
    def recent(self) -> BindMemory | None:
        return self.inner.recent

    @property
    def metric_window_seconds(self) -> float:
        return self.inner.metric_window_seconds

    def score(self, ctx: DecisionContext) -> np.ndarray:
        staged = self.stage.narrow(ctx)
        scores = np.asarray(self.inner.score(staged), dtype=np.float64)
        return scores if staged is ctx else np.where(staged.feasible, scores, -np.inf)

    def bound(self, ctx: DecisionContext, node: int) -> None:
        """The stage remembers ``ctx``'s pod as the filters gave it; ``inner`` keeps the decision as it would
        without the stage."""
        self.stage.record(ctx)
        self.inner.bound(ctx, node)
