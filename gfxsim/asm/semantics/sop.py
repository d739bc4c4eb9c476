"""Scalar ALU (SOP1, SOP2, SOPC, SOPK) and program control (SOPP), per the CDNA3 ISA: 32/64-bit
wrap-around, SCC from carries, overflow, comparisons and non-zero results; EXEC through the
saveexec forms; scalar branches."""
from __future__ import annotations

import numpy as np

from . import Inline, const32, count, no_mods, op
from ..state import EXEC

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


def s_source(o, width: int = 32):
    """The form of the read ``s_reader(o, width)`` makes, as semantics.source gives forms: ("s",
    first), ("sread", an EXEC register or pair: read through WaveState), ("scc",) or ("const",
    value); None where ``s_reader`` gives None."""
    if o.neg or o.abs or o.sext:
        return None
    if o.kind == "reg" and o.file == "s" and o.count == width // 32:
        i = o.first
        touches = EXEC - 1 <= i + width // 32 - 1 and i <= EXEC + 1
        return ("sread" if touches or not 0 <= i <= 128 - width // 32 else "s", i), (False, False)
    if width == 32 and o.kind == "scc":
        return ("scc",), (False, False)
    if width == 32 and o.kind in ("int", "float"):
        c = const32(None, o)
    elif width == 64 and o.kind == "int" and (o.inline or 0 <= o.value < (1 << 31)):
        c = o.value & M64
    else:
        return None
    return ("const", c), (False, False)


def s_reader(o, width: int = 32):
    """The read of a scalar source decided once for a translated step (translate.py): what ``s32``
    (width 32) or ``s64`` (64) gives, through the same WaveState reads; None where the operand
    needs the generic path (which names what is wrong with it, or reads a relocation). Made from
    ``s_source``'s form, so a step and a block's source accept the same operands."""
    got = s_source(o, width)
    if got is None:
        return None
    kind, *arg = got[0]
    if kind in ("s", "sread"):
        i = arg[0]
        return (lambda st: st.sread(i)) if width == 32 else (lambda st: st.sread64(i))
    if kind == "scc":
        return lambda st: st.scc.copy()
    c = arg[0]
    return lambda st: np.full(st.members, c, U64)


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
    wb = 32 if width == 32 or _shift_amount_is_32(name) else 64

    def finish(st, dst, a, b):
        r, scc = fn(a, b, st.scc)
        if width == 32:
            st.swrite(_dst(st, dst, 1), r)
        else:
            st.swrite64(_dst(st, dst, 2), r)
        if scc is not None:
            st.set_scc(scc)

    @op(name)
    def run(st, d):
        count(st, d, 3)
        no_mods(st, d)
        dst, a, b = d.ops.positional
        rd = s32 if width == 32 else s64
        rb = s32 if wb == 32 else s64
        finish(st, dst, rd(st, a), rb(st, b))

    def prepare(d):
        """The step with its operand count, modifiers and destination checked and its sources'
        reads decided (None: a check fails, and run names it when a wave gets there)."""
        if len(d.ops) != 3 or d.ops.mods:
            return None
        dst, a, b = d.ops.positional
        ra, rb = s_reader(a, width), s_reader(b, wb)
        if ra is None or rb is None or dst.kind != "reg" or dst.file != "s" or dst.count != width // 32:
            return None
        return lambda st: finish(st, dst, ra(st), rb(st))

    def inline(d):
        """The step's work for a block's source (semantics.Inline): the reads s_reader makes, the
        row's numbers and SCC, written as finish writes them (a destination below EXEC)."""
        if prepare(d) is None:
            return None
        dst, a, b = d.ops.positional
        n = width // 32
        if dst.first < 0 or dst.first + n > EXEC:
            return None
        fa, fb = s_source(a, width), s_source(b, wb)
        return Inline([(fa, f"s{width}"), (fb, f"s{wb}"), ((("scc",), (False, False)), "scc")], fn, ("s", dst.first, n))

    run.prepare = prepare
    run.inline = inline
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
    "s_andn1_saveexec_b64": lambda s, e: ~s & e,
    "s_orn1_saveexec_b64": lambda s, e: ~s | e,
}


def _saveexec(name, fn):
    def finish(st, dst, src):
        old = st.sread64(126)
        st.swrite64(dst, old)
        new = fn(src, old)
        st.swrite64(126, new)
        st.set_scc(new != 0)

    @op(name)
    def run(st, d):
        count(st, d, 2)
        no_mods(st, d)
        finish(st, _dst(st, d.ops[0], 2), s64(st, d.ops[1]))     # S0 read before D is written (D may alias it)

    def prepare(d):
        """The step with its operand count, modifiers, destination and source read decided once."""
        if len(d.ops) != 2 or d.ops.mods:
            return None
        dst, src = d.ops.positional
        read = s_reader(src, 64)
        if read is None or dst.kind != "reg" or dst.file != "s" or dst.count != 2:
            return None
        first = dst.first
        return lambda st: finish(st, first, read(st))

    run.prepare = prepare


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


# wrexec: EXEC = D = f(S0, EXEC) (the new EXEC, where saveexec writes the old); SCC = EXEC != 0
WREXEC = {"s_andn1_wrexec_b64": lambda s, e: ~s & e, "s_andn2_wrexec_b64": lambda s, e: s & ~e}


def _wrexec(name, fn):
    @op(name)
    def run(st, d):
        count(st, d, 2)
        no_mods(st, d)
        new = fn(s64(st, d.ops[1]), st.sread64(126))
        st.swrite64(126, new)
        st.swrite64(_dst(st, d.ops[0], 2), new)
        st.set_scc(new != 0)


for _n, _f in WREXEC.items():
    _wrexec(_n, _f)


@op("s_bitcmp0_b64", "s_bitcmp1_b64")
def s_bitcmp64(st, d):
    bit = (s64(st, d.ops[0]) >> _sh(s32(st, d.ops[1]), 64)) & U64(1)
    st.set_scc(bit == (1 if d.mnemonic.startswith("s_bitcmp1") else 0))


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


# The wait counters are kept by gfxsim/asm/waitcnt.py (run.execute hands it every instruction, the
# waits included); the data itself is complete at issue. Pipeline hazards are the compiler's (its
# s_nops) and not modelled. Priorities, sleeps and trace data change no state a kernel can read; the scalar cache is
# coherent with memory here (one copy of every byte), so its write-back and invalidates do nothing.
@op("s_waitcnt", "s_nop", "s_setprio", "s_sleep", "s_waitcnt_vscnt", "s_waitcnt_lgkmcnt", "s_waitcnt_vmcnt",
    "s_waitcnt_expcnt", "s_ttracedata", "s_sched_barrier", "s_icache_inv")
def s_noop(st, d):
    return None



# The cache maintenance instructions whose family records a back-end event (run.own_event: "s_dcache",
# "buffer_"): there is no cache to write back or invalidate, so they record their own.
@op("s_dcache_wb", "s_dcache_inv", "s_dcache_wb_vol", "s_dcache_inv_vol", "buffer_wbl2", "buffer_inv",
    "buffer_wbinvl1", "buffer_wbinvl1_vol")
def cache_noop(st, d):
    st.w.event(d.ins.mnemonic)


@op("s_memtime", "s_memrealtime")
def s_memtime(st, d):
    """A 64-bit clock with no real time behind it: each read returns the member's previous reading
    plus one, so runs are reproducible and an elapsed time is positive."""
    count(st, d, 1)
    no_mods(st, d)
    clock = st.__dict__.setdefault("clock", np.zeros(st.members, U64))
    clock[np.ones(st.members, bool) if st.act is None else st.act] += U64(1)
    st.swrite64(_dst(st, d.ops[0], 2), clock)


@op("s_trap")
def s_trap(st, d):
    raise st.error(f"s_trap {d.ins.operands}: the kernel trapped (abort(), assert() or __builtin_trap())")


@op("s_sethalt")
def s_sethalt(st, d):
    raise st.error("s_sethalt: a halted wave waits for a debugger or the host, which the simulator does not model")


@op("s_set_gpr_idx_on", "s_set_gpr_idx_off", "s_set_gpr_idx_idx", "s_set_gpr_idx_mode")
def s_set_gpr_idx(st, d):
    raise st.error(f"{d.mnemonic}: VGPR index mode (indexed VGPR operands) is not modelled")


# -- more SOP1/SOP2/SOPK ---------------------------------------------------------------------------
def _lshl_add(n):
    # D = (S0 << n) + S1 computed in 64 bits; SCC = the carry out of bit 31 (shifted-out bits included)
    return lambda a, b, c: ((((a << U64(n)) + b) & U64(M32)), ((a << U64(n)) + b) > M32)


for _n in (1, 2, 3, 4):
    _sop2(f"s_lshl{_n}_add_u32", 32, _lshl_add(_n))


def _bfe(signed, width):
    def fn(a, b, c):
        off = b & U64(width - 1)
        w = (b >> U64(16)) & U64(0x7F)
        w = np.minimum(w, U64(width))
        mask = np.where(w >= U64(64), U64(M64), (U64(1) << np.minimum(w, U64(63))) - U64(1))
        r = (a >> off) & mask
        if signed:
            top = np.where(w > 0, (r >> (np.maximum(w, U64(1)) - U64(1))) & U64(1), U64(0))
            ext = np.where((top != 0) & (w < U64(64)), ~mask, U64(0))
            r = r | ext
        r = r & U64(_bits(width))
        return r, r != 0
    return fn


# S_BFE: offset S1[4:0] (64-bit: [5:0]), width S1[22:16]; SCC = D != 0
_sop2("s_bfe_u32", 32, _bfe(False, 32))
_sop2("s_bfe_i32", 32, _bfe(True, 32))
_sop2("s_absdiff_i32", 32, lambda a, b, c: _nz(_b(np.abs(sx(a) - sx(b)))))
# S_PACK_{LL,LH,HH}_B32_B16: two 16-bit halves of the sources into one dword (S0's half low)
_sop2("s_pack_ll_b32_b16", 32, lambda a, b, c: ((a & U64(0xFFFF)) | ((b & U64(0xFFFF)) << U64(16)), None))
_sop2("s_pack_lh_b32_b16", 32, lambda a, b, c: ((a & U64(0xFFFF)) | (b & U64(0xFFFF0000)), None))
_sop2("s_pack_hh_b32_b16", 32, lambda a, b, c: ((a >> U64(16)) | (b & U64(0xFFFF0000)), None))


def _sop1(name, width, src_width, fn, sets_scc=False):
    @op(name)
    def run(st, d):
        count(st, d, 2)
        no_mods(st, d)
        a = (s32 if src_width == 32 else s64)(st, d.ops[1])
        r = fn(a)
        if width == 32:
            st.swrite(_dst(st, d.ops[0], 1), r & U64(M32))
        else:
            st.swrite64(_dst(st, d.ops[0], 2), r)
        if sets_scc:
            st.set_scc(r != 0)
    return run


def _popcount(a):
    a = np.asarray(a, U64)
    return np.array([bin(int(x)).count("1") for x in a.reshape(-1)], U64).reshape(a.shape)


def _ff1(a, bits):
    """Index of the lowest set bit, or -1 (0xFFFFFFFF) when none."""
    a = np.asarray(a, U64) & U64((1 << bits) - 1)
    low = a & (~a + U64(1))
    idx = np.array([int(x).bit_length() - 1 for x in low.reshape(-1)], np.int64).reshape(a.shape)
    return _b(idx)


def _flbit(a, bits):
    """Bits before the highest set bit counted from the MSB, or -1 when none."""
    a = np.asarray(a, U64) & U64((1 << bits) - 1)
    idx = np.array([bits - int(x).bit_length() if x else -1 for x in a.reshape(-1)], np.int64).reshape(a.shape)
    return _b(idx)


def _flbit_signed(a, bits):
    """Bits before the first bit that differs from the sign bit, or -1 when all bits are equal."""
    a = np.asarray(a, U64) & U64((1 << bits) - 1)
    neg = (a >> U64(bits - 1)) & U64(1)
    flipped = np.where(neg != 0, ~a & U64((1 << bits) - 1), a)
    return _flbit(flipped, bits)


for _w in (32, 64):
    _m = (1 << _w) - 1
    _sop1(f"s_bcnt1_i32_b{_w}", 32, _w, _popcount, sets_scc=True)
    _sop1(f"s_bcnt0_i32_b{_w}", 32, _w, lambda a, m=_m: _popcount(~a & U64(m)), sets_scc=True)
    _sop1(f"s_ff1_i32_b{_w}", 32, _w, lambda a, w=_w: _ff1(a, w))
    _sop1(f"s_ff0_i32_b{_w}", 32, _w, lambda a, w=_w, m=_m: _ff1(~a & U64(m), w))
    _sop1(f"s_flbit_i32_b{_w}", 32, _w, lambda a, w=_w: _flbit(a, w))
    _sop1(f"s_brev_b{_w}", _w, _w, lambda a, w=_w: np.array(
        [int(format(int(x), f"0{w}b")[::-1], 2) for x in np.asarray(a, U64).reshape(-1)], U64).reshape(np.shape(a)))
_sop1("s_flbit_i32", 32, 32, lambda a: _flbit_signed(a, 32))
_sop1("s_flbit_i32_i64", 32, 64, lambda a: _flbit_signed(a, 64))
_sop1("s_sext_i32_i8", 32, 32, lambda a: _b(sx(a, 8)))
_sop1("s_sext_i32_i16", 32, 32, lambda a: _b(sx(a, 16)))


@op("s_cmov_b32", "s_cmov_b64")
def s_cmov(st, d):
    """D = S0 if SCC (the other members' and SCC-clear members' D kept)."""
    count(st, d, 2)
    no_mods(st, d)
    w64 = d.mnemonic.endswith("64")
    i = _dst(st, d.ops[0], 2 if w64 else 1)
    src = (s64 if w64 else s32)(st, d.ops[1])
    old = st.sread64(i) if w64 else st.sread(i)
    r = np.where(st.scc != 0, src, old)
    st.swrite64(i, r) if w64 else st.swrite(i, r)


@op("s_bitset0_b32", "s_bitset1_b32", "s_bitset0_b64", "s_bitset1_b64")
def s_bitset(st, d):
    """D[S0[4:0]] (64-bit: S0[5:0]) = 0 or 1; D's other bits kept."""
    count(st, d, 2)
    no_mods(st, d)
    w64 = d.mnemonic.endswith("64")
    i = _dst(st, d.ops[0], 2 if w64 else 1)
    bit = U64(1) << (s32(st, d.ops[1]) & U64(63 if w64 else 31))
    old = st.sread64(i) if w64 else st.sread(i)
    r = old | bit if "bitset1" in d.mnemonic else old & ~bit
    st.swrite64(i, r) if w64 else st.swrite(i, r & U64(M32))


def _cmpk(name, rel, signed):
    @op(name)
    def run(st, d):
        """SCC = S0 <rel> SIMM16, the immediate sign-extended (_i32) or zero-extended (_u32)."""
        count(st, d, 2)
        no_mods(st, d)
        a = s32(st, d.ops[0])
        k = _simm16(st, d.ops[1])
        if signed:
            st.set_scc(rel(sx(a), np.int64(k)))
        else:
            st.set_scc(rel(a, U64(k & 0xFFFF)))
    return run


for _c, _rel in CMP.items():
    _cmpk(f"s_cmpk_{_c}_i32", _rel, True)
    _cmpk(f"s_cmpk_{_c}_u32", _rel, False)


@op("s_cmovk_i32")
def s_cmovk_i32(st, d):
    count(st, d, 2)
    i = _dst(st, d.ops[0], 1)
    st.swrite(i, np.where(st.scc != 0, U64(_simm16(st, d.ops[1]) & M32), st.sread(i)))


# -- program counter: calls into device functions ----------------------------------------------------
# Code addresses are the simulator's: instruction i of the kernel's Program (the kernel followed by
# the device functions it calls, parse.py) is at CODE + 8*i, every instruction 8 bytes. A relocated
# operand sym@rel32@lo+A is S + A - P with P the address of its literal (the instruction's + 4), as
# the linker resolves R_AMDGPU_REL32_LO/HI; s_getpc_b64 then s_add_u32/s_addc_u32 of the pair (both
# 8 bytes with their literal, as on the hardware) give the symbol's address exactly.
CODE = 0x7F00_0000_0000
STEP = 8


def code_address(pc) -> int:
    return CODE + STEP * int(pc)


def reloc32(st, o) -> int:
    sym, kind, addend = o.value
    if sym not in st.kernel.labels:
        raise st.error(f"{o.text}: {sym} is not a function or label of {st.kernel.name} (a symbol defined "
                       "elsewhere: global variables and external functions are not linked)")
    s = code_address(st.kernel.labels[sym])
    v = s + addend - (code_address(st.pc) + 4) if kind.startswith("rel32") else s + addend
    v &= M64
    return (v >> 32 if kind.endswith("hi") else v) & M32


def _pc_of(st, addr) -> np.ndarray:
    """Code addresses [members] -> instruction indices (an error for an address no instruction has)."""
    a = np.broadcast_to(np.asarray(addr, U64), (st.members,))
    n = len(st.kernel.instructions)
    out = np.full(st.members, st.pc + 1, np.int64)          # members not executing: ignored
    for m in range(st.members):
        if st.act is not None and not st.act[m]:
            continue
        i, r = divmod(int(a[m]) - CODE, STEP)
        if r or not 0 <= i < n:
            raise st.error(f"jump to address 0x{int(a[m]):x}, which is no instruction of {st.kernel.name} "
                           f"(code is at 0x{CODE:x} + {STEP}*i, i < {n})", address=int(a[m]))
        out[m] = i
    return out


def _jump(st, pcs):
    if st.act is None and (pcs == pcs[0]).all():
        return int(pcs[0])
    return pcs


@op("s_getpc_b64")
def s_getpc_b64(st, d):
    """D = the address of the next instruction."""
    count(st, d, 1)
    st.swrite64(_dst(st, d.ops[0], 2), U64(code_address(st.pc + 1)))


@op("s_setpc_b64")
def s_setpc_b64(st, d):
    """PC = S0 (a return: the address s_swappc_b64 saved)."""
    count(st, d, 1)
    return _jump(st, _pc_of(st, s64(st, d.ops[0])))


@op("s_swappc_b64")
def s_swappc_b64(st, d):
    """D = the address of the next instruction; PC = S0 (a call)."""
    count(st, d, 2)
    target = _pc_of(st, s64(st, d.ops[1]))          # read before D is written (they may overlap)
    st.swrite64(_dst(st, d.ops[0], 2), U64(code_address(st.pc + 1)))
    return _jump(st, target)
