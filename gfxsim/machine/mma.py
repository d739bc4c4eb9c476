"""Matrix-instruction execution from the instruction record: gather, compute, scatter.

Operands are gathered through the record's layout (``slot_of``), so one code path serves every
v_mfma_*/v_mmac_* shape and block count, and any arch whose record exists (wave32 included).
int8 -> int32 is exact with overflow detection; float inputs are widened exactly to float64 and
go through the record's accumulator datapath (``AccumulatorPrecision``, computed by ``accum`` and
``accum_serial``); its exact model forms each output's K-sum plus C in float64 and rounds once to
fp32. xf32 operands (fp32 registers) are cut to XF32's 10 mantissa bits first (XF32_BITS). f64
C/D: one fma per K index where the record says so, else the exact sum of the products and C
rounded once to f64 (``mma64``).
"""
from __future__ import annotations

import functools

from .jit import njit
import numpy as np

from .accum import mma_f32, round_mantissa, truncate_mantissa  # noqa: F401  (round_mantissa: re-exported)
from .mma64 import mma_f64

INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1
XF32_BITS = 10          # XF32: 1 sign, 8 exponent, 10 mantissa bits, read from fp32 registers


def gather_plan(insn, op):
    """(element index, lane) arrays ``[blocks, rows, cols]`` for an operand, from its record.
    The element index counts elements of the operand's type within the lane's registers.

    The plan depends on the operand's layout only, so it is cached by the layout record itself
    (a frozen, hashable value compared field by field): two records with equal layouts share a
    plan, a record never aliases another through a reused object address, and the cache keeps no
    instruction record alive. The arrays are read-only (they are shared)."""
    return _plan(insn.operand(op))


@functools.lru_cache(maxsize=256)
def _plan(lay):
    lane, reg, elem = lay.slot_of()
    epr = max(32 // lay.elem_bits, 1)        # a 64-bit element: one per register pair
    e = reg.astype(np.int64) * epr + elem
    lane = lane.astype(np.int64)
    e.setflags(write=False)
    lane.setflags(write=False)
    return e, lane


@njit
def _mma_int(a, b, c, blocks, M, N, K):
    d = np.empty((blocks, M, N), np.int64)
    for bl in range(blocks):
        for m in range(M):
            for n in range(N):
                s = c[bl, m, n]
                for k in range(K):
                    s += np.int64(a[bl, m, k]) * np.int64(b[bl, k, n])
                d[bl, m, n] = s
    return d


@njit
def _mma_f64(a, b, c, blocks, M, N, K):
    d = np.empty((blocks, M, N), np.float64)
    for bl in range(blocks):
        for m in range(M):
            for n in range(N):
                s = 0.0
                for k in range(K):
                    s += a[bl, m, k] * b[bl, k, n]
                d[bl, m, n] = s + c[bl, m, n]
    return d


def compute(insn, a_mat, b_mat, c_mat, batch: int = 1):
    """D = A.B + C for ``[batch*blocks, M, K] x [batch*blocks, K, N] + [batch*blocks, M, N]``.
    Returns (D typed like the record's C/D, overflow mask or None)."""
    bl, M, N, K = insn.blocks * batch, insn.M, insn.N, insn.K
    if insn.a_type == "xf32":
        a_mat = truncate_mantissa(a_mat, XF32_BITS)
    if insn.b_type == "xf32":
        b_mat = truncate_mantissa(b_mat, XF32_BITS)
    acc = insn.accumulator
    if insn.cd_type == "f64":
        if acc.c_entry == "fma":
            return mma_f32(acc, a_mat, b_mat, np.asarray(c_mat, np.float64)), None
        return mma_f64(a_mat, b_mat, c_mat), None
    if insn.cd_type == "i32":
        d = _mma_int(a_mat.astype(np.int64), b_mat.astype(np.int64), c_mat.astype(np.int64), bl, M, N, K)
        overflow = (d < INT32_MIN) | (d > INT32_MAX)
        return d.astype(np.int64).astype(np.uint64).astype(np.uint32).view(np.int32), overflow
    if not acc.is_exact:
        # the record's datapath: measured (sm_90), MMA-Sim's models (CDNA, Ada), FP22
        return mma_f32(acc, a_mat, b_mat, c_mat, insn.a_type, insn.b_type), None
    d = _mma_f64(a_mat.astype(np.float64), b_mat.astype(np.float64), c_mat.astype(np.float64), bl, M, N, K)
    return d.astype(np.float32), None
