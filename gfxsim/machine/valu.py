"""VALU: elementwise arithmetic, compares, selects and conversions under EXEC.

Numbers: each operation computes through the ISA table's entry of the instruction it traces
(``ops.valu(op, dtype).entry``, gfxsim/isa), on its typed [elements, lanes] arrays.

Provenance: arithmetic keeps, per element, the identity fields its operands agree on
(``provenance.merge``), as the entry's rule says (a reduction, a sum, a product, an extremum);
bitwise ops and shifts by whole bytes route bytes exactly (``routing``).
"""
from __future__ import annotations

import numpy as np

from . import ops
from .cond import Cond
from . import encoding
from .dtypes import FLOAT, INT, SIGNED, dtype_name, itemsize, np_dtype
from ..arch.dtypes import ELEM_TYPES
from .encoding import numeric
from .provenance import Prov, broadcast_rows, fill_value
from .valueprov import combine, elem_prov, merged, sum_of_results, with_marks
from .vgpr import VGPRs
from ..errors import ArgumentError


def bcast(x, n):
    """Rows of a one-element (or n/k-element) operand repeated to n rows."""
    if x.shape[0] == n:
        return x
    if x.shape[0] == 1:
        return np.broadcast_to(x, (n,) + x.shape[1:])
    if n % x.shape[0] == 0:
        return np.tile(x, (n // x.shape[0],) + (1,) * (x.ndim - 1))
    raise ArgumentError(f"cannot broadcast {x.shape[0]} elements to {n}")


_MARKED = {"mul": "mul", "div": "div", "max": "extremum", "min": "extremum"}     # qdir.py's operations
# a unary op's or a select's result is the array the ISA function made, and x op= y writes the
# statement's own result array into x's registers, instead of copies of them (False: the
# copies, the A/B the tests compare)
ADOPT_RESULTS = True


def _result(r, dt, *operands) -> np.ndarray:
    """A statement's result as ``dt``: the array the ISA function made where it is its own, else
    a copy (an ISA function may hand an operand back); ADOPT_RESULTS False: always a copy."""
    r = np.asarray(r)
    if not ADOPT_RESULTS:
        return r.astype(dt)
    r = r.astype(dt, copy=False)
    return r.copy() if any(np.may_share_memory(r, x) for x in operands) else r


def _own(out: VGPRs, a, b) -> bool:
    """Whether ``out``'s array is the statement's alone: writable, C-contiguous, and no view of an
    operand's (an ISA function may hand an operand back, a shift by 0 say)."""
    v = out.val
    if not (v.flags.writeable and v.flags.c_contiguous):
        return False
    return not any(isinstance(x, VGPRs) and np.may_share_memory(v, x.val) for x in (a, b))
_BITWISE = frozenset(("and", "or", "xor", "shl", "shr"))      # integer ones route bytes where they can


class ValuOps:
    # -- elementwise ALU ----------------------------------------------------------------------------
    def _binary(self, op, a, b, into=None) -> VGPRs:
        if isinstance(a, VGPRs):
            dtype = a.dtype
            if not isinstance(b, VGPRs):
                b = self.coerce(b, dtype)
        elif isinstance(b, VGPRs):
            dtype = b.dtype
            a = self.coerce(a, dtype)
        else:
            raise self.error(TypeError, f"{op} of two numbers: compute it in Python")
        if b.dtype != dtype:
            raise self.error(TypeError, f"{op}: operand types differ ({a.dtype} vs {b.dtype}); convert with .to()")
        na, nb = a.val.shape[0], b.val.shape[0]
        if na != nb and na != 1 and nb != 1:
            raise self.error(ValueError, f"{op}: {na} elements vs {nb} elements")
        if op in _BITWISE and dtype in INT:
            routed = self.route_bitwise(op, a, b)          # byte routing (routing.py)
            if routed is not None:
                return self._finish(routed, into, a, b)
        insn = ops.VALU.get((op, dtype)) or self.lookup_op(ops.valu, op, dtype)
        if a.valid is not None or b.valid is not None:
            self.check_read(a, b)
        e = insn.entry
        x, y = a.val, b.val
        if op in ("idiv", "mod") and dtype in INT:
            if b.literal and y.flat[0] > 0:
                r = e.option("by_constant")(x, int(y.flat[0]))     # by a positive literal: a shift or mask
            elif np.any((y == 0) & self.exec[None, :]):
                raise self.error(ZeroDivisionError, "integer division by zero")
            else:
                r = e.fn(x, y)
        else:
            r = e.fn(y, x) if e.reversed else e.fn(x, y)       # *rev: v_lshlrev_b32 D = S1 << S0
        r = np.asarray(r).astype(np_dtype(dtype), copy=False)
        prov = None
        if self.machine.provenance:        # without it, merged and with_marks give None, the scale check False
            rule = e.rule
            prov = merged(self, a, b, r.shape[0], reducing=rule.reducing, summing=rule.summing, product=rule.product,
                          extremum=rule.extremum, op=insn.mnemonic)
            if op in _MARKED:
                prov = with_marks(self, _MARKED[op], a, b, prov, r.shape[0])
            if rule.product and self.check_scale_application(a, b, divisor=op == "div") and prov is not None:
                prov = Prov(prov.g, prov.ids)     # dequantized: the scale's group was applied, not reduced over
        out = self.new_value(r, dtype, prov)
        if into is not None:
            return self._finish((out, insn), into, a, b)
        self.event(insn, (a, b), (out,))
        return out

    def _finish(self, routed, into, a, b):
        out, insn = routed
        if into is not None:             # x op= y: the result lands in x's registers
            self._write_into(into, np.arange(into.n), out, record=False, fresh=ADOPT_RESULTS and _own(out, a, b))
            out = into
        self.event(insn, ins=[a, b], outs=[out])
        return out

    def _unary(self, op, x) -> VGPRs:
        x = self.coerce(x, "f32")
        insn = self.lookup_op(ops.valu, op, x.dtype)
        self.check_read(x)
        e, v = insn.entry, x.val
        if op == "abs" and not e.pseudo:          # v_and_b32 clearing the sign bit
            bits = np.dtype(f"u{v.dtype.itemsize}")
            r = e.fn(v.view(bits), bits.type((1 << (8 * bits.itemsize - 1)) - 1)).view(v.dtype)
        else:
            r = e.fn(v)
        prov = merged(self, x, None, x.n)
        if op == "rcp":
            prov = with_marks(self, "rcp", x, None, prov, x.n)
        out = self.new_value(_result(r, np_dtype(x.dtype), x.val), x.dtype, prov)
        self.event(insn, ins=[x], outs=[out])
        return out

    def _float_only(self, x, op):
        if not isinstance(x, VGPRs) or x.dtype not in ("f32", "f16", "bf16"):
            raise self.error(TypeError, f"{op} needs a float value, got {getattr(x, 'dtype', type(x).__name__)}")

    def exp(self, x):
        """e**x in fp32, correctly rounded: the pseudo-op for v_mul_f32 by log2(e) then v_exp_f32
        (2**x on the hardware, within 1 ulp — a stated difference)."""
        self._float_only(x, "exp")
        return self._unary("exp", x)

    def exp2(self, x):
        """2**x (v_exp_f32), correctly rounded."""
        self._float_only(x, "exp2")
        return self._unary("exp2", x)

    def sqrt(self, x):
        self._float_only(x, "sqrt")
        return self._unary("sqrt", x)

    def rcp(self, x):
        """1/x, correctly rounded (hardware v_rcp_f32 is 1 ulp: an explicit, documented difference)."""
        self._float_only(x, "rcp")
        return self._unary("rcp", x)

    def rint(self, x):
        """Round to nearest integer, ties to even (v_rndne_f32)."""
        self._float_only(x, "rint")
        return self._unary("rndne", x)

    def max(self, a, b):
        if not isinstance(a, VGPRs) and not isinstance(b, VGPRs):
            return max(a, b)              # two uniform numbers: s_max
        return self._binary("max", a, b)

    def min(self, a, b):
        if not isinstance(a, VGPRs) and not isinstance(b, VGPRs):
            return min(a, b)
        return self._binary("min", a, b)

    def clamp(self, x, lo, hi):
        return self.min(self.max(x, lo), hi)

    def fma(self, a, b, c):
        """a*b+c with one rounding (v_fma_f32)."""
        if not isinstance(a, VGPRs):
            raise self.error(TypeError, "fma: the first operand must be a per-lane value")
        self._float_only(a, "fma")
        a, b, c = (self.coerce(v, a.dtype) for v in (a, b, c))
        insn = self.lookup_op(ops.valu, "fma", a.dtype)
        self.check_read(a, b, c)
        r = insn.entry.fn(a.val, b.val, c.val)
        dequant = self.check_scale_application(a, b)
        n = r.shape[0]
        prov = None
        if self.machine.provenance:
            ab = merged(self, a, b, n, product=True, op=insn.mnemonic)
            if dequant and ab is not None:
                ab = Prov(ab.g, ab.ids)
            pc = elem_prov(self, c, n)
            if pc is None and not dequant:       # a*b + a number: a*b's quantization marks
                ab = with_marks(self, "mul", a, b, ab, n)
            prov = combine(self, numeric(ab), numeric(pc), True, "reduction", insn.mnemonic, (c,))
            if ab is not None and pc is not None and "@mma" in ab.ids and "@mma" in pc.ids:
                prov = sum_of_results(self, ab, pc, prov)      # c + a*b: an add of two named values
        out = self.new_value(r, "f32", prov)
        self.event(insn, ins=[a, b, c], outs=[out])
        return out

    def select(self, cond, a, b) -> VGPRs:
        """Per lane: a where cond else b (v_cndmask_b32); provenance (marks included) selected alike."""
        dtype = a.dtype if isinstance(a, VGPRs) else b.dtype
        a, b = self.coerce(a, dtype), self.coerce(b, dtype)
        m = self.lane_mask(cond)
        self.check_read(a, b)
        n = max(a.n, b.n)
        m = m[None, :] if m.ndim == 1 else m
        r = ops.VALU[("cndmask", "any")].entry.fn(bcast(b.val, n), bcast(a.val, n), m)     # D = m ? S1 : S0
        prov = None
        if self.machine.provenance and (a.prov is not None or b.prov is not None):
            size = itemsize(dtype)
            mp = self.pcols(m, "a select's condition")
            if any(p is not None and p.g == 1 and size > 1 for p in (a.prov, b.prov)):   # route bytes
                pa = None if a.prov is None else broadcast_rows(a.prov.per_byte(), n * size)
                pb = None if b.prov is None else broadcast_rows(b.prov.per_byte(), n * size)
                prov = Prov.select(np.repeat(mp, size, axis=0) if mp.shape[0] > 1 else mp, pa, pb, (n * size, self.pw))
            else:
                pa, pb = elem_prov(self, a, n), elem_prov(self, b, n)
                prov = Prov.select(mp, pa, pb, (n, self.pw))
        out = self.new_value(_result(r, np_dtype(dtype), a.val, b.val), dtype, prov)
        self.event(ops.VALU[("cndmask", "any")], ins=[a, b], outs=[out])
        return out

    def _compare(self, op, a, b):
        dtype = a.dtype if isinstance(a, VGPRs) else b.dtype
        a, b = self.coerce(a, dtype), self.coerce(b, dtype)
        if a.n != b.n and 1 not in (a.n, b.n):
            raise self.error(ValueError, f"v_cmp_{op}: {a.n} elements vs {b.n} elements")
        insn = self.lookup_op(ops.valu, f"cmp_{op}", dtype)
        self.check_read(a, b)
        m = insn.entry.fn(a.val, b.val)
        if not self.exec_full:                                   # an all-ones EXEC changes no bit
            m = m & self.exec[None, :]                           # VOPC writes 0 for inactive lanes
        if m.shape[0] == 1:
            m = m[0]
        self.event(insn, ins=[a, b])
        return Cond(m)

    # -- conversions -------------------------------------------------------------------------------
    def _convert(self, x: VGPRs, dtype: str) -> VGPRs:
        np_dtype(dtype)
        src = x.dtype
        insn = self.lookup_op(ops.cvt, src, dtype)
        self.check_read(x)
        v, e, dt = x.val, insn.entry, np_dtype(dtype)
        if src in FLOAT and dtype in INT and dtype not in ("i32", "u32"):
            raise self.error(TypeError, f"no v_cvt from {src} to {dtype}: convert to i32 first")
        if src != dtype and src in INT and dtype in INT and (dt.itemsize < np_dtype(src).itemsize
                                                             or (src not in SIGNED) != (dtype not in SIGNED)):
            # a checked conversion: a silent wrap would hide a bug (the hardware's move wraps)
            bad = e.option("checked")(v, dt) & self.exec[None, :]
            if bad.any():
                el, l = (int(i) for i in np.argwhere(bad)[0])
                raise self.error(OverflowError, f"{src} value {int(v[el, l])} does not fit {dtype} "
                                 f"(a silent wrap would hide a bug)", lane=l)
        r = e.convert(v, dt)
        # one element in, one element out: its provenance (an extended byte keeps its identity)
        px = elem_prov(self, x, x.n)
        if src != dtype and self.machine.provenance:
            # as the asm front end's v_cvt_*_fp8/bf8: an 8-bit float is read in its type's encoding
            # and written in it (here the type names it: the same opcodes are OCP on gfx950)
            if px is not None and _fp8(src):
                encoding.check_values(self, f"{insn.mnemonic} ({src} to {dtype})", "source",
                                      ELEM_TYPES[src].encoding, px, self.pexec(f"EXEC of {insn.mnemonic}"))
            px = encoding.with_encoding(px, itemsize(dtype), (x.n, self.pw),
                                        ELEM_TYPES[dtype].encoding if _fp8(dtype) else None, insn.mnemonic)
        out = self.new_value(r, dtype, px)
        if out.prov is not None:
            ids = out.prov.ids
            if e.rule.quantizes and "@mma" in ids:
                ids = {f: a for f, a in ids.items() if f not in ("@mma", "@mn")}
            out.prov = Prov(itemsize(dtype), ids, out.prov.fp, out.prov.flags)
        self.event(insn, ins=[x], outs=[out])
        return out

    # -- in-place update under EXEC --------------------------------------------------------------
    def _write_into(self, dst: VGPRs, idx, new, record=True, fresh=False):
        """dst[idx] = new in the active lanes (the registers of dst keep their number). ``fresh``:
        ``new`` was made by this statement and nothing else holds its array (``_own``), so a
        write of every element in every lane takes that array instead of a copy of it."""
        if not isinstance(new, VGPRs):
            new = self.coerce(new, dst.dtype)
        if new.dtype != dst.dtype:
            raise self.error(TypeError, f"cannot write {new.dtype} into a {dst.dtype} value {dst.reg_name()}")
        if new.n not in (1, len(idx)):
            raise self.error(ValueError, f"cannot write {new.n} x {new.dtype} into {len(idx)} elements of "
                             f"{dst.reg_name()}")
        size = itemsize(dst.dtype)
        m = self.exec
        full = self.exec_full
        nv = bcast(new.val, len(idx))
        every = len(idx) == dst.n and (idx == np.arange(dst.n)).all()
        if full and every:
            dst.val = nv if fresh and nv is new.val else np.array(nv, copy=True)
        elif every:                     # a masked copy is far cheaper than a boolean column index
            np.copyto(dst.val, nv, where=m[None, :])
        else:
            rows = dst.val[idx]
            np.copyto(rows, nv, where=m[None, :])
            dst.val[idx] = rows
        if new.valid is not None or dst.valid is not None:
            bidx = (idx[:, None] * size + np.arange(size)).ravel()
            dv = dst.written().copy()
            rows = dv[bidx]
            np.copyto(rows, bcast(new.written(), len(bidx)), where=m[None, :])
            dv[bidx] = rows
            dst.valid = None if dv.all() else dv
        if self.machine.provenance and (dst.prov is not None or new.prov is not None):
            dst.prov = self._prov_write(dst, idx, new, self.pexec("EXEC of a register write"), full, every)
        if record:
            self.event(ops.VALU[("mov", "any")], ins=[new], outs=[dst])

    def _prov_write(self, dst, idx, new, m, full, every):
        """dst's provenance after dst[idx] = new under EXEC m (its provenance columns: fold.py;
        ``every``: idx is every element, in order)."""
        n, size = dst.n, itemsize(dst.dtype)
        bytewise = size > 1 and any(p is not None and p.g == 1 for p in (dst.prov, new.prov))
        if bytewise:                        # route bytes: rows are bytes
            idx = (idx[:, None] * size + np.arange(size)).ravel()
            n *= size
            pn = None if new.prov is None else broadcast_rows(new.prov.per_byte(), len(idx))
            pd = None if dst.prov is None else dst.prov.per_byte()
        else:
            pn = elem_prov(self, new, len(idx))
            pd = elem_prov(self, dst, n)
        if full and every:
            return pn
        if every:                           # every row, some lanes: no scatter
            return Prov.select(m[None, :], pn, pd, (n, self.pw))
        rows = np.zeros(n, bool)
        rows[idx] = True
        sel = rows[:, None] & m[None, :]
        expanded = None if pn is None else _scatter_rows(pn, idx, n, self.pw)
        return Prov.select(sel, expanded, pd, (n, self.pw))


def _fp8(dtype: str) -> bool:
    t = ELEM_TYPES.get(dtype)
    return t is not None and t.is_float and t.bits == 8


def _scatter_rows(p: Prov, idx, n, width) -> Prov:
    """p's rows placed at rows idx of an n-row block (other rows empty)."""
    def place(a):
        out = np.full((n,) + a.shape[1:], fill_value(a), a.dtype)
        out[idx] = a
        return out
    return p.map(place)


__all__ = ["ValuOps", "bcast", "dtype_name"]
