"""numpy's NaN-free copy, mean and standard deviation for the decision path's small arrays, the same to the bit.

A decision of the shipped model makes a few hundred numpy calls on (nodes x signals) arrays of a hundred rows; at
that size the Python wrappers around ``np.nan_to_num``, ``np.mean`` and ``np.std`` (argument handling, several
passes for NaN and the infinities whether or not there is anything to replace) cost more than the arithmetic.
These functions make the same ufunc calls in the same order as numpy's own (numpy/_core/_methods.py), so every
score is unchanged (tests/properties/test_array_math.py compares the bits).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def nan_as(values: Any, nan: float) -> np.ndarray:
    """``np.nan_to_num(np.asarray(values, dtype=np.float64), nan=nan)``: a float64 copy with NaN read as ``nan`` and
    infinities as the largest finite floats."""
    a = np.asarray(values, dtype=np.float64)
    if np.isfinite(a).all():
        return a.copy()
    return np.nan_to_num(a, nan=nan)


def mean_of(values: Any) -> float:
    """``float(np.mean(values))`` over every item of a non-empty array (booleans and integers summed as float64)."""
    a = np.asarray(values)
    total = np.add.reduce(a, axis=None, dtype=np.float64 if a.dtype.kind in "biu" else None)
    return float(total / a.size)


def std_of(values: Any) -> float:
    """``float(np.std(values))`` over every item of a non-empty floating-point array."""
    a = np.asarray(values)
    mean = np.add.reduce(a, axis=None, keepdims=True)
    np.true_divide(mean, a.size, out=mean, casting="unsafe")
    dev = a - mean
    np.multiply(dev, dev, out=dev)
    return float(np.sqrt(np.add.reduce(dev, axis=None) / a.size))


def mean_along(values: np.ndarray, axis: int) -> np.ndarray:
    """``np.mean(values, axis=axis)`` of a 2-D floating-point array."""
    a = np.asarray(values)
    total = np.add.reduce(a, axis=axis)
    np.true_divide(total, a.shape[axis], out=total, casting="unsafe")
    return np.asarray(total)


def std_along(values: np.ndarray, axis: int) -> np.ndarray:
    """``np.std(values, axis=axis)`` of a 2-D floating-point array."""
    a = np.asarray(values)
    n = a.shape[axis]
    mean = np.add.reduce(a, axis=axis, keepdims=True)
    np.true_divide(mean, n, out=mean, casting="unsafe")
    dev = a - mean
    np.multiply(dev, dev, out=dev)
    total = np.add.reduce(dev, axis=axis)
    np.true_divide(total, n, out=total, casting="unsafe")
    np.sqrt(total, out=total)
    return np.asarray(total)
