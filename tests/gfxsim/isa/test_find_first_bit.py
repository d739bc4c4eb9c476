"""v_ffbh_u32, v_ffbl_b32, v_ffbh_i32 (the CDNA3 ISA's find-first-bit instructions; Triton's
integer divisions and sorts use v_ffbh_u32), against a bit-by-bit count, through the asm front end."""
import numpy as np
import pytest

from gfxsim import Buffer
from gfxsim.asm.run import kernel_from_text, run_asm

WORDS = np.array([0, 1, 2, 3, 0x80000000, 0xFFFFFFFF, 0x00010000, 0x7FFFFFFF, 0xFFFF0000, 0xC0000000,
                  0x40000000, 0xFFFFFFFE, 0x12345678, 0x00000100] * 4 + list(range(8)), np.uint32)


def _bits(w):
    return [(int(w) >> (31 - p)) & 1 for p in range(32)]          # position 0 = the MSB


def ffbh_u(w):
    b = _bits(w)
    return b.index(1) if 1 in b else 0xFFFFFFFF


def ffbl(w):
    return next((k for k in range(32) if (int(w) >> k) & 1), 0xFFFFFFFF)


def ffbh_i(w):
    b = _bits(w)
    return next((p for p in range(1, 32) if b[p] != b[0]), 0xFFFFFFFF)


@pytest.mark.parametrize("mn, want", [("v_ffbh_u32", ffbh_u), ("v_ffbl_b32", ffbl), ("v_ffbh_i32", ffbh_i)])
def test_find_first_bit(mn, want):
    k = kernel_from_text(f"""
        s_load_dwordx2 s[4:5], s[0:1], 0x0
        v_lshlrev_b32_e32 v1, 2, v0
        s_waitcnt lgkmcnt(0)
        global_load_dword v2, v1, s[4:5]
        s_waitcnt vmcnt(0)
        {mn}_e32 v3, v2
        global_store_dword v1, v3, s[4:5]
    """, args=[("x", "global_buffer", 8)])
    b = Buffer("x", WORDS.copy())
    run_asm(k, 1, 64, args={"x": b})
    assert b.array.tolist() == [want(w) for w in WORDS]
