"""Scalar ALU (SOP1, SOP2, SOPC, SOPK) and program control (SOPP), per the CDNA3 ISA: 32/64-bit
wrap-around, SCC from carries, overflow, comparisons and non-zero results; EXEC through the
saveexec forms; scalar branches."""
from __future__ import annotations

from . import _const32, count, no_mods, op

M32, M64 = (1 << 32) - 1, (1 << 64) - 1


def s32(st, o) -> int:
    if o.neg or o.abs or o.sext:
        raise st.error(f"modifier on scalar operand {o.text}")
    if o.kind == "reg":
        if o.file != "s" or o.count != 1:
            raise st.error(f"operand {o.text}: one SGPR expected")
        return st.sget(o.first)[0]
    if o.kind == "scc":
        return st.scc
    return _const32(st, o)


def s64(st, o) -> int:
    if o.kind == "reg":
        if o.file != "s" or o.count != 2:
            raise st.error(f"operand {o.text}: an SGPR pair expected")
        return st.sget64(o.first)
    if o.kind == "int" and (o.inline or 0 <= o.value < (1 << 31)):
        return o.value & M64
    raise st.error(f"operand {o.text} is not a 64-bit scalar source ({LITERAL64})")


# A 32-bit literal in a 64-bit operand is sign-extended for signed operands and zero-extended for
# unsigned ones (llvm-project PR 70274; clang then emits no negative ones): one below 2^31 means
# the same either way, any other is refused rather than guessed.
LITERAL64 = "a 64-bit operand takes inline constants and 32-bit literals below 2^31"


def _dst(st, o, n):
    if o.kind != "reg" or o.file != "s" or o.count != n:
        raise st.error(f"destination {o.text}: {'an SGPR' if n == 1 else 'an SGPR pair'} expected")
    return o.first


def sx(v: int, bits: int = 32) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


# -- SOP2 / SOP1 table: name -> (width, fn(a, b, scc) -> (result, scc or None)) ------------------
def _bits(width):
    return M32 if width == 32 else M64


SOP2 = {
    "s_add_u32": (32, lambda a, b, c: ((a + b) & M32, int(a + b > M32))),
    "s_sub_u32": (32, lambda a, b, c: ((a - b) & M32, int(b > a))),
    "s_addc_u32": (32, lambda a, b, c: ((a + b + c) & M32, int(a + b + c > M32))),
    "s_subb_u32": (32, lambda a, b, c: ((a - b - c) & M32, int(b + c > a))),
    "s_add_i32": (32, lambda a, b, c: ((a + b) & M32, int(not -2**31 <= sx(a) + sx(b) < 2**31))),
    "s_sub_i32": (32, lambda a, b, c: ((a - b) & M32, int(not -2**31 <= sx(a) - sx(b) < 2**31))),
    "s_mul_i32": (32, lambda a, b, c: ((sx(a) * sx(b)) & M32, None)),
    "s_mul_hi_u32": (32, lambda a, b, c: ((a * b) >> 32, None)),
    "s_mul_hi_i32": (32, lambda a, b, c: (((sx(a) * sx(b)) >> 32) & M32, None)),
    "s_min_i32": (32, lambda a, b, c: (a if sx(a) < sx(b) else b, int(sx(a) < sx(b)))),
    "s_min_u32": (32, lambda a, b, c: (min(a, b), int(a < b))),
    "s_max_i32": (32, lambda a, b, c: (a if sx(a) > sx(b) else b, int(sx(a) > sx(b)))),
    "s_max_u32": (32, lambda a, b, c: (max(a, b), int(a > b))),
    "s_cselect_b32": (32, lambda a, b, c: (a if c else b, None)),
    "s_cselect_b64": (64, lambda a, b, c: (a if c else b, None)),
    "s_lshl_b32": (32, lambda a, b, c: _nz((a << (b & 31)) & M32)),
    "s_lshl_b64": (64, lambda a, b, c: _nz((a << (b & 63)) & M64)),
    "s_lshr_b32": (32, lambda a, b, c: _nz(a >> (b & 31))),
    "s_lshr_b64": (64, lambda a, b, c: _nz(a >> (b & 63))),
    "s_ashr_i32": (32, lambda a, b, c: _nz((sx(a) >> (b & 31)) & M32)),
    "s_ashr_i64": (64, lambda a, b, c: _nz((sx(a, 64) >> (b & 63)) & M64)),
    "s_bfm_b32": (32, lambda a, b, c: ((((1 << (a & 31)) - 1) << (b & 31)) & M32, None)),
}
for _w in (32, 64):
    _m = _bits(_w)
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
    return r, int(r != 0)


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
            st.sset(_dst(st, dst, 1), [r])
        else:
            st.sset64(_dst(st, dst, 2), r)
        if scc is not None:
            st.scc = scc
    return run


for _n, (_w, _f) in SOP2.items():
    _sop2(_n, _w, _f)


# -- SOP1 ----------------------------------------------------------------------------------------
@op("s_mov_b32")
def s_mov_b32(st, d):
    count(st, d, 2)
    no_mods(st, d)
    st.sset(_dst(st, d.ops[0], 1), [s32(st, d.ops[1])])


@op("s_mov_b64")
def s_mov_b64(st, d):
    count(st, d, 2)
    no_mods(st, d)
    st.sset64(_dst(st, d.ops[0], 2), s64(st, d.ops[1]))


@op("s_not_b32")
def s_not_b32(st, d):
    r = ~s32(st, d.ops[1]) & M32
    st.sset(_dst(st, d.ops[0], 1), [r])
    st.scc = int(r != 0)


@op("s_not_b64")
def s_not_b64(st, d):
    r = ~s64(st, d.ops[1]) & M64
    st.sset64(_dst(st, d.ops[0], 2), r)
    st.scc = int(r != 0)


@op("s_abs_i32")
def s_abs_i32(st, d):
    """D = |S0| (wrapping: |-2^31| = -2^31); SCC = D != 0."""
    count(st, d, 2)
    no_mods(st, d)
    r = abs(sx(s32(st, d.ops[1]))) & M32
    st.sset(_dst(st, d.ops[0], 1), [r])
    st.scc = int(r != 0)


# saveexec: D = EXEC; EXEC = f(S0, EXEC); SCC = EXEC != 0
SAVEEXEC = {
    "s_and_saveexec_b64": lambda s, e: s & e,
    "s_or_saveexec_b64": lambda s, e: s | e,
    "s_xor_saveexec_b64": lambda s, e: s ^ e,
    "s_andn2_saveexec_b64": lambda s, e: s & ~e & M64,
    "s_orn2_saveexec_b64": lambda s, e: (s | ~e) & M64,
    "s_nand_saveexec_b64": lambda s, e: ~(s & e) & M64,
    "s_nor_saveexec_b64": lambda s, e: ~(s | e) & M64,
    "s_xnor_saveexec_b64": lambda s, e: ~(s ^ e) & M64,
}


def _saveexec(name, fn):
    @op(name)
    def run(st, d):
        count(st, d, 2)
        no_mods(st, d)
        src = s64(st, d.ops[1])                 # read before D is written (D may alias S0)
        old = st.sget64(126)
        st.sset64(_dst(st, d.ops[0], 2), old)
        new = fn(src, old)
        st.sset64(126, new)
        st.scc = int(new != 0)


for _n, _f in SAVEEXEC.items():
    _saveexec(_n, _f)


# -- SOPK: a signed 16-bit immediate -------------------------------------------------------------
def _simm16(st, o) -> int:
    if o.kind != "int" or not -(1 << 15) <= o.value < (1 << 16):
        raise st.error(f"{o.text} is not a 16-bit immediate")
    return sx(o.value, 16)


@op("s_movk_i32")
def s_movk_i32(st, d):
    count(st, d, 2)
    st.sset(_dst(st, d.ops[0], 1), [_simm16(st, d.ops[1]) & M32])


@op("s_addk_i32")
def s_addk_i32(st, d):
    count(st, d, 2)
    i = _dst(st, d.ops[0], 1)
    a, k = sx(st.sget(i)[0]), _simm16(st, d.ops[1])
    st.sset(i, [(a + k) & M32])
    st.scc = int(not -2**31 <= a + k < 2**31)


@op("s_mulk_i32")
def s_mulk_i32(st, d):
    i = _dst(st, d.ops[0], 1)
    st.sset(i, [(sx(st.sget(i)[0]) * _simm16(st, d.ops[1])) & M32])


# -- SOPC: SCC = compare ---------------------------------------------------------------------------
CMP = {"eq": lambda a, b: a == b, "lg": lambda a, b: a != b, "gt": lambda a, b: a > b,
       "ge": lambda a, b: a >= b, "lt": lambda a, b: a < b, "le": lambda a, b: a <= b}


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
        st.scc = int(rel(a, b))


for _c, _rel in CMP.items():
    for _k in ("i32", "u32"):
        _scmp(f"s_cmp_{_c}_{_k}", _rel, _k)
for _c in ("eq", "lg"):
    _scmp(f"s_cmp_{_c}_u64", CMP[_c], "u64")


@op("s_bitcmp0_b32", "s_bitcmp1_b32")
def s_bitcmp(st, d):
    bit = (s32(st, d.ops[0]) >> (s32(st, d.ops[1]) & 31)) & 1
    st.scc = int(bit == (1 if d.mnemonic.startswith("s_bitcmp1") else 0))


# -- SOPP: program control -------------------------------------------------------------------------
def _target(st, d) -> int:
    count(st, d, 1)
    o = d.ops[0]
    if o.kind != "label" or o.value not in st.kernel.labels:
        raise st.error(f"branch target {o.text} is not a label of {st.kernel.name}")
    return st.kernel.labels[o.value]


BRANCH = {
    "s_branch": lambda st: True,
    "s_cbranch_scc0": lambda st: st.scc == 0,
    "s_cbranch_scc1": lambda st: st.scc == 1,
    "s_cbranch_vccz": lambda st: not st.mask_of(106).any(),
    "s_cbranch_vccnz": lambda st: st.mask_of(106).any(),
    "s_cbranch_execz": lambda st: not st.exec.any(),
    "s_cbranch_execnz": lambda st: st.exec.any(),
}


def _branch(name, taken):
    @op(name)
    def run(st, d):
        target = _target(st, d)
        return target if taken(st) else None


for _n, _t in BRANCH.items():
    _branch(_n, _t)


@op("s_endpgm")
def s_endpgm(st, d):
    st.done = True
    return len(st.kernel.instructions)


@op("s_barrier")
def s_barrier(st, d):
    st.w.barrier()


# In-order execution: every memory access is complete before the next instruction, so the
# wait counters are always satisfied; hazards are the compiler's (its s_nops) and not modelled.
@op("s_waitcnt", "s_nop", "s_setprio", "s_sleep", "s_waitcnt_vscnt", "s_waitcnt_lgkmcnt", "s_waitcnt_vmcnt")
def s_noop(st, d):
    return None
