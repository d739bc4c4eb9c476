"""Static checks on the compiled twins, derived from the algorithm (kernels_py/ALGORITHMS.md) for
HEAD_DIM 128, BLOCK_SIZE 16: no scratch, LDS as declared and within 64 KiB, the number of matrix
instructions per 64-token chunk, the 16-byte V load, the D-layout-dependent reductions of the
gfx936 stand-in; and the asm parser against llvm-mc and clang's own annotations.
"""
from __future__ import annotations

import json
import os
import re

import pytest
from support import need_toolchain, repo_project

from gfxsim.cli import main
from gfxsim.hip import build as hipbuild
from gfxsim.asm import encoding_family, parse
from gfxsim.asm.encoding import llvm_mc_families
from gfxsim.asm.inspect import occupancy
from gfxsim.hip.inspect import inspect

PROJECT = repo_project()

ARCHS = ("gfx940", "gfx942", "gfx936")
I8, BF16 = "v_mfma_i32_16x16x32_i8", "v_mfma_f32_16x16x16_bf16"
HEAD_DIM, TOKENS = 128, 64
DTILES, KSTEPS = HEAD_DIM // 16, HEAD_DIM // 32        # 16-column PV tiles, K=32 QK steps

# LDS of the declared __shared__ arrays, in bytes.
# Rows padded by LDS_PAD = 8 bytes (Q, Wq, bf16 W); waves 1..3's o_lds rows of HEAD_DIM + 2 floats on gfx936's
# jump layout, HEAD_DIM + 4 on CDNA3 (int8_attention.h "LDS row strides").
Q_LDS, W_LDS = 16 * (HEAD_DIM + 8), 4 * 16 * (TOKENS + 8)          # Qq, the waves' Wq slabs
BF16_W_LDS = 4 * 16 * (2 * TOKENS + 8)


def o_lds(arch):                                                    # waves 1..3's partial O
    return 3 * 16 * (HEAD_DIM + (2 if arch == "gfx936" else 4)) * 4


def lds(name, arch):
    return {
        "int8_kv_cache": 0,
        "qk_int8": Q_LDS + 16 * 4,                                              # Qq, sQ
        "pv_int8_fragment": W_LDS + o_lds(arch),
        "pv_int8_contiguous": W_LDS + o_lds(arch),
        "pv_bf16": BF16_W_LDS + o_lds(arch),                                    # bf16 W slabs
        "paged_attention_decode_fragment": Q_LDS + 16 * 4 + 2 * 4 * 16 * 4 + W_LDS + o_lds(arch),
        "paged_attention_decode_contiguous": Q_LDS + 16 * 4 + 2 * 4 * 16 * 4 + W_LDS + o_lds(arch),
        "paged_attention_reduce": 0,
        "prefix_prefill": 4 * Q_LDS + 4 * 16 * 4 + W_LDS,                       # per-wave Qq, sQ
    }[name]


# Matrix instructions per 64-token chunk of a wave:
#   QK: 4 token tiles x HEAD_DIM/32 K=32 steps                                   = 16
#   PV int8: 2 K=32 instructions (bytes 0-7, 8-15 of the 16-byte V load) x 8 column tiles = 16
#   PV bf16: 4 K=16 instructions (4 tokens each of the 16) x 8 column tiles      = 32
QK, PV, PV16 = 4 * KSTEPS, 2 * DTILES, 4 * DTILES
# entry -> (mnemonic, per iteration of the chunk loop (None: no loop), in the whole kernel).
# Kernels with a chunk loop peel the partial last chunk, so the kernel holds twice the loop's count.
MATRIX = {
    "int8_kv_cache": (None, None, 0),
    "qk_int8": (I8, QK, 2 * QK),
    "pv_int8_fragment": (I8, PV, 2 * PV),
    "pv_int8_contiguous": (I8, PV, 2 * PV),
    "pv_bf16": (BF16, PV16, 2 * PV16),
    "paged_attention_decode_fragment": (I8, None, QK + PV),     # one chunk per wave, no loop
    "paged_attention_decode_contiguous": (I8, None, QK + PV),
    "paged_attention_reduce": (None, None, 0),
    "prefix_prefill": (I8, QK + PV, 2 * (QK + PV)),
}


need = need_toolchain   # tests/support


@pytest.fixture(scope="session")
def reports():
    """entry -> arch -> KernelReport for every twin and target (builds once; then the cache)."""
    out: dict[str, dict] = {}
    for arch in ARCHS:
        need(arch)
        for kernel in PROJECT.kernels:
            for r in inspect(kernel, arch, project=PROJECT).reports:
                out.setdefault(r.name, {})[arch] = r
    return out


def test_every_entry_point_is_checked(reports):
    assert set(reports) == set(MATRIX)
    for name in reports:
        lds(name, "gfx942")                                    # raises for an entry it does not know


def test_no_scratch_and_no_spills(reports):
    for name, by_arch in reports.items():
        for arch, r in by_arch.items():
            assert (r.scratch_bytes, r.vgpr_spills, r.sgpr_spills) == (0, 0, 0), f"{name} {arch}"


def test_lds_is_what_the_kernel_declares_and_fits_64k(reports):
    for name, by_arch in reports.items():
        for arch, r in by_arch.items():
            assert r.lds_bytes == lds(name, arch) <= 64 * 1024, f"{name} {arch}: {r.lds_bytes} bytes"


def test_matrix_instructions_per_chunk(reports):
    for name, by_arch in reports.items():
        mnemonic, per_iteration, total = MATRIX[name]
        for arch, r in by_arch.items():
            assert sum(r.matrix.values()) == total and (not total or set(r.matrix) == {mnemonic}), f"{name} {arch}"
            if per_iteration is None:
                assert not r.loops, f"{name} {arch}: matrix instructions in a loop"
            else:
                loop, = r.loops          # exactly one loop holds them, and it is innermost
                assert loop.innermost and loop.matrix == {mnemonic: per_iteration}, f"{name} {arch}"


def test_pv_loads_v_16_bytes_at_a_time(reports):
    """One global_load_dwordx4 per 16-column tile: each lane's 16 consecutive tokens of one V
    column. The "faster, wrong" variant loads 8 bytes (global_load_dwordx2) and so feeds
    half of each instruction's tokens."""
    for name in ("pv_int8_fragment", "pv_int8_contiguous", "pv_bf16", "prefix_prefill"):
        for arch, r in reports[name].items():
            loop, = r.loops
            assert loop.vector_memory.get("global_load_dwordx4") == DTILES, f"{name} {arch}"
            # the only 8-byte loads are prefix_prefill's K fragments: one per QK instruction
            assert loop.vector_memory.get("global_load_dwordx2", 0) == (QK if name == "prefix_prefill" else 0)
    for name in ("paged_attention_decode_fragment", "paged_attention_decode_contiguous"):
        for arch, r in reports[name].items():                    # V of the chunk + 2 x 16 bytes of Q per lane
            assert r.vector_memory["global_load_dwordx4"] == DTILES + 2, f"{name} {arch}"


def test_stand_in_keeps_gfx936_reductions(reports):
    """The scale-group amax of W crosses the lanes that hold one D row and pv_tile: on gfx942
    register i is row 4*rowid+i and pv_tile = lane16id/8, so 3 shuffles (xor 1, 2, 4) per register
    = 12, and one more per register (xor 8) fetches the row's other group = 16; contiguous groups
    need all 16 lanes of the row (4 shuffles) for both groups of the 4 rows = 32. On gfx936 (jump
    layout) the row is lane16id and pv_tile = i/2 lives in the registers: 2 shuffles (xor 16, 32) per
    group, 2 groups = 4 for either grouping, and the other group is a register of the lane."""
    expect = {("pv_int8_fragment", "gfx942"): 16, ("pv_int8_contiguous", "gfx942"): 32,
              ("pv_int8_fragment", "gfx936"): 4, ("pv_int8_contiguous", "gfx936"): 4}
    for (name, arch), n in expect.items():
        k = parse(hipbuild.arch_dir(arch, PROJECT).joinpath("pv_int8.s").read_text()).kernel(name)
        loop, = [lp for lp in k.loops if any(i.is_matrix for i in k.body(lp))]
        assert sum(i.mnemonic == "ds_bpermute_b32" for i in k.body(loop)) == n, f"{name} {arch}"


def test_occupancy_estimate_agrees_with_clang(reports):
    for name, by_arch in reports.items():
        for arch, r in by_arch.items():
            assert r.occupancy.waves_per_simd == r.clang_occupancy, f"{name} {arch}: {r.occupancy.formula}"


@pytest.mark.parametrize("vgprs, sgprs, lds, threads, waves", [
    (208, 37, 29184, 256, 2),      # VGPR-bound: 512 / 208
    (64, 30, 40000, 256, 1),       # LDS-bound: one 4-wave workgroup per CU
    (128, 47, 31808, 256, 2),      # LDS: 2 workgroups x 4 waves / 4 SIMDs; VGPRs allow 4
    (24, 20, 20000, 64, 1),        # 3 one-wave workgroups per CU: at most 1 on a SIMD
    (100, 20, 0, 256, 4),          # 512 / align8(100) = 5 ... 104 -> 4
    (8, 16, 0, 64, 8),             # capped at 8 waves per SIMD
])
def test_occupancy_formula(vgprs, sgprs, lds, threads, waves):
    assert occupancy(vgprs, sgprs, lds, threads).waves_per_simd == waves


def test_families_agree_with_llvm_mc_encodings():
    for arch in ("gfx942", "gfx936"):
        tc = need(arch)
        if tc.llvm_mc is None:
            msg = f"llvm-mc-{tc.major} not installed (apt-get install llvm-{tc.major})"
            pytest.fail(msg) if os.environ.get("GFXSIM_REQUIRE_TOOLCHAIN") else pytest.skip(msg)
        for b in hipbuild.build(None, arch, project=PROJECT):
            f = parse(b.asm.read_text())
            ours = [(i.mnemonic, i.family) for k in f.kernels.values() for i in k.instructions]
            truth = llvm_mc_families(b.asm, f.processor, tc.llvm_mc)
            assert len(ours) == len(truth), b.asm
            wrong = {(m, a, t) for (m, a), (_, t) in zip(ours, truth) if a != t}
            assert not wrong, f"{b.asm}: (mnemonic, ours, llvm-mc) {sorted(wrong)[:10]}"


def test_loops_are_the_ones_clang_annotates(reports):
    for arch in ARCHS:
        for kernel in PROJECT.kernels:
            text = hipbuild.arch_dir(arch, PROJECT).joinpath(f"{kernel}.s").read_text()
            # "; =>This Loop Header", or for a nested loop "; Parent Loop ..." with the header on the next line
            clang = set(re.findall(r"^(\.\w+):[ \t]*;(?:[^\n]*\n[ \t]+;)*?[^\n]*=>\s*This (?:Inner )?Loop Header",
                                   text, re.M))
            ours = {lp.header for k in parse(text).kernels.values() for lp in k.loops}
            assert ours == clang, f"{kernel} {arch}"


SNIPPET = """\
\t.amdgcn_target "amdgcn-amd-amdhsa--gfx942"
\t.globl k
\t.type k,@function
k:
\ts_load_dwordx2 s[0:1], s[0:1], 0x0
\ts_mov_b32 s2, 0
.LBB0_1:                                ; outer loop header
\tv_mov_b32_e32 v1, 0
.LBB0_2:                                ; inner loop header
\tv_mfma_i32_16x16x32_i8 v[0:3], v[4:5], v[6:7], 0
\ts_add_i32 s2, s2, 1
\ts_cmp_lt_i32 s2, 4
\ts_cbranch_scc1 .LBB0_2
\ts_cmpk_lt_i32 s2, 0x40
\ts_cbranch_scc0 .LBB0_4                ; to an out-of-line block ...
.LBB0_3:
\tds_bpermute_b32 v1, v2, v3
\ts_branch .LBB0_1
.LBB0_5:
\ts_endpgm
.LBB0_4:                                ; ... that jumps back: not a loop
\tglobal_load_dwordx4 v[8:11], v[12:13], off
\ts_branch .LBB0_5
.Lfunc_end0:
\t.section .rodata,"a",@progbits
\t.amdhsa_kernel k
\t\t.amdhsa_group_segment_fixed_size 512
\t\t.amdhsa_private_segment_fixed_size 0
\t.end_amdhsa_kernel
\t.amdgpu_metadata
---
amdhsa.kernels:
  - .name: k
    .vgpr_count: 16
    .sgpr_count: 8
    .args:
      - .name: x
        .offset: 0
        .size: 8
        .value_kind: global_buffer
...
\t.end_amdgpu_metadata
"""


def test_parser_on_a_snippet():
    k = parse(SNIPPET).kernel("k")
    assert [i.mnemonic for i in k.instructions][:3] == ["s_load_dwordx2", "s_mov_b32", "v_mov_b32_e32"]
    mfma = k.instructions[3]
    assert (mfma.label, mfma.line, mfma.operands, mfma.is_matrix) == (".LBB0_2", 10, "v[0:3], v[4:5], v[6:7], 0", True)
    assert k.descriptor[".amdhsa_group_segment_fixed_size"] == 512
    assert k.metadata[".args"][0][".name"] == "x"
    loops = {lp.header: lp for lp in k.loops}
    assert set(loops) == {".LBB0_1", ".LBB0_2"}                 # .LBB0_5 <- .LBB0_4 is no back edge
    assert loops[".LBB0_1"].contains(loops[".LBB0_2"]) and k.innermost(loops[".LBB0_2"])
    assert (loops[".LBB0_1"].depth, loops[".LBB0_2"].depth) == (1, 2)
    assert [i.mnemonic for i in k.body(loops[".LBB0_2"])] == ["v_mfma_i32_16x16x32_i8", "s_add_i32", "s_cmp_lt_i32",
                                                             "s_cbranch_scc1"]


@pytest.mark.parametrize("mnemonic, operands, family", [
    ("s_load_dwordx8", "s[4:11], s[0:1], 0x0", "SMEM"), ("s_and_saveexec_b64", "s[0:1], vcc", "SOP1"),
    ("s_lshl_b64", "s[0:1], s[2:3], 2", "SOP2"), ("s_cmp_lt_i32", "s2, 4", "SOPC"),
    ("s_movk_i32", "s2, 0x40", "SOPK"), ("s_cbranch_execz", ".LBB0_3", "SOPP"), ("s_waitcnt", "vmcnt(0)", "SOPP"),
    ("v_mov_b32_e32", "v1, 0", "VOP1"), ("v_add_f32_e32", "v1, v2, v3", "VOP2"),
    ("v_cmp_gt_i32_e32", "vcc, 4, v0", "VOPC"), ("v_cmp_gt_i32_e64", "s[0:1], 4, v0", "VOP3"),
    ("v_fma_f32", "v1, v2, v3, v4", "VOP3"), ("v_pk_fma_f32", "v[0:1], v[2:3], v[4:5], v[6:7]", "VOP3P"),
    ("v_mfma_i32_16x16x32_i8", "a[0:3], v[0:1], v[2:3], 0", "MFMA"), ("v_accvgpr_read_b32", "v0, a0", "MFMA"),
    ("v_or_b32_sdwa", "v0, v1, v2 dst_sel:DWORD src0_sel:BYTE_0", "SDWA"), ("v_mov_b32_dpp", "v0, v1 row_shr:1", "DPP"),
    ("ds_read_b128", "v[0:3], v4", "DS"), ("global_load_dwordx4", "v[0:3], v[4:5], off", "GLOBAL"),
    ("buffer_load_dwordx4", "v[0:3], v4, s[0:3], 0 offen", "MUBUF"), ("v_fmamk_f32", "v0, v1, 0x3f800000, v2", "VOP2"),
    ("v_readfirstlane_b32", "s0, v0", "VOP1"),
])
def test_family_rules(mnemonic, operands, family):
    assert encoding_family(mnemonic, operands) == family


def test_cli_inspect_pv_int8_gfx942(reports, capsys):
    assert main(["hip", "inspect", "pv_int8", "--arch", "gfx942"]) == 0
    text = capsys.readouterr().out
    for figure in ("pv_int8_fragment", "pv_int8_contiguous", f"{PV} {I8}",
                   f"LDS            {lds('pv_int8_fragment', 'gfx942')} bytes",
                   "VGPR", "AGPR", "SGPR", "scratch        0 bytes", "occupancy", "waves/SIMD", "global_load_dwordx4",
                   "MFMA", "VOP3P", "SOPP"):
        assert figure in text, figure
    assert main(["hip", "inspect", "pv_int8_fragment", "--arch", "gfx936", "--format", "json"]) == 0
    res = json.loads(capsys.readouterr().out)
    k, = res["kernels"]
    assert res["stand_in"] and res["processor"] == "gfx942" and k["name"] == "pv_int8_fragment"
    assert k["loops"][0]["matrix"] == {I8: PV} and k["lds_bytes"] == lds("pv_int8_fragment", "gfx936")
    assert main(["hip", "inspect", "pv_int9", "--arch", "gfx942"]) == 2
    assert "gfxsim hip: error: no HIP kernel 'pv_int9'" in capsys.readouterr().err


def test_inspect_reads_any_clang_assembly(tmp_path, capsys):
    path = tmp_path / "k.s"
    path.write_text(SNIPPET)
    assert main(["hip", "inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "1 v_mfma_i32_16x16x32_i8" in out and "LDS            512 bytes" in out
