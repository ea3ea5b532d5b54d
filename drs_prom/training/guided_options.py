"""``drs-prom train --learner guided``'s options as a GuidedConfig: checked once, one-line errors for bad input."""

from __future__ import annotations

from drs_prom.agent.guided import GUIDES
from drs_prom.errors import ConfigError
from drs_prom.training.guided_run import FLOOR, GuidedConfig


def guided_config(clusters: int, seed: int, load: str, windows: str, arms: str, dagger: int) -> GuidedConfig:
    """The run ``drs-prom train --learner guided`` asks for; ConfigError (one line) for a malformed option."""
    try:
        lo_hi = tuple(float(x) for x in load.split(","))
        lags = tuple(float(x) for x in windows.split(","))
    except ValueError as e:
        raise ConfigError(f"--train-load and --metric-windows take comma-separated numbers: {e}") from None
    if len(lo_hi) != 2 or not 0 < lo_hi[0] <= lo_hi[1] or not lags or min(lags) < 0:
        raise ConfigError(
            f"--train-load needs LO,HI with 0 < LO <= HI and --metric-windows lags >= 0: {load} / {windows}"
        )
    label = tuple(a for a in arms.split(",") if a)
    unknown = [a for a in label if a not in GUIDES]
    if unknown:
        raise ConfigError(f"--label-arms: unknown heuristic(s) {unknown}; known: {', '.join(GUIDES)}")
    if label and FLOOR not in label:
        label = (FLOOR, *label)
    return GuidedConfig(
        clusters=clusters,
        seed=seed,
        load=(lo_hi[0], lo_hi[1]),
        metric_windows=lags,
        label_arms=label,
        dagger_rounds=dagger,
    )
