"""The wave: lockstep execution of one wave's statements on all lanes under EXEC.

This is the back end's single execution model. The Python front end calls these methods from
kernel code (``w.global_load(...)``, ``w.mma(...)``, ``a * b``); the asm front end will call the same
methods per decoded instruction. Nothing here assumes wave64 (the lane count comes from the arch
profile) or a particular arch (matrix instructions come from the records).
"""
from __future__ import annotations

import contextlib
import os
import sys

import numpy as np

from .banks import bank_conflicts
from .dtypes import FLOAT, INT, SIGNED, from_bytes, itemsize, np_dtype, to_bytes
from .errors import GfxSimError, MemoryFault, located
from .memory import Buffer, LdsRegion, lds_track
from .mma import compute, gather_plan
from .trace import MmaEvent, Event, Operand
from .vgpr import VGPRs

_MACHINE_DIR = os.path.dirname(os.path.abspath(__file__))
_LOAD_NAMES = {1: "ubyte", 2: "ushort", 4: "dword", 8: "dwordx2", 12: "dwordx3", 16: "dwordx4"}
_DS_NAMES = {1: "b8", 2: "b16", 4: "b32", 8: "b64", 12: "b96", 16: "b128"}

_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
}


class Cond:
    """A per-lane predicate (VCC / an SGPR pair): bool ``[lanes]``."""
    __slots__ = ("mask",)

    def __init__(self, mask):
        self.mask = np.asarray(mask, bool)

    def __and__(self, o): return Cond(self.mask & _mask(o))
    def __or__(self, o): return Cond(self.mask | _mask(o))
    def __invert__(self): return Cond(~self.mask)
    def __bool__(self):
        raise TypeError("a per-lane condition has no single truth value: use w.if_(c), w.any(c) or w.all(c)")


def _mask(c):
    return c.mask if isinstance(c, Cond) else np.asarray(c, bool)


def _full_mask(c, width):
    m = _mask(c)
    return np.full(width, bool(m)) if m.ndim == 0 else m


class Wave:
    def __init__(self, machine, workgroup, wave_id: int):
        self.machine = machine
        self.wg = workgroup
        self.arch = machine.arch
        self.lanes = machine.arch.wave_size              # lanes of one wave (what kernels see)
        self.members = workgroup.members                 # workgroups run side by side in a batch
        self.width = self.lanes * self.members           # columns of every register array
        self.wave_id = wave_id
        self.exec = np.ones(self.width, bool)
        self._base = (np.arange(self.width) // self.lanes) * self.lanes     # first lane of each member
        self._free_regs = []
        self._next_reg = 0
        self.max_regs = 0
        self._coverage = []
        lane = (np.arange(self.width) % self.lanes).astype(np.int32)
        self.lane_id = self._new(lane[None, :], "i32")
        self.thread_id = self._new((lane + wave_id * self.lanes)[None, :].astype(np.int32), "i32")
        if self.members > 1:     # workgroup ids differ per member: uniform per wave, held per lane
            ids = np.repeat(np.array(workgroup.ids, np.int32), self.lanes, axis=0)      # [width, 3]
            self._wg_ids = tuple(self._new(ids[:, d][None, :], "i32") for d in range(3))

    # -- identity ----------------------------------------------------------------------------
    @property
    def workgroup_id(self) -> tuple:
        """(x, y, z): Python ints, or per-lane i32 values when workgroups run batched."""
        return self.wg.id if self.members == 1 else self._wg_ids

    def _coords(self, lane):
        """(workgroup, lane within its wave) of a column of the register arrays."""
        if lane is None:
            return self.wg.id, None
        lane = int(lane)
        return self.wg.ids[lane // self.lanes], lane % self.lanes

    @property
    def num_waves(self) -> int:
        return self.wg.num_waves

    @property
    def kernel(self) -> str:
        return self.machine.kernel_name

    def insn(self, mnemonic: str):
        return self.arch.instruction(mnemonic)

    # -- register allocation (virtual VGPR numbers for the trace and the stepper) ---------------
    def _alloc(self, n: int):
        for i, (base, cnt) in enumerate(self._free_regs):
            if cnt >= n:
                if cnt == n:
                    self._free_regs.pop(i)
                else:
                    self._free_regs[i] = (base + n, cnt - n)
                return (base, n)
        base = self._next_reg
        self._next_reg += n
        self.max_regs = max(self.max_regs, self._next_reg)
        return (base, n)

    def _free(self, regs):
        self._free_regs.append(regs)

    # -- coordinates of the statement being executed ------------------------------------------
    def source(self) -> str | None:
        f = sys._getframe(1)
        while f is not None and os.path.dirname(os.path.abspath(f.f_code.co_filename)) == _MACHINE_DIR:
            f = f.f_back
        if f is None:
            return None
        return f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno}"

    def error(self, cls, message, lane=None, address=None):
        wg, lane = self._coords(lane)
        return located(cls, message, kernel=self.kernel, workgroup=wg, wave=self.wave_id, lane=lane,
                       instruction=self.machine.trace.n_events, source=self.source(), address=address)

    def finding(self, kind, message, lane=None, address=None, instruction=None, dedupe=None, **details):
        if instruction is not None and lane is not None and self.members > 1:
            instruction = instruction + int(lane) // self.lanes     # a batched instruction: one index per member
        wg, lane = self._coords(lane)
        if dedupe is not None:
            dedupe = tuple(dedupe) + (wg,)
        self.machine.report(kind, message, workgroup=wg, wave=self.wave_id, lane=lane,
                            instruction=self.machine.trace.n_events if instruction is None else instruction,
                            source=self.source(), address=address, dedupe=dedupe, details=details)

    def _event(self, op, ins=(), outs=(), cls=Event, **details):
        tr = self.machine.trace
        idx = tr.n_events
        tr.n_events += 1
        if not tr.enabled and cls is Event:
            return None
        # matrix instructions are always recorded (the token queries need them); their per-lane
        # operand values only when tracing
        ev = cls(index=idx, op=op, kernel=self.kernel, workgroup=self.wg.id, wave=self.wave_id,
                 source=self.source(), exec_mask=self.exec.copy(),
                 inputs=[Operand(v.regs, v.dtype, v.val.copy()) for v in ins if isinstance(v, VGPRs)]
                 if tr.enabled else [],
                 outputs=[Operand(v.regs, v.dtype, v.val.copy()) for v in outs] if tr.enabled else [],
                 details=details)
        (tr.events if tr.enabled else tr.matrix_events).append(ev)
        return ev

    # -- value construction --------------------------------------------------------------------
    def _new(self, val, dtype, **meta) -> VGPRs:
        v = VGPRs(self, val, dtype, **meta)
        if not self.exec.all():
            v.valid[:, ~self.exec] = False
        return v

    def const(self, value, dtype: str = "i32", n: int = 1) -> VGPRs:
        """A uniform value in every lane (v_mov_b32 of an SGPR/literal)."""
        val = np.full((n, self.width), value, dtype=np_dtype(dtype))
        v = self._new(val, dtype)
        self._event("v_mov_b32", outs=[v])
        return v

    def zeros(self, dtype: str = "f32", n: int = 1) -> VGPRs:
        return self.const(0, dtype, n)

    def from_lanes(self, values, dtype: str) -> VGPRs:
        """A value given per lane: ``values`` is ``[lanes]`` or ``[n, lanes]``."""
        val = np.asarray(values).astype(np_dtype(dtype))
        if val.ndim == 1:
            val = val[None, :]
        if val.shape[1] == self.lanes and self.members > 1:
            val = np.tile(val, (1, self.members))            # the same per-lane values in every member
        if val.shape[1] != self.width:
            raise self.error(ValueError, f"per-lane values have {val.shape[1]} lanes, the wave has {self.lanes}")
        v = self._new(val.copy(), dtype)
        self._event("v_mov_b32", outs=[v])
        return v

    def cat(self, *parts) -> VGPRs:
        """Concatenate values of one type element-wise (registers side by side)."""
        parts = [p for p in parts]
        dt = parts[0].dtype
        for p in parts:
            if p.dtype != dt:
                raise self.error(TypeError, f"cannot concatenate {dt} with {p.dtype}")
        self._check_read(*parts)
        v = VGPRs(self, np.concatenate([p.val for p in parts]), dt, np.concatenate([p.ids for p in parts]),
                  np.concatenate([p.valid for p in parts]), np.concatenate([p.fp for p in parts]))
        self._event("v_mov_b32", ins=parts, outs=[v])
        return v

    # -- checks ----------------------------------------------------------------------------------
    def _check_read(self, *vals):
        full = self.exec.all()
        for v in vals:
            if v.regs is None:                       # literal
                continue
            if v.valid.all() if full else (v.valid | ~self.exec).all():
                continue
            bad = ~v.valid & self.exec[None, :]
            for lane in self._first_lanes(bad.any(axis=0)):
                m = slice(lane - lane % self.lanes, lane - lane % self.lanes + self.lanes)
                self.finding("uninitialized-read", f"read of never-written {v.reg_name()} "
                             f"(byte {int(np.argmax(bad[:, lane]))}) in {int(bad[:, m].any(axis=0).sum())} "
                             f"active lane(s)", lane=lane, dedupe=("uninit-reg", self.source()))

    def _first_lanes(self, mask):
        """The first column where ``mask`` holds, in every workgroup of the batch that has one."""
        per = np.asarray(mask, bool).reshape(self.members, self.lanes)
        return [int(m * self.lanes + np.argmax(per[m])) for m in np.nonzero(per.any(axis=1))[0]]

    def _coerce(self, x, dtype, n=1) -> VGPRs:
        if isinstance(x, VGPRs):
            return x
        if isinstance(x, (int, float, np.integer, np.floating)):
            return VGPRs(self, np.full((1, self.width), x, dtype=np_dtype(dtype)), dtype, literal=True)
        raise self.error(TypeError, f"expected a per-lane value or a number, got {type(x).__name__}")

    # -- elementwise ALU --------------------------------------------------------------------------
    def _binary(self, op, a, b, into=None) -> VGPRs:
        dtype = a.dtype if isinstance(a, VGPRs) else (b.dtype if isinstance(b, VGPRs) else None)
        a, b = self._coerce(a, dtype), self._coerce(b, dtype)
        if a.dtype != b.dtype:
            raise self.error(TypeError, f"{op}: operand types differ ({a.dtype} vs {b.dtype}); convert with .to()")
        if a.n != b.n and 1 not in (a.n, b.n):
            raise self.error(ValueError, f"{op}: {a.n} elements vs {b.n} elements")
        self._check_read(a, b)
        dt = np_dtype(a.dtype)
        x, y = a.val, b.val
        with np.errstate(all="ignore"):
            if op in _BINARY:
                r = _BINARY[op](x, y)
            elif op == "div":
                if a.dtype not in FLOAT:
                    raise self.error(TypeError, f"integer division of {a.dtype}: use // or % (no VALU op divides)")
                r = np.divide(x.astype(np.float32) if dt.itemsize < 4 else x, y)
            elif op in ("idiv", "mod"):
                if a.dtype in FLOAT:
                    raise self.error(TypeError, f"{op} on {a.dtype}")
                if np.any((y == 0) & self.exec[None, :]):
                    raise self.error(ZeroDivisionError, "integer division by zero")
                safe = np.where(y == 0, 1, y)
                r = np.floor_divide(x, safe) if op == "idiv" else np.mod(x, safe)
            elif op in ("shl", "shr"):
                if a.dtype in FLOAT:
                    raise self.error(TypeError, f"shift of {a.dtype}")
                sh = (y & (8 * dt.itemsize - 1)).astype(dt)
                r = np.left_shift(x, sh) if op == "shl" else np.right_shift(x, sh)
            else:
                raise self.error(ValueError, f"unknown operation {op!r}")
        r = np.asarray(r).astype(dt, copy=False)
        out = self._derive(r, a.dtype, a, b, op)
        if op == "mul":
            self._check_scale_application(a, b)
        if into is not None:             # x op= y: the result lands in x's registers
            self._write_into(into, np.arange(into.n), out, None)
            out = into
        self._event(f"v_{op}_{a.dtype}", ins=[a, b], outs=[out])
        return out

    def _derive(self, r, dtype, a, b=None, op=""):
        """A new value computed from a (and b): provenance merged elementwise."""
        n = r.shape[0]
        size = itemsize(dtype)
        if b is None:
            ia, fa = a.element_ids(), a.fp
            ids, fp = ia, fa
        else:
            ia, ib = _bcast(a.element_ids(), n), _bcast(b.element_ids(), n)
            fa, fb = _bcast(a.fp, n), _bcast(b.fp, n)
            a_none, b_none = not (ia.any() or fa.any()), not (ib.any() or fb.any())
            if not self.machine.provenance or (a_none and b_none):
                ids, fp = ia, fa
            elif b_none:                # a constant or untagged operand changes nothing
                ids, fp = ia, fa
            elif a_none:
                ids, fp = ib, fb
            elif np.array_equal(ia, ib) and not (fa.any() or fb.any()):
                ids, fp = ia, fa        # the same elements on both sides
            else:
                ids, fp = self.machine.tags.combine(ia, fa, ib, fb, reducing=op in ("max", "min", "add"))
        ka = kb = None
        src = a.mma_event
        for v in (a, b):
            if v is not None and v.ka is not None:
                ka = _bcast(v.ka, n) if ka is None else self._union_sets(ka, _bcast(v.ka, n))
                kb = _bcast(v.kb, n) if kb is None else self._union_sets(kb, _bcast(v.kb, n))
                src = v.mma_event if src is None else src
        out = self._new(r, dtype, ids=np.repeat(ids, size, axis=0), fp=fp.copy(), ka=ka, kb=kb, mma_event=src)
        return out

    def _union_sets(self, s1, s2):
        if not self.machine.provenance:
            return s1
        t = self.machine.tags
        return t.unions(s1, s2)

    def _unary(self, op, x, fn=None) -> VGPRs:
        x = self._coerce(x, "f32")
        self._check_read(x)
        with np.errstate(all="ignore"):
            if op == "abs":
                r = np.abs(x.val)
            else:
                r = fn(x.val)
        out = self._derive(np.asarray(r).astype(np_dtype(x.dtype)), x.dtype, x)
        self._event(f"v_{op}_{x.dtype}", ins=[x], outs=[out])
        return out

    def _float_only(self, x, op):
        if not isinstance(x, VGPRs) or x.dtype not in ("f32", "f16", "bf16"):
            raise self.error(TypeError, f"{op} needs a float value, got {getattr(x, 'dtype', type(x).__name__)}")

    def exp(self, x):
        """e**x in fp32 (numpy's correctly rounded-to-1-ulp expf; hardware v_exp_f32 is 2**x, 1 ulp)."""
        self._float_only(x, "exp")
        return self._unary("exp", x, np.exp)

    def exp2(self, x):
        self._float_only(x, "exp2")
        return self._unary("exp", x, np.exp2)

    def sqrt(self, x):
        self._float_only(x, "sqrt")
        return self._unary("sqrt", x, np.sqrt)

    def rcp(self, x):
        """1/x, correctly rounded (hardware v_rcp_f32 is 1 ulp: an explicit, documented difference)."""
        self._float_only(x, "rcp")
        return self._unary("rcp", x, lambda v: np.float32(1) / v)

    def rint(self, x):
        """Round to nearest integer, ties to even (v_rndne_f32)."""
        self._float_only(x, "rint")
        return self._unary("rndne", x, np.rint)

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
        """a*b+c with one rounding (v_fma_f32): formed in float64, where a*b is exact."""
        for v in (a, b, c):
            self._float_only(v if isinstance(v, VGPRs) else a, "fma")
        a, b, c = (self._coerce(v, a.dtype) for v in (a, b, c))
        self._check_read(a, b, c)
        r = (a.val.astype(np.float64) * b.val + c.val).astype(np.float32)
        ab = self._derive(r, "f32", a, b)
        out = self._derive(r, "f32", ab, c)
        self._check_scale_application(a, b)
        self._event("v_fma_f32", ins=[a, b, c], outs=[out])
        return out

    def select(self, cond, a, b) -> VGPRs:
        """Per lane: a where cond else b (v_cndmask_b32)."""
        dtype = a.dtype if isinstance(a, VGPRs) else b.dtype
        a, b = self._coerce(a, dtype), self._coerce(b, dtype)
        m = self._m(cond)
        self._check_read(a, b)
        n = max(a.n, b.n)
        m = m[None, :] if m.ndim == 1 else m
        r = np.where(m, _bcast(a.val, n), _bcast(b.val, n))
        size = itemsize(dtype)
        mb = np.repeat(m, size, axis=0) if m.shape[0] > 1 else m
        ids = np.where(mb, _bcast(a.ids, n * size), _bcast(b.ids, n * size))
        fp = np.where(m, _bcast(a.fp, n), _bcast(b.fp, n))
        out = self._new(r.astype(np_dtype(dtype)), dtype, ids=ids.astype(np.int32), fp=fp.astype(np.int32))
        self._event("v_cndmask_b32", ins=[a, b], outs=[out])
        return out

    def _compare(self, op, a, b) -> Cond:
        dtype = a.dtype if isinstance(a, VGPRs) else b.dtype
        a, b = self._coerce(a, dtype), self._coerce(b, dtype)
        if a.n != b.n and 1 not in (a.n, b.n):
            raise self.error(ValueError, f"v_cmp_{op}: {a.n} elements vs {b.n} elements")
        self._check_read(a, b)
        f = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
             "eq": np.equal, "ne": np.not_equal}[op]
        m = f(a.val, b.val) & self.exec[None, :]     # VOPC writes 0 for inactive lanes
        if m.shape[0] == 1:
            m = m[0]
        self._event(f"v_cmp_{op}_{dtype}", ins=[a, b])
        return Cond(m)

    # -- conversions -------------------------------------------------------------------------------
    def _convert(self, x: VGPRs, dtype: str) -> VGPRs:
        np_dtype(dtype)
        self._check_read(x)
        src = x.dtype
        v = x.val
        with np.errstate(all="ignore"):
            if src == dtype:
                r = v.copy()
            elif src in FLOAT and dtype in INT:
                if dtype != "i32" and dtype != "u32":
                    raise self.error(TypeError, f"no v_cvt from {src} to {dtype}: convert to i32 first")
                f = v.astype(np.float64)
                lo, hi = (-2.0 ** 31, 2.0 ** 31 - 1) if dtype == "i32" else (0.0, 2.0 ** 32 - 1)
                r = np.where(np.isnan(f), 0, np.clip(np.trunc(f), lo, hi)).astype(np_dtype(dtype))
            elif src in INT and dtype in INT:
                info = np.iinfo(np_dtype(dtype))
                wide = v.astype(np.int64)
                if np.dtype(np_dtype(dtype)).itemsize < np.dtype(np_dtype(src)).itemsize or \
                        (src not in SIGNED) != (dtype not in SIGNED):
                    bad = ((wide < info.min) | (wide > info.max)) & self.exec[None, :]
                    if bad.any():
                        e, l = (int(i) for i in np.argwhere(bad)[0])
                        raise self.error(OverflowError, f"{src} value {int(wide[e, l])} does not fit {dtype} "
                                         f"(a silent wrap would hide a bug)", lane=l)
                r = wide.astype(np_dtype(dtype))
            else:                       # int -> float, float -> float: round to nearest even
                r = v.astype(np.float64).astype(np_dtype(dtype)) if src in INT else v.astype(np_dtype(dtype))
        out = self._derive(r, dtype, x)
        out.fp = x.fp.copy()
        self._event(f"v_cvt_{dtype}_{src}", ins=[x], outs=[out])
        return out

    # -- in-place update under EXEC --------------------------------------------------------------
    def _write_into(self, dst, idx, new, op):
        if new.dtype != dst.dtype:
            raise self.error(TypeError, f"cannot write {new.dtype} into a {dst.dtype} value")
        size = itemsize(dst.dtype)
        m = self.exec
        nv = _bcast(new.val, len(idx))
        dst.val[np.ix_(idx, m)] = nv[:, m]
        bidx = (idx[:, None] * size + np.arange(size)).ravel()
        dst.ids[np.ix_(bidx, m)] = _bcast(new.ids, len(bidx))[:, m]
        dst.valid[np.ix_(bidx, m)] = _bcast(new.valid, len(bidx))[:, m]
        dst.fp[np.ix_(idx, m)] = _bcast(new.fp, len(idx))[:, m]
        if new.ka is not None:
            if dst.ka is None:
                dst.ka = np.zeros(dst.fp.shape, np.int32)
                dst.kb = np.zeros(dst.fp.shape, np.int32)
            dst.ka[np.ix_(idx, m)] = _bcast(new.ka, len(idx))[:, m]
            dst.kb[np.ix_(idx, m)] = _bcast(new.kb, len(idx))[:, m]
            dst.mma_event = new.mma_event
        dst.is_scale = dst.is_scale or new.is_scale
        if op:
            self._event(op, ins=[new], outs=[dst])

    # -- divergent control ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def if_(self, cond):
        """``with w.if_(c):`` narrows EXEC to the lanes where c holds (s_and_saveexec_b64)."""
        m = self._m(cond)
        if m.ndim != 1:
            raise self.error(ValueError, "w.if_ needs a one-element condition (one bit per lane)")
        saved = self.exec.copy()
        self.exec = saved & m
        try:
            yield Cond(self.exec.copy())
        finally:
            self.exec = saved

    def _m(self, cond):
        """A condition as a mask over the register columns: a Python bool is uniform, a per-lane
        numpy mask of one wave applies to every workgroup of a batch."""
        m = _full_mask(cond, self.width)
        if m.ndim >= 1 and m.shape[-1] == self.lanes and self.members > 1:
            m = np.tile(m, (1,) * (m.ndim - 1) + (self.members,))
        return m

    def any(self, cond) -> bool:
        return bool((self._m(cond) & self.exec).any())

    def all(self, cond) -> bool:
        return bool((self._m(cond) | ~self.exec).all())

    def end_program(self, cond) -> bool:
        """s_endpgm where ``cond`` holds (uniform per wave): those lanes stop for good. Returns True
        when no lane is left, so a kernel writes ``if w.end_program(part * P >= ctx): return``."""
        m = self._m(cond)
        if m.ndim != 1:
            raise self.error(ValueError, "w.end_program needs a one-element condition")
        self.exec = self.exec & ~m
        return not self.exec.any()

    # -- cross-lane -------------------------------------------------------------------------------------
    def bpermute(self, v: VGPRs, src_lane) -> VGPRs:
        """out[l] = v[src_lane[l]] (ds_bpermute_b32); the source lane's data is read even if it is inactive."""
        src = src_lane.val[0].astype(np.int64) if isinstance(src_lane, VGPRs) else np.asarray(src_lane, np.int64)
        if src.ndim == 1 and src.shape[0] == self.lanes and self.members > 1:
            src = np.tile(src, self.members)
        src = self._base + np.broadcast_to(src, (self.width,)) % self.lanes
        self._check_read(v)
        if not v.valid[:, src[self.exec]].all():
            self.finding("uninitialized-read", f"bpermute reads a never-written lane of {v.reg_name()}",
                         dedupe=("uninit-perm", self.source()))
        ka = None if v.ka is None else v.ka[:, src]
        out = self._new(v.val[:, src].copy(), v.dtype, ids=v.ids[:, src].copy(), fp=v.fp[:, src].copy(),
                        ka=ka, kb=None if v.kb is None else v.kb[:, src], mma_event=v.mma_event, is_scale=v.is_scale)
        out.valid &= v.valid[:, src]
        self._event("ds_bpermute_b32", ins=[v], outs=[out])
        return out

    def shfl_xor(self, v: VGPRs, mask: int) -> VGPRs:
        """out[l] = v[l ^ mask] (a butterfly shuffle; ds_swizzle / DPP on hardware)."""
        return self.bpermute(v, np.arange(self.lanes) ^ int(mask))

    def swizzle(self, v: VGPRs, and_mask: int = 0x1F, or_mask: int = 0, xor_mask: int = 0) -> VGPRs:
        """ds_swizzle_b32 bit-mask mode within each group of 32 lanes."""
        l = np.arange(self.lanes)
        src = (l & ~31) | ((((l & 31) & and_mask) | or_mask) ^ xor_mask)
        return self.bpermute(v, src)

    def readlane(self, v: VGPRs, lane: int):
        """v_readlane_b32: the value of one lane, as a Python number (an SGPR)."""
        self._check_read(v)
        if self.members > 1:
            raise self.error(ValueError, "readlane gives one number per wave; in a batched launch use w.bpermute")
        return v.val[0, lane].item()

    def reduce(self, v: VGPRs, op: str = "max", width: int | None = None) -> VGPRs:
        """Butterfly reduction over groups of ``width`` lanes (default: the whole wave), every lane
        ends with its group's result. Built from shuffles so provenance flows as on hardware."""
        width = width or self.lanes
        fn = {"max": self.max, "min": self.min, "sum": lambda a, b: a + b}[op]
        k = 1
        while k < width:
            v = fn(v, self.shfl_xor(v, k))
            k *= 2
        return v

    # -- memory ---------------------------------------------------------------------------------------
    def _addresses(self, offset, nbytes, limit, what, align):
        if nbytes not in _LOAD_NAMES:
            raise self.error(ValueError, f"{what}: {nbytes}-byte accesses do not exist (use 1, 2, 4, 8, 12 or 16)")
        if isinstance(offset, VGPRs):
            self._check_read(offset)
            if offset.dtype not in ("i32", "u32", "i64", "u64") or offset.n != 1:
                raise self.error(TypeError, f"{what}: address must be one i32/u32/i64 per lane, got "
                                 f"{offset.n} x {offset.dtype}")
            addr = offset.val[0].astype(np.int64)
        else:
            addr = np.full(self.width, int(offset), np.int64)
        act = self.exec
        bad = act & ((addr < 0) | (addr + nbytes > limit))
        if bad.any():
            l = int(np.argmax(bad))
            raise self.error(MemoryFault, f"{what}: lane {l} accesses bytes [{addr[l]}, {addr[l] + nbytes}) "
                             f"outside [0, {limit})", lane=l, address=int(addr[l]))
        mis = act & (addr % align != 0)
        if mis.any():
            l = int(np.argmax(mis))
            raise self.error(MemoryFault, f"{what}: lane {l} address {addr[l]} is not {align}-byte aligned "
                             f"for a {nbytes}-byte access", lane=l, address=int(addr[l]))
        return addr

    def global_load(self, buf: Buffer, offset, nbytes: int = 4, dtype: str | None = None) -> VGPRs:
        """global_load_*: ``nbytes`` per lane from byte ``offset`` of ``buf`` (dtype defaults to the buffer's)."""
        if not isinstance(buf, Buffer):
            raise self.error(TypeError, f"global_load needs a Buffer, got {type(buf).__name__}")
        dtype = dtype or _dtype_name(buf.array.dtype)
        if nbytes % itemsize(dtype):
            raise self.error(ValueError, f"global_load of {nbytes} bytes as {dtype} from {buf.name!r}")
        addr = self._addresses(offset, nbytes, buf.nbytes, f"global_load from {buf.name!r}", min(nbytes, 4))
        act = self.exec
        byte_addr = addr[None, :] + np.arange(nbytes)[:, None]           # [nbytes, lanes]
        safe = np.where(act[None, :], byte_addr, 0)
        raw = buf.raw[safe]
        ids = np.zeros(raw.shape, np.int32)
        if self.machine.provenance:
            if buf.tags:
                ids[:, act] = buf.element_identities(self.machine.tags, safe[:, act])
            elif buf.ids is not None:
                ids[:, act] = self.machine.tags.import_ids(buf.tag_table, buf.ids[safe[:, act]])
        fp = np.zeros((nbytes // itemsize(dtype), self.width), np.int32)
        if buf.fp is not None and self.machine.provenance:
            fp[:, act] = self.machine.tags.import_sets(buf.tag_table, buf.fp[safe[:: itemsize(dtype), act]])
        v = self._new(from_bytes(raw, dtype), dtype, ids=ids, fp=fp)
        if buf.written is not None and not buf.written[safe[:, act]].all():
            unwritten = act & ~buf.written[safe].all(axis=0)
            for l in self._first_lanes(unwritten):
                self.finding("uninitialized-read", f"global_load from {buf.name!r} reads never-written bytes",
                             lane=l, address=int(addr[l]), dedupe=("uninit-global", buf.name, self.source()))
            v.valid[:, act] &= buf.written[safe[:, act]]
        self._event(f"global_load_{_LOAD_NAMES[nbytes]}", outs=[v], buffer=buf.name, address=addr.copy())
        return v

    def scalar_load(self, buf: Buffer, offset, dtype: str | None = None):
        """s_load_dword: one uniform value (an SGPR), returned as a Python number; in a batched
        launch the offset may differ per workgroup and the result is a per-lane value."""
        dtype = dtype or _dtype_name(buf.array.dtype)
        if isinstance(offset, VGPRs):
            return self.global_load(buf, offset, itemsize(dtype), dtype)
        size = itemsize(dtype)
        offset = int(offset)
        if offset < 0 or offset + size > buf.nbytes:
            raise self.error(MemoryFault, f"s_load from {buf.name!r}: bytes [{offset}, {offset + size}) outside "
                             f"[0, {buf.nbytes})", address=offset)
        if offset % min(size, 4):
            raise self.error(MemoryFault, f"s_load from {buf.name!r}: address {offset} is not aligned", address=offset)
        if buf.written is not None and not buf.written[offset:offset + size].all():
            self.finding("uninitialized-read", f"s_load from {buf.name!r} reads never-written bytes",
                         address=offset, dedupe=("uninit-smem", buf.name, self.source()))
        self._event("s_load_dword", buffer=buf.name, address=offset)
        return buf.raw[offset:offset + size].view(np_dtype(dtype))[0].item()

    def global_store(self, buf: Buffer, offset, value: VGPRs, nbytes: int | None = None):
        """global_store_*: the value's bytes (or the first ``nbytes``) to byte ``offset`` of ``buf``."""
        nbytes = nbytes or value.nbytes
        self._check_read(value)
        addr = self._addresses(offset, nbytes, buf.nbytes, f"global_store to {buf.name!r}", min(nbytes, 4))
        act = self.exec
        byte_addr = addr[None, :] + np.arange(nbytes)[:, None]
        raw = to_bytes(value.val)[:nbytes]
        buf.raw[byte_addr[:, act]] = raw[:, act]
        if buf.written is not None:
            buf.written[byte_addr[:, act]] = True
        if self.machine.provenance and (value.ids.any() or value.fp.any()):
            if buf.ids is None or buf.tag_table is not self.machine.tags:
                buf.ids = np.zeros(buf.raw.size, np.int32)
                buf.fp = np.zeros(buf.raw.size, np.int32)
                buf.tag_table = self.machine.tags
            buf.ids[byte_addr[:, act]] = value.ids[:nbytes][:, act]
            buf.fp[byte_addr[:, act]] = np.repeat(value.fp, itemsize(value.dtype), axis=0)[:nbytes][:, act]
        self._event(f"global_store_{_LOAD_NAMES[nbytes]}", ins=[value], buffer=buf.name, address=addr.copy())

    def shared(self, name: str, shape, dtype) -> LdsRegion:
        """A ``__shared__`` array of the workgroup (the same region for every wave)."""
        try:
            return self.wg.lds.region(name, shape, dtype)
        except (MemoryError, ValueError) as e:
            raise self.error(MemoryFault if isinstance(e, MemoryError) else ValueError, str(e)) from None

    def _lds_access(self, region, offset, nbytes, is_write):
        lds = self.wg.lds
        if not isinstance(region, LdsRegion):
            raise self.error(TypeError, f"LDS access needs a region from w.shared(), got {type(region).__name__}")
        rel = self._addresses(offset, nbytes, region.nbytes, f"ds_{'write' if is_write else 'read'} of "
                              f"{region.name!r}", min(nbytes, 16) if nbytes in (4, 8, 16) else nbytes)
        addr = rel + region.offset + (self._base // self.lanes) * lds.member_bytes
        act = self.exec
        worst = 0
        for m in range(self.members):                    # each workgroup of a batch has its own LDS
            cols = slice(m * self.lanes, (m + 1) * self.lanes)
            if not act[cols].any():
                continue
            a, on = addr[cols], act[cols]
            if self.machine.check_races and self.wg.num_waves > 1:
                hl, ha, hw = lds_track(a, on, nbytes, self.wave_id, self.wg.epoch, is_write,
                                       lds.w_wave, lds.w_epoch, lds.r_mask, lds.r_epoch)
                if hl >= 0:
                    ha -= m * lds.member_bytes
                    self.finding("lds-race", f"{'write' if is_write else 'read'} of LDS byte {ha} "
                                 f"({region.name}) races with wave {hw}: no barrier between them",
                                 lane=m * self.lanes + hl, address=int(ha), dedupe=("race", self.source(), int(hw)),
                                 other_wave=int(hw))
            deg, cycles, passes = bank_conflicts(a, on, nbytes, lds.banks, lds.bank_bytes)
            worst = max(worst, deg)
            if deg > 1:
                self.finding("lds-bank-conflict", f"ds_{'write' if is_write else 'read'}_{_DS_NAMES[nbytes]} on "
                             f"{region.name!r}: {deg}-way bank conflict ({cycles} cycles for {passes} passes)",
                             lane=m * self.lanes + int(np.argmax(on)),
                             address=int(a[np.argmax(on)] - m * lds.member_bytes),
                             dedupe=("bank", self.source(), deg), degree=int(deg), cycles=int(cycles),
                             passes=int(passes))
        return addr, worst

    def lds_load(self, region: LdsRegion, offset, nbytes: int = 4, dtype: str | None = None) -> VGPRs:
        """ds_read_b*: ``nbytes`` per lane from byte ``offset`` of the region."""
        dtype = dtype or _dtype_name(region.dtype)
        if nbytes % itemsize(dtype):
            raise self.error(ValueError, f"ds_read of {nbytes} bytes as {dtype}")
        addr, deg = self._lds_access(region, offset, nbytes, False)
        lds, act = self.wg.lds, self.exec
        byte_addr = addr[None, :] + np.arange(nbytes)[:, None]
        safe = np.where(act[None, :], byte_addr, 0)
        v = self._new(from_bytes(lds.raw[safe], dtype), dtype, ids=np.where(act[None, :], lds.ids[safe], 0),
                      fp=np.where(act[None, :], lds.fp[safe[:: itemsize(dtype)]], 0).astype(np.int32))
        wr = lds.written[safe]
        v.valid &= wr | ~act[None, :]
        if not wr[:, act].all():
            for l in self._first_lanes(act & ~wr.all(axis=0)):
                self.finding("uninitialized-read", f"ds_read of {region.name!r} reads never-written LDS bytes",
                             lane=l, address=int(addr[l] - (l // self.lanes) * lds.member_bytes),
                             dedupe=("uninit-lds", self.source()))
        self._event(f"ds_read_{_DS_NAMES[nbytes]}", outs=[v], region=region.name, address=addr.copy(),
                    bank_conflict=int(deg))
        return v

    def lds_store(self, region: LdsRegion, offset, value: VGPRs, nbytes: int | None = None):
        """ds_write_b*: the value's bytes (or the first ``nbytes``) to byte ``offset`` of the region."""
        nbytes = nbytes or value.nbytes
        self._check_read(value)
        addr, deg = self._lds_access(region, offset, nbytes, True)
        lds, act = self.wg.lds, self.exec
        byte_addr = addr[None, :] + np.arange(nbytes)[:, None]
        lds.raw[byte_addr[:, act]] = to_bytes(value.val)[:nbytes][:, act]
        lds.written[byte_addr[:, act]] = True
        lds.ids[byte_addr[:, act]] = value.ids[:nbytes][:, act]
        lds.fp[byte_addr[:, act]] = np.repeat(value.fp, itemsize(value.dtype), axis=0)[:nbytes][:, act]
        self._event(f"ds_write_{_DS_NAMES[nbytes]}", ins=[value], region=region.name, address=addr.copy(),
                    bank_conflict=int(deg))

    def barrier(self):
        """s_barrier: wait until every live wave of the workgroup arrives."""
        self._event("s_barrier")
        self.wg.barrier(self)

    # -- matrix instructions --------------------------------------------------------------------------
    def mma(self, mnemonic: str, a: VGPRs, b: VGPRs, c: VGPRs | None = None) -> VGPRs:
        """D = A*B + C by the arch's record of ``mnemonic`` (C = 0 when omitted)."""
        insn = self.insn(mnemonic)
        need = {"A": (a, insn.a_type), "B": (b, insn.b_type)}
        if c is None:
            c = VGPRs(self, np.zeros((insn.regs("C"), self.width), np_dtype(insn.cd_type)), insn.cd_type)
        need["C"] = (c, insn.cd_type)
        for op, (v, t) in need.items():
            lay = insn.operand(op)
            n_want = lay.n_regs * (32 // lay.elem_bits)
            if not isinstance(v, VGPRs):
                raise self.error(TypeError, f"{mnemonic}: operand {op} must be a register value")
            if v.dtype != t and not (itemsize(v.dtype) == itemsize(t) and op in "AB" and
                                     {v.dtype, t} <= {"i8", "u8"}):
                raise self.error(TypeError, f"{mnemonic}: operand {op} must be {t}, got {v.dtype}")
            if v.n != n_want:
                raise self.error(ValueError, f"{mnemonic}: operand {op} needs {n_want} x {t} per lane "
                                 f"({lay.n_regs} VGPRs), got {v.n}")
        ex = self.exec.reshape(self.members, self.lanes)
        live = ex.all(axis=1)
        if not np.all(live | ~ex.any(axis=1)):
            m = int(np.argmax(~(live | ~ex.any(axis=1))))
            raise self.error(GfxSimError, f"{mnemonic} issued with EXEC {ex[m].sum()}/{self.lanes}: "
                             "matrix instructions need the whole wave", lane=m * self.lanes)
        self._check_read(a, b, c)
        plans = {op: self._batched_plan(insn, op) for op in "ABCD"}      # [members*blocks, rows, cols]
        mats = {op: v.val[plans[op]] for op, v in (("A", a), ("B", b), ("C", c))}
        d_mat, overflow = compute(insn, mats["A"], mats["B"], mats["C"], batch=self.members)
        dval = np.empty((insn.regs("D"), self.width), np_dtype(insn.cd_type))
        dval[plans["D"]] = d_mat
        tr = self.machine.trace
        idx = tr.n_events
        out = self._new(dval, insn.cd_type, mma_event=idx)
        a_ids = b_ids = None
        if self.machine.provenance:
            a_ids, b_ids = self._mma_provenance(insn, a, b, c, out, idx, plans)
        if overflow is not None and (overflow & np.repeat(live, insn.blocks)[:, None, None]).any():
            blk, m, n = (int(x) for x in np.argwhere(overflow & np.repeat(live, insn.blocks)[:, None, None])[0])
            lane = int(plans["D"][1][blk, m, n])
            self.finding("int32-overflow", f"{mnemonic}: int32 accumulator overflow at D[{m}][{n}]"
                         + (f" block {blk % insn.blocks}" if insn.blocks > 1 else ""), lane=lane, instruction=idx,
                         elements=int(overflow.sum()))
        self._mma_events(mnemonic, insn, a, b, c, out, a_ids, b_ids, live)
        for cov in self._coverage:
            cov.add(self, insn, a_ids, b_ids, idx)
        return out

    def _batched_plan(self, insn, op):
        """(element, column) index arrays ``[members*blocks, rows, cols]`` of an operand."""
        key = (id(insn), op, self.members, self.lanes)
        cache = self.machine._plan_cache
        got = cache.get(key)
        if got is None:
            e, l = gather_plan(insn, op)
            base = (np.arange(self.members) * self.lanes)[:, None, None, None]
            got = cache[key] = (np.broadcast_to(e, (self.members,) + e.shape).reshape((-1,) + e.shape[1:]),
                                (l[None] + base).reshape((-1,) + l.shape[1:]))
        return got

    def _mma_events(self, mnemonic, insn, a, b, c, out, a_ids, b_ids, live):
        """One MmaEvent per workgroup: a batched instruction is one instruction in every member."""
        if self.members == 1:
            ev = self._event(mnemonic, ins=[a, b, c], outs=[out], cls=MmaEvent)
            if ev is not None:
                ev.insn, ev.a_ids, ev.b_ids, ev.tags = insn, a_ids, b_ids, self.machine.tags
            return
        tr = self.machine.trace
        idx = tr.n_events
        tr.n_events += self.members          # member m's instruction is event idx + m
        src = self.source()
        bl = insn.blocks
        for m in np.nonzero(live)[0].tolist():
            cols = slice(m * self.lanes, (m + 1) * self.lanes)
            ev = MmaEvent(index=idx + m, op=mnemonic, kernel=self.kernel, workgroup=self.wg.ids[m], wave=self.wave_id,
                          source=src, exec_mask=self.exec[cols].copy())
            ev.insn, ev.tags = insn, self.machine.tags
            ev.a_ids = None if a_ids is None else a_ids[m * bl:(m + 1) * bl]
            ev.b_ids = None if b_ids is None else b_ids[m * bl:(m + 1) * bl]
            tr.matrix_events.append(ev)

    def _mma_provenance(self, insn, a, b, c, out, idx, plans):
        """K-slot tags of A and B, the A/B agreement check, and the K sets of the result."""
        t = self.machine.tags
        (ea, la), (eb, lb) = plans["A"], plans["B"]
        a_ids = a.element_ids()[ea, la]                 # [blocks, M, K]
        b_ids = b.element_ids()[eb, lb]                 # [blocks, K, N]
        if not (a_ids.any() or b_ids.any()):
            return a_ids, b_ids
        pa, pb = self._operand_provenance(a_ids, "A"), self._operand_provenance(b_ids, "B")
        # A/B agreement per K slot, on every field both sides carry
        for f in sorted(pa["fields"] & pb["fields"]):
            fa = t.field_values(a_ids, f)               # [bl, M, K]
            fb = t.field_values(b_ids, f)               # [bl, K, N]
            va = np.where(fa >= 0, fa, np.iinfo(np.int64).max)
            lo = np.minimum(va.min(axis=1), np.where(fb >= 0, fb, np.iinfo(np.int64).max).min(axis=2))
            hi = np.maximum(fa.max(axis=1), fb.max(axis=2))
            bad = (hi >= 0) & (lo != hi) & (lo != np.iinfo(np.int64).max)
            if bad.any():
                blk, k = (int(x) for x in np.argwhere(bad)[0])
                ka_set = sorted(set(fa[blk, :, k].tolist()) - {-1})
                kb_set = sorted(set(fb[blk, k, :].tolist()) - {-1})
                lane = int(la[blk, 0, k])
                self.finding("ab-kslot-mismatch", f"{insn.mnemonic}: K slot {k} gets {f} {ka_set} from A but "
                             f"{kb_set} from B ({int(bad.sum())} K slots disagree)", lane=lane, instruction=idx,
                             field=f, k_slot=k, a_values=ka_set, b_values=kb_set,
                             slots=[int(x) for x in np.argwhere(bad)[:, 1]])
        # K sets of each output element: the A row's and B column's identities (plus C's chain)
        ed, ld = plans["D"]
        nb = ed.shape[0]
        ka = np.zeros(out.val.shape, np.int32)
        kb = np.zeros(out.val.shape, np.int32)
        ka[ed, ld] = pa["sets"][:, :, None].repeat(insn.N, axis=2)
        kb[ed, ld] = pb["sets"][:, None, :].repeat(insn.M, axis=1)
        if c.ka is not None:
            ka, kb = self._union_sets(ka, c.ka), self._union_sets(kb, c.kb)
        out.ka, out.kb = ka, kb
        # identity of D[m][n]: the fields constant along K of A's row m and of B's column n
        ident = np.zeros(out.val.shape, np.int32)
        ra, cb = pa["common"], pb["common"]
        dm = t.merge_ids(np.broadcast_to(ra[:, :, None], (nb, insn.M, insn.N)),
                         np.broadcast_to(cb[:, None, :], (nb, insn.M, insn.N)))[0]
        ident[ed, ld] = dm
        out.ids = np.repeat(ident, itemsize(out.dtype), axis=0)
        return a_ids, b_ids

    def _operand_provenance(self, ids, op):
        """Per A row / B column: its K set, the identity fields constant along K, the fields present.
        Cached on the tags themselves: a kernel feeds the same A fragment to many instructions."""
        cache = self.machine._operand_cache
        key = (op, ids.shape, ids.tobytes())
        got = cache.get(key)
        if got is None:
            t = self.machine.tags
            rows = ids if op == "A" else np.swapaxes(ids, 1, 2)
            sets = t.sets_of_rows(rows)
            common = np.array([self._common_identity(x) for x in sets.ravel().tolist()],
                              np.int32).reshape(sets.shape)
            fields = {t.fields[f] for i in np.unique(ids).tolist() for f, _ in t.identities[i]}
            got = {"sets": sets, "common": common, "fields": fields}
            if len(cache) > 4096:
                cache.clear()
            cache[key] = got
        return got

    def _common_identity(self, sid):
        t = self.machine.tags
        cache = self.machine._common_cache
        got = cache.get(int(sid))
        if got is None:
            members = [dict(t.identities[i]) for i in t.sets[int(sid)]]
            common = {}
            if members:
                common = {f: v for f, v in members[0].items() if all(m.get(f) == v for m in members[1:])}
            got = cache[int(sid)] = t.identity(common.items())
        return got

    # -- quantization scales --------------------------------------------------------------------------
    def group_scale(self, value: VGPRs) -> VGPRs:
        """Mark ``value`` as a quantization scale. Its footprint (what it was reduced over) is checked
        against the K set of every matrix result it is applied to."""
        out = self._derive(value.val.copy(), value.dtype, value)
        out.fp = value.fp.copy()
        out.is_scale = True
        self._event("v_mov_b32", ins=[value], outs=[out], scale=True)
        return out

    def dequant(self, acc: VGPRs, scale: VGPRs) -> VGPRs:
        """float(acc) * scale: the explicit form of applying a group scale to a matrix result."""
        return acc.to(scale.dtype) * scale

    def _check_scale_application(self, a, b):
        if not self.machine.provenance:
            return
        for res, sc in ((a, b), (b, a)):
            if not (isinstance(sc, VGPRs) and sc.is_scale and isinstance(res, VGPRs) and res.ka is not None):
                continue
            n = max(res.n, sc.n)
            fp = _bcast(sc.fp, n)
            # a reduction over a single element has no footprint of its own: it is that element
            fp = np.where(fp != 0, fp, self.machine.tags._self_sets(_bcast(sc.element_ids(), n)))
            ka, kb = _bcast(res.ka, n), _bcast(res.kb, n)
            # a scale over no tagged element at all (fp 0) applied to a result that did sum tagged
            # elements is checked too: e.g. a contiguous group with no token left, whose scale 0
            # silently drops the tokens the instruction consumed
            act = self.exec[None, :] & (ka != 0)
            if not act.any():
                continue
            trip = np.stack([fp[act], ka[act], kb[act]], axis=1)
            uk = np.unique(trip, axis=0)
            bad = [(t_, v) for t_, v in ((t_, self.machine.scale_verdict(*t_)) for t_ in uk.tolist()) if v]
            if not bad:
                continue
            member = np.broadcast_to(self._base // self.lanes, act.shape)
            for (f_, a_, b_), verdict in bad:
                hit = act & (fp == f_) & (ka == a_) & (kb == b_)
                for m_ in np.unique(member[hit]).tolist():
                    mask = hit & (member == m_)
                    lane = int(np.nonzero(mask)[1][0])
                    self.machine.report_scale(self, res, verdict, lane=lane, mask=mask)


def _bcast(x, n):
    if x.shape[0] == n:
        return x
    if x.shape[0] == 1:
        return np.repeat(x, n, axis=0)
    if n % x.shape[0] == 0:
        return np.tile(x, (n // x.shape[0], 1))
    raise ValueError(f"cannot broadcast {x.shape[0]} elements to {n}")


def _dtype_name(dt) -> str:
    from .dtypes import NP
    for k, v in NP.items():
        if v == np.dtype(dt):
            return k
    raise ValueError(f"no register type for numpy dtype {dt}")
