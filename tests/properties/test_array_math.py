"""The decision path's array helpers give numpy's own results to the bit, whatever the array holds: the scores must
not change for having skipped numpy's Python wrappers."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from drs_prom.policies.array_math import mean_along, mean_of, nan_as, std_along, std_of

shapes = hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=40)
any_values = hnp.arrays(
    dtype=st.sampled_from([np.float64, np.float32, np.int64]),
    shape=hnp.array_shapes(min_dims=1, max_dims=2, max_side=8),
    elements={"allow_nan": True, "allow_infinity": True},
)
floats = hnp.arrays(
    dtype=st.sampled_from([np.float64, np.float32]),
    shape=shapes,
    elements=st.floats(-1e6, 1e6, allow_subnormal=False, width=32),
)
counted = st.one_of(
    floats,
    hnp.arrays(dtype=np.bool_, shape=shapes),
    hnp.arrays(dtype=np.int64, shape=shapes, elements=st.integers(-(10**12), 10**12)),
)


def _bits(x: float) -> bytes:
    return np.float64(x).tobytes()


@given(values=any_values, nan=st.floats(allow_nan=False, allow_infinity=False))
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


@given(values=counted, column=st.booleans())
@example(values=np.array([0.1, 0.2, 0.3] * 50), column=False)
@example(values=np.array([[True, False], [True, True]]), column=True)
def test_mean_of_is_numpys_mean(values: np.ndarray, column: bool) -> None:
    if column and values.ndim == 2:
        values = values[:, 0]  # a strided view, as a decision reads one signal of its (nodes x signals) array
    assert _bits(mean_of(values)) == _bits(float(np.mean(values)))


@given(values=floats, column=st.booleans())
@example(values=np.array([1e6, 1.0, -1e6, 3.0] * 30), column=False)
def test_std_of_is_numpys_std(values: np.ndarray, column: bool) -> None:
    if column and values.ndim == 2:
        values = values[:, 0]
    assert _bits(std_of(values)) == _bits(float(np.std(values)))


@given(
    values=hnp.arrays(
        dtype=np.float64,
        shape=hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=40),
        elements=st.floats(-1e6, 1e6, allow_subnormal=False),
    ),
    axis=st.sampled_from([0, 1]),
)
@example(values=np.array([[0.1, 0.2, 0.3, 0.4, 0.5, 0.6]] * 100), axis=0)
def test_mean_and_std_along_an_axis_are_numpys(values: np.ndarray, axis: int) -> None:
    assert mean_along(values, axis).tobytes() == np.mean(values, axis=axis).tobytes()
    assert std_along(values, axis).tobytes() == np.std(values, axis=axis).tobytes()
