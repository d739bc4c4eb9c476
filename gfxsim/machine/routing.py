"""Byte routing and cross-lane moves: every byte's provenance goes where the byte goes.

Rules (one test each in tests/gfxsim/machine/test_machine_routing.py):
* ``cat``, ``bytes``, ``bitcast``: bytes move, their identities, footprints and marks with them;
* ``x << 8k``, ``x >> 8k`` (literal shift): byte i comes from byte i∓k, shifted-in bytes carry
  nothing; ``>>`` of a signed value fills with copies of the top byte (they carry its identity);
  a shift by a non-multiple of 8 mixes two neighbouring bytes (their agreeing fields survive);
* ``x & m`` with a literal mask: bytes where m is 0x00 carry nothing, others keep x's;
  ``x | y``, ``x ^ y``, ``x & y`` of two values: per byte, the fields both agree on (a byte one
  side leaves without provenance, e.g. zero after a shift, takes the other side's);
* ``w.perm(a, b, sel)`` — v_perm_b32: selector byte 0-3 picks b's byte, 4-7 a's byte, 8-11 the sign
  of a byte (its identity), 12 is 0x00 and >= 13 is 0xFF (no provenance);
* ``w.bpermute``/``shfl_xor``/``swizzle``: the source lane's bytes and provenance.
"""
from __future__ import annotations

import numpy as np

from ..isa.moves import byte_permute
from . import ops
from .dtypes import dtype_name, from_bytes, itemsize, np_dtype, to_bytes
from . import qdir
from .provenance import Prov, broadcast_rows, fill_value, merge
from .vgpr import VGPRs

_NONE = -1


# a shuffle whose lane pattern is l ^ m (m a power of two: shfl_xor's butterfly) swaps adjacent
# blocks of m lanes by two strided copies instead of a take by lane index; tests compare both ways
XOR_BLOCKS = True


def xor_blocks(val: np.ndarray, pattern: np.ndarray) -> np.ndarray | None:
    """``val`` ``[rows, columns]`` with every run of ``len(pattern)`` columns read by ``pattern``
    (``np.take`` over the lane axis), where the pattern is ``l ^ m`` for a power of two m: blocks of
    m lanes swapped pairwise, copied as units of m lanes' bytes (a uint of that size where it is
    one, else 8-byte words), never arithmetic on the values. None for any other pattern, for
    blocks of 16 bytes (their 2-word strided copies cost more than the take) or a value whose rows
    are not contiguous: the caller takes."""
    lanes = len(pattern)
    m = int(pattern[0])
    s = val.itemsize
    b = m * s                            # bytes in a block
    if m <= 0 or m & (m - 1) or lanes % (2 * m) or b == 16 or (b > 8 and b % 8) or val.ndim != 2 \
            or not val.flags.c_contiguous or val.shape[1] % lanes or s not in (1, 2, 4, 8) \
            or not np.array_equal(pattern, np.arange(lanes) ^ m):
        return None
    rows = val.shape[0]
    unit = np.dtype(f"u{min(b, 8)}")
    r = val.view(unit).reshape(rows, -1, 2, max(b // 8, 1))
    out = np.empty_like(r)
    out[:, :, 0] = r[:, :, 1]
    out[:, :, 1] = r[:, :, 0]
    return out.reshape(rows, -1).view(val.dtype)


def route_prov(p: Prov | None, src: np.ndarray, width: int) -> Prov | None:
    """Rows of a per-byte Prov gathered by ``src`` ``[out_bytes, width]`` (-1: a byte with none).
    A Prov of no field and no flags (what a concatenation of parts without any makes) routes to none."""
    if p is None or p.shape is None:
        return None
    rows = p.shape[0]
    none = src < 0
    flat = np.where(none, 0, src) * width + np.arange(width)      # one flat index: take, not a[s, cols]

    def take(a):
        r = np.take(a.reshape((-1,) + a.shape[2:]), flat, axis=0)
        if none.any():
            fill = fill_value(a)
            r = np.where(none.reshape(none.shape + (1,) * (r.ndim - 2)), fill, r)
        return r
    return p.map(take) if rows else None


class RoutingOps:
    # -- whole values ---------------------------------------------------------------------------
    def cat(self, *parts) -> VGPRs:
        """Concatenate values of one type element-wise (registers side by side)."""
        dt = parts[0].dtype
        for p in parts:
            if not isinstance(p, VGPRs) or p.dtype != dt:
                raise self.error(TypeError, f"cannot concatenate {dt} with {getattr(p, 'dtype', type(p).__name__)}")
        self.check_read(*parts)
        val = np.concatenate([p.val for p in parts])
        prov = None
        if self.machine.provenance and any(p.prov is not None for p in parts):
            g = min(p.prov.g for p in parts if p.prov is not None)
            rows = [p.nbytes // g for p in parts]
            prov = Prov.concat([None if p.prov is None else (p.prov if p.prov.g == g else p.prov.per_byte())
                                for p in parts], rows, self.pw)
        valid = None
        if any(p.valid is not None for p in parts):
            valid = np.concatenate([p.written() for p in parts])
        v = VGPRs(self, val, dt, prov, valid)
        self.event(ops.VALU[("mov", "any")], ins=list(parts), outs=[v])
        return v

    def bitcast(self, v: VGPRs, dtype) -> VGPRs:
        """Reinterpret the bytes as ``dtype`` (no instruction): provenance per byte, unchanged."""
        dtype = dtype_name(dtype)
        if v.nbytes % itemsize(dtype):
            raise self.error(ValueError, f"cannot bitcast {v.nbytes} bytes of {v.dtype} to {dtype}")
        prov = v.prov
        if prov is not None and prov.g != 1 and prov.g != itemsize(dtype):
            prov = prov.per_byte()
        return VGPRs(self, from_bytes(to_bytes(v.val), dtype), dtype, prov,
                     None if v.valid is None else v.valid.copy(), regs=v.regs, rfile=v.rfile)

    # -- bitwise ops and shifts that route bytes ---------------------------------------------------
    def route_bitwise(self, op, a: VGPRs, b: VGPRs):
        """(result, Op) with exact per-byte provenance, or None for the generic path."""
        insn = self.lookup_op(ops.valu, op, a.dtype)
        if op in ("shl", "shr") and not b.literal:
            return None
        self.check_read(a, b)
        size = itemsize(a.dtype)
        dt = np_dtype(a.dtype)
        if op in ("shl", "shr"):
            s = int(b.val[0, 0]) & (8 * size - 1)
            r = insn.entry.fn(dt.type(s), a.val)          # v_lshlrev_b32 & co.: the amount is S0
        else:
            r = insn.entry.fn(a.val, b.val)
        r = np.asarray(r).astype(dt, copy=False)
        n = r.shape[0]
        prov = None
        if self.machine.provenance and (a.prov is not None or b.prov is not None):
            pa = None if a.prov is None else broadcast_rows(a.prov.per_byte(), n * size)
            if op in ("shl", "shr"):
                prov = shift_prov(pa, s, size, op, a.dtype, n, self.pw, self.machine.wide)
            elif a.literal and not b.literal:      # a mask written first (v_and_b32 v, 0xff, v): commutes
                return self.route_bitwise(op, b, a)
            elif b.literal:
                prov = pa
                if op == "and" and pa is not None:       # bytes the mask clears carry nothing
                    mb = self.pcols(to_bytes(np.broadcast_to(b.val, (n, self.width)).astype(dt)), "an and-mask")
                    prov = route_prov(pa, np.where(mb != 0, np.arange(n * size)[:, None], -1), self.pw)
            else:
                pb = None if b.prov is None else broadcast_rows(b.prov.per_byte(), n * size)
                prov = qdir.joined(pa, pb, merge(pa, pb, False, self.machine.wide))
        return self.new_value(r, a.dtype, prov), insn

    def perm(self, a: VGPRs, b: VGPRs, sel) -> VGPRs:
        """v_perm_b32 D = byte_permute({a, b}, sel): selector byte i picks the result's byte i —
        0-3: b's bytes, 4-7: a's bytes, 8-11: 0xFF if the sign bit of byte 1, 3, 5, 7 of {a, b}
        is set else 0x00, 12: 0x00, >= 13: 0xFF."""
        for x in (a, b):
            if not isinstance(x, VGPRs) or itemsize(x.dtype) * x.n != 4:
                raise self.error(TypeError, f"v_perm_b32 takes 32-bit operands, got {getattr(x, 'dtype', x)}")
        insn = ops.VALU[("perm", "any")]
        sel = np.broadcast_to(sel.val.view(np.uint32)[0] if isinstance(sel, VGPRs) else np.uint32(sel),
                              (self.width,)).astype(np.uint32)
        self.check_read(a, b)
        words, route = byte_permute(from_bytes(to_bytes(a.val), "u32")[0], from_bytes(to_bytes(b.val), "u32")[0], sel)
        prov = None
        if self.machine.provenance and (a.prov is not None or b.prov is not None):
            pb = b.prov.per_byte() if b.prov is not None else None
            pa = a.prov.per_byte() if a.prov is not None else None
            both = Prov.concat([pb, pa], [4, 4], self.pw)
            prov = route_prov(both, self.pcols(route, "a v_perm_b32 selector"), self.pw)
        v = self.new_value(words[None, :], "u32", prov)
        self.event(insn, ins=[a, b], outs=[v])
        return v

    # -- cross-lane -------------------------------------------------------------------------------------
    def bpermute(self, v: VGPRs, src_lane) -> VGPRs:
        """out[l] = v[src_lane[l]] (ds_bpermute_b32); the source lane's data is read even if it is inactive."""
        src = src_lane.val[0].astype(np.int64) if isinstance(src_lane, VGPRs) else np.asarray(src_lane, np.int64)
        if src.shape not in ((), (self.lanes,), (self.width,)):
            raise self.error(ValueError, f"bpermute's source lanes must be one number or one per lane "
                                         f"({self.lanes}), got shape {src.shape}")
        # one pattern of source lanes for every member (a shuffle): each member's lanes are read by
        # one take over the lane axis, without a source column per column of the batch
        pattern = None if src.shape == (self.width,) and self.members > 1 else \
            np.broadcast_to(src, (self.lanes,)) % self.lanes
        provenance = v.prov is not None and self.machine.provenance
        # a folded batch's representatives read by the pattern too (what fold.rep would find)
        rep_pattern = provenance and pattern is not None and self.fold is not None
        if pattern is None:
            src = self.member_starts + src % self.lanes
        elif v.valid is not None or (provenance and not rep_pattern):     # the source column of every column
            src = self.member_starts + (np.tile(pattern, self.members) if self.members > 1 else pattern)
        self.check_read(v)
        valid = None
        if v.valid is not None:
            if not v.valid[:, src[self.exec]].all():
                self.finding("uninitialized-read", f"bpermute reads a never-written lane of {v.reg_name()}",
                             what="register", name=v.reg_name())
            valid = v.valid[:, src]
        prov = None
        cols = lambda a: np.take(a, src, axis=1)          # faster than a[:, src]
        if rep_pattern:
            psrc = np.tile(pattern, self.pw // self.lanes) + (np.arange(self.pw) // self.lanes) * self.lanes
            prov = v.prov.map(lambda a: np.take(a, psrc, axis=1))
        elif provenance:
            psrc = src
            if self.fold is not None:                      # the representatives' lanes read theirs
                psrc = self.pcols(src - self.member_starts, "a bpermute's source lanes") + \
                    (np.arange(self.pw) // self.lanes) * self.lanes
            prov = v.prov.map(lambda a: np.take(a, psrc, axis=1))
        if pattern is not None:
            rows = v.val.shape[0]
            val = xor_blocks(v.val, pattern) if XOR_BLOCKS else None
            if val is None:
                val = np.take(v.val.reshape(rows, self.members, self.lanes), pattern, axis=2).reshape(rows, self.width)
        else:
            val = cols(v.val)
        out = self.new_value(val, v.dtype, prov)
        if valid is not None:
            out.valid = valid if out.valid is None else (out.valid & valid)
        self.event(ops.OTHER["bpermute"], ins=[v], outs=[out])
        return out

    def shfl_xor(self, v: VGPRs, mask: int) -> VGPRs:
        """out[l] = v[l ^ mask] (a butterfly shuffle; ds_swizzle / DPP on hardware)."""
        # a mask outside the wave would wrap round: 64 is the identity, -1 reverses the lanes
        if isinstance(mask, bool) or not isinstance(mask, (int, np.integer)) or not 0 <= mask < self.lanes:
            raise self.error(ValueError, f"shfl_xor mask must be an integer in [0, {self.lanes}), got {mask!r}")
        return self.bpermute(v, np.arange(self.lanes) ^ int(mask))

    def swizzle(self, v: VGPRs, and_mask: int = 0x1F, or_mask: int = 0, xor_mask: int = 0) -> VGPRs:
        """ds_swizzle_b32 bit-mask mode within each group of 32 lanes."""
        l = np.arange(self.lanes)
        src = (l & ~31) | ((((l & 31) & and_mask) | or_mask) ^ xor_mask)
        return self.bpermute(v, src)

    def readlane(self, v: VGPRs, lane: int):
        """v_readlane_b32: the value of one lane, as a Python number (an SGPR)."""
        if isinstance(lane, bool) or not isinstance(lane, (int, np.integer)) or not 0 <= lane < self.lanes:
            raise self.error(IndexError, f"readlane of lane {lane!r}: the wave has lanes 0-{self.lanes - 1}")
        self.check_read(v)
        if self.members > 1:
            raise self.error(ValueError, "readlane gives one number per wave; in a batched launch use w.bpermute")
        self.event(ops.OTHER["readlane"], ins=[v])
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


def shift_prov(pa: Prov | None, s: int, size: int, op: str, dtype: str, n: int, width: int, wide) -> Prov | None:
    """Provenance of x << s / x >> s per byte, for n elements of ``size`` bytes."""
    if pa is None:
        return None
    k, r = divmod(s, 8)
    i = np.arange(size)
    if op == "shl":
        lo, hi = i - k, i - k - 1          # byte i comes from bytes i-k (and i-k-1 when r > 0)
    else:
        lo, hi = i + k, i + k + 1
    signed = dtype.startswith("i") and op == "shr"
    first = np.where((lo >= 0) & (lo < size), lo, (size - 1) if signed else -1)
    second = np.where((hi >= 0) & (hi < size), hi, (size - 1) if signed else -1)
    base = (np.arange(n) * size)[:, None]
    f1 = np.where(first >= 0, base + first, -1).reshape(-1)
    p1 = route_prov(pa, np.broadcast_to(f1[:, None], (n * size, width)), width)
    if r == 0:
        return p1
    f2 = np.where(second >= 0, base + second, -1).reshape(-1)
    p2 = route_prov(pa, np.broadcast_to(f2[:, None], (n * size, width)), width)
    return merge(p1, p2, False, wide)
