"""Accumulator models: how one matrix instruction turns K products and C into an fp32 D.

A record's ``AccumulatorPrecision`` picks the model (see its docstring). The reduced models follow
what the H200 probe measured (hw_probes/nvidia/README.md):

  fused  every term (the products, and C) is aligned to the largest exponent among them and cut to
         ``mantissa_bits`` fraction bits below it (toward zero, or to nearest), the cut terms are
         summed exactly and the sum is rounded to fp32 (toward zero, or to nearest). HMMA f16/bf16
         on sm_90 keeps 25 bits and truncates; wgmma e4m3 (QGMMA) keeps 13, truncates, and writes
         a result truncated to 13 mantissa bits (``result_bits``).
  after  the products alone go through the fused adder (one ``k_steps`` step at a time, each
         step's sum entering the next as its C), then C is added by an fp32 add (nearest even). This
         is how sm_90 runs mma.sync e4m3: two f16 HMMA.16816 (K slots k%4 < 2, then k%4 >= 2) and
         an FADD.
  exact  the exact sum rounded once to fp32, then (``mantissa_bits`` set) to that many bits.

Inputs are float64 arrays: products ``[..., K]`` (exact: every product of two <=16-bit floats is)
and ``c`` ``[...]`` (fp32 values). The exact sums of the fused models are formed in float64, which
is exact while mantissa_bits + log2(K + 1) <= 52.
"""
from __future__ import annotations

import numpy as np


NONE = -(1 << 20)        # the exponent of a zero term: it never sets the alignment


def exponent(x):
    """floor(log2|x|) per element (NONE where x == 0)."""
    _, e = np.frexp(np.asarray(x, np.float64))
    return np.where(np.asarray(x) == 0, NONE, e - 1)


def product_terms(a, b):
    """Products ``[..., M, N, K]`` of A ``[..., M, K]`` and B ``[..., K, N]`` with their alignment
    exponents: the sum of the inputs' exponents, as a multiplier forms it (significand in [1, 4))."""
    a = np.asarray(a, np.float64)
    b = np.swapaxes(np.asarray(b, np.float64), -1, -2)
    prod = a[..., :, None, :] * b[..., None, :, :]
    pexp = exponent(a)[..., :, None, :] + exponent(b)[..., None, :, :]
    return prod, np.where(prod == 0, NONE, pexp)


def _cut(x, quantum, rounding):
    q = x / quantum
    return (np.trunc(q) if rounding == "truncate" else np.round(q)) * quantum     # np.round: ties to even


def to_f32(x, rounding):
    """float64 -> float32, to nearest even or toward zero."""
    x = np.asarray(x, np.float64)
    near = x.astype(np.float32)
    if rounding == "nearest":
        return near
    over = np.abs(near.astype(np.float64)) > np.abs(x)          # nearest went away from zero: step back
    return np.where(over, np.nextafter(near, np.float32(0)), near).astype(np.float32)


def fused_sum(terms, exps, bits, rounding):
    """Align ``terms`` [..., n] to the largest of ``exps``, cut each to ``bits`` fraction bits, sum exactly."""
    emax = exps.max(axis=-1, keepdims=True)
    quantum = np.ldexp(1.0, np.clip(emax - bits, -1074, 1023).astype(np.int64))
    return _cut(terms, quantum, rounding).sum(axis=-1)


def _step(prod, pexp, run, bits, rnd, result_bits=None):
    terms = np.concatenate([prod, run[..., None]], axis=-1)
    exps = np.concatenate([pexp, exponent(run)[..., None]], axis=-1)
    d = to_f32(fused_sum(terms, exps, bits, rnd), rnd)
    if result_bits is not None:
        d = truncate_mantissa(d, result_bits) if rnd == "truncate" else round_mantissa(d, result_bits)
    return d.astype(np.float64)


def accumulate(acc, prod, pexp, c):
    """D (float32 ``[...]``) from products ``[..., K]`` (alignment exponents ``pexp``) and C ``[...]``
    by the record ``acc`` (an ``AccumulatorPrecision``)."""
    prod = np.asarray(prod, np.float64)
    c = np.asarray(c, np.float64)
    if acc.mantissa_bits is None or acc.c_entry == "exact":
        d = (prod.sum(axis=-1) + c).astype(np.float32)
        if acc.mantissa_bits is not None:
                d = round_mantissa(d, acc.mantissa_bits) if acc.rounding == "nearest" else \
                truncate_mantissa(d, acc.mantissa_bits)
        return d
    bits, rnd = acc.mantissa_bits, acc.rounding
    steps = acc.k_steps or (tuple(range(prod.shape[-1])),)
    run = c if acc.c_entry == "fused" else np.zeros_like(c)
    for ks in steps:
        ks = list(ks)
        run = _step(prod[..., ks], pexp[..., ks], run, bits, rnd, acc.result_bits)
    if acc.c_entry == "after":                                  # C joins last, by an fp32 add
        return (run.astype(np.float32) + c.astype(np.float32)).astype(np.float32)
    return run.astype(np.float32)


def mma_f32(acc, a, b, c):
    """D = A.B + C of float inputs ``[bl, M, K] x [bl, K, N] + [bl, M, N]`` under the record ``acc``."""
    prod, pexp = product_terms(a, b)
    return accumulate(acc, prod, pexp, c)


def truncate_mantissa(x, bits):
    """fp32 values cut (toward zero) to ``bits`` explicit mantissa bits."""
    x = np.asarray(x, np.float32)
    drop = 23 - bits
    if drop <= 0:
        return x
    u = x.view(np.uint32) & np.uint32(~((1 << drop) - 1) & 0xFFFFFFFF)
    return u.view(np.float32)


def round_mantissa(x: np.ndarray, bits: int) -> np.ndarray:
    """Round fp32 values to ``bits`` explicit mantissa bits (nearest, ties to even)."""
    x = np.asarray(x, np.float32)
    drop = 23 - bits
    if drop <= 0:
        return x
    u = x.view(np.uint32).astype(np.uint64)
    half = np.uint64(1 << (drop - 1))
    lsb = (u >> np.uint64(drop)) & np.uint64(1)
    u = (u + half - np.uint64(1) + lsb) & ~np.uint64((1 << drop) - 1)
    return u.astype(np.uint32).view(np.float32)
