"""The PolicySpec unit tests build policies from (drs_prom.registry.make_policy): the production rate window
(30 s, ``prometheus.window``'s documented default) on the default scales, written out so a test never depends
on the environment it runs in."""

from __future__ import annotations

from drs_prom.config import Normalisation
from drs_prom.registry import PolicySpec

WINDOW = 30.0
SPEC = PolicySpec(metric_window_seconds=WINDOW, normalisation=Normalisation())
