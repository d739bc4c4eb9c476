"""A compiled lane executor for runs of a block's lean instructions (no provenance, no trace).

A block (blocks.py) writes each lean instruction's work into its source as numpy calls on whole
register rows: ~10 calls of its own per instruction plus the ISA entry's, each costing about a
microsecond whatever the width. Here a run of consecutive instructions that each have a lane form
is encoded once per Program as a small integer array (``encode``: one row per instruction, its
opcode, destination and sources' forms) and executed by one numba function (``run_rows``): a loop over
the instructions, a switch on the opcode and a loop over the lanes under EXEC. The register files'
own arrays are written in place exactly as the block's lean lines write them: the words, the
written bits of the four bytes, the fresh marks cleared (or set from src0 where the row keeps a
fresh matrix result, dequant.KEEPS).

A lane form is the ISA entry's numbers for one lane on uint32 bit patterns (``_int_row``); which
mnemonics have one is ``LANE_OPS``. tests/gfxsim/asm/test_asm_lanevm.py holds every opcode to the
block's numpy lines (the semantics functions' lean work) on random operands, every source kind
and partial EXEC. A row the executor has no form for stays on the block's numpy lines.
"""
from __future__ import annotations

import threading

import numpy as np

from ..machine.jit import njit
from . import lanef32
from .state import EXEC

# source kinds of an encoded row
K_NONE, K_V, K_A, K_S, K_CONST, K_V64, K_A64, K_S64, K_MASK = range(9)
_KIND = {"v": K_V, "a": K_A, "s": K_S, "const": K_CONST}
_KIND64 = {"v": K_V64, "a": K_A64, "sread": K_S64, "const": K_CONST}

# opcodes: the integer VALU rows (their ISA entries' numbers), then the moves and selects
LANE_OPS = {n: k for k, n in enumerate((
    "v_add_u32", "v_sub_u32", "v_subrev_u32", "v_mul_lo_u32", "v_mul_hi_u32",
    "v_lshlrev_b32", "v_lshrrev_b32", "v_ashrrev_i32",
    "v_and_b32", "v_or_b32", "v_xor_b32", "v_not_b32",
    "v_max_u32", "v_min_u32", "v_max_i32", "v_min_i32",
    "v_mul_u32_u24", "v_mul_i32_i24", "v_mad_u32_u24", "v_mad_i32_i24",
    "v_lshl_or_b32", "v_and_or_b32", "v_or3_b32", "v_xad_u32", "v_add3_u32", "v_lshl_add_u32", "v_add_lshl_u32",
    "v_bfe_u32", "v_bfe_i32", "v_bfi_b32",
    "v_cvt_f32_i32", "v_cvt_f32_u32",
))}
OP_MOV = len(LANE_OPS)          # a source's words (v_mov_b32 / v_accvgpr_* of an SGPR or a constant)
OP_COPY = OP_MOV + 1            # a register copy with its written bits and fresh marks (WaveState.vcopy)
OP_CNDMASK = OP_MOV + 2         # v_cndmask_b32: src1 where the mask's lane bit is set, else src0
OP_LSHL_ADD64 = OP_MOV + 3      # v_lshl_add_u64 by a constant: (src0 << sh) + src1, two registers
OP_PK = OP_MOV + 4              # v_pk_{add,mul,fma}_f32: each half through its fp32 row (code[k, 5]), halves picked
OP_CMP = OP_MOV + 5             # v_cmp_<rel>_{f32,i32,u32}: the lanes under EXEC to an SGPR pair, every member
OP_SOP2 = OP_MOV + 6            # a SOP2 row (SOP2_OPS: code[k, 5]) of every member into SGPRs below EXEC, and SCC
OP_SAVEEXEC = OP_MOV + 7        # s_*_saveexec_b64 (SAVEEXEC_OPS: code[k, 5]): D = EXEC, EXEC = f(S0, EXEC), SCC
OP_DIV = OP_MOV + 8             # the division helpers (DIV_OPS: code[k, 5]) through lanef32's functions; the
#                                 mask div_scale writes (VCC, or an SGPR pair) at code[k, SDWA]
OP_NOP = OP_MOV + 9             # s_nop: no state, its lanes counted
OP_PERM = OP_MOV + 10           # v_perm_b32: byte_permute({S0, S1}, S2), sources whole-word written
OP_SCMP = OP_MOV + 11           # s_cmp_* / s_cmpk_* of 32-bit sources: SCC of every executing member
OP_CARRY = OP_MOV + 12          # v_{add,sub,subrev}_co_u32, v_{addc,subb,subbrev}_co_u32 (CARRY_OPS: code[k, 5]):
#                                 D, the carry-out pair at code[k, SDWA], the carry-in pair at code[k, SDWA + 1]
OP_MAD64 = OP_MOV + 13          # v_mad_u64_u32 (code[k, 5] 0) / v_mad_i64_i32 (1): D pair, the carry pair at code[k, SDWA]
OP_SHIFT64 = OP_MOV + 14        # v_lshlrev_b64 / v_lshrrev_b64 / v_ashrrev_i64 (code[k, 5] 0, 1, 2) by code[k, SDWA]
OP_FIRSTLANE = OP_MOV + 15      # v_readfirstlane_b32: each executing member's first active lane (0 if none) to an SGPR
OP_MBCNT = OP_MOV + 16          # v_mbcnt_lo/hi_u32_b32 (code[k, 5] 0, 1): popcount(S0 & the lanes below) + S1
OP_F32 = OP_MOV + 17            # the first fp32 row: lanef32's functions (the block's source order for fmac/mac: D, S0, S1)
F32_OPS = {n: OP_F32 + k for k, n in enumerate((
    'v_add_f32',
    'v_sub_f32',
    'v_subrev_f32',
    'v_mul_f32',
    'v_fma_f32',
    'v_fmac_f32',
    'v_mac_f32',
    'v_max_f32',
    'v_min_f32',
    'v_max3_f32',
    'v_min3_f32',
    'v_med3_f32',
    'v_rndne_f32',
    'v_trunc_f32',
    'v_floor_f32',
    'v_ceil_f32',
    'v_fract_f32',
    'v_rcp_f32',
    'v_rcp_iflag_f32',
    'v_sqrt_f32',
    'v_rsq_f32',
    'v_cvt_i32_f32',
    'v_cvt_u32_f32',
    'v_cvt_f32_ubyte0',
    'v_cvt_f32_ubyte1',
    'v_cvt_f32_ubyte2',
    'v_cvt_f32_ubyte3',
    'v_ldexp_f32',
    'v_frexp_mant_f32',
    'v_frexp_exp_i32_f32',
    'v_exp_f32',
    'v_log_f32',
))}

# a row: opcode, destination file (0 v, 1 a), first register, count, keep (0 no, 1 src0's fresh
# marks), shift (lshl_add64), then (kind, value, abs, neg) per source, then an SDWA row's selects:
# src0's and src1's (SELECTS), which sources sign-extend (bit k), dst_sel and dst_unused (UNUSED)
ROW = 6 + 4 * 3 + 5
SDWA = 6 + 4 * 3
SELECTS = {"DWORD": 0, "BYTE_0": 1, "BYTE_1": 2, "BYTE_2": 3, "BYTE_3": 4, "WORD_0": 5, "WORD_1": 6}
UNUSED = {"UNUSED_PAD": 0, "UNUSED_SEXT": 1, "UNUSED_PRESERVE": 2}


# the SOP2 rows (semantics/sop.py SOP2), in _sop2_row's order
SOP2_OPS = {n: k for k, n in enumerate((
    "s_add_u32", "s_sub_u32", "s_addc_u32", "s_subb_u32", "s_add_i32", "s_sub_i32", "s_mul_i32", "s_mul_hi_u32",
    "s_mul_hi_i32", "s_min_i32", "s_min_u32", "s_max_i32", "s_max_u32", "s_cselect_b32", "s_cselect_b64",
    "s_lshl_b32", "s_lshl_b64", "s_lshr_b32", "s_lshr_b64", "s_ashr_i32", "s_ashr_i64", "s_bfm_b32",
    "s_and_b32", "s_or_b32", "s_xor_b32", "s_andn2_b32", "s_orn2_b32", "s_nand_b32", "s_nor_b32", "s_xnor_b32",
    "s_and_b64", "s_or_b64", "s_xor_b64", "s_andn2_b64", "s_orn2_b64", "s_nand_b64", "s_nor_b64", "s_xnor_b64"))}
SAVEEXEC_OPS = {n: k for k, n in enumerate((
    "s_and_saveexec_b64", "s_or_saveexec_b64", "s_xor_saveexec_b64", "s_andn2_saveexec_b64", "s_orn2_saveexec_b64",
    "s_nand_saveexec_b64", "s_nor_saveexec_b64", "s_xnor_saveexec_b64", "s_andn1_saveexec_b64",
    "s_orn1_saveexec_b64"))}
# the SOP1/SOPK rows the SOP2 path runs: s_mov_b32/b64 (D = S0, SCC kept); s_movk_i32 and s_addk_i32
# are s_mov_b32 and s_add_i32 of their sign-extended immediate
SOP1_OPS = {"s_mov_b32": len(SOP2_OPS), "s_mov_b64": len(SOP2_OPS), "s_abs_i32": len(SOP2_OPS) + 1}
DIV_OPS = {"v_div_scale_f32": 0, "v_div_fmas_f32": 1, "v_div_fixup_f32": 2}
CARRY_OPS = {"v_add_co_u32": 0, "v_sub_co_u32": 1, "v_subrev_co_u32": 2, "v_addc_co_u32": 3, "v_subb_co_u32": 4,
             "v_subbrev_co_u32": 5}
SHIFT64_OPS = {"v_lshlrev_b64": 0, "v_lshrrev_b64": 1, "v_ashrrev_i64": 2}
# s_cmp relations as RELATIONS index them (isa.compare's order)
_SCMP = {"lt": 1, "eq": 2, "le": 3, "gt": 4, "lg": 5, "ge": 6}
_SOP1_MOV, _SOP1_ABS = len(SOP2_OPS), len(SOP2_OPS) + 1
VCC = 106                       # the SGPR pair v_div_fmas_f32 reads
K_SREAD, K_SCC = 9, 10          # scalar sources: an EXEC half or EXEC (from the lanes' mask), SCC

# v_cmp relations (isa.compare: FLOAT, INTEGER); the source type: 0 f32, 1 i32, 2 u32
RELATIONS = {r: k for k, r in enumerate(("f", "lt", "eq", "le", "gt", "lg", "ge", "o", "u", "nge", "nlg", "ngt",
                                         "nle", "neq", "nlt", "tru", "ne", "t"))}
_CMP_TYPES = {"f32": 0, "i32": 1, "u32": 2}
_PK = {"v_pk_add_f32": "v_add_f32", "v_pk_mul_f32": "v_mul_f32", "v_pk_fma_f32": "v_fma_f32"}


def _pk_row(d, x, row) -> np.ndarray | None:
    """A packed fp32 row: per source its register pair (or constant), the halves op_sel/op_sel_hi
    pick (in the abs field: bit 0 the low result's, bit 1 the high's) and neg_lo/neg_hi (the neg
    field, the same bits), as the step's reads_of decides them."""
    n = len(x.srcs)
    mods = d.ops.mods
    sel, sel_hi = mods.get("op_sel", (0,) * n), mods.get("op_sel_hi", (1,) * n)
    neg_lo, neg_hi = mods.get("neg_lo", (0,) * n), mods.get("neg_hi", (0,) * n)
    row[0], row[5] = OP_PK, F32_OPS[_PK[d.mnemonic]] - OP_F32
    for k, ((form, _), t) in enumerate(x.srcs):
        kind = form[0]
        if t == "u32" and kind == "const":
            code, picks = K_CONST, 0                    # both halves the constant
        elif t == "pair" and kind in ("v", "a", "s"):
            if kind == "s" and form[1] >= EXEC - 1:     # a pair reaching EXEC: read from the mask
                return None
            code, picks = _KIND[kind], int(sel[k]) | (int(sel_hi[k]) << 1)
        else:
            return None
        row[6 + 4 * k: 10 + 4 * k] = code, form[1], picks, int(bool(neg_lo[k])) | (int(bool(neg_hi[k])) << 1)
    return row


def encode_step(d, step) -> np.ndarray | None:
    """The row of an instruction a block runs by its prepared step or its semantics function (no
    template), where the executor has its lane form: a saveexec or a 64-bit SOP2 row into EXEC, the
    division helpers, v_perm_b32, v_mov_b64, s_nop and the SOP1/SOPK/SOPC moves and compares; None
    for any other, or where a check of the function's would fail (the function then names it)."""
    from .semantics.sop import s_source
    m, pos = d.mnemonic, d.ops.positional
    if d.ops.mods:
        return None
    if m in SAVEEXEC_OPS and len(pos) == 2 and step is not None:
        dst, src = pos
        form = s_source(src, 64)
        if form is None or dst.kind != "reg" or dst.file != "s" or dst.count != 2 or not 0 <= dst.first <= EXEC - 2:
            return None
        row = np.zeros(ROW, np.int64)
        row[0], row[2], row[3], row[4], row[5], row[SDWA] = OP_SAVEEXEC, dst.first, 2, 64, SAVEEXEC_OPS[m], 64
        return row if _scalar_source(row, 0, form[0], "s64") else None
    if m in SOP2_OPS and m.endswith("_b64") and len(pos) == 3 and not m.startswith(("s_lshl", "s_lshr", "s_ashr")) \
            and step is not None:
        dst, a, b = pos
        fa, fb = s_source(a, 64), s_source(b, 64)
        if fa is None or fb is None or dst.kind != "reg" or dst.file != "s" or dst.count != 2 or dst.first != EXEC:
            return None
        row = np.zeros(ROW, np.int64)
        row[0], row[2], row[3], row[4], row[5], row[SDWA] = OP_SOP2, EXEC, 2, 64, SOP2_OPS[m], 64
        ok = _scalar_source(row, 0, fa[0], "s64") and _scalar_source(row, 1, fb[0], "s64")
        return row if ok and _scalar_source(row, 2, ("scc",), "scc") else None
    if d.enc in ("sdwa", "dpp") or len(d.ops) != len(pos):
        return None
    if m in DIV_OPS:
        return _div_row(d, step)
    if m in ("s_nop", "s_setprio", "s_sched_barrier"):
        row = np.zeros(ROW, np.int64)
        row[0] = OP_NOP
        return row
    if m == "v_perm_b32":
        return _perm_row(pos)
    if m == "v_mov_b64":
        return _mov64_row(pos)
    if m in CARRY_OPS:
        return _carry_row(m, pos)
    if m in ("v_mad_u64_u32", "v_mad_i64_i32"):
        return _mad64_row(m, pos)
    if m in SHIFT64_OPS:
        return _shift64_row(m, pos, step)
    if m == "v_readfirstlane_b32":
        return _firstlane_row(pos)
    if m in ("v_mbcnt_lo_u32_b32", "v_mbcnt_hi_u32_b32"):
        row = np.zeros(ROW, np.int64)
        row[0], row[5] = OP_MBCNT, 0 if m == "v_mbcnt_lo_u32_b32" else 1
        ok = len(pos) == 3 and _vdst(row, pos[0], 1) and _vsources(row, pos[1:], "u32")
        return row if ok else None
    return _scalar_row(m, pos)


def _pair(o) -> int | None:
    """An SGPR pair below EXEC (a carry or a mask operand), or None."""
    if o.kind != "reg" or o.file != "s" or o.count != 2 or not 0 <= o.first < EXEC - 1:
        return None
    return o.first


def _carry_row(m: str, pos) -> np.ndarray | None:
    """vop._carry's rows: D, carry out, S0, S1 (u32 reads), and the carry in where the row has one."""
    has_in = m in ("v_addc_co_u32", "v_subb_co_u32", "v_subbrev_co_u32")
    row = np.zeros(ROW, np.int64)
    row[0], row[5] = OP_CARRY, CARRY_OPS[m]
    if len(pos) != (5 if has_in else 4) or not _vdst(row, pos[0], 1) or _pair(pos[1]) is None:
        return None
    row[SDWA] = _pair(pos[1])
    if has_in:
        if _pair(pos[4]) is None:
            return None
        row[SDWA + 1] = _pair(pos[4])
    return row if _vsources(row, pos[2:4], "u32") else None


def _mad64_row(m: str, pos) -> np.ndarray | None:
    """vop.v_mad64: D pair, carry pair, S0, S1 (u32 reads), S2 (a 64-bit read: source64)."""
    from .semantics import source64
    row = np.zeros(ROW, np.int64)
    row[0], row[5] = OP_MAD64, 0 if m == "v_mad_u64_u32" else 1
    if len(pos) != 5 or not _vdst(row, pos[0], 2) or _pair(pos[1]) is None or not _vsources(row, pos[2:4], "u32"):
        return None
    row[SDWA] = _pair(pos[1])
    got = source64(pos[4])
    if got is None or got[0][0] not in _KIND64 or (got[0][0] == "sread" and got[0][1] >= EXEC - 1):
        return None
    row[14:16] = _KIND64[got[0][0]], _word(got[0][1])
    return row


def _shift64_row(m: str, pos, step) -> np.ndarray | None:
    """A 64-bit shift by a constant whose step was prepared (vop._shift64_prepare): D pair, S1 a
    64-bit read, the shift's low 6 bits."""
    from .semantics import source64
    if step is None or len(pos) != 3:
        return None
    dst, sh, a = pos
    row = np.zeros(ROW, np.int64)
    row[0], row[5] = OP_SHIFT64, SHIFT64_OPS[m]
    got = source64(a)
    if sh.kind != "int" or not _vdst(row, dst, 2) or got is None or got[0][0] not in _KIND64 or \
            (got[0][0] == "sread" and got[0][1] >= EXEC - 1):
        return None
    row[6:8] = _KIND64[got[0][0]], _word(got[0][1])
    row[SDWA] = sh.value & 63
    return row


def _firstlane_row(pos) -> np.ndarray | None:
    """v_readfirstlane_b32 SDST (an SGPR below EXEC), a 32-bit source."""
    if len(pos) != 2:
        return None
    dst = pos[0]
    if dst.kind != "reg" or dst.file != "s" or dst.count != 1 or not 0 <= dst.first < EXEC:
        return None
    row = np.zeros(ROW, np.int64)
    row[0], row[2], row[3] = OP_FIRSTLANE, dst.first, 1
    return row if _vsources(row, pos[1:], "u32") else None


def _vdst(row, o, n: int) -> bool:
    """A VGPR/AGPR destination of ``n`` registers into the row (file, first, count)."""
    if o.kind != "reg" or o.file not in ("v", "a") or o.count != n or o.first < 0:
        return False
    row[1:4] = (0 if o.file == "v" else 1), o.first, n
    return True


def _vsources(row, srcs, t: str) -> bool:
    """32-bit sources (semantics.source's forms of type t) into the row; False where one is not a
    VGPR, AGPR, SGPR below EXEC or a constant."""
    from .semantics import source
    for k, o in enumerate(srcs):
        got = source(o, t)
        if got is None or got[0][0] not in _KIND or (got[0][0] == "s" and got[0][1] >= EXEC - 1):
            return False
        (form, (abs_, neg)) = got
        row[6 + 4 * k: 10 + 4 * k] = _KIND[form[0]], _word(form[1]) if len(form) > 1 else 0, abs_, neg
    return True


def _div_row(d, step) -> np.ndarray | None:
    """A division helper whose step was prepared (vop._div_prepare: no modifiers, its operands
    checked): D, S0..S2 as f32 reads, and div_scale's mask pair below EXEC."""
    pos = d.ops.positional
    row = np.zeros(ROW, np.int64)
    row[0], row[5] = OP_DIV, DIV_OPS[d.mnemonic]
    if step is None or len(pos) != (5 if row[5] == 0 else 4) or not _vdst(row, pos[0], 1):
        return None
    if row[5] == 0:
        sd = pos[1]
        if sd.kind != "reg" or sd.file != "s" or sd.count != 2 or not 0 <= sd.first < EXEC - 1:
            return None
        row[SDWA] = sd.first
    return row if _vsources(row, pos[-3:], "f32") else None


def _perm_row(pos) -> np.ndarray | None:
    """v_perm_b32 D, S0, S1, S2 of plain 32-bit sources (vop.v_perm_b32's lean path)."""
    row = np.zeros(ROW, np.int64)
    row[0] = OP_PERM
    if len(pos) != 4 or not _vdst(row, pos[0], 1) or not _vsources(row, pos[1:], "u32"):
        return None
    return row


def _mov64_row(pos) -> np.ndarray | None:
    """v_mov_b64: a register pair copied with its written bits and fresh marks (WaveState.vcopy),
    or an SGPR pair's or a constant's 64 bits written (put64): lshl_add64's row shifting by 0 and
    adding 0."""
    from .semantics import source64
    if len(pos) != 2:
        return None
    dst, src = pos
    row = np.zeros(ROW, np.int64)
    if not _vdst(row, dst, 2):
        return None
    if src.kind == "reg" and src.file in ("v", "a") and not (src.neg or src.abs or src.sext or src.dpp):
        if src.count != 2 or src.first < 0:
            return None
        row[0] = OP_COPY
        row[6:8] = _KIND[src.file], src.first
        return row
    got = source64(src)
    if got is None or got[0][0] not in ("sread", "const") or (got[0][0] == "sread" and got[0][1] >= EXEC - 1):
        return None
    row[0], row[5] = OP_LSHL_ADD64, 0
    row[6:8] = _KIND64[got[0][0]], _word(got[0][1])
    row[10:12] = K_CONST, 0
    return row


def _scalar_row(m: str, pos) -> np.ndarray | None:
    """s_mov_b32/b64, s_movk_i32, s_addk_i32 (SOP2 rows, SOP1_OPS) and s_cmp_*/s_cmpk_* of 32-bit
    sources (OP_SCMP), as sop.py's functions check and read them."""
    from .semantics.sop import s_source
    if len(pos) != 2:
        return None
    row = np.zeros(ROW, np.int64)
    parts = m.split("_")
    if m in ("s_movk_i32", "s_addk_i32") or parts[1] == "cmpk":
        o = pos[1]
        if o.kind != "int" or not -(1 << 15) <= o.value < (1 << 16) or o.neg or o.abs or o.sext:
            return None
        k = o.value & 0xFFFF
        k = k - (1 << 16) if k >> 15 else k                 # sop._simm16
    if parts[1] in ("cmp", "cmpk") and len(parts) == 4 and parts[2] in _SCMP and parts[3] in ("i32", "u32"):
        row[0], row[4], row[5] = OP_SCMP, 1 if parts[3] == "i32" else 2, _SCMP[parts[2]]
        fa = s_source(pos[0], 32)
        if parts[1] == "cmp":
            fb = s_source(pos[1], 32)
        else:                                               # the immediate sign- (i32) or zero-extended (u32)
            fb = (("const", k & 0xFFFFFFFF if parts[3] == "i32" else k & 0xFFFF), (False, False))
        if fa is None or fb is None:
            return None
        return row if _scalar_source(row, 0, fa[0], "s32") and _scalar_source(row, 1, fb[0], "s32") else None
    if m not in ("s_mov_b32", "s_mov_b64", "s_movk_i32", "s_addk_i32", "s_abs_i32"):
        return None
    dst = pos[0]
    n = 2 if m == "s_mov_b64" else 1
    if dst.kind != "reg" or dst.file != "s" or dst.count != n or not (0 <= dst.first <= EXEC - n or
                                                                      (n == 2 and dst.first == EXEC)):
        return None
    row[0], row[2], row[3], row[4], row[SDWA] = OP_SOP2, dst.first, n, 32 * n, 32
    if m == "s_addk_i32":                                   # s_add_i32 D, D, simm16
        row[5] = SOP2_OPS["s_add_i32"]
        row[6:8] = K_S, dst.first
        row[10:12] = K_CONST, k & 0xFFFFFFFF
        return row
    row[5] = SOP1_OPS["s_abs_i32" if m == "s_abs_i32" else "s_mov_b32"]
    if m == "s_movk_i32":
        row[6:8] = K_CONST, k & 0xFFFFFFFF
        return row
    fa = s_source(pos[1], 32 * n)
    return row if fa is not None and _scalar_source(row, 0, fa[0], f"s{32 * n}") else None


def refuses(row) -> bool:
    """Whether the executor may stop before this row, leaving it to the step (which names what it
    refuses, or takes the back end's path): v_div_fmas_f32 with VCC set on a finite non-zero result,
    v_div_fixup_f32's underflow, v_perm_b32 of a register with a byte never written in an active lane."""
    return (row[0] == OP_DIV and row[5] != 0) or row[0] == OP_PERM


def vregs(row) -> list:
    """The VGPR/AGPR ranges (file, first, count) a row names: its destination and register sources."""
    op = row[0]
    if op in (OP_SOP2, OP_SAVEEXEC, OP_NOP, OP_SCMP, OP_CMP):
        return []
    if op == OP_FIRSTLANE:                  # its destination is an SGPR
        return [("v" if row[6] == K_V else "a", int(row[7]), 1)] if row[6] in (K_V, K_A) else []
    files = {K_V: "v", K_A: "a", K_V64: "v", K_A64: "a"}
    out = [("v" if row[1] == 0 else "a", int(row[2]), int(row[3]))]
    for k in range(3):
        kind = row[6 + 4 * k]
        if kind in files:
            n = int(row[3]) if op == OP_COPY else 2 if kind in (K_V64, K_A64) or op == OP_PK else 1
            out.append((files[kind], int(row[7 + 4 * k]), n))
    return out


def _scalar_source(row, k: int, form, t: str) -> bool:
    """Source k of a scalar row from its form (sop.s_source); False where the executor has none."""
    kind = form[0]
    if kind == "s":
        code = K_S
    elif kind == "sread" and (form[1] == EXEC or (form[1] == EXEC + 1 and t == "s32")):
        code = K_SREAD
    elif kind == "scc":
        code = K_SCC
    elif kind == "const":
        code = K_CONST
    else:
        return False
    row[6 + 4 * k: 8 + 4 * k] = code, _word(form[1]) if len(form) > 1 else 0
    return True


def _sop2_row(d, x) -> np.ndarray | None:
    """A SOP2 row into SGPRs below EXEC: opcode, destination, count, the row (code[k, 5]), the
    sources' widths (code[k, 4], code[k, SDWA]); sources as SGPRs, EXEC or its halves, SCC or constants."""
    m = d.mnemonic
    _, first, n = x.dst
    if m not in SOP2_OPS or first + n > EXEC:
        return None
    row = np.zeros(ROW, np.int64)
    row[0], row[2], row[3], row[5] = OP_SOP2, first, n, SOP2_OPS[m]
    for k, ((form, _), t) in enumerate(x.srcs):
        if not _scalar_source(row, k, form, t):
            return None
    row[4], row[SDWA] = (32 if x.srcs[0][1] == "s32" else 64), (32 if x.srcs[1][1] == "s32" else 64)
    return row


def _cmp_row(d, x) -> np.ndarray | None:
    """A v_cmp of f32/i32/u32 sources into an SGPR pair below EXEC (not v_cmpx: EXEC stays as it
    is, so the run's lanes do): opcode, the pair, the relation (code[k, 5]) and the type (code[k, 4])."""
    _, first, exec_too = x.dst
    parts = d.mnemonic.split("_")                 # v, cmp, relation, type
    if exec_too or len(parts) != 4 or parts[1] != "cmp" or parts[3] not in _CMP_TYPES or parts[2] not in RELATIONS \
            or first >= EXEC - 1:
        return None
    row = np.zeros(ROW, np.int64)
    row[0], row[2], row[3], row[4], row[5] = OP_CMP, first, 2, _CMP_TYPES[parts[3]], RELATIONS[parts[2]]
    for k, ((form, (abs_, neg)), t) in enumerate(x.srcs):
        if form[0] not in _KIND:
            return None
        row[6 + 4 * k: 10 + 4 * k] = _KIND[form[0]], form[1] if len(form) > 1 else 0, abs_, neg
    return row


def _f32_types(m: str) -> tuple:
    """The source types of fp32 row ``m`` in the block's source order (fmac/mac: D, S0, S1)."""
    e = lanef32.LANE_F32[m]
    return ("f32",) * 3 if e.order else e.srcs


def executor():
    """``run_rows``, with lanef32's functions compiled before it is (it calls them; numba resolves
    them through that module's globals when it compiles it)."""
    global READY
    lanef32.LANE_F32["v_add_f32"].fn  # noqa: B018  (the property compiles lanef32's module)
    READY = True
    return run_rows


READY = False                   # executor() has run: ``run_rows`` may be called directly
_SCRATCH = threading.local()


def scratch(width: int) -> tuple:
    """``run_rows``'s scratch arrays at ``width`` columns, made once per thread and width (a wide batch's
    arrays allocated per call would cost more than the rows: fresh pages each time)."""
    made = getattr(_SCRATCH, "made", None)
    if made is None:
        made = _SCRATCH.made = {}
    got = made.get(width)
    if got is None:
        got = made[width] = (np.empty((5, width), np.uint32), np.empty((2, width), np.uint64), np.empty(width, bool))
    return got


def encode(d, x) -> np.ndarray | None:
    """Instruction ``d``'s row for the executor, from its block template ``x`` (semantics.Inline),
    or None where it has no lane form (it then stays on the block's numpy lines)."""
    f, first, n = x.dst
    if f == "mask":
        return _cmp_row(d, x)
    if f == "s":
        return _sop2_row(d, x)
    if f not in ("v", "a"):
        return None
    row = np.zeros(ROW, np.int64)
    row[1:4] = (0 if f == "v" else 1), first, n
    m = d.mnemonic
    if x.copy:
        ((sf, sa), _), _t = x.srcs[0]
        row[0] = OP_COPY
        row[6:8] = _KIND[sf], sa
        return row
    types = [t for _, t in x.srcs]
    if d.enc == "sdwa":                 # UNUSED_PRESERVE's last source is the destination (read in place here)
        types = types[:len(d.ops.positional) - 1]
    if m in ("v_mov_b32", "v_accvgpr_read_b32", "v_accvgpr_write_b32", "v_accvgpr_mov_b32"):
        row[0] = OP_MOV
    elif m == "v_cndmask_b32":
        row[0] = OP_CNDMASK
    elif m == "v_lshl_add_u64":
        from .semantics.vop import lshl_add_form
        from .semantics import source64
        row[0], row[5] = OP_LSHL_ADD64, int(lshl_add_form(d, source64)[3])
    elif m in _PK:
        return _pk_row(d, x, row)
    elif m in F32_OPS and tuple(types) == _f32_types(m):
        row[0] = F32_OPS[m]
    elif m in LANE_OPS and all(t in ("u32", "i32", "f32") for t in types):
        row[0] = LANE_OPS[m]
        from . import semantics
        if semantics.OPS.get(m) is None:
            return None
        from .semantics import dequant
        row[4] = 1 if m in dequant.KEEPS and d.enc != "sdwa" else 0      # as the step keeps them
    else:
        return None
    if d.enc == "sdwa":
        if row[0] < OP_F32 and row[0] >= len(LANE_OPS):      # only the VALU rows have SDWA templates
            return None
        mods = d.ops.mods
        row[SDWA:SDWA + 5] = (SELECTS[mods.get("src0_sel", "DWORD")], SELECTS[mods.get("src1_sel", "DWORD")],
                              sum(1 << k for k, o in enumerate(d.ops.positional[1:3]) if o.sext),
                              SELECTS[mods.get("dst_sel", "DWORD")], UNUSED[mods.get("dst_unused", "UNUSED_PAD")])
    for k, ((form, (abs_, neg)), t) in enumerate(x.srcs):
        kind = form[0]
        if t == "u64":
            if kind not in _KIND64 or (kind == "sread" and form[1] >= EXEC - 1):
                return None
            code = _KIND64[kind]
        elif t == "mask":
            if form[1] >= EXEC - 1:         # EXEC (or a pair overlapping it): the block's numpy lines
                return None
            code = K_MASK
        elif kind in _KIND:
            code = _KIND[kind]
        else:
            return None                     # EXEC halves, SCC: the block's numpy lines
        row[6 + 4 * k: 10 + 4 * k] = code, _word(form[1]) if len(form) > 1 else 0, abs_, neg
    return row


def _word(v: int) -> int:
    """A register number or a constant (up to 64 bits) as the int64 a row holds (the bits kept)."""
    return v - (1 << 64) if v >= 1 << 63 else v


@njit
def _gather32(code, k, j, rv, ra, s, lanes, out):
    """Source j of row k over every column (as uint32, float modifiers applied on the bits)."""
    kind = code[k, 6 + 4 * j]
    i = code[k, 7 + 4 * j]
    width = out.shape[0]
    if kind == K_V:
        out[:] = rv[i]
    elif kind == K_A:
        out[:] = ra[i]
    elif kind == K_S:
        for c in range(width):
            out[c] = s[c // lanes, i]
    else:
        out[:] = np.uint32(i)
    if code[k, 8 + 4 * j]:
        for c in range(width):
            out[c] &= np.uint32(0x7FFFFFFF)
    if code[k, 9 + 4 * j]:
        for c in range(width):
            out[c] ^= np.uint32(0x80000000)


@njit
def _gather64(code, k, j, rv, ra, s, lanes, out):
    kind = code[k, 6 + 4 * j]
    i = code[k, 7 + 4 * j]
    for c in range(out.shape[0]):
        if kind == K_V64:
            out[c] = np.uint64(rv[i, c]) | (np.uint64(rv[i + 1, c]) << np.uint64(32))
        elif kind == K_A64:
            out[c] = np.uint64(ra[i, c]) | (np.uint64(ra[i + 1, c]) << np.uint64(32))
        elif kind == K_S64:
            m = c // lanes
            out[c] = np.uint64(s[m, i]) | (np.uint64(s[m, i + 1]) << np.uint64(32))
        else:
            out[c] = np.uint64(i)


@njit
def _gather_half(code, k, j, half, rv, ra, s, lanes, out):
    """Source j of packed row k for result half ``half``: the register its pick names (a constant
    for both), its sign flipped where neg_lo/neg_hi says."""
    kind = code[k, 6 + 4 * j]
    i = code[k, 7 + 4 * j] + ((code[k, 8 + 4 * j] >> half) & 1)
    flip = np.uint32(0x80000000) if (code[k, 9 + 4 * j] >> half) & 1 else np.uint32(0)
    width = out.shape[0]
    if kind == K_V:
        for c in range(width):
            out[c] = rv[i, c] ^ flip
    elif kind == K_A:
        for c in range(width):
            out[c] = ra[i, c] ^ flip
    elif kind == K_S:
        for c in range(width):
            out[c] = s[c // lanes, i] ^ flip
    else:
        out[:] = np.uint32(code[k, 7 + 4 * j]) ^ flip


@njit
def _relation(rel, t, a, b):
    """isa.compare's relation ``rel`` (RELATIONS) of two source words of type t (0 f32, 1 i32, 2 u32)."""
    if t == 0:
        x, y = np.uint32(a).view(np.float32), np.uint32(b).view(np.float32)
        ordered = not (np.isnan(x) or np.isnan(y))
        if rel == 1:
            return x < y
        if rel == 2:
            return x == y
        if rel == 3:
            return x <= y
        if rel == 4:
            return x > y
        if rel == 5:
            return ordered and x != y
        if rel == 6:
            return x >= y
        if rel == 7:
            return ordered
        if rel == 8:
            return not ordered
        if rel == 9:
            return not x >= y
        if rel == 10:
            return not (ordered and x != y)
        if rel == 11:
            return not x > y
        if rel == 12:
            return not x <= y
        if rel == 13:
            return not x == y
        if rel == 14:
            return not x < y
        return rel == 15
    if t == 1:
        p, q = np.int64(np.int32(a)), np.int64(np.int32(b))
    else:
        p, q = np.int64(a), np.int64(b)
    if rel == 1:
        return p < q
    if rel == 2:
        return p == q
    if rel == 3:
        return p <= q
    if rel == 4:
        return p > q
    if rel == 5 or rel == 16:
        return p != q
    if rel == 6:
        return p >= q
    return rel == 17


@njit
def _select(x, sel, sext):
    """An integer SDWA source word: the byte or word ``sel`` (SELECTS) picks, zero- or sign-extended."""
    if sel == 0:
        return x
    shift = np.uint32(0 if sel == 1 or sel == 5 else 8 if sel == 2 else 16 if sel == 3 or sel == 6 else 24)
    bits = np.uint32(8 if sel <= 4 else 16)
    v = (x >> shift) & ((np.uint32(1) << bits) - np.uint32(1))
    if sext and (v >> (bits - np.uint32(1))) & np.uint32(1):
        v |= ~((np.uint32(1) << bits) - np.uint32(1))
    return v


@njit
def _place(r, old, sel, unused):
    """An SDWA result word in the destination field ``sel``: zeros around it, its top bit above it
    (unused 1) or the old word's bits (2)."""
    if sel == 0:
        return r
    shift = np.uint32(0 if sel == 1 or sel == 5 else 8 if sel == 2 else 16 if sel == 3 or sel == 6 else 24)
    bits = np.uint32(8 if sel <= 4 else 16)
    fmask = ((np.uint32(1) << bits) - np.uint32(1)) << shift
    field = (r << shift) & fmask
    if unused == 2:
        return (old & ~fmask) | field
    if unused == 1 and (field >> (shift + bits - np.uint32(1))) & np.uint32(1):
        above = shift + bits
        return field | (~np.uint32(0) << above if above < 32 else np.uint32(0))
    return field


@njit
def _sdwa_sources(code, k, a, b):
    """An SDWA row's integer sources in place: each the field its select picks."""
    sext = code[k, SDWA + 2]
    if code[k, SDWA] != 0:
        for c in range(a.shape[0]):
            a[c] = _select(a[c], code[k, SDWA], sext & 1)
    if code[k, SDWA + 1] != 0:
        for c in range(b.shape[0]):
            b[c] = _select(b[c], code[k, SDWA + 1], sext & 2)


@njit
def _exec_word(ex, m, lanes):
    """Member m's EXEC as a 64-bit word (its lanes' bits)."""
    w = np.uint64(0)
    for l in range(lanes):
        if ex[m * lanes + l]:
            w |= np.uint64(1) << np.uint64(l)
    return w


@njit
def _scalar(code, k, j, width, s, scc, ex, lanes, m):
    """Scalar source j of row k for member m: uint64 (a 32-bit source zero-extended)."""
    kind = code[k, 6 + 4 * j]
    i = code[k, 7 + 4 * j]
    if kind == K_S:
        if width == 32:
            return np.uint64(s[m, i])
        return np.uint64(s[m, i]) | (np.uint64(s[m, i + 1]) << np.uint64(32))
    if kind == K_SREAD:
        w = _exec_word(ex, m, lanes)
        if width == 64:
            return w
        return w & np.uint64(0xFFFFFFFF) if i == EXEC else w >> np.uint64(32)
    if kind == K_SCC:
        return scc[m]
    return np.uint64(i)


@njit
def _sx(v):
    """The low 32 bits of v as a signed number (int64)."""
    return np.int64(np.int32(np.uint32(v & np.uint64(0xFFFFFFFF))))


@njit
def _sop2_math(op, a, b, c):
    """SOP2 row ``op`` (SOP2_OPS) of one member: (result, SCC: 0, 1, or -1 where the row leaves it)."""
    M = np.uint64(0xFFFFFFFF)
    F = np.uint64(0xFFFFFFFFFFFFFFFF)
    s5, s6 = b & np.uint64(31), b & np.uint64(63)
    if op == _SOP1_MOV:                 # s_mov_b32/b64: S0, SCC kept
        return a, np.int64(-1)
    if op == _SOP1_ABS:                 # s_abs_i32: |S0| wrapping (|-2^31| = -2^31), SCC = D != 0
        x = _sx(a)
        r = np.uint64(-x if x < 0 else x) & M
        return r, np.int64(r != 0)
    if op == 0:
        return (a + b) & M, np.int64(a + b > M)
    if op == 1:
        return (a - b) & M, np.int64(b > a)
    if op == 2:
        return (a + b + c) & M, np.int64(a + b + c > M)
    if op == 3:
        return (a - b - c) & M, np.int64(b + c > a)
    if op == 4 or op == 5:
        x = _sx(a) + _sx(b) if op == 4 else _sx(a) - _sx(b)
        return np.uint64(x) & M, np.int64(not (-2**31 <= x < 2**31))
    if op == 6:
        return np.uint64(_sx(a) * _sx(b)) & M, np.int64(-1)
    if op == 7:
        return (a * b) >> np.uint64(32), np.int64(-1)
    if op == 8:
        return np.uint64((_sx(a) * _sx(b)) >> 32) & M, np.int64(-1)
    if op == 9:
        return (a if _sx(a) < _sx(b) else b), np.int64(_sx(a) < _sx(b))
    if op == 10:
        return min(a, b), np.int64(a < b)
    if op == 11:
        return (a if _sx(a) > _sx(b) else b), np.int64(_sx(a) > _sx(b))
    if op == 12:
        return max(a, b), np.int64(a > b)
    if op == 13 or op == 14:
        return (a if c != 0 else b), np.int64(-1)
    if op == 15:
        r = (a << s5) & M
    elif op == 16:
        r = a << s6
    elif op == 17:
        r = a >> s5
    elif op == 18:
        r = a >> s6
    elif op == 19:
        r = np.uint64(_sx(a) >> np.int64(s5)) & M
    elif op == 20:
        r = np.uint64(np.int64(a) >> np.int64(s6))
    elif op == 21:
        return (((np.uint64(1) << (a & np.uint64(31))) - np.uint64(1)) << s5) & M, np.int64(-1)
    else:
        mask = M if op < 30 else F
        q = (op - 22) % 8
        if q == 0:
            r = a & b
        elif q == 1:
            r = a | b
        elif q == 2:
            r = a ^ b
        elif q == 3:
            r = a & ~b & mask
        elif q == 4:
            r = (a | ~b) & mask
        elif q == 5:
            r = ~(a & b) & mask
        elif q == 6:
            r = ~(a | b) & mask
        else:
            r = ~(a ^ b) & mask
    return r, np.int64(r != 0)


@njit
def _saveexec_math(op, x, e):
    """SAVEEXEC_OPS row ``op``: the new EXEC word from S0 and the old one."""
    if op == 0:
        return x & e
    if op == 1:
        return x | e
    if op == 2:
        return x ^ e
    if op == 3:
        return x & ~e
    if op == 4:
        return x | ~e
    if op == 5:
        return ~(x & e)
    if op == 6:
        return ~(x | e)
    if op == 7:
        return ~(x ^ e)
    if op == 8:
        return ~x & e
    return ~x | e


@njit
def _sext(x, bits):
    """The low ``bits`` of x sign-extended, as int64."""
    v = np.int64(x) & ((np.int64(1) << bits) - 1)
    if bits > 0 and (v >> (bits - 1)) & 1:
        v -= np.int64(1) << bits
    return v


@njit
def _int_rows(op, a, b, c, r):
    """The ISA entry of integer row ``op`` (LANE_OPS, in order) on every column's uint32 sources
    (32-bit arithmetic wraps), into r: one loop per row, so the switch is outside it."""
    M = np.uint64(0xFFFFFFFF)
    M32 = np.int64(0xFFFFFFFF)
    L24 = np.uint64(0xFFFFFF)
    n = r.shape[0]
    if op == 0:
        for x in range(n):
            r[x] = a[x] + b[x]
    elif op == 1:
        for x in range(n):
            r[x] = a[x] - b[x]
    elif op == 2:
        for x in range(n):
            r[x] = b[x] - a[x]
    elif op == 3:
        for x in range(n):
            r[x] = np.uint32((np.uint64(a[x]) * np.uint64(b[x])) & M)
    elif op == 4:
        for x in range(n):
            r[x] = np.uint32((np.uint64(a[x]) * np.uint64(b[x])) >> np.uint64(32))
    elif op == 5:
        for x in range(n):
            r[x] = b[x] << (a[x] & np.uint32(31))
    elif op == 6:
        for x in range(n):
            r[x] = b[x] >> (a[x] & np.uint32(31))
    elif op == 7:
        for x in range(n):
            r[x] = np.uint32((np.int64(np.int32(b[x])) >> np.int64(a[x] & np.uint32(31))) & M32)
    elif op == 8:
        for x in range(n):
            r[x] = a[x] & b[x]
    elif op == 9:
        for x in range(n):
            r[x] = a[x] | b[x]
    elif op == 10:
        for x in range(n):
            r[x] = a[x] ^ b[x]
    elif op == 11:
        for x in range(n):
            r[x] = ~a[x]
    elif op == 12:
        for x in range(n):
            r[x] = max(a[x], b[x])
    elif op == 13:
        for x in range(n):
            r[x] = min(a[x], b[x])
    elif op == 14:
        for x in range(n):
            r[x] = np.uint32(np.int64(max(np.int32(a[x]), np.int32(b[x]))) & M32)
    elif op == 15:
        for x in range(n):
            r[x] = np.uint32(np.int64(min(np.int32(a[x]), np.int32(b[x]))) & M32)
    elif op == 16:
        for x in range(n):
            r[x] = np.uint32(((np.uint64(a[x]) & L24) * (np.uint64(b[x]) & L24)) & M)
    elif op == 17:
        for x in range(n):
            r[x] = np.uint32((_sext(a[x], 24) * _sext(b[x], 24)) & M32)
    elif op == 18:
        for x in range(n):
            r[x] = np.uint32(((np.uint64(a[x]) & L24) * (np.uint64(b[x]) & L24) + np.uint64(c[x])) & M)
    elif op == 19:
        for x in range(n):
            r[x] = np.uint32((_sext(a[x], 24) * _sext(b[x], 24) + np.int64(c[x])) & M32)
    elif op == 20:
        for x in range(n):
            r[x] = (a[x] << (b[x] & np.uint32(31))) | c[x]
    elif op == 21:
        for x in range(n):
            r[x] = (a[x] & b[x]) | c[x]
    elif op == 22:
        for x in range(n):
            r[x] = a[x] | b[x] | c[x]
    elif op == 23:
        for x in range(n):
            r[x] = (a[x] ^ b[x]) + c[x]
    elif op == 24:
        for x in range(n):
            r[x] = a[x] + b[x] + c[x]
    elif op == 25:
        for x in range(n):
            r[x] = (a[x] << (b[x] & np.uint32(31))) + c[x]
    elif op == 26:
        for x in range(n):
            r[x] = (a[x] + b[x]) << (c[x] & np.uint32(31))
    elif op == 27:
        for x in range(n):
            field = (np.uint64(1) << np.uint64(c[x] & np.uint32(31))) - np.uint64(1)
            r[x] = np.uint32((np.uint64(a[x]) >> np.uint64(b[x] & np.uint32(31))) & field)
    elif op == 28:
        for x in range(n):
            r[x] = np.uint32(_sext(np.int64(a[x] >> (b[x] & np.uint32(31))), np.int64(c[x] & np.uint32(31))) & M32)
    elif op == 29:
        for x in range(n):
            r[x] = (a[x] & b[x]) | (~a[x] & c[x])
    elif op == 30:
        for x in range(n):
            r[x] = np.float32(np.int32(a[x])).view(np.uint32)
    elif op == 31:
        for x in range(n):
            r[x] = np.float32(a[x]).view(np.uint32)


@njit
def _f32_rows(op, a, b, c, r):
    """Lane function ``op`` of F32_OPS (lanef32.LANE_F32, in order) on every column's source words
    (a, b, c: the instruction's sources in operand order), into r: one loop per row."""
    n = r.shape[0]
    if op == 0:
        for x in range(n):
            r[x] = lanef32.v_add_f32(a[x], b[x])
    elif op == 1:
        for x in range(n):
            r[x] = lanef32.v_sub_f32(a[x], b[x])
    elif op == 2:
        for x in range(n):
            r[x] = lanef32.v_subrev_f32(a[x], b[x])
    elif op == 3:
        for x in range(n):
            r[x] = lanef32.v_mul_f32(a[x], b[x])
    elif op == 4:
        for x in range(n):
            r[x] = lanef32.v_fma_f32(a[x], b[x], c[x])
    elif op == 5:
        for x in range(n):
            r[x] = lanef32.v_fma_f32(b[x], c[x], a[x])
    elif op == 6:
        for x in range(n):
            r[x] = lanef32.v_mac_f32(b[x], c[x], a[x])
    elif op == 7:
        for x in range(n):
            r[x] = lanef32.v_max_f32(a[x], b[x])
    elif op == 8:
        for x in range(n):
            r[x] = lanef32.v_min_f32(a[x], b[x])
    elif op == 9:
        for x in range(n):
            r[x] = lanef32.v_max3_f32(a[x], b[x], c[x])
    elif op == 10:
        for x in range(n):
            r[x] = lanef32.v_min3_f32(a[x], b[x], c[x])
    elif op == 11:
        for x in range(n):
            r[x] = lanef32.v_med3_f32(a[x], b[x], c[x])
    elif op == 12:
        for x in range(n):
            r[x] = lanef32.v_rndne_f32(a[x])
    elif op == 13:
        for x in range(n):
            r[x] = lanef32.v_trunc_f32(a[x])
    elif op == 14:
        for x in range(n):
            r[x] = lanef32.v_floor_f32(a[x])
    elif op == 15:
        for x in range(n):
            r[x] = lanef32.v_ceil_f32(a[x])
    elif op == 16:
        for x in range(n):
            r[x] = lanef32.v_fract_f32(a[x])
    elif op == 17:
        for x in range(n):
            r[x] = lanef32.v_rcp_f32(a[x])
    elif op == 18:
        for x in range(n):
            r[x] = lanef32.v_rcp_f32(a[x])
    elif op == 19:
        for x in range(n):
            r[x] = lanef32.v_sqrt_f32(a[x])
    elif op == 20:
        for x in range(n):
            r[x] = lanef32.v_rsq_f32(a[x])
    elif op == 21:
        for x in range(n):
            r[x] = lanef32.v_cvt_i32_f32(a[x])
    elif op == 22:
        for x in range(n):
            r[x] = lanef32.v_cvt_u32_f32(a[x])
    elif op == 23:
        for x in range(n):
            r[x] = lanef32.v_cvt_f32_ubyte0(a[x])
    elif op == 24:
        for x in range(n):
            r[x] = lanef32.v_cvt_f32_ubyte1(a[x])
    elif op == 25:
        for x in range(n):
            r[x] = lanef32.v_cvt_f32_ubyte2(a[x])
    elif op == 26:
        for x in range(n):
            r[x] = lanef32.v_cvt_f32_ubyte3(a[x])
    elif op == 27:
        for x in range(n):
            r[x] = lanef32.v_ldexp_f32(a[x], b[x])
    elif op == 28:
        for x in range(n):
            r[x] = lanef32.v_frexp_mant_f32(a[x])
    elif op == 29:
        for x in range(n):
            r[x] = lanef32.v_frexp_exp_i32_f32(a[x])
    elif op == 30:
        for x in range(n):
            r[x] = lanef32.v_exp_f32(a[x])
    elif op == 31:
        for x in range(n):
            r[x] = lanef32.v_log_f32(a[x])


@njit
def _perm(a, b, sel):
    """isa.moves.byte_permute of one lane: selector byte i picks result byte i — 0-3 S1's bytes,
    4-7 S0's, 8-11 0xFF where the sign bit of byte 1, 3, 5, 7 of {S0, S1} is set (else 0), 12 0x00,
    13 and above 0xFF."""
    pair = (np.uint64(a) << np.uint64(32)) | np.uint64(b)
    r = np.uint32(0)
    for i in range(4):
        sb = (sel >> np.uint32(8 * i)) & np.uint32(0xFF)
        if sb < 8:
            byte = np.uint32((pair >> np.uint64(8 * sb)) & np.uint64(0xFF))
        elif sb < 12:
            sign = (pair >> np.uint64(8 * (2 * (sb - 8) + 1) + 7)) & np.uint64(1)
            byte = np.uint32(0xFF) if sign else np.uint32(0)
        elif sb == 12:
            byte = np.uint32(0)
        else:
            byte = np.uint32(0xFF)
        r |= byte << np.uint32(8 * i)
    return r


@njit
def _all_written(code, k, j, wv, wa, ex):
    """Whether register source j of row k has its four bytes written in every lane under ``ex``
    (WaveState.vall_written; a constant or an SGPR always)."""
    kind = code[k, 6 + 4 * j]
    if kind != K_V and kind != K_A:
        return True
    w = wv if kind == K_V else wa
    i = code[k, 7 + 4 * j]
    for c in range(ex.shape[0]):
        if ex[c]:
            for b4 in range(4):
                if not w[4 * i + b4, c]:
                    return False
    return True


@njit
def _put_mask(s, sw, act, pair, words):
    """Each executing member's lane mask ``words`` into SGPR pair ``pair`` (WaveState.set_mask)."""
    for mm in range(s.shape[0]):
        if act[mm]:
            s[mm, pair] = np.uint32(words[mm] & np.uint64(0xFFFFFFFF))
            s[mm, pair + 1] = np.uint32(words[mm] >> np.uint64(32))
    sw[pair] = True
    sw[pair + 1] = True


@njit
def _popcount(x):
    n = np.uint32(0)
    while x:
        x &= x - np.uint64(1)
        n += np.uint32(1)
    return n


@njit
def run_rows(code, start, rv, wv, fv, ra, wa, fa, s, sw, scc, act, ex, exo, lanes, keep_on, t32, t64, tb):
    """Rows ``code`` in turn, each on the lanes under ``ex``: the words of file v (``rv``, written
    bits ``wv``, fresh marks ``fv``) and a (``ra``, ``wa``, ``fa``), the SGPRs ``s`` [members, n]
    and their written marks ``sw``, SCC per member ``scc`` (member of column c: c // lanes; a compare
    or a scalar row writes the members executing, ``act``, as WaveState.swrite does).
    ``keep_on``: dequant's fresh marks are kept (dequant.ENABLED). ``t32``, ``t64``, ``tb``: this
    thread's scratch at the width (``scratch``). A row writing EXEC writes ``exo``
    (a new array, ``ex`` copied into it first), which the rows after it run on. Returns the lanes
    the rows ran on, summed (the lane count each event adds), whether EXEC changed, and the row it
    stopped before: ``start``.. run; a row that ``refuses`` (its step names the lanes, or takes the
    back end's path) stops the run before any of its state is written, the caller runs its step and
    calls again from the next row; code.shape[0] where every row ran."""
    width = ex.shape[0]
    counted = 0
    changed = False
    cur = ex
    a, b, c3, lo, hi = t32[0], t32[1], t32[2], t32[3], t32[4]     # scratch (``scratch``): no allocation per call
    x64, y64 = t64[0], t64[1]
    fresh = tb
    for k in range(start, code.shape[0]):
        ex = cur
        active = 0
        for c in range(width):
            if ex[c]:
                active += 1
        counted += active
        op = code[k, 0]
        fd = code[k, 1]
        d = code[k, 2]
        n = code[k, 3]
        rd, wd, fdm = (rv, wv, fv) if fd == 0 else (ra, wa, fa)
        if op == OP_NOP:
            continue
        if op == OP_COPY:
            si = code[k, 7]
            rs, ws, fs = (rv, wv, fv) if code[k, 6] == K_V else (ra, wa, fa)
            down = (code[k, 6] == K_V) == (fd == 0) and d > si     # overlapping upwards: the top register first
            for c in range(width):       # each lane's registers read before they are written
                if ex[c]:
                    for jj in range(n):
                        j = n - 1 - jj if down else jj
                        rd[d + j, c] = rs[si + j, c]
                        fdm[d + j, c] = fs[si + j, c]
                        for b4 in range(4):
                            wd[4 * (d + j) + b4, c] = ws[4 * (si + j) + b4, c]
            continue
        if op == OP_SCMP:
            for mm in range(s.shape[0]):
                if act[mm]:
                    x = _scalar(code, k, 0, 32, s, scc, ex, lanes, mm)
                    y = _scalar(code, k, 1, 32, s, scc, ex, lanes, mm)
                    hit = _relation(code[k, 5], code[k, 4], np.uint32(x & np.uint64(0xFFFFFFFF)),
                                    np.uint32(y & np.uint64(0xFFFFFFFF)))
                    scc[mm] = np.uint64(1) if hit else np.uint64(0)
            continue
        if op == OP_SOP2 or op == OP_SAVEEXEC:
            members = s.shape[0]
            new = np.zeros(members, np.uint64)
            for mm in range(members):
                if not act[mm]:                # a member waiting elsewhere keeps its state
                    continue
                x = _scalar(code, k, 0, code[k, 4], s, scc, ex, lanes, mm)
                if op == OP_SAVEEXEC:          # S0 read before D is written (D may alias it)
                    old = _exec_word(ex, mm, lanes)
                    r, c_out = old, np.int64(-1)
                    new[mm] = _saveexec_math(code[k, 5], x, old)
                    scc[mm] = np.uint64(new[mm] != 0)
                else:
                    y = _scalar(code, k, 1, code[k, SDWA], s, scc, ex, lanes, mm)
                    r, c_out = _sop2_math(code[k, 5], x, y, scc[mm])
                    new[mm] = r
                if c_out >= 0:
                    scc[mm] = np.uint64(c_out)
                if d != EXEC:
                    s[mm, d] = np.uint32(r & np.uint64(0xFFFFFFFF))
                    if n == 2:
                        s[mm, d + 1] = np.uint32(r >> np.uint64(32))
            if d != EXEC:
                sw[d] = True
                if n == 2:
                    sw[d + 1] = True
            if op == OP_SAVEEXEC or d == EXEC:  # EXEC := each member's new word over its lanes
                if not changed:
                    exo[:] = ex
                    changed = True
                    cur = exo
                for c in range(width):
                    if act[c // lanes]:
                        exo[c] = (new[c // lanes] >> np.uint64(c % lanes)) & np.uint64(1) != 0
            continue
        if op == OP_CMP:
            _gather32(code, k, 0, rv, ra, s, lanes, a)
            _gather32(code, k, 1, rv, ra, s, lanes, b)
            rel, t = code[k, 5], code[k, 4]
            words = np.zeros(s.shape[0], np.uint64)
            for c in range(width):
                if ex[c] and _relation(rel, t, a[c], b[c]):
                    words[c // lanes] |= np.uint64(1) << np.uint64(c % lanes)
            _put_mask(s, sw, act, d, words)
            continue
        if op == OP_FIRSTLANE:
            _gather32(code, k, 0, rv, ra, s, lanes, a)
            for mm in range(s.shape[0]):
                if act[mm]:
                    first = 0
                    for ln in range(lanes):
                        if ex[mm * lanes + ln]:
                            first = ln
                            break
                    s[mm, d] = a[mm * lanes + first]
            sw[d] = True
            continue
        fresh[:] = False
        if op == OP_PK:
            for half in range(2):
                _gather_half(code, k, 0, half, rv, ra, s, lanes, a)
                _gather_half(code, k, 1, half, rv, ra, s, lanes, b)
                _gather_half(code, k, 2, half, rv, ra, s, lanes, c3)
                _f32_rows(code[k, 5], a, b, c3, hi if half else lo)
        elif op == OP_LSHL_ADD64:
            _gather64(code, k, 0, rv, ra, s, lanes, x64)
            _gather64(code, k, 1, rv, ra, s, lanes, y64)
            sh = np.uint64(code[k, 5])
            for c in range(width):
                r64 = (x64[c] << sh) + y64[c]
                lo[c] = np.uint32(r64 & np.uint64(0xFFFFFFFF))
                hi[c] = np.uint32(r64 >> np.uint64(32))
        elif op == OP_MOV:
            _gather32(code, k, 0, rv, ra, s, lanes, lo)
        elif op == OP_DIV:
            _gather32(code, k, 0, rv, ra, s, lanes, a)
            _gather32(code, k, 1, rv, ra, s, lanes, b)
            _gather32(code, k, 2, rv, ra, s, lanes, c3)
            sub = code[k, 5]
            refused = False
            if sub == 0:                    # D, and the mask's bits of the lanes under EXEC
                words = np.zeros(s.shape[0], np.uint64)
                for c in range(width):
                    r64 = lanef32.v_div_scale_f32(a[c], b[c], c3[c])
                    lo[c] = np.uint32(r64 & np.uint64(0xFFFFFFFF))
                    if ex[c] and (r64 >> np.uint64(32)) & np.uint64(1):
                        words[c // lanes] |= np.uint64(1) << np.uint64(c % lanes)
            elif sub == 1:
                for c in range(width):
                    lane = c % lanes
                    vcc = (s[c // lanes, VCC + (lane >> 5)] >> np.uint32(lane & 31)) & np.uint32(1)
                    r64 = lanef32.v_div_fmas_f32(a[c], b[c], c3[c], vcc != 0)
                    lo[c] = np.uint32(r64 & np.uint64(0xFFFFFFFF))
                    if ex[c] and (r64 >> np.uint64(32)) & np.uint64(1):
                        refused = True
            else:
                for c in range(width):
                    r64 = lanef32.v_div_fixup_f32(a[c], b[c], c3[c])
                    lo[c] = np.uint32(r64 & np.uint64(0xFFFFFFFF))
                    if ex[c] and (r64 >> np.uint64(32)) & np.uint64(1):
                        refused = True
            if refused:                     # nothing of this row written: its step names the lanes
                return counted - active, changed, k
            if sub == 0:
                _put_mask(s, sw, act, code[k, SDWA], words)
        elif op == OP_CARRY:
            _gather32(code, k, 0, rv, ra, s, lanes, a)
            _gather32(code, k, 1, rv, ra, s, lanes, b)
            sub, cin = code[k, 5], code[k, SDWA + 1]
            words = np.zeros(s.shape[0], np.uint64)
            for c in range(width):
                lane = c % lanes
                x, y, ci = np.int64(a[c]), np.int64(b[c]), np.int64(0)
                if sub >= 3:                # the carry in: the lane's bit of its pair, read before any write
                    ci = np.int64((s[c // lanes, cin + (lane >> 5)] >> np.uint32(lane & 31)) & np.uint32(1))
                if sub == 0 or sub == 3:
                    r = x + y + ci
                    cy = r > 0xFFFFFFFF
                elif sub == 1 or sub == 4:
                    r = x - y - ci
                    cy = y + ci > x
                else:
                    r = y - x - ci
                    cy = x + ci > y
                lo[c] = np.uint32(r & np.int64(0xFFFFFFFF))
                if ex[c] and cy:
                    words[c // lanes] |= np.uint64(1) << np.uint64(lane)
            _put_mask(s, sw, act, code[k, SDWA], words)
        elif op == OP_MAD64:
            _gather32(code, k, 0, rv, ra, s, lanes, a)
            _gather32(code, k, 1, rv, ra, s, lanes, b)
            _gather64(code, k, 2, rv, ra, s, lanes, x64)
            words = np.zeros(s.shape[0], np.uint64)
            for c in range(width):
                z = x64[c]
                if code[k, 5] == 0:         # exact below 2^64; the sum wraps, its carry out
                    p = np.uint64(a[c]) * np.uint64(b[c])
                    tot = p + z
                    cy = tot < p
                else:                       # signed: the sum's overflow (both signs differ from the sum's)
                    p = np.uint64(np.int64(np.int32(a[c])) * np.int64(np.int32(b[c])))
                    tot = p + z
                    cy = (((p ^ tot) & (z ^ tot)) >> np.uint64(63)) != 0
                lo[c] = np.uint32(tot & np.uint64(0xFFFFFFFF))
                hi[c] = np.uint32(tot >> np.uint64(32))
                if ex[c] and cy:
                    words[c // lanes] |= np.uint64(1) << np.uint64(c % lanes)
            _put_mask(s, sw, act, code[k, SDWA], words)
        elif op == OP_SHIFT64:
            _gather64(code, k, 0, rv, ra, s, lanes, x64)
            sh = np.uint64(code[k, SDWA])
            for c in range(width):
                if code[k, 5] == 0:
                    r64 = x64[c] << sh
                elif code[k, 5] == 1:
                    r64 = x64[c] >> sh
                else:
                    r64 = np.uint64(np.int64(x64[c]) >> np.int64(sh))
                lo[c] = np.uint32(r64 & np.uint64(0xFFFFFFFF))
                hi[c] = np.uint32(r64 >> np.uint64(32))
        elif op == OP_MBCNT:
            _gather32(code, k, 0, rv, ra, s, lanes, a)
            _gather32(code, k, 1, rv, ra, s, lanes, b)
            for c in range(width):
                lane = c % lanes
                below = np.uint64(0xFFFFFFFFFFFFFFFF) if lane >= 64 else (np.uint64(1) << np.uint64(lane)) - np.uint64(1)
                part = below & np.uint64(0xFFFFFFFF) if code[k, 5] == 0 else below >> np.uint64(32)
                lo[c] = _popcount(np.uint64(a[c]) & part) + b[c]
        elif op == OP_PERM:
            if not (_all_written(code, k, 0, wv, wa, ex) and _all_written(code, k, 1, wv, wa, ex)):
                return counted - active, changed, k         # the step's back-end path reports the read
            _gather32(code, k, 0, rv, ra, s, lanes, a)
            _gather32(code, k, 1, rv, ra, s, lanes, b)
            _gather32(code, k, 2, rv, ra, s, lanes, c3)
            for c in range(width):
                lo[c] = _perm(a[c], b[c], c3[c])
        elif op == OP_CNDMASK:
            _gather32(code, k, 0, rv, ra, s, lanes, a)
            _gather32(code, k, 1, rv, ra, s, lanes, b)
            first = code[k, 15]
            for c in range(width):
                lane = c % lanes
                word = s[c // lanes, first + (lane >> 5)]
                lo[c] = b[c] if (word >> np.uint32(lane & 31)) & np.uint32(1) else a[c]
        elif op >= OP_F32:
            _gather32(code, k, 0, rv, ra, s, lanes, a)
            _gather32(code, k, 1, rv, ra, s, lanes, b)
            _gather32(code, k, 2, rv, ra, s, lanes, c3)
            _sdwa_sources(code, k, a, b)
            _f32_rows(op - OP_F32, a, b, c3, lo)
        else:
            _gather32(code, k, 0, rv, ra, s, lanes, a)
            _gather32(code, k, 1, rv, ra, s, lanes, b)
            _gather32(code, k, 2, rv, ra, s, lanes, c3)
            _sdwa_sources(code, k, a, b)
            _int_rows(op, a, b, c3, lo)
            if code[k, 4] == 1 and keep_on:      # dequant.KEEPS: src0's fresh marks, read before the write
                kind = code[k, 6]
                if kind == K_V:
                    fresh[:] = fv[code[k, 7]]
                elif kind == K_A:
                    fresh[:] = fa[code[k, 7]]
        if code[k, SDWA + 3] != 0:                  # an SDWA destination field
            for c in range(width):
                lo[c] = _place(lo[c], rd[d, c], code[k, SDWA + 3], code[k, SDWA + 4])
        if active == width:                     # every lane: whole rows
            rd[d] = lo
            fdm[d] = fresh
            wd[4 * d:4 * d + 4] = True
            if n == 2:
                rd[d + 1] = hi
                fdm[d + 1] = False
                wd[4 * d + 4:4 * d + 8] = True
            continue
        for c in range(width):
            if ex[c]:
                rd[d, c] = lo[c]
                fdm[d, c] = fresh[c]
                for b4 in range(4):
                    wd[4 * d + b4, c] = True
                if n == 2:
                    rd[d + 1, c] = hi[c]
                    fdm[d + 1, c] = False
                    for b4 in range(4):
                        wd[4 * d + 4 + b4, c] = True
    return counted, changed, code.shape[0]
