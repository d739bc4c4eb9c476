"""LDS (DS encoding) per the CDNA3 ISA: address = VGPR + offset (16-bit, bytes), read2/write2 at
offset0/offset1 in units of the element size (x64 for the st64 forms), ds_bpermute_b32 and
ds_swizzle_b32 (lanes exchanged through the LDS crossbar, no LDS memory touched).
Every access goes through the back end's lds_load / lds_store on the workgroup's one LDS region
(bounds, alignment, bank conflicts, races between waves, provenance)."""
from __future__ import annotations

import numpy as np

from . import moved_as, no_mods, op, u32, widen
from .. import bpermute
from ...machine import jit, ops
from ...machine.vgpr import VGPRs

U32 = np.uint32
COMPILED_BPERMUTE = True                   # without provenance: bpermute.py's compiled pass (False: numpy, the A/B)
_BPERMUTE = ops.OTHER["bpermute"]          # the back end's event of a bpermute
READ = {"b32": 4, "b64": 8, "b96": 12, "b128": 16}
WRITE = {"b8": 1, "b16": 2, "b32": 4, "b64": 8, "b96": 12, "b128": 16}


def _vaddr(st, o):
    if o.kind != "reg" or o.file != "v" or o.count != 1:
        raise st.error(f"DS address {o.text}: one VGPR expected")
    return u32(st, o).astype(np.int64)


def _region(st):
    if st.lds is None:
        raise st.error("LDS access in a kernel whose descriptor allocates no LDS (group segment 0)")
    return st.lds


def _off(st, a, extra):
    return VGPRs(st.w, ((a + extra) & 0xFFFFFFFF)[None, :], "i64", literal=True)


def _ds_read(nbytes):
    def run(st, d):
        no_mods(st, d, ("offset",))
        dst, addr = d.ops.positional
        if dst.kind != "reg" or dst.file not in "va" or dst.count * 4 != nbytes:
            raise st.error(f"destination {dst.text} does not hold {nbytes} bytes")
        a = _vaddr(st, addr)
        _put(st, dst.file, dst.first, _load(st, a, d.ops.mods.get("offset", 0), nbytes))
    return run


def _load(st, a, extra: int, nbytes: int):
    """The LDS read of ``nbytes`` per lane at ``a + extra``: uint32 words where the back end can
    give them straight (``st.lean``: Wave.lds_load_words), else its value (lds_load)."""
    if st.lean:
        words = st.w.lds_load_words(_region(st), (a + extra) & 0xFFFFFFFF, nbytes)
        if words is not None:
            return words
    return st.w.lds_load(_region(st), _off(st, a, extra), nbytes, moved_as(st, nbytes))


def _store_words(st, a, extra: int, data, nbytes: int, byte0: int = 0) -> bool:
    """An LDS write of ``data``'s whole dwords (or one register's 1 or 2 bytes from ``byte0``, 0 or
    2: the d16_hi forms) at ``a + extra`` straight from the registers (``st.lean``:
    Wave.lds_store_words) where they are written in every active lane; False, having done nothing,
    where the back end's value path must take it."""
    if not st.lean or (nbytes != 4 * data.count if nbytes >= 4 else data.count != 1) or \
            not st.vall_written(data.file, data.first, data.count):
        return False
    words = st.vwords(data.file, data.first, data.count)
    if byte0:                                        # the high half's bytes as a word's low ones
        words = words >> np.uint32(8 * byte0)
    return st.w.lds_store_words(_region(st), (a + extra) & 0xFFFFFFFF, words, nbytes)


def _put(st, f: str, first: int, got):
    """Write what _load gave into registers first.. of file f."""
    if isinstance(got, np.ndarray):
        st.vwrite(f, first, got)
    else:
        st.vwrite_value(f, first, got)


def _ds_read2(nbytes, stride):
    def run(st, d):
        no_mods(st, d, ("offset0", "offset1"))
        dst, addr = d.ops.positional
        if dst.kind != "reg" or dst.file not in "va" or dst.count * 4 != 2 * nbytes:
            raise st.error(f"destination {dst.text} does not hold 2 x {nbytes} bytes")
        a = _vaddr(st, addr)
        unit = nbytes * stride
        vals = [_load(st, a, unit * d.ops.mods.get(k, 0), nbytes) for k in ("offset0", "offset1")]
        if isinstance(vals[0], np.ndarray) and isinstance(vals[1], np.ndarray):    # words: one register write
            st.vwrite(dst.file, dst.first, np.concatenate(vals))
            return
        for j, v in enumerate(vals):              # both read before either is written (dst may alias addr)
            _put(st, dst.file, dst.first + j * nbytes // 4, v)
    return run


def _ds_write(nbytes, byte0=0):
    def run(st, d):
        no_mods(st, d, ("offset",))
        addr, data = d.ops.positional
        if data.kind != "reg" or data.file not in "va" or data.count != max(1, nbytes // 4):
            raise st.error(f"data {data.text} does not hold {nbytes} bytes")
        a = _vaddr(st, addr)
        if _store_words(st, a, d.ops.mods.get("offset", 0), data, nbytes, byte0):
            return
        value = st.vread(data.file, data.first, data.count, moved_as(st, 4 * data.count) if not byte0 and
                         nbytes == 4 * data.count else "u8")
        if byte0 or nbytes < 4:
            value = value.bytes(byte0, nbytes)
        st.w.lds_store(_region(st), _off(st, a, d.ops.mods.get("offset", 0)), value, nbytes)
    return run


def _ds_write2(nbytes, stride):
    def run(st, d):
        no_mods(st, d, ("offset0", "offset1"))
        addr, d0, d1 = d.ops.positional
        a = _vaddr(st, addr)
        unit = nbytes * stride
        for k, data in (("offset0", d0), ("offset1", d1)):
            if data.kind != "reg" or data.file not in "va" or data.count * 4 != nbytes:
                raise st.error(f"data {data.text} does not hold {nbytes} bytes")
            if _store_words(st, a, unit * d.ops.mods.get(k, 0), data, nbytes):
                continue
            value = st.vread(data.file, data.first, data.count, moved_as(st, nbytes))
            st.w.lds_store(_region(st), _off(st, a, unit * d.ops.mods.get(k, 0)), value, nbytes)
    return run


for _k, _n in READ.items():
    op(f"ds_read_{_k}")(_ds_read(_n))
for _k, _n in WRITE.items():
    op(f"ds_write_{_k}")(_ds_write(_n))
op("ds_write_b8_d16_hi")(_ds_write(1, 2))
op("ds_write_b16_d16_hi")(_ds_write(2, 2))
for _k in ("b32", "b64"):
    op(f"ds_read2_{_k}")(_ds_read2(READ[_k], 1))
    op(f"ds_read2st64_{_k}")(_ds_read2(READ[_k], 64))
    op(f"ds_write2_{_k}")(_ds_write2(READ[_k], 1))
    op(f"ds_write2st64_{_k}")(_ds_write2(READ[_k], 64))


def _ds_read_ext(nbytes, signed):
    def run(st, d):
        no_mods(st, d, ("offset",))
        dst, addr = d.ops.positional
        a = _vaddr(st, addr)
        t = {(1, False): "u8", (1, True): "i8", (2, False): "u16", (2, True): "i16"}[(nbytes, signed)]
        v = st.w.lds_load(_region(st), _off(st, a, d.ops.mods.get("offset", 0)), nbytes, t)
        st.vwrite_value(dst.file, dst.first, widen(st, v, signed))
    return run


op("ds_read_u8")(_ds_read_ext(1, False))
op("ds_read_i8")(_ds_read_ext(1, True))
op("ds_read_u16")(_ds_read_ext(2, False))
op("ds_read_i16")(_ds_read_ext(2, True))


@op("ds_bpermute_b32")
def ds_bpermute_b32(st, d):
    """D[l] = data[((addr[l] + offset) >> 2) & 63] through the back end (provenance moves with
    the word); a source lane that is inactive gives 0 (the ISA's rule for disabled lanes)."""
    no_mods(st, d, ("offset",))
    dst, addr, data = d.ops.positional
    if st.lean and COMPILED_BPERMUTE and _bpermute_compiled(st, dst, addr, data, int(d.ops.mods.get("offset", 0))):
        return
    a = (_vaddr(st, addr) + d.ops.mods.get("offset", 0)) & 0xFFFFFFFF
    src = ((a >> 2) % st.lanes).astype(np.int64)
    if st.lean and _bpermute_words(st, dst, data, src):
        return
    _write_moved(st, dst, data, st.w.bpermute(st.vread(data.file, data.first, 1), src), src)


def _bpermute_compiled(st, dst, addr, data, offset: int) -> bool:
    """``_bpermute_words`` in one compiled pass (bpermute.py) where ``data`` is written in every
    lane and the destination holds no provenance and takes no origin marks; False, having done
    nothing, otherwise."""
    if not _compiled_form(dst, addr):
        return False
    return _bpermute_compiled_of(st, dst, addr, data, offset)


def _compiled_form(dst, addr) -> bool:
    """Whether the operands are those _bpermute_compiled takes (one plain VGPR address, one register
    written)."""
    return not (addr.kind != "reg" or addr.file != "v" or addr.count != 1 or addr.neg or addr.abs or addr.sext
                or addr.dpp or dst.kind != "reg" or dst.file not in "va" or dst.count != 1)


def _bpermute_compiled_of(st, dst, addr, data, offset: int) -> bool:
    """_bpermute_compiled past its operand forms (_compiled_form)."""
    if st.taint_v is not None or not jit.worth_starting(st.w.width):
        return False
    a = st.vwords("v", addr.first, 1)[0]                 # the checks in the order _bpermute_words makes them
    rf, out = st.regfile(data.file), (st.v if dst.file == "v" else st.a)
    rf.check_range(data.first, 1)
    if out is None or out.prov is not None or not 0 <= dst.first < out.count:
        return False
    wr = rf.written[4 * data.first:4 * data.first + 4]
    if np.count_nonzero(wr) != wr.size:                  # every byte written (a count: quicker than all())
        return False
    st.w.event(_BPERMUTE)
    bpermute.permute_words(a, offset, st.lanes, st.exec, rf.words[data.first], st.fresh[data.file][data.first],
                      out.words[dst.first], out.written[4 * dst.first:4 * dst.first + 4], st.fresh[dst.file][dst.first])
    return True


def _bpermute_prepare(d):
    """ds_bpermute_b32's step where its operands take the compiled pass (translate.py): that pass
    without the per-instruction form checks, else (provenance, a register not written, ...) the
    function itself."""
    ops_ = d.ops.positional
    if len(ops_) != 3 or any(k != "offset" for k in d.ops.mods):
        return None
    dst, addr, data = ops_
    if not _compiled_form(dst, addr):
        return None
    offset = int(d.ops.mods.get("offset", 0))

    def step(st):
        if st.lean and COMPILED_BPERMUTE and _bpermute_compiled_of(st, dst, addr, data, offset):
            return None
        return ds_bpermute_b32(st, d)
    return step


ds_bpermute_b32.prepare = _bpermute_prepare


def _bpermute_words(st, dst, data, src) -> bool:
    """ds_bpermute_b32 without provenance (``st.lean``) as words where ``data`` is written in every
    lane: what bpermute and _write_moved leave (the words, 0 from an inactive source lane, the
    freshness moved, the event); False, having done nothing, otherwise."""
    rf = st.regfile(data.file)
    rf.check_range(data.first, 1)
    if not rf.written[4 * data.first:4 * data.first + 4].all():
        return False
    w = st.w
    at = w.member_starts + src                          # the source lane's column
    ex = st.exec
    on = ex[at]
    words = rf.words[data.first][at]
    moved = st.fresh[data.file][data.first][at] & on
    w.event(_BPERMUTE)
    st.vwrite(dst.file, dst.first, (words if w.exec_full and on.all() else np.where(on, words, U32(0)))[None, :])
    np.copyto(st.fresh[dst.file][dst.first], moved, where=ex)
    return True


def _write_moved(st, dst, data, v, src):
    """Write ``v``, ``data`` read from lane ``src`` [width] of each member, to ``dst``: freshness
    moves with it, and a lane whose source lane is inactive gets 0."""
    at = st.w.member_starts + src                     # the source lane's column
    ex = st.exec
    moved = st.fresh[data.file][data.first][at] & ex[at]                          # freshness moves too
    st.vwrite_value(dst.file, dst.first, v)
    st.set_fresh(dst.file, dst.first, moved[None, :])
    dead = None if st.w.exec_full else ex & ~ex[at]
    if dead is not None and dead.any():
        saved = st.exec.copy()
        st.set_exec(dead)
        st.vwrite(dst.file, dst.first, np.zeros((1, st.w.width), U32))
        st.set_exec(saved)


def swizzle_sources(offset: int, lanes: int) -> np.ndarray:
    """The lane each lane reads in ds_swizzle_b32 with ``offset``: bit 15 set, each lane of a quad
    the lane its 2-bit field of offset[7:0] names; else the bit-mask mode within each 32 lanes,
    ((lane & and_mask) | or_mask) ^ xor_mask with the masks at offset bits 0, 5 and 10."""
    lane = np.arange(lanes)
    if offset & 0x8000:
        return (lane & ~3) | ((offset >> (2 * (lane & 3))) & 3)
    and_m, or_m, xor_m = offset & 0x1F, (offset >> 5) & 0x1F, (offset >> 10) & 0x1F
    return (lane & ~0x1F) | ((((lane & 0x1F) & and_m) | or_m) ^ xor_m)


@op("ds_swizzle_b32")
def ds_swizzle_b32(st, d):
    """D[l] = data[swizzle_sources(offset)[l]] through the back end (provenance moves with the
    word); a source lane that is inactive gives 0, as for ds_bpermute_b32."""
    no_mods(st, d, ("offset",))
    dst, data = d.ops.positional
    src = np.tile(swizzle_sources(int(d.ops.mods.get("offset", 0)), st.lanes), st.members)
    _write_moved(st, dst, data, st.w.bpermute(st.vread(data.file, data.first, 1), src[:st.lanes]), src)
