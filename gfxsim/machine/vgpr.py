"""VGPRs: a block of vector registers of one wave, ``[element, lane]``, with per-byte provenance.

A ``VGPRs`` value is what a Python kernel statement produces: ``n`` elements of one type per lane,
packed little-endian into ``ceil(n*size/4)`` 32-bit VGPRs (so 16 int8 tokens are ``v[k:k+3]``).
Per byte it carries an identity tag and a written bit (poison for never-written lanes); per
element a footprint (what it was reduced over) and, for matrix-instruction results, K sets.
Arithmetic acts on all lanes under the wave's EXEC mask; inactive lanes of a new value are
unwritten, inactive lanes of an updated value keep their old contents.
"""
from __future__ import annotations

import numpy as np

from .dtypes import FLOAT, INT, SIGNED, from_bytes, itemsize, np_dtype, to_bytes


class VGPRs:
    __array_ufunc__ = None       # numpy scalars defer to our operators (np.float32(127) / v)
    __slots__ = ("w", "val", "dtype", "ids", "valid", "fp", "ka", "kb", "mma_event", "is_scale",
                 "regs", "name", "owner", "__weakref__")

    def __init__(self, w, val, dtype, ids=None, valid=None, fp=None, ka=None, kb=None, mma_event=None,
                 is_scale=False, name=None, literal=False, alias=None):
        self.w = w
        self.owner = None
        self.dtype = dtype
        self.val = val                       # [n, lanes] numpy, typed
        n, lanes = val.shape
        nb = n * itemsize(dtype)
        self.ids = ids if ids is not None else np.zeros((nb, lanes), np.int32)
        self.valid = valid if valid is not None else np.ones((nb, lanes), bool)
        self.fp = fp if fp is not None else np.zeros((n, lanes), np.int32)
        self.ka = ka
        self.kb = kb
        self.mma_event = mma_event
        self.is_scale = is_scale
        self.name = name
        # a literal/inline constant occupies no VGPR; a register sub-range (v[2:3] of v[0:3]) is
        # the same registers, kept alive by its owner
        if alias is not None:
            self.owner, self.regs = alias
        else:
            self.regs = w._alloc(self.n_regs) if (w is not None and not literal) else None

    def __del__(self):
        try:
            if self.regs is not None and self.w is not None and self.owner is None:
                self.w._free(self.regs)
        except Exception:            # interpreter shutdown
            pass

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
            return "v?"
        base, n = self.regs
        return f"v{base}" if n == 1 else f"v[{base}:{base + n - 1}]"

    def __repr__(self):
        return f"VGPRs({self.reg_name()}, {self.n} x {self.dtype})"

    # -- reading ------------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """Values ``[n, lanes]`` (a copy; poison where never written)."""
        return self.val.copy()

    def lane(self, lane: int) -> np.ndarray:
        return self.val[:, lane].copy()

    def element_ids(self) -> np.ndarray:
        """Identity of each element: the tag of its first byte, ``[n, lanes]``."""
        return self.ids[:: itemsize(self.dtype)]

    def tags(self, field: str) -> np.ndarray:
        """One provenance field (e.g. "token") of every element, ``[n, lanes]`` (-1 where absent)."""
        return self.w.machine.tags.field_values(self.element_ids(), field)

    # -- element access -----------------------------------------------------------------------
    def _sub(self, sl) -> "VGPRs":
        size = itemsize(self.dtype)
        idx = np.arange(self.n)[sl]
        bidx = (idx[:, None] * size + np.arange(size)).ravel()
        alias = None
        first = int(idx[0]) * size if len(idx) else 0
        if self.regs is not None and len(idx) and np.all(np.diff(idx) == 1) and first % 4 == 0:
            # whole registers of this value: the slice names them (v[n+2:n+3]), no copy is made
            alias = (self.owner or self, (self.regs[0] + first // 4, -(-(len(idx) * size) // 4)))
        return VGPRs(self.w, self.val[idx].copy(), self.dtype, self.ids[bidx].copy(), self.valid[bidx].copy(),
                     self.fp[idx].copy(), None if self.ka is None else self.ka[idx].copy(),
                     None if self.kb is None else self.kb[idx].copy(), self.mma_event, self.is_scale,
                     alias=alias)

    def __getitem__(self, i) -> "VGPRs":
        if isinstance(i, (int, np.integer)):
            if not -self.n <= i < self.n:
                raise IndexError(f"element {i} of a {self.n}-element {self.dtype} value")
            i = slice(i % self.n, i % self.n + 1)
        return self._sub(i)

    def __setitem__(self, i, value):
        if isinstance(i, (int, np.integer)):
            i = slice(i % self.n, i % self.n + 1)
        idx = np.arange(self.n)[i]
        value = self.w._coerce(value, self.dtype, len(idx))
        self.w._write_into(self, idx, value, "v_mov_b32")

    def bytes(self, offset: int, count: int) -> "VGPRs":
        """Byte slice [offset, offset+count) reinterpreted in the same type (operand halves of a load)."""
        size = itemsize(self.dtype)
        if offset % size or count % size or offset < 0 or offset + count > self.nbytes:
            raise ValueError(f"byte slice [{offset}, {offset + count}) of a {self.nbytes}-byte {self.dtype} value")
        return self._sub(slice(offset // size, (offset + count) // size))

    # -- conversions --------------------------------------------------------------------------
    def to(self, dtype: str) -> "VGPRs":
        """Value conversion (v_cvt_*): f32<->i32 (f32->i32 truncates toward zero, saturates,
        NaN->0 as v_cvt_i32_f32), f32->f16/bf16 round to nearest even, int narrowing only when
        every active value fits (a wrap would be a silent bug)."""
        return self.w._convert(self, dtype)

    def bitcast(self, dtype: str) -> "VGPRs":
        """Reinterpret the bytes (no conversion)."""
        if self.nbytes % itemsize(dtype):
            raise ValueError(f"cannot bitcast {self.nbytes} bytes of {self.dtype} to {dtype}")
        out = VGPRs(self.w, from_bytes(to_bytes(self.val), dtype), dtype, self.ids.copy(), self.valid.copy())
        out.fp = np.repeat(self.fp, max(1, itemsize(self.dtype) // itemsize(dtype)), axis=0)[:out.n] \
            if itemsize(dtype) <= itemsize(self.dtype) else self.fp[:: itemsize(dtype) // itemsize(self.dtype)]
        return out

    # -- arithmetic: every operator is a lockstep VALU op under EXEC ------------------------------
    def __add__(self, o): return self.w._binary("add", self, o)
    def __radd__(self, o): return self.w._binary("add", o, self)
    def __sub__(self, o): return self.w._binary("sub", self, o)
    def __rsub__(self, o): return self.w._binary("sub", o, self)
    def __mul__(self, o): return self.w._binary("mul", self, o)
    def __rmul__(self, o): return self.w._binary("mul", o, self)
    def __truediv__(self, o): return self.w._binary("div", self, o)
    def __rtruediv__(self, o): return self.w._binary("div", o, self)
    def __floordiv__(self, o): return self.w._binary("idiv", self, o)
    def __mod__(self, o): return self.w._binary("mod", self, o)
    def __and__(self, o): return self.w._binary("and", self, o)
    def __or__(self, o): return self.w._binary("or", self, o)
    def __xor__(self, o): return self.w._binary("xor", self, o)
    def __lshift__(self, o): return self.w._binary("shl", self, o)
    def __rshift__(self, o): return self.w._binary("shr", self, o)
    def __neg__(self): return self.w._binary("sub", 0, self)
    def __abs__(self): return self.w._unary("abs", self)
    def __lt__(self, o): return self.w._compare("lt", self, o)
    def __le__(self, o): return self.w._compare("le", self, o)
    def __gt__(self, o): return self.w._compare("gt", self, o)
    def __ge__(self, o): return self.w._compare("ge", self, o)
    def eq(self, o): return self.w._compare("eq", self, o)
    def ne(self, o): return self.w._compare("ne", self, o)

    def __iadd__(self, o):
        return self.w._binary("add", self, o, into=self)

    def __isub__(self, o):
        return self.w._binary("sub", self, o, into=self)

    def __imul__(self, o):
        return self.w._binary("mul", self, o, into=self)

    def __bool__(self):
        raise TypeError("a per-lane value has no single truth value: use w.if_(cond), w.any(cond) or w.all(cond)")


def is_float(dtype: str) -> bool:
    return dtype in FLOAT


__all__ = ["VGPRs", "is_float", "np_dtype", "INT", "SIGNED"]
