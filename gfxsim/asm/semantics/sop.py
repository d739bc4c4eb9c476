"""Scalar ALU (SOP1, SOP2, SOPC, SOPK) and program control (SOPP), per the CDNA3 ISA: 32/64-bit
wrap-around, SCC from carries, overflow, comparisons and non-zero results; EXEC through the
saveexec forms; scalar branches."""
from __future__ import annotations

import numpy as np

from . import const32, count, no_mods, op

M32, M64 = (1 << 32) - 1, (1 << 64) - 1
U64, I64 = np.uint64, np.int64
# Every scalar value is one number per member (uint64 [members], run side by side: state.py); the
# operations below are numpy expressions over that axis, so the members compute at once.


def s32(st, o):
    """A 32-bit scalar source: uint64 [members] (arrays throughout: numpy wraps them silently)."""
    if o.neg or o.abs or o.sext:
        raise st.error(f"modifier on scalar operand {o.text}")
    if o.kind == "reg":
        if o.file != "s" or o.count != 1:
            raise st.error(f"operand {o.text}: one SGPR expected")
        return st.sread(o.first)
    if o.kind == "scc":
        return st.scc.copy()
    return np.full(st.members, const32(st, o), U64)


def s64(st, o):
    if o.kind == "reg":
        if o.file != "s" or o.count != 2:
            raise st.error(f"operand {o.text}: an SGPR pair expected")
        return st.sread64(o.first)
    if o.kind == "int" and (o.inline or 0 <= o.value < (1 << 31)):
        return np.full(st.members, o.value & M64, U64)
    raise st.error(f"operand {o.text} is not a 64-bit scalar source ({LITERAL64})")


# A 32-bit literal in a 64-bit operand is sign-extended for signed operands and zero-extended for
# unsigned ones (llvm-project PR 70274; clang then emits no negative ones): one below 2^31 means
# the same either way, any other is refused rather than guessed.
LITERAL64 = "a 64-bit operand takes inline constants and 32-bit literals below 2^31"


def _dst(st, o, n):
    if o.kind != "reg" or o.file != "s" or o.count != n:
        raise st.error(f"destination {o.text}: {'an SGPR' if n == 1 else 'an SGPR pair'} expected")
    return o.first


def sx(v, bits: int = 32):
    """Two's-complement value of the low ``bits`` bits: int64 (arrays or numbers)."""
    v = np.asarray(v, U64)
    if bits == 64:
        return v.view(I64)
    v = (v & U64((1 << bits) - 1)).astype(I64)
    return v - ((v >> (bits - 1)) << bits)


def _b(x, bits=32):
    """An int64/uint64 result -> its low ``bits`` bits as uint64."""
    return np.asarray(x).astype(I64).astype(U64) & U64((1 << bits) - 1) if bits < 64 else np.asarray(x).astype(U64)


def _sh(b, bits):
    return (np.asarray(b, U64) & U64(bits - 1))


def _in_i32(x):
    return (x >= -2**31) & (x < 2**31)


# -- SOP2 / SOP1 table: name -> (width, fn(a, b, scc) -> (result, scc or None)) ------------------
def _bits(width):
    return M32 if width == 32 else M64


SOP2 = {
    "s_add_u32": (32, lambda a, b, c: ((a + b) & U64(M32), a + b > M32)),
    "s_sub_u32": (32, lambda a, b, c: ((a - b) & U64(M32), b > a)),
    "s_addc_u32": (32, lambda a, b, c: ((a + b + c) & U64(M32), a + b + c > M32)),
    "s_subb_u32": (32, lambda a, b, c: ((a - b - c) & U64(M32), b + c > a)),
    "s_add_i32": (32, lambda a, b, c: ((a + b) & U64(M32), ~_in_i32(sx(a) + sx(b)))),
    "s_sub_i32": (32, lambda a, b, c: ((a - b) & U64(M32), ~_in_i32(sx(a) - sx(b)))),
    "s_mul_i32": (32, lambda a, b, c: (_b(sx(a) * sx(b)), None)),
    "s_mul_hi_u32": (32, lambda a, b, c: ((a * b) >> U64(32), None)),
    "s_mul_hi_i32": (32, lambda a, b, c: (_b((sx(a) * sx(b)) >> 32), None)),
    "s_min_i32": (32, lambda a, b, c: (np.where(sx(a) < sx(b), a, b), sx(a) < sx(b))),
    "s_min_u32": (32, lambda a, b, c: (np.minimum(a, b), a < b)),
    "s_max_i32": (32, lambda a, b, c: (np.where(sx(a) > sx(b), a, b), sx(a) > sx(b))),
    "s_max_u32": (32, lambda a, b, c: (np.maximum(a, b), a > b)),
    "s_cselect_b32": (32, lambda a, b, c: (np.where(c != 0, a, b), None)),
    "s_cselect_b64": (64, lambda a, b, c: (np.where(c != 0, a, b), None)),
    "s_lshl_b32": (32, lambda a, b, c: _nz((a << _sh(b, 32)) & U64(M32))),
    "s_lshl_b64": (64, lambda a, b, c: _nz(a << _sh(b, 64))),
    "s_lshr_b32": (32, lambda a, b, c: _nz(a >> _sh(b, 32))),
    "s_lshr_b64": (64, lambda a, b, c: _nz(a >> _sh(b, 64))),
    "s_ashr_i32": (32, lambda a, b, c: _nz(_b(sx(a) >> _sh(b, 32).astype(I64)))),
    "s_ashr_i64": (64, lambda a, b, c: _nz(_b(sx(a, 64) >> _sh(b, 64).astype(I64), 64))),
    "s_bfm_b32": (32, lambda a, b, c: ((((U64(1) << _sh(a, 32)) - U64(1)) << _sh(b, 32)) & U64(M32), None)),
}
for _w in (32, 64):
    _m = U64(_bits(_w))
    SOP2.update({
        f"s_and_b{_w}": (_w, lambda a, b, c: _nz(a & b)),
        f"s_or_b{_w}": (_w, lambda a, b, c: _nz(a | b)),
        f"s_xor_b{_w}": (_w, lambda a, b, c: _nz(a ^ b)),
        f"s_andn2_b{_w}": (_w, lambda a, b, c, m=_m: _nz(a & ~b & m)),
        f"s_orn2_b{_w}": (_w, lambda a, b, c, m=_m: _nz((a | ~b) & m)),
        f"s_nand_b{_w}": (_w, lambda a, b, c, m=_m: _nz(~(a & b) & m)),
        f"s_nor_b{_w}": (_w, lambda a, b, c, m=_m: _nz(~(a | b) & m)),
        f"s_xnor_b{_w}": (_w, lambda a, b, c, m=_m: _nz(~(a ^ b) & m)),
    })


def _nz(r):
    return r, r != 0


def _shift_amount_is_32(name):
    return name in ("s_lshl_b64", "s_lshr_b64", "s_ashr_i64")


def _sop2(name, width, fn):
    @op(name)
    def run(st, d):
        count(st, d, 3)
        no_mods(st, d)
        dst, a, b = d.ops.positional
        rd = s32 if width == 32 else s64
        rb = s32 if width == 32 or _shift_amount_is_32(name) else s64
        r, scc = fn(rd(st, a), rb(st, b), st.scc)
        if width == 32:
            st.swrite(_dst(st, dst, 1), r)
        else:
            st.swrite64(_dst(st, dst, 2), r)
        if scc is not None:
            st.set_scc(scc)
    return run


for _n, (_w, _f) in SOP2.items():
    _sop2(_n, _w, _f)


# -- SOP1 ----------------------------------------------------------------------------------------
@op("s_mov_b32")
def s_mov_b32(st, d):
    count(st, d, 2)
    no_mods(st, d)
    st.swrite(_dst(st, d.ops[0], 1), s32(st, d.ops[1]))


@op("s_mov_b64")
def s_mov_b64(st, d):
    count(st, d, 2)
    no_mods(st, d)
    st.swrite64(_dst(st, d.ops[0], 2), s64(st, d.ops[1]))


@op("s_not_b32")
def s_not_b32(st, d):
    r = ~s32(st, d.ops[1]) & U64(M32)
    st.swrite(_dst(st, d.ops[0], 1), r)
    st.set_scc(r != 0)


@op("s_not_b64")
def s_not_b64(st, d):
    r = ~s64(st, d.ops[1])
    st.swrite64(_dst(st, d.ops[0], 2), r)
    st.set_scc(r != 0)


@op("s_abs_i32")
def s_abs_i32(st, d):
    """D = |S0| (wrapping: |-2^31| = -2^31); SCC = D != 0."""
    count(st, d, 2)
    no_mods(st, d)
    r = _b(np.abs(sx(s32(st, d.ops[1]))))
    st.swrite(_dst(st, d.ops[0], 1), r)
    st.set_scc(r != 0)


@op("s_brev_b32")
def s_brev_b32(st, d):
    """D = S0 with its 32 bits reversed (clang builds binary64 constants' high words with it); SCC kept."""
    count(st, d, 2)
    no_mods(st, d)
    x = s32(st, d.ops[1]).astype(np.uint32)
    bits = np.unpackbits(x.view(np.uint8).reshape(-1, 4), axis=1, bitorder="little")[:, ::-1]
    st.swrite(_dst(st, d.ops[0], 1), np.packbits(bits, axis=1, bitorder="little").view(np.uint32)
              .reshape(x.shape).astype(U64))


# saveexec: D = EXEC; EXEC = f(S0, EXEC); SCC = EXEC != 0
SAVEEXEC = {
    "s_and_saveexec_b64": lambda s, e: s & e,
    "s_or_saveexec_b64": lambda s, e: s | e,
    "s_xor_saveexec_b64": lambda s, e: s ^ e,
    "s_andn2_saveexec_b64": lambda s, e: s & ~e,
    "s_orn2_saveexec_b64": lambda s, e: s | ~e,
    "s_nand_saveexec_b64": lambda s, e: ~(s & e),
    "s_nor_saveexec_b64": lambda s, e: ~(s | e),
    "s_xnor_saveexec_b64": lambda s, e: ~(s ^ e),
}


def _saveexec(name, fn):
    @op(name)
    def run(st, d):
        count(st, d, 2)
        no_mods(st, d)
        src = s64(st, d.ops[1])                 # read before D is written (D may alias S0)
        old = st.sread64(126)
        st.swrite64(_dst(st, d.ops[0], 2), old)
        new = fn(src, old)
        st.swrite64(126, new)
        st.set_scc(new != 0)


for _n, _f in SAVEEXEC.items():
    _saveexec(_n, _f)


# -- SOPK: a signed 16-bit immediate -------------------------------------------------------------
def _simm16(st, o) -> int:
    if o.kind != "int" or not -(1 << 15) <= o.value < (1 << 16):
        raise st.error(f"{o.text} is not a 16-bit immediate")
    v = o.value & 0xFFFF
    return v - (1 << 16) if v >> 15 else v


@op("s_movk_i32")
def s_movk_i32(st, d):
    count(st, d, 2)
    st.swrite(_dst(st, d.ops[0], 1), U64(_simm16(st, d.ops[1]) & M32))


@op("s_addk_i32")
def s_addk_i32(st, d):
    count(st, d, 2)
    i = _dst(st, d.ops[0], 1)
    a, k = sx(st.sread(i)), _simm16(st, d.ops[1])
    st.swrite(i, _b(a + k))
    st.set_scc(~_in_i32(a + k))


@op("s_mulk_i32")
def s_mulk_i32(st, d):
    i = _dst(st, d.ops[0], 1)
    st.swrite(i, _b(sx(st.sread(i)) * _simm16(st, d.ops[1])))


# -- SOPC: SCC = compare ---------------------------------------------------------------------------
CMP = {"eq": np.equal, "lg": np.not_equal, "gt": np.greater, "ge": np.greater_equal, "lt": np.less,
       "le": np.less_equal}


def _scmp(name, rel, kind):
    @op(name)
    def run(st, d):
        count(st, d, 2)
        no_mods(st, d)
        if kind == "u64":
            a, b = s64(st, d.ops[0]), s64(st, d.ops[1])
        else:
            a, b = s32(st, d.ops[0]), s32(st, d.ops[1])
            if kind == "i32":
                a, b = sx(a), sx(b)
        st.set_scc(rel(a, b))


for _c, _rel in CMP.items():
    for _k in ("i32", "u32"):
        _scmp(f"s_cmp_{_c}_{_k}", _rel, _k)
for _c in ("eq", "lg"):
    _scmp(f"s_cmp_{_c}_u64", CMP[_c], "u64")


@op("s_bitcmp0_b32", "s_bitcmp1_b32")
def s_bitcmp(st, d):
    bit = (s32(st, d.ops[0]) >> _sh(s32(st, d.ops[1]), 32)) & U64(1)
    st.set_scc(bit == (1 if d.mnemonic.startswith("s_bitcmp1") else 0))


# -- SOPP: program control -------------------------------------------------------------------------
def _target(st, d) -> int:
    count(st, d, 1)
    o = d.ops[0]
    if o.kind != "label" or o.value not in st.kernel.labels:
        raise st.error(f"branch target {o.text} is not a label of {st.kernel.name}")
    return st.kernel.labels[o.value]


# whether each member takes the branch: bool [members] (or True)
BRANCH = {
    "s_branch": lambda st: True,
    "s_cbranch_scc0": lambda st: st.scc == 0,
    "s_cbranch_scc1": lambda st: st.scc != 0,
    "s_cbranch_vccz": lambda st: st.sread64(106) == 0,
    "s_cbranch_vccnz": lambda st: st.sread64(106) != 0,
    "s_cbranch_execz": lambda st: st.exec_words() == 0,
    "s_cbranch_execnz": lambda st: st.exec_words() != 0,
}


def _branch(name, taken):
    @op(name)
    def run(st, d):
        target = _target(st, d)
        t = taken(st)
        if t is True:
            return target
        return np.where(t, target, st.pc + 1)          # each member's next pc
    return run


for _n, _t in BRANCH.items():
    _branch(_n, _t)


@op("s_endpgm")
def s_endpgm(st, d):
    if st.act is None:
        st.ended[:] = True
    else:
        st.ended |= st.act
    return len(st.kernel.instructions)


@op("s_barrier")
def s_barrier(st, d):
    st.w.barrier()


# In-order execution: every memory access is complete before the next instruction, so the
# wait counters are always satisfied; hazards are the compiler's (its s_nops) and not modelled.
@op("s_waitcnt", "s_nop", "s_setprio", "s_sleep", "s_waitcnt_vscnt", "s_waitcnt_lgkmcnt", "s_waitcnt_vmcnt")
def s_noop(st, d):
    return None
