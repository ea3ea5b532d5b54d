"""Hypothesis profiles for the property tests.

``ci`` (default) runs 200 generated inputs per test, enough to find the defects pinned
with ``@example`` here again within the suite's time budget; ``dev`` is a quick 50;
``long`` (2000) is for a soak run by hand::

    HYPOTHESIS_PROFILE=long .venv/bin/python -m pytest tests/properties --hypothesis-show-statistics

No deadline: the machine is shared, and wall-clock limits are not behaviour.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow], "print_blob": True}
settings.register_profile("ci", max_examples=200, **_COMMON)
settings.register_profile("dev", max_examples=50, **_COMMON)
settings.register_profile("long", max_examples=2000, **_COMMON)
# Generated inputs only (the pinned @examples skipped): how defects were found in the first place.
settings.register_profile("discover", max_examples=200, phases=[Phase.generate, Phase.target, Phase.shrink], **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
