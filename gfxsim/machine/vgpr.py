"""VGPRs: the value handle a Python kernel holds — ``n`` elements of one type per lane.

Numbers are ``val`` ``[n, width]`` typed (width = lanes x batched workgroups), packed
little-endian into ``ceil(n*size/4)`` 32-bit VGPRs (16 int8 tokens are ``v[k:k+3]``). ``prov`` is
the value's provenance (``provenance.Prov`` on the wave's provenance columns — a folded batch's
representatives', fold.py; None when the launch runs without provenance or the value carries
none), ``valid`` the written bit per byte (None: every byte written).

Register numbers are virtual and deterministic: every new value takes the next numbers of its
wave (SSA style, never reused), so the same statement of the same run always writes the same
VGPRs, whatever Python keeps alive. A slice of whole registers names the same registers.
"""
from __future__ import annotations

import numpy as np

from .dtypes import FLOAT, INT, SIGNED, dtype_name, from_bytes, itemsize, np_dtype, to_bytes
from ..errors import ArgumentTypeError, OutOfRangeError


class VGPRs:
    __array_ufunc__ = None       # numpy scalars defer to our operators (np.float32(127) / v)
    __slots__ = ("w", "val", "dtype", "prov", "valid", "regs", "literal", "traced", "rfile", "elem_memo")

    def __init__(self, w, val, dtype, prov=None, valid=None, *, regs=None, literal=False, rfile="v"):
        self.w = w
        self.dtype = dtype
        self.val = val                       # [n, width] numpy, typed
        self.prov = prov
        self.valid = valid                   # [nbytes, width] bool or None (all written)
        self.literal = literal               # an inline constant / SGPR: occupies no VGPR
        if regs is None and w is not None and not literal:
            regs = w.alloc(-(-(val.shape[0] * itemsize(dtype)) // 4))       # n_regs, without its property chain
        self.regs = regs
        self.rfile = rfile                   # the register file as the code names it: "v" VGPRs, "a" AGPRs
        self.traced = None                   # the trace's copy of these values (when tracing)
        self.elem_memo = None                # valueprov.elem_prov's last answer: (prov, dtype, n, result)

    # -- shape -------------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return self.val.shape[0]

    @property
    def nbytes(self) -> int:
        return self.n * itemsize(self.dtype)

    @property
    def n_regs(self) -> int:
        return -(-self.nbytes // 4)

    def __len__(self):
        return self.n

    def reg_name(self) -> str:
        if self.regs is None:
            return f"{self.rfile}?"
        base, n = self.regs
        return f"{self.rfile}{base}" if n == 1 else f"{self.rfile}[{base}:{base + n - 1}]"

    def __repr__(self):
        return f"VGPRs({self.reg_name()}, {self.n} x {self.dtype})"

    # -- reading ------------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """Values ``[n, width]`` (a copy; poison where never written)."""
        return self.val.copy()

    def lane(self, lane: int) -> np.ndarray:
        return self.val[:, lane].copy()

    def written(self) -> np.ndarray:
        """The written bit of every byte ``[nbytes, width]``."""
        return np.ones((self.nbytes, self.val.shape[1]), bool) if self.valid is None else self.valid

    def byte_prov(self):
        """Provenance per byte (``g == 1``) on every member's columns, or None."""
        return None if self.prov is None else self.w.unfold_prov(self.prov.per_byte(), "a value's bytes")

    def tags(self, field: str) -> np.ndarray:
        """One identity field (e.g. "token") of every element, ``[n, width]`` (-1 where absent or
        where the bytes of an element disagree)."""
        shape = self.val.shape
        if self.prov is None:
            return np.full(shape, -1, np.int64)
        p = self.w.unfold_prov(self.prov.per_element(itemsize(self.dtype), self.w.machine.wide), "a value's tags")
        return p.field(field, shape).astype(np.int64)

    def footprint(self, field: str, element: int = 0, lane: int = 0) -> set:
        """The values of ``field`` one element was reduced over (its footprint)."""
        if self.prov is None:
            return set()
        p = self.w.unfold_prov(self.prov.per_element(itemsize(self.dtype), self.w.machine.wide), "a value's footprint")
        m = p.fp.get(field)
        return set() if m is None else set(m.values_at((element, lane), self.w.machine.wide))

    def is_scale(self) -> bool:
        """Whether any element carries the quantization-scale mark."""
        f = None if self.prov is None else self.prov.scale_flag()
        return bool(f is not None and f.any())

    # -- element access -----------------------------------------------------------------------
    def _rows(self, idx) -> VGPRs:
        """Elements ``idx`` (an index array): a copy, naming the same registers when they are
        whole registers of this value."""
        size = itemsize(self.dtype)
        regs = None
        first = int(idx[0]) * size if len(idx) else 0
        if self.regs is not None and len(idx) and np.all(np.diff(idx) == 1) and first % 4 == 0:
            regs = (self.regs[0] + first // 4, -(-(len(idx) * size) // 4))
        prov = None
        if self.prov is not None:
            g = self.prov.g
            ridx = idx if g == size else (idx[:, None] * size + np.arange(size)).ravel()
            prov = self.prov.map(lambda a: a[ridx])
        valid = None
        if self.valid is not None:
            valid = self.valid[(idx[:, None] * size + np.arange(size)).ravel()]
        return VGPRs(self.w, self.val[idx], self.dtype, prov, valid, regs=regs,
                     rfile=self.rfile if regs is not None else "v")

    def _span(self, start: int, stop: int) -> VGPRs:
        """``_rows`` of the elements start..stop-1 (0 <= start < stop <= n): slices, no index arrays."""
        size = itemsize(self.dtype)
        first = start * size
        regs = None
        if self.regs is not None and first % 4 == 0:
            regs = (self.regs[0] + first // 4, -(-((stop - start) * size) // 4))
        prov = None
        if self.prov is not None:
            g = self.prov.g
            lo, hi = (start, stop) if g == size else (first, stop * size)
            prov = self.prov.map(lambda a: a[lo:hi].copy())
        valid = None if self.valid is None else self.valid[first:stop * size].copy()
        return VGPRs(self.w, self.val[start:stop].copy(), self.dtype, prov, valid, regs=regs,
                     rfile=self.rfile if regs is not None else "v")

    def __getitem__(self, i) -> VGPRs:
        if isinstance(i, (int, np.integer)):
            if not -self.n <= i < self.n:
                raise OutOfRangeError(f"element {i} of a {self.n}-element {self.dtype} value")
            i = int(i) % self.n
            return self._span(i, i + 1)
        if isinstance(i, slice) and i.step in (None, 1):
            start, stop, _ = i.indices(self.n)
            if start < stop:
                return self._span(start, stop)
        return self._rows(np.arange(self.n)[i])

    def __setitem__(self, i, value):
        if isinstance(i, (int, np.integer)):
            if not -self.n <= i < self.n:
                raise OutOfRangeError(f"element {i} of a {self.n}-element {self.dtype} value")
            i = slice(i % self.n, i % self.n + 1)
        idx = np.arange(self.n)[i]
        self.w._write_into(self, idx, value)

    def bytes(self, offset: int, count: int) -> VGPRs:
        """Byte slice [offset, offset+count) in the same type (operand halves of a load)."""
        size = itemsize(self.dtype)
        if offset % size or count % size or offset < 0 or offset + count > self.nbytes:
            raise self.w.error(ValueError, f"byte slice [{offset}, {offset + count}) of a {self.nbytes}-byte "
                               f"{self.dtype} value {self.reg_name()}")
        return self._rows(np.arange(offset // size, (offset + count) // size))

    # -- conversions --------------------------------------------------------------------------
    def to(self, dtype) -> VGPRs:
        """Value conversion (v_cvt_*): f32<->i32 (f32->i32 truncates toward zero, saturates,
        NaN->0 as v_cvt_i32_f32), f32->f16/bf16 round to nearest even, int narrowing only when
        every active value fits (a wrap would be a silent bug)."""
        return self.w._convert(self, dtype_name(dtype))

    def bitcast(self, dtype) -> VGPRs:
        """Reinterpret the bytes (no conversion, no instruction): provenance routed per byte."""
        return self.w.bitcast(self, dtype)

    # -- arithmetic: every operator is a lockstep VALU op under EXEC ------------------------------
    def __add__(self, o: VGPRs | int | float) -> VGPRs: return self.w._binary("add", self, o)
    def __radd__(self, o: VGPRs | int | float) -> VGPRs: return self.w._binary("add", o, self)
    def __sub__(self, o: VGPRs | int | float) -> VGPRs: return self.w._binary("sub", self, o)
    def __rsub__(self, o: VGPRs | int | float) -> VGPRs: return self.w._binary("sub", o, self)
    def __mul__(self, o: VGPRs | int | float) -> VGPRs: return self.w._binary("mul", self, o)
    def __rmul__(self, o: VGPRs | int | float) -> VGPRs: return self.w._binary("mul", o, self)
    def __truediv__(self, o: VGPRs | int | float) -> VGPRs: return self.w._binary("div", self, o)
    def __rtruediv__(self, o: VGPRs | int | float) -> VGPRs: return self.w._binary("div", o, self)
    def __floordiv__(self, o: VGPRs | int | float) -> VGPRs: return self.w._binary("idiv", self, o)
    def __mod__(self, o: VGPRs | int | float) -> VGPRs: return self.w._binary("mod", self, o)
    def __and__(self, o: VGPRs | int | float) -> VGPRs: return self.w._binary("and", self, o)
    def __rand__(self, o: VGPRs | int | float) -> VGPRs: return self.w._binary("and", o, self)
    def __or__(self, o: VGPRs | int | float) -> VGPRs: return self.w._binary("or", self, o)
    def __ror__(self, o: VGPRs | int | float) -> VGPRs: return self.w._binary("or", o, self)
    def __xor__(self, o: VGPRs | int | float) -> VGPRs: return self.w._binary("xor", self, o)
    def __lshift__(self, o: VGPRs | int | float) -> VGPRs: return self.w._binary("shl", self, o)
    def __rshift__(self, o: VGPRs | int | float) -> VGPRs: return self.w._binary("shr", self, o)
    def __neg__(self) -> VGPRs: return self.w._binary("sub", 0, self)
    def __abs__(self) -> VGPRs: return self.w._unary("abs", self)
    def __lt__(self, o: VGPRs | int | float) -> VGPRs: return self.w._compare("lt", self, o)
    def __le__(self, o: VGPRs | int | float) -> VGPRs: return self.w._compare("le", self, o)
    def __gt__(self, o: VGPRs | int | float) -> VGPRs: return self.w._compare("gt", self, o)
    def __ge__(self, o: VGPRs | int | float) -> VGPRs: return self.w._compare("ge", self, o)
    def eq(self, o: VGPRs | int | float) -> VGPRs: return self.w._compare("eq", self, o)
    def ne(self, o: VGPRs | int | float) -> VGPRs: return self.w._compare("ne", self, o)

    def __iadd__(self, o: VGPRs | int | float) -> VGPRs:
        return self.w._binary("add", self, o, into=self)

    def __isub__(self, o: VGPRs | int | float) -> VGPRs:
        return self.w._binary("sub", self, o, into=self)

    def __imul__(self, o: VGPRs | int | float) -> VGPRs:
        return self.w._binary("mul", self, o, into=self)

    def __bool__(self):
        raise ArgumentTypeError("a per-lane value has no single truth value: use w.if_(cond), w.any(cond) or w.all(cond)")


def is_float(dtype: str) -> bool:
    return dtype in FLOAT


__all__ = ["VGPRs", "is_float", "np_dtype", "INT", "SIGNED", "from_bytes", "to_bytes"]
