"""The register file: numbered 32-bit VGPRs of one wave (over every batched workgroup's columns),
with the written bit and the provenance of every byte.

The Python front end hands values around as ``VGPRs`` handles that own their numbers; a front end
that addresses registers by number (the asm front end: ``v_perm_b32 v3, v1, v2, s4`` reads v1
and v2 and writes v3) keeps them here and moves values in and out with ``read``/``write``, so
both front ends share the value model: the same bytes, identities, footprints and marks.

State: ``words`` uint32 ``[count, width]``; ``written`` bool ``[count*4, width]`` (per byte; a
never-written register reads as poison and is flagged by the reader); ``prov`` a per-byte
``Prov`` ``[count*4, pw]`` or None: the wave's provenance columns (a folded batch's
representatives', fold.py), as every value of the wave holds them.
"""
from __future__ import annotations

import numpy as np

from .dtypes import POISON_WORD, dtype_name, itemsize, np_dtype, retype
from .provenance import Mask, Prov, fill_value
from .vgpr import VGPRs


class RegisterFile:
    def __init__(self, wave, count: int, prefix: str = "v"):
        self.wave = wave
        self.count = count
        self.prefix = prefix                          # "v" VGPRs, "a" AGPRs, "s" SGPRs
        self.words = np.full((count, wave.width), POISON_WORD, np.uint32)
        self.written = np.zeros((count * 4, wave.width), bool)
        self.prov: Prov | None = None
        self.has = np.zeros(count, bool)             # per register: may carry provenance (else none at all)
        # per plane ("i", field) / ("f", field) / "flags" and register: may hold a value other than the
        # plane's fill (else a write that does not carry the plane has nothing there to clear)
        self.holds: dict = {}
        # register -> {element size: Prov}: what ``read`` of that one register last gave, until a
        # write reaches its planes (only ``write`` changes them); its planes are read-only and
        # handed out as they are, in a Prov of their own (an in-place write to one raises)
        self._reads: dict = {}
        # per register: its 4 bytes agree in every plane (each write put whole elements of 4 or 8
        # bytes, or cleared, in every column it reached), so a read of 4-byte elements need not compare
        self.whole = np.ones(count, bool)
        # registers whose kept read a write seeded (SEED_READS) and no read has taken yet
        self._unread: set = set()

    def name(self, first: int, n: int = 1) -> str:
        return f"{self.prefix}{first}" if n == 1 else f"{self.prefix}[{first}:{first + n - 1}]"

    def check_range(self, first: int, n: int) -> None:
        """An IndexError at this statement unless registers first..first+n-1 exist."""
        if first < 0 or first + n > self.count:
            raise self.wave.error(IndexError, f"{self.name(first, n)} is outside the register file "
                                  f"({self.prefix}0..{self.prefix}{self.count - 1})")

    def read(self, first: int, n: int, dtype="u32") -> VGPRs:
        """Registers first..first+n-1 as a value of ``dtype`` (bytes and provenance as they are)."""
        if first < 0 or first + n > self.count:
            self.check_range(first, n)
        word = _WORD.get(dtype) if isinstance(dtype, str) else None     # the common reads, no lookups
        if word is not None:
            size = 4
        else:
            dtype = dtype_name(dtype)
            size = itemsize(dtype)
            if (n * 4) % size:
                raise self.wave.error(ValueError, f"{self.name(first, n)} ({n * 4} bytes) does not hold whole {dtype}s")
        if size == 4:                     # one element per register: the words themselves
            val = self.words[first:first + n].view(word if word is not None else np_dtype(dtype)).copy()
        else:
            val = retype(self.words[first:first + n], dtype)
        rows = slice(first * 4, (first + n) * 4)
        prov = None
        if self.prov is not None and (self.has[first] if n == 1 else self.has[first:first + n].any()):
            if n == 1:                        # one register, read again and again until written
                got = self._reads.get(first)
                mine = None if got is None else got.get(size)
                if self._unread and size == 4:
                    self._unread.discard(first)
                if mine is None:
                    mine = _read_only(_read_prov(self.prov, rows, size, slice(first, 1 + first), self.holds,
                                                 size == 4 and self.whole[first]))
                    self._reads.setdefault(first, {})[size] = mine
                prov = _handout(mine)
            else:
                prov = _read_prov(self.prov, rows, size, slice(first, first + n), self.holds)
        wr = self.written[rows]
        # every byte written: a count of set bools is one C call where all() is a Python reduction
        return VGPRs(self.wave, val, dtype, prov, None if np.count_nonzero(wr) == wr.size else wr.copy(),
                     regs=(first, n), rfile=self.prefix)

    def write(self, first: int, value: VGPRs):
        """Write ``value``'s bytes into registers first.. in the active lanes (EXEC); a value that
        does not fill whole registers is an error, not a silent pad."""
        nbytes = value.nbytes
        if nbytes % 4:
            raise self.wave.error(ValueError, f"a {nbytes}-byte value does not fill whole registers "
                                  f"at {self.name(first)}")
        n = nbytes // 4
        if first < 0 or first + n > self.count:
            self.check_range(first, n)
        act = self.wave.exec
        v = value.val
        words = v.view(np.uint32) if v.dtype.itemsize == 4 else retype(v, "u32")
        rows = slice(first * 4, (first + n) * 4)
        every = value.valid is None                   # every byte written: no bit array to copy
        if self.wave.exec_full:
            self.words[first:first + n] = words
            self.written[rows] = True if every else value.valid
        else:
            np.copyto(self.words[first:first + n], words, where=act)
            if every:
                self.written[rows] |= act
            else:
                np.copyto(self.written[rows], value.valid, where=act)
        p = value.prov                        # on the provenance columns; per element or per byte
        if p is None and (self.prov is None or not self.has[first:first + n].any()):
            return                                   # nothing there to clear
        if self.prov is None:
            self.prov = Prov(1, {})
        for r in range(first, first + n):
            self._reads.pop(r, None)
        flagless = self.prov.flags is None
        w = self.wave
        one = None
        if ONE_WRITE and n == 1 and p is not None and p.g == 4 and w.exec_full:
            one = _write_one(self.prov, first, p, w.pw, self.holds, SEED_READS)
        if one is None:
            pact = act if w.fold is None else w.pexec("EXEC of a register write")
            self.prov = _assign(self.prov, rows, pact, p, self.count * 4, w.pw, w.exec_full,
                                slice(first, first + n), self.holds)
        if self._unread:
            self._unread.difference_update(range(first, first + n))
            if flagless and self.prov.flags is not None:
                # a flags plane made now: a read of an unread seeded register gives its zeros, no None
                for r in self._unread:
                    self._reads.pop(r, None)
                self._unread.clear()
        agree = p is None or p.g % 4 == 0            # what this write put agrees within each register
        if self.wave.exec_full or not agree:
            self.whole[first:first + n] = agree
        if p is not None:
            self.has[first:first + n] = True
            if SEED_READS and n == 1 and self.wave.exec_full and p.g == 4:
                seeded = one[0] if one is not None else _seeded_read(self.prov, p, w.pw)
                if seeded is not None:
                    self._reads[first] = {4: seeded}
                    self._unread.add(first)
        elif self.wave.exec_full:
            self.has[first:first + n] = False


# A one-register write of a per-element value under full EXEC leaves that register's planes
# holding exactly the value's (the rest cleared), so the next read's provenance is known without
# reading the planes back (most VALU results are read by the next instruction). Off: every read
# after a write reads the planes (tests hold the two to the same answers).
SEED_READS = True


# A one-register write under full EXEC of a per-element value whose planes the file has already
# made (most VALU results) is one walk over the file's planes: each set or cleared in the register's
# four rows, and the seeded read taken in the same walk (``_assign`` and ``_seeded_read`` walk them
# twice, a closure call and set unions a plane). Off: those two (tests hold both to the same file).
ONE_WRITE = True


def _write_one(mem: Prov, first: int, p: Prov, width: int, holds: dict, seed: bool) -> tuple | None:
    """``_assign`` of ``p`` (per element of 4 bytes, every column) into register ``first``, in place,
    with ``_seeded_read``'s answer (``seed``; else None) as a 1-tuple. None, nothing written, where
    this form does not apply: a plane p carries that the file has not made, a plane ``holds`` does
    not follow, a plane of p that is not one row over the provenance columns."""
    ids_p, fp_p, flags_p = p.ids, p.fp, p.flags
    shape = (1, width)
    for f, a in ids_p.items():
        if f not in mem.ids or a.shape != shape:
            return None
    for f, m in fp_p.items():
        if f not in mem.fp or m.base.shape != shape or m.wide.shape != shape or m.bits.shape[:2] != shape:
            return None
    if flags_p is not None and (mem.flags is None or flags_p.shape != shape):
        return None
    # holds follows planes only (a key is made with its plane): every plane followed <=> as many keys
    if len(holds) != len(mem.ids) + len(mem.fp) + (mem.flags is not None):
        return None
    rows = slice(4 * first, 4 * first + 4)
    ids = {}
    for f, plane in mem.ids.items():
        src, h = ids_p.get(f), holds[("i", f)]
        if src is None:
            if h[first]:                     # (a plane that holds nothing here is not even cleared)
                plane[rows] = -1
                h[first] = False
            continue
        plane[rows] = src
        h[first] = True
        if seed and _max(src, axis=None) >= 0:
            ids[f] = src.astype(plane.dtype)
    fp = {}
    for f, m in mem.fp.items():
        src, h = fp_p.get(f), holds[("f", f)]
        if src is None:
            if h[first]:
                for a in (m.base, m.bits, m.wide):
                    a[rows] = fill_value(a)
                h[first] = False
            continue
        m.base[rows] = src.base
        m.bits[rows] = src.bits
        m.wide[rows] = src.wide
        h[first] = True
        if seed:
            x = Mask(src.base.astype(m.base.dtype), src.bits.astype(m.bits.dtype), src.wide.astype(m.wide.dtype))
            if x.nonempty().any():
                fp[f] = x
    flags = None
    if mem.flags is not None:
        h = holds["flags"]
        if flags_p is None:
            if h[first]:
                mem.flags[rows] = 0
                h[first] = False
            if seed:
                flags = np.zeros(shape, mem.flags.dtype)
        else:
            mem.flags[rows] = flags_p
            h[first] = True
            if seed:
                flags = flags_p.astype(mem.flags.dtype)
    return (_read_only(Prov(4, ids, fp, flags)) if seed else None,)


def _seeded_read(mem: Prov, p: Prov, width: int) -> Prov | None:
    """What ``read`` of the one register just written with ``p`` (4-byte elements, full EXEC;
    ``mem`` the file's planes after the write) gives: _read_prov's answer — each field of p's that
    holds a value or a non-empty set, in the file's plane order, as the planes' types, the flags
    where the file has a flags plane — made from p's own rows, read-only. None where p's planes
    are not one row over the provenance columns (broadcast forms): the read reads the planes."""
    ids = {}
    for f, plane in mem.ids.items():
        a = p.ids.get(f)
        if a is None:
            continue
        if a.shape != (1, width):
            return None
        if _max(a, axis=None) >= 0:
            ids[f] = a.astype(plane.dtype)
    fp = {}
    for f, plane in mem.fp.items():
        m = p.fp.get(f)
        if m is None:
            continue
        if m.base.shape != (1, width) or m.wide.shape != (1, width) or m.bits.shape[:2] != (1, width):
            return None
        x = Mask(m.base.astype(plane.base.dtype), m.bits.astype(plane.bits.dtype), m.wide.astype(plane.wide.dtype))
        if x.nonempty().any():
            fp[f] = x
    flags = None
    if mem.flags is not None:
        if p.flags is None:
            flags = np.zeros((1, width), mem.flags.dtype)
        elif p.flags.shape != (1, width):
            return None
        else:
            flags = p.flags.astype(mem.flags.dtype)
    return _read_only(Prov(4, ids, fp, flags))


def _read_only(p: Prov) -> Prov:
    """``p`` (a copy ``_read_prov`` made, no view of the file's planes) with every plane read-only."""
    for a in p.ids.values():
        a.flags.writeable = False
    for m in p.fp.values():
        m.base.flags.writeable = m.bits.flags.writeable = m.wide.flags.writeable = False
    if p.flags is not None:
        p.flags.flags.writeable = False
    return p


def _handout(p: Prov) -> Prov:
    """A cached read's provenance for one reader: its own Prov and Masks over the shared read-only
    planes (no copy; a reader that rebinds a field changes only its own)."""
    return Prov(p.g, dict(p.ids), {f: Mask(m.base, m.bits, m.wide) for f, m in p.fp.items()}, p.flags)


def _held(holds, key, regs) -> bool:
    """Whether plane ``key`` may hold a value in registers ``regs`` (no record: it may)."""
    h = None if holds is None else holds.get(key)
    return h is None or bool(h[regs].any())


_NO_HOLDS: dict = {}
_WORD = {name: np_dtype(name) for name in ("u32", "i32", "f32")}     # the 4-byte types: a word each
_max = np.maximum.reduce             # the ufunc's own reduce: ndarray.max's Python wrapper costs a call


def _read_prov(mem: Prov, rows: slice, size: int, regs: slice | None = None, holds=None, agree=False) -> Prov:
    """A copy of rows ``rows`` (registers ``regs``) of the file's per-byte planes, per element of
    ``size`` bytes where every byte of every element agrees in every plane (Prov.compact's rule;
    taking each element's first byte is then its union), else per byte. ``agree``: known to agree
    (RegisterFile.whole), not compared."""
    # the file's planes hold every field any register ever had: a value carries only those its
    # own bytes name (as a value of the Python front end does), so an operand does not show a
    # field — a V dim on a PV's A — that no byte of it holds (a plane ``holds`` says is empty in
    # these registers is not even looked at)
    one = regs.start if regs is not None and regs.stop - regs.start == 1 else None
    holds = _NO_HOLDS if holds is None else holds
    if agree:                          # each element's first byte is the element: read only those rows
        rows = slice(rows.start, rows.stop, size)
    # (the loops are written out, no helper call per plane: a read runs thousands of times a launch)
    ids = {}
    for f, a in mem.ids.items():
        h = holds.get(("i", f))
        if h is None or (h[one] if one is not None else h[regs].any()):
            x = a[rows]
            if _max(x, axis=None) >= 0:
                ids[f] = x
    fp = {}
    for f, m in mem.fp.items():
        h = holds.get(("f", f))
        if h is None or (h[one] if one is not None else h[regs].any()):
            x = Mask(m.base[rows], m.bits[rows], m.wide[rows])
            if x.nonempty().any():
                fp[f] = x
    flags = None if mem.flags is None else mem.flags[rows]
    if agree:
        return Prov(size, {f: a.copy() for f, a in ids.items()},
                    {f: Mask(m.base.copy(), m.bits.copy(), m.wide.copy()) for f, m in fp.items()},
                    None if flags is None else flags.copy())
    if size > 1:
        planes = list(ids.values()) + [x for m in fp.values() for x in (m.base, m.wide, m.bits)] + \
            ([flags] if flags is not None else [])
        if all((a.reshape((-1, size) + a.shape[1:]) == a[::size][:, None]).all() for a in planes):
            first = lambda a: a[::size].copy()
            return Prov(size, {f: first(a) for f, a in ids.items()},
                        {f: Mask(first(m.base), first(m.bits), first(m.wide)) for f, m in fp.items()},
                        None if flags is None else first(flags))
    return Prov(mem.g, {f: a.copy() for f, a in ids.items()},
                {f: Mask(m.base.copy(), m.bits.copy(), m.wide.copy()) for f, m in fp.items()},
                None if flags is None else flags.copy())


def _assign(mem: Prov, rows: slice, act, p: Prov | None, total: int, width: int, full: bool = False,
            regs: slice | None = None, holds=None) -> Prov:
    """mem with rows ``rows`` (registers ``regs``) of the active columns replaced by p (per byte, or
    per element of ``p.g`` bytes; fields p lacks cleared there), in place: the planes belong to
    the register file alone (``read`` hands out copies). ``holds`` (RegisterFile.holds) is kept:
    a plane p lacks that holds nothing in these registers is left alone."""
    n_regs = total // 4
    g = 1 if p is None else p.g
    one = regs.start if regs is not None and regs.stop - regs.start == 1 else None
    track = holds is not None and regs is not None

    def held(key, current, src):
        """holds' row of plane ``key`` (a plane made now holds nothing yet; one made before it was
        followed may hold anything); False: a clear of a plane that holds nothing in these
        registers, skipped; None: not followed."""
        if not track:
            return None
        h = holds.get(key)
        if h is None:
            h = holds[key] = np.zeros(n_regs, bool) if current is None else np.ones(n_regs, bool)
        if src is None and not (h[one] if one is not None else h[regs].any()):
            return False
        return h

    def wrote(h, src):
        if h is not None:
            if src is not None:
                h[regs] = True
            elif full:                       # cleared in every column of these registers
                h[regs] = False

    p_ids = {} if p is None else p.ids
    for f in set(mem.ids) | (set(p.ids) if p is not None else set()):
        current, src = mem.ids.get(f), p_ids.get(f)
        h = held(("i", f), current, src)
        if h is False:
            continue
        if current is None:
            current = mem.ids[f] = np.full((total, width), -1, np.int32)
        _put(current, rows, src, -1, act, g, full)
        wrote(h, src)
    p_fp = {} if p is None else p.fp
    for f in set(mem.fp) | (set(p.fp) if p is not None else set()):
        current, src = mem.fp.get(f), p_fp.get(f)
        h = held(("f", f), current, src)
        if h is False:
            continue
        if current is None:
            current = mem.fp[f] = Mask.empty((total, width))
        for name in ("base", "bits", "wide"):
            a = getattr(current, name)
            _put(a, rows, None if src is None else getattr(src, name), fill_value(a), act[:, None] if a.ndim == 3 else act,
                 g, full)
        wrote(h, src)
    if mem.flags is not None or (p is not None and p.flags is not None):
        current, src = mem.flags, None if p is None else p.flags
        h = held("flags", current, src)
        if h is not False:
            if current is None:
                current = mem.flags = np.zeros((total, width), np.uint8)
            _put(current, rows, src, 0, act, g, full)
            wrote(h, src)
    return mem


def _put(plane, rows: slice, src, fill, where, g: int, full: bool):
    """plane[rows] = src (None: fill) in the columns ``where`` (every column where ``full``); a
    source per element of g bytes goes into each of its bytes, as per_byte would put it."""
    blk = plane[rows]
    if src is not None and g > 1 and src.shape[0] > 1:     # one element (one row): it broadcasts over its bytes
        if not blk.flags.c_contiguous:
            src = np.repeat(src, g, axis=0)
        else:
            blk = blk.reshape((blk.shape[0] // g, g) + blk.shape[1:])      # a view of the rows
            src = src[:, None]
    if full:
        blk[...] = fill if src is None else src
    else:
        np.copyto(blk, fill if src is None else src, where=where)
