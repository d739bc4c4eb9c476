"""FLAT (generic address) loads and stores per the CDNA3 ISA: ``flat_load_* vdst, v[a:a+1]`` and
``flat_store_* v[a:a+1], vdata`` with an unsigned 12-bit ``offset``. clang emits them where it cannot
tell a pointer's address space (a pointer loaded from memory, a generic pointer passed around).
Each lane's 64-bit address goes where the hardware sends it: into the LDS aperture (SHARED_BASE,
``src_shared_base``: the workgroup's LDS at the address's low bits), the private aperture
(PRIVATE_BASE, ``src_private_base``: the lane's own private bytes past FLAT_SCRATCH, scratch.py),
or global memory (the launch's buffers, as global_*), each part through the back end's operation,
so provenance, bounds and findings are those of the segment.
"""
from __future__ import annotations

import numpy as np

from . import OPS, no_mods, widen
from . import scratch
from ..launch import APERTURE, PRIVATE_BASE, SHARED_BASE
from ...machine.vgpr import VGPRs

U64 = np.uint64
_MODS = ("offset", "sc0", "sc1", "nt", "glc", "slc")
_SUB = {(1, "u"): "u8", (2, "u"): "u16", (1, "s"): "i8", (2, "s"): "i16"}


def _address(st, d, vaddr) -> np.ndarray:
    off = int(d.ops.mods.get("offset", 0))
    if not 0 <= off < 4096:
        raise st.error(f"offset:{off} outside the 12-bit range")
    if vaddr.kind != "reg" or vaddr.file != "v" or vaddr.count != 2:
        raise st.error(f"vaddr {vaddr.text}: a VGPR pair (a 64-bit address) expected")
    w = st.vwords("v", vaddr.first, 2).astype(U64)
    return (w[0] | (w[1] << U64(32))) + U64(off)


def _segments(st, addr):
    """[(segment, lanes)] of the active lanes: "shared", "private" or "global"."""
    shared = (addr >= U64(SHARED_BASE)) & (addr < U64(SHARED_BASE + APERTURE))
    private = (addr >= U64(PRIVATE_BASE)) & (addr < U64(PRIVATE_BASE + APERTURE))
    act = st.exec
    parts = [("shared", act & shared), ("private", act & private), ("global", act & ~shared & ~private)]
    return [(name, lanes) for name, lanes in parts if lanes.any()]


def _each(st, addr, fn):
    """``fn(segment)`` with EXEC narrowed to the lanes addressing that segment."""
    saved = st.exec.copy()
    try:
        for name, lanes in _segments(st, addr):
            st.set_exec(lanes)
            fn(name)
    finally:
        st.set_exec(saved)


def _private(st, addr) -> np.ndarray:
    """A private-aperture address's offset in the lane's private bytes: past the wave's scratch
    base, FLAT_SCRATCH (gfx90a's prolog sets it; gfx940+ the hardware)."""
    base = st.lanewise64(st.sread64(scratch.FLAT_SCRATCH)).astype(np.int64) - PRIVATE_BASE
    return (addr - U64(PRIVATE_BASE)).astype(np.int64) + base


def _lds(st):
    if st.lds is None:
        raise st.error("flat access to the LDS aperture in a kernel whose descriptor allocates no LDS")
    return st.lds


def _offsets(st, values) -> VGPRs:
    return VGPRs(st.w, np.where(st.exec, values, 0).astype(np.int64)[None, :], "i64", literal=True)


def _flat_load(kind):
    nbytes, fill = scratch.LOADS[kind]

    def run(st, d):
        no_mods(st, d, _MODS)
        dst, vaddr = d.ops.positional
        if dst.kind != "reg" or dst.file not in "va" or dst.count != max(1, nbytes // 4):
            raise st.error(f"destination {dst.text} does not hold {nbytes} bytes")
        addr = _address(st, d, vaddr)
        t = "u8" if fill is None else _SUB[nbytes, fill]

        def put(v):
            st.vwrite_value(dst.file, dst.first, v if fill is None else widen(st, v, fill == "s"))

        def one(seg):
            if seg == "private":
                scratch.private_load(st, dst, _private(st, addr), nbytes, fill)
            elif seg == "shared":
                put(st.w.lds_load(_lds(st), _offsets(st, (addr - U64(SHARED_BASE)).astype(np.int64)), nbytes, t))
            else:
                for buf, offs, lanes in st.memory.split(st, addr, st.exec, nbytes):
                    saved = st.exec.copy()
                    st.set_exec(lanes)
                    try:
                        put(st.w.global_load(buf, _offsets(st, offs), nbytes, t))
                    finally:
                        st.set_exec(saved)
        _each(st, addr, one)
    return run


def _flat_store(kind):
    nbytes, byte0 = scratch.STORES[kind]

    def run(st, d):
        no_mods(st, d, _MODS)
        vaddr, data = d.ops.positional
        if data.kind != "reg" or data.file not in "va" or data.count != max(1, nbytes // 4):
            raise st.error(f"data {data.text} does not hold {nbytes} bytes")
        addr = _address(st, d, vaddr)
        value = st.vread(data.file, data.first, data.count, "u8")
        if byte0 or nbytes < 4:
            value = value.bytes(byte0, nbytes)

        def one(seg):
            if seg == "private":
                scratch.private_store(st, data, _private(st, addr), nbytes, byte0)
            elif seg == "shared":
                st.w.lds_store(_lds(st), _offsets(st, (addr - U64(SHARED_BASE)).astype(np.int64)), value, nbytes)
            else:
                for buf, offs, lanes in st.memory.split(st, addr, st.exec, nbytes):
                    saved = st.exec.copy()
                    st.set_exec(lanes)
                    try:
                        st.w.global_store(buf, _offsets(st, offs), value, nbytes)
                    finally:
                        st.set_exec(saved)
        _each(st, addr, one)
    return run


# imported after mem: these replace a FLAT form registered there as its global twin (global memory
# only), keeping the forms this module does not take (the d16 loads) as they are
for _k in scratch.LOADS:
    OPS[f"flat_load_{_k}"] = _flat_load(_k)
for _k in scratch.STORES:
    OPS[f"flat_store_{_k}"] = _flat_store(_k)
