"""The private segment (scratch): each lane's own memory, where clang keeps local arrays it cannot
hold in registers (a dynamically indexed ``int a[64]``) and register spills.

The launch gives every wave one Buffer of ``.amdhsa_private_segment_fixed_size`` bytes per lane
(``private_segment``): lane c's private byte o is byte ``c * stride + o`` of it, so loads and stores
go through the back end's global_load / global_store and route every byte's provenance exactly, as
for LDS and global memory; a never-written private byte read is an ``uninitialized-read`` finding.
Hardware interleaves the lanes' dwords (the swizzle) — invisible to a lane, which sees its own bytes
from offset 0, as here. Two ways in, both to the same per-lane offset:

- FLAT scratch (``scratch_load_*`` / ``scratch_store_*``, gfx940+ and gfx9 with flat scratch):
  offset = FLAT_SCRATCH - PRIVATE_BASE + (vaddr: a VGPR, or off) + (saddr: an SGPR, or off) +
  offset:N (13-bit signed). gfx940+ set FLAT_SCRATCH themselves; gfx90a's prolog adds the scratch
  wave offset to the flat scratch init SGPRs (both PRIVATE_BASE + 0 here, launch.initial_state).
- MUBUF on the private segment buffer V# (gfx90a: ``buffer_store_dword v1, off, s[0:3], 0
  offset:4``, ``... v2, s[0:3], 0 offen``): offset = V#.base - PRIVATE_BASE + soffset + offset:N
  (12-bit) + (offen: vaddr). A V# whose base is not in the private aperture is a global buffer,
  left to the global MUBUF semantics registered before this module (``OPS[...]`` is wrapped).
"""
from __future__ import annotations

import numpy as np

from . import OPS, no_mods, op, u32, widen
from .mem import LOADS as _GLOBAL_LOADS, STORES as _GLOBAL_STORES
from ...machine.memory import Buffer
from ...machine.vgpr import VGPRs
from ..launch import APERTURE, PRIVATE_BASE

U32, U64 = np.uint32, np.uint64
FLAT_SCRATCH = 102
STRIDE_ALIGN = 16                    # lane c's private bytes start at c * stride (a dword multiple)
_FLAT_MODS = ("offset", "sc0", "sc1", "nt", "glc", "slc")
_BUF_MODS = ("offset", "offen", "sc0", "sc1", "nt", "glc", "slc")
ADD_TID = 1 << 23                    # V# word 3: the swizzled, per-lane (private segment) form
# the forms a private access takes: suffix -> (bytes, sub-dword fill) / (bytes, first byte stored)
LOADS = {k: _GLOBAL_LOADS[k] for k in ("dword", "dwordx2", "dwordx3", "dwordx4", "ubyte", "sbyte", "ushort", "sshort")}
STORES = {k: _GLOBAL_STORES[k] for k in ("dword", "dwordx2", "dwordx3", "dwordx4", "byte", "short", "byte_d16_hi",
                                         "short_d16_hi")}


class PrivateSegment(Buffer):
    """A wave's private memory: ``lane_bytes`` per lane, lane c's at byte ``c * stride``."""

    def __init__(self, lane_bytes: int, width: int):
        self.lane_bytes = lane_bytes
        self.stride = -(-lane_bytes // STRIDE_ALIGN) * STRIDE_ALIGN
        super().__init__("private", np.zeros(self.stride * width, np.uint8), written=False)


def private_segment(st, nbytes: int) -> PrivateSegment | None:
    """The wave's private memory: ``nbytes`` per lane of every member (None: size 0)."""
    return PrivateSegment(nbytes, st.w.width) if nbytes else None


def _region(st) -> PrivateSegment:
    buf = getattr(st, "scratch", None)
    if buf is None:
        raise st.error("private (scratch) access in a kernel whose descriptor gives no private segment "
                       "(.amdhsa_private_segment_fixed_size 0)")
    return buf


def _access(st, offs: np.ndarray, nbytes: int, fn):
    """Run ``fn(buf, byte offsets)`` on the active lanes' private offsets ``offs`` [width] (int64),
    each checked against the lane's private segment."""
    buf = _region(st)
    act = st.exec
    bad = act & ((offs < 0) | (offs + nbytes > buf.lane_bytes))
    if bad.any():
        lane = int(np.argmax(bad))
        raise st.error(f"lane {lane % st.lanes} accesses private bytes [{int(offs[lane])}, "
                       f"{int(offs[lane]) + nbytes}) outside its {buf.lane_bytes}-byte private segment "
                       "(.amdhsa_private_segment_fixed_size)", lane=lane, address=int(offs[lane]))
    cols = np.arange(st.w.width, dtype=np.int64) * buf.stride
    o = VGPRs(st.w, np.where(act, cols + offs, 0)[None, :], "i64", literal=True)
    return fn(buf, o)


def private_load(st, dst, offs: np.ndarray, nbytes: int, fill):
    """Load ``nbytes`` (``fill``: a sub-dword load's extension) at each active lane's private offset."""
    if dst.kind != "reg" or dst.file not in "va" or dst.count != max(1, nbytes // 4):
        raise st.error(f"destination {dst.text} does not hold {nbytes} bytes")

    def one(buf, o):
        if fill is None:
            v = st.w.global_load(buf, o, nbytes, "u8")
        else:
            v = widen(st, st.w.global_load(buf, o, nbytes, {(1, "u"): "u8", (2, "u"): "u16", (1, "s"): "i8",
                                                            (2, "s"): "i16"}[(nbytes, fill)]), fill == "s")
        st.vwrite_value(dst.file, dst.first, v)
    _access(st, offs, nbytes, one)


def private_store(st, data, offs: np.ndarray, nbytes: int, byte0: int):
    """Store ``nbytes`` of ``data`` (from byte ``byte0``) at each active lane's private offset."""
    if data.kind != "reg" or data.file not in "va" or data.count != max(1, nbytes // 4):
        raise st.error(f"data {data.text} does not hold {nbytes} bytes")
    value = st.vread(data.file, data.first, data.count, "u8")
    if byte0 or nbytes < 4:
        value = value.bytes(byte0, nbytes)
    _access(st, offs, nbytes, lambda buf, o: st.w.global_store(buf, o, value, nbytes))


# -- FLAT scratch --------------------------------------------------------------------------------
def _flat_offsets(st, d, vaddr, saddr) -> np.ndarray:
    off = int(d.ops.mods.get("offset", 0))
    if not -4096 <= off < 4096:
        raise st.error(f"offset:{off} outside the 13-bit signed range")
    base = st.lanewise64(st.sread64(FLAT_SCRATCH)).astype(np.int64) - PRIVATE_BASE
    total = base + off
    if vaddr.kind != "off":
        if vaddr.kind != "reg" or vaddr.file != "v" or vaddr.count != 1:
            raise st.error(f"vaddr {vaddr.text}: one VGPR (a private offset) or off expected")
        total = total + st.vwords("v", vaddr.first, 1)[0].astype(np.int64)
    if saddr.kind != "off":
        if saddr.kind != "reg" or saddr.file != "s" or saddr.count != 1:
            raise st.error(f"saddr {saddr.text}: one SGPR or off expected")
        total = total + st.lanewise(st.sread(saddr.first)).astype(np.int64)
    return total


def _scratch_load(kind):
    nbytes, fill = LOADS[kind]

    def run(st, d):
        no_mods(st, d, _FLAT_MODS)
        dst, vaddr, saddr = d.ops.positional
        private_load(st, dst, _flat_offsets(st, d, vaddr, saddr), nbytes, fill)
    return run


def _scratch_store(kind):
    nbytes, byte0 = STORES[kind]

    def run(st, d):
        no_mods(st, d, _FLAT_MODS)
        vaddr, data, saddr = d.ops.positional
        private_store(st, data, _flat_offsets(st, d, vaddr, saddr), nbytes, byte0)
    return run


for _k in LOADS:
    op(f"scratch_load_{_k}")(_scratch_load(_k))
for _k in STORES:
    op(f"scratch_store_{_k}")(_scratch_store(_k))


# -- MUBUF on the private segment buffer ----------------------------------------------------------
def _rsrc(st, o) -> np.ndarray:
    if o.kind != "reg" or o.file != "s" or o.count != 4:
        raise st.error(f"resource {o.text}: four SGPRs (a V#) expected")
    return np.stack([st.sread(o.first + k) for k in range(4)])          # [4, members]


def is_private(st, rsrc_operand) -> bool:
    """Whether a MUBUF instruction's V# is the private segment buffer (base in the private
    aperture, per-lane swizzled), for every member executing it."""
    w = _rsrc(st, rsrc_operand)
    base = w[0] | ((w[1] & U64(0xFFFF)) << U64(32))
    m = slice(None) if st.act is None else st.act
    inside = (base >= U64(PRIVATE_BASE)) & (base < U64(PRIVATE_BASE + APERTURE)) & ((w[3] & U64(ADD_TID)) != 0)
    if inside[m].all():
        return True
    if inside[m].any():
        raise st.error(f"resource {rsrc_operand.text} is the private segment buffer in some workgroups of the batch "
                       "and a global buffer in others")
    return False


def _buffer_offsets(st, d, vaddr, rsrc, soffset) -> np.ndarray:
    no_mods(st, d, _BUF_MODS)
    off = int(d.ops.mods.get("offset", 0))
    if not 0 <= off < 4096:
        raise st.error(f"offset:{off} outside the 12-bit range")
    w = _rsrc(st, rsrc)
    base = (w[0] | ((w[1] & U64(0xFFFF)) << U64(32))).astype(np.int64) - PRIVATE_BASE
    total = st.lanewise64(base.astype(U64)).astype(np.int64) + off + u32(st, soffset).astype(np.int64)
    if d.ops.mods.get("offen"):
        if vaddr.kind != "reg" or vaddr.file != "v" or vaddr.count != 1:
            raise st.error(f"vaddr {vaddr.text}: one VGPR (the offset) expected with offen")
        total = total + st.vwords("v", vaddr.first, 1)[0].astype(np.int64)
    elif vaddr.kind != "off":
        raise st.error(f"vaddr {vaddr.text} without offen or idxen (a private access takes offen or off)")
    return total


def _buffer_load(kind, other):
    nbytes, fill = LOADS[kind]

    def run(st, d):
        if d.ops.mods.get("lds"):                    # to LDS at M0 (no VGPR destination): a global form
            return _global(st, d, other)
        dst, vaddr, rsrc, soffset = d.ops.positional
        if not is_private(st, rsrc):
            return _global(st, d, other)
        private_load(st, dst, _buffer_offsets(st, d, vaddr, rsrc, soffset), nbytes, fill)
    return run


def _buffer_store(kind, other):
    nbytes, byte0 = STORES[kind]

    def run(st, d):
        data, vaddr, rsrc, soffset = d.ops.positional
        if not is_private(st, rsrc):
            return _global(st, d, other)
        private_store(st, data, _buffer_offsets(st, d, vaddr, rsrc, soffset), nbytes, byte0)
    return run


def _global(st, d, other):
    if other is None:
        raise st.error(f"{d.ins.mnemonic} on a global buffer resource (not the private segment buffer): "
                       "no semantics for global MUBUF accesses in this build")
    return other(st, d)


# the global MUBUF semantics, where a module imported before this one registered them, keep every
# resource that is not the private segment buffer
for _k in LOADS:
    _n = f"buffer_load_{_k}"
    OPS[_n] = _buffer_load(_k, OPS.get(_n))
for _k in STORES:
    _n = f"buffer_store_{_k}"
    OPS[_n] = _buffer_store(_k, OPS.get(_n))
