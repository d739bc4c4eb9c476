"""Scalar ALU forms clang and Triton write (s_cmpk_*, s_lshl<n>_add_u32, bit scans and counts,
s_bfe, packs, sign extension, s_bitset, s_cmov), readlane/writelane, the cache and scheduling
instructions accepted as no-ops, and calls: s_getpc_b64 + rel32 relocations + s_swappc_b64 into
a device function and s_setpc_b64 back, by hand and from clang."""
from __future__ import annotations

import numpy as np
import pytest

from gfxsim import Buffer
from gfxsim.asm.parse import parse
from gfxsim.asm.run import kernel_from_text, run_asm
from gfxsim.asm.state import AsmError

from support.asm_sandbox import Sandbox
from support.mubuf import compile_hip

M32 = 0xFFFFFFFF


def scalar(lines, **sgprs):
    sb = Sandbox()
    for r, v in sgprs.items():
        sb.set_sgpr(int(r[1:]), v & M32)
    sb.run(*lines.strip().splitlines())
    return sb


@pytest.mark.parametrize("op,a,k,want", [
    ("s_cmpk_lt_u32", 5, 0x40, 1), ("s_cmpk_lt_u32", 0xFFFFFFFF, 0x40, 0),
    ("s_cmpk_lt_i32", -1, 0x40, 1), ("s_cmpk_gt_i32", 3, -2, 1), ("s_cmpk_ge_u32", 0x8000, 0x8000, 1),
    ("s_cmpk_eq_u32", 0xFFFF, 0xFFFF, 1), ("s_cmpk_eq_i32", 0xFFFF, -1, 0), ("s_cmpk_eq_i32", -1, -1, 1),
    ("s_cmpk_lg_i32", 7, 7, 0), ("s_cmpk_le_u32", 0x10000, 0xFFFF, 0), ("s_cmpk_le_i32", -5, -5, 1),
])
def test_cmpk_extends_the_immediate_by_the_compare_type(op, a, k, want):
    sb = scalar(f"{op} s4, {k}", s4=a)
    assert int(sb.st.scc[0]) == want


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_lshl_add_carries_out_of_32_bits(n):
    sb = scalar(f"s_lshl{n}_add_u32 s6, s4, s5", s4=0x1234, s5=7)
    assert sb.sgpr(6) == [(0x1234 << n) + 7] and int(sb.st.scc[0]) == 0
    sb = scalar(f"s_lshl{n}_add_u32 s6, s4, s5", s4=0xC0000001, s5=1)
    assert sb.sgpr(6) == [((0xC0000001 << n) + 1) & M32] and int(sb.st.scc[0]) == 1


def test_bit_scans_and_counts():
    sb = scalar("""
s_ff1_i32_b32 s10, s4
s_ff1_i32_b32 s11, s5
s_ff1_i32_b64 s12, s[6:7]
s_flbit_i32_b32 s13, s4
s_flbit_i32_b32 s14, s5
s_flbit_i32 s15, s8
s_bcnt1_i32_b64 s16, s[6:7]
s_bcnt1_i32_b32 s17, s4
s_ff0_i32_b32 s18, s4
""", s4=0x00F0, s5=0, s6=0, s7=0x10, s8=0xFFFF0000)
    assert sb.sgpr(10, 9) == [4, M32, 36, 24, M32, 16, 1, 4, 0]
    assert int(sb.st.scc[0]) == 1            # s_bcnt1 set SCC = D != 0


def test_bfe_pack_sext():
    sb = scalar("""
s_bfe_u32 s10, s4, 0x80004
s_bfe_i32 s11, s4, 0x80004
s_pack_ll_b32_b16 s12, s4, s5
s_pack_lh_b32_b16 s13, s4, s5
s_pack_hh_b32_b16 s14, s4, s5
s_sext_i32_i16 s15, s4
s_sext_i32_i8 s16, s5
s_absdiff_i32 s17, s5, s4
""", s4=0x12348F80, s5=0xABCD0081)
    assert sb.sgpr(10, 8) == [0xF8, 0xFFFFFFF8, 0x00818F80, 0xABCD8F80, 0xABCD1234, 0xFFFF8F80, 0xFFFFFF81,
                              abs(0xABCD0081 - (1 << 32) - 0x12348F80)]


def test_bitset_cmov_and_the_64_bit_forms():
    sb = scalar("""
s_bitset1_b32 s4, 31
s_bitset0_b32 s5, 0
s_bitset1_b64 s[6:7], 33
s_cmp_eq_u32 s4, s4
s_cmov_b32 s8, s5
s_cmovk_i32 s9, -3
s_brev_b32 s10, s5
""", s4=1, s5=3, s6=0, s7=0, s8=99, s9=1)
    assert sb.sgpr(4, 7) == [0x80000001, 2, 0, 2, 2, 0xFFFFFFFD, 0x40000000]


def test_readlane_and_writelane():
    sb = Sandbox()
    sb.v[1] = np.arange(64) * 3
    sb.set_sgpr(4, 70)                        # lane 70 & 63 = 6
    sb.set_exec(np.arange(64) < 4)            # readlane ignores EXEC; so does writelane
    sb.run("v_readlane_b32 s5, v1, s4", "v_readlane_b32 s6, v1, 63", "v_writelane_b32 v1, s5, 40")
    assert sb.sgpr(5, 2) == [18, 189]
    assert sb.v[1][40] == 18 and sb.v[1][41] == 123


def test_cache_and_scheduling_instructions_are_accepted():
    sb = scalar("""
s_waitcnt vmcnt(0) expcnt(0) lgkmcnt(0)
s_setprio 2
s_nop 4
s_dcache_wb
s_dcache_inv
s_icache_inv
buffer_wbl2 sc0 sc1
buffer_inv sc1
s_ttracedata
s_memtime s[10:11]
s_memrealtime s[12:13]
""")
    assert sb.sgpr(10, 4) == [1, 0, 2, 0]          # a clock that only moves forward, deterministically


@pytest.mark.parametrize("line,match", [("s_trap 2", "trapped"), ("s_sethalt 1", "halt"),
                                        ("s_set_gpr_idx_off", "index mode")])
def test_traps_halts_and_index_mode_are_refused(line, match):
    with pytest.raises(Exception, match=match):
        scalar(line)


CALL = """
s_load_dwordx2 s[4:5], s[0:1], 0x0
v_lshlrev_b32_e32 v2, 2, v0
v_mov_b32_e32 v1, v0
s_getpc_b64 s[16:17]
s_add_u32 s16, s16, add_five@rel32@lo+4
s_addc_u32 s17, s17, add_five@rel32@hi+12
s_swappc_b64 s[30:31], s[16:17]
s_waitcnt lgkmcnt(0)
global_store_dword v2, v1, s[4:5]
s_endpgm
add_five:
v_add_u32_e32 v1, 5, v1
s_setpc_b64 s[30:31]
"""


def test_a_call_by_hand_goes_there_and_back():
    out = Buffer("out", np.zeros(64, np.int32))
    run_asm(kernel_from_text(CALL, "call", args=[("out", "global_buffer", 8)]), args=dict(out=out))
    assert (out.array == np.arange(64) + 5).all()


def test_a_jump_to_no_instruction_is_an_error():
    bad = CALL.replace("add_five@rel32@lo+4", "add_five@rel32@lo+6")
    with pytest.raises(AsmError, match="no instruction"):
        run_asm(kernel_from_text(bad, "call", args=[("out", "global_buffer", 8)]),
                args=dict(out=Buffer("out", np.zeros(64, np.int32))))


HIP = r"""
#include "gfxsim_hip.h"
__device__ __attribute__((noinline)) float scale_add(float a, int b) { return a * b + 1.0f; }
extern "C" __global__ void calls(float* __restrict__ out, const float* __restrict__ in) {
  int i = threadIdx.x;
  out[i] = scale_add(in[i], i);
}
"""


def test_a_hip_kernel_calling_a_noinline_device_function(tmp_path):
    text = compile_hip(HIP, tmp_path)
    assert "s_swappc_b64" in text and "_Z9scale_addfi@rel32@lo" in text     # a real call, not inlined
    k = parse(text).kernel("calls")
    x = np.linspace(-2, 2, 64).astype(np.float32)
    out = Buffer("out", np.zeros(64, np.float32))
    run_asm(k, args=dict(out=out, **{"in": Buffer("in", x)}))
    fused = (x.astype(np.float64) * np.arange(64) + 1).astype(np.float32)     # v_fma_f32: rounded once
    assert (out.array == fused).all()




def test_wrexec_and_n1_saveexec():
    sb = Sandbox()
    sb.set_sgpr(4, 0x0000FFFF, 0)
    sb.run("s_andn2_wrexec_b64 s[6:7], s[4:5]")           # EXEC = D = S0 & ~EXEC: all ones -> 0
    assert sb.sgpr(6, 2) == [0, 0] and not sb.st.exec.any()
    sb.set_exec(np.ones(64, bool))
    sb.run("s_andn1_saveexec_b64 s[8:9], s[4:5]")         # D = old EXEC; EXEC = ~S0 & EXEC
    assert sb.sgpr(8, 2) == [M32, M32] and (sb.st.exec == (np.arange(64) >= 16)).all()
    sb.run("s_bitcmp1_b64 s[8:9], 40")
    assert int(sb.st.scc[0]) == 1
