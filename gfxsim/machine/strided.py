"""An index array as strides: where the flat positions an index array names are an affine function
of the index's own position in nested runs (a matrix operand's plan: lanes in runs of 16, then
registers, then lane groups, then members), ``np.take(a, index)`` reads the elements of a strided
view of ``a``. numpy copies or converts such a view in one pass, several times faster than a take
through an int64 index (an int8 operand of 512 members: ~50 µs against ~350 µs).

A form is found once per index array (its plan is cached) and checked against every element of
the index before it is used, so a view reads exactly the elements the take reads.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..errors import ArgumentError

Form = tuple[tuple[int, ...], tuple[int, ...], int]     # (shape, strides in elements, offset)


def strided_form(index: np.ndarray) -> Form | None:
    """(shape, strides, offset) such that element j of the C-order view
    ``offset + sum(i_k * strides[k])`` over ``shape`` is ``index.flat[j]``, or None where the index
    is no such view (or an index or a stride would be negative)."""
    x = np.ascontiguousarray(index).reshape(-1).astype(np.int64, copy=False)
    n = x.size
    if n == 0:
        return None
    off = int(x[0])
    if off < 0:                           # a take counts a negative index from the end
        return None
    dims, pos = [], 1                     # inner runs first: (length, stride)
    while pos < n:
        step = x[::pos] - off             # the start of each run of the inner dimensions so far
        s = int(step[1])
        run = int(np.argmax(step != np.arange(step.size) * s)) or step.size
        length = next((d for d in range(run, 1, -1) if (n // pos) % d == 0), 1)     # the longest that tiles
        if length == 1 or s < 0:
            return None
        dims.append((length, s))
        pos *= length
    shape = tuple(d for d, _ in reversed(dims))
    strides = tuple(s for _, s in reversed(dims))
    made = off + sum(np.arange(d).reshape((-1,) + (1,) * (len(shape) - 1 - k)) * s
                     for k, (d, s) in enumerate(zip(shape, strides)))
    if not np.array_equal(np.reshape(made, -1), x):
        return None
    return shape, strides, off


def view(a: np.ndarray, form: Form) -> np.ndarray | None:
    """The elements of C-contiguous ``a`` that ``form``'s index names, as a read-only view in the
    form's shape (``np.take(a, index)`` reshaped to it); None where an index lies past ``a`` (the
    take then raises)."""
    shape, strides, off = form
    if off + sum((d - 1) * s for d, s in zip(shape, strides)) >= a.size:
        return None
    it = a.itemsize
    return as_strided(a.reshape(-1)[off:], shape, tuple(s * it for s in strides), writeable=False)


def take(a: np.ndarray, index: np.ndarray, form: Form | None, dtype=None) -> np.ndarray:
    """``np.take(a, index).astype(dtype)`` (``dtype`` None: a's), C-contiguous: one strided copy
    where ``form`` (index's, from strided_form) is given and ``a`` is C-contiguous."""
    v = view(a, form) if form is not None and a.flags.c_contiguous else None
    if v is None:
        got = np.take(a, index)
        return got if dtype is None else got.astype(dtype)
    return v.astype(a.dtype if dtype is None else dtype, order="C").reshape(index.shape)


def take_into(out: np.ndarray, a: np.ndarray, index: np.ndarray, form: Form | None) -> None:
    """``out.flat[:] = a.flat[index]`` for C-contiguous ``out`` (``index`` of out's size, every
    entry in range): one strided copy where ``form`` is given and ``a`` is C-contiguous."""
    if not out.flags.c_contiguous:
        raise ArgumentError("strided.take_into: out must be C-contiguous (its reshape is written)")
    v = view(a, form) if form is not None and a.flags.c_contiguous else None
    if v is None:
        np.take(a.reshape(-1), index, out=out.reshape(-1), mode="clip")
        return
    np.copyto(out.reshape(form[0]), v)
