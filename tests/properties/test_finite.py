"""``nan_as`` is ``np.nan_to_num`` on a float64 copy, to the bit, whatever the array holds: the decision path's
scores must not change for having skipped the passes that find nothing to replace."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from drs_prom.policies.finite import nan_as

arrays = hnp.arrays(
    dtype=st.sampled_from([np.float64, np.float32, np.int64]),
    shape=hnp.array_shapes(min_dims=1, max_dims=2, max_side=8),
    elements={"allow_nan": True, "allow_infinity": True},
)


@given(values=arrays, nan=st.floats(allow_nan=False, allow_infinity=False))
@example(values=np.array([[0.5, np.nan], [np.inf, -np.inf]]), nan=1.0)
@example(values=np.array([0.25, 0.5]), nan=0.0)
def test_nan_as_is_nan_to_num_on_a_float64_copy(values: np.ndarray, nan: float) -> None:
    want = np.nan_to_num(np.asarray(values, dtype=np.float64), nan=nan)
    got = nan_as(values, nan)
    assert got.dtype == np.float64
    assert got.tobytes() == want.tobytes()
    if got.size:
        got.flat[0] = 7.0  # a copy: the caller's array is untouched
        assert not np.shares_memory(got, values)
