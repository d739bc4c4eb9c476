"""Two-level accumulation bounds the error of a reduced FP8 accumulator along the sequence."""
from dataclasses import replace

import numpy as np
import pytest

from gfxsim.arch import nvidia
from kernels_py.fp8.two_level import markdown, pv, pv_inputs, rel_l1, table


def _err(acc, L, block):
    p, v = pv_inputs(L, seed=1)
    return rel_l1(pv(acc, p, v, block=block), p @ v)


def test_one_level_error_grows_two_level_stays_bounded():
    acc = nvidia.SM90_WGMMA_E4M3
    one = {L: _err(acc, L, None) for L in (256, 4096)}
    two = {L: _err(acc, L, 64) for L in (256, 4096)}
    assert one[4096] > 3 * one[256]                  # the accumulator's exponent grows with L: more is cut
    assert two[4096] < 1.5 * two[256]                # a fresh buffer per 64 tokens: the same loss per block
    assert two[4096] < one[4096] / 4
    assert _err(nvidia.F32_EXACT, 4096, None) < two[4096] / 100


def test_fp22_record_is_the_13_bit_adder_over_two_halves_of_k():
    p, v = pv_inputs(256, seed=2)
    halves = replace(nvidia.SM90_WGMMA_E4M3, step=16, zero_exponent=-132)     # Ada: 16 products per fused step
    assert np.array_equal(pv(nvidia.FP22_ADA, p, v), pv(halves, p, v))
    assert not np.array_equal(pv(nvidia.FP22_ADA, p, v), pv(nvidia.SM90_WGMMA_E4M3, p, v))


def test_pv_checks_its_shapes():
    p, v = pv_inputs(96)
    with pytest.raises(ValueError, match="multiples of 32"):
        pv(nvidia.F32_EXACT, p[:, :80], v[:80])
    with pytest.raises(ValueError, match="multiples of 32"):
        pv(nvidia.F32_EXACT, p, v, block=48)


def test_table_renders():
    rows = table(lengths=(64, 128))
    text = markdown(rows, (64, 128))
    assert text.count("\n") == 1 + len(rows) and "two-level (64)" in text
