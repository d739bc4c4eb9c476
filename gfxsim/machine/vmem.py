"""VMEM and SMEM: per-lane loads and stores of 1/2/4/8/12/16 bytes to global buffers, and scalar loads.

A load's bytes carry the buffer's tags (or what an earlier store with provenance left there); a
store leaves the value's per-byte provenance in the buffer. Out-of-bounds or misaligned accesses
raise MemoryFault naming lane and address.
"""
from __future__ import annotations

import functools

import numpy as np

from . import byteruns, encoding as enc, jit, member_words, ops
from .addressing import addresses, byte_addr, integer, read_addr
from .dtypes import div_const, dtype_name, itemsize, load_strided, load_values, load_written, np_dtype, store_values
from ..errors import ArgumentError
from .errors import MemoryFault
from .memory import Buffer
from .provenance import RESERVED, Prov
from .valueprov import stored_prov
from .vgpr import VGPRs


COMPILED_WORDS = True      # member_words' compiled passes (False: numpy, the A/B)
_NO_WRITTEN = np.zeros(4, bool)          # a buffer without written bits: the compiled passes' stand-in


class VmemOps:
    def global_load(self, buf: Buffer, offset, nbytes: int = 4, dtype=None) -> VGPRs:
        """global_load_*: ``nbytes`` per lane from byte ``offset`` of ``buf`` (dtype defaults to the buffer's)."""
        if not isinstance(buf, Buffer):
            raise self.error(TypeError, f"global_load needs a Buffer, got {type(buf).__name__}")
        dtype = dtype_name(dtype) if dtype is not None else buf.dtype
        size = itemsize(dtype)
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)):
            raise self.error(TypeError, f"global_load from {buf.name!r}: nbytes must be an integer (1, 2, 4, 8, 12 "
                                        f"or 16), got {type(nbytes).__name__} {nbytes!r} (the type is dtype=)")
        if nbytes % size:
            raise self.error(ValueError, f"global_load of {nbytes} bytes as {dtype} from {buf.name!r}")
        addr = addresses(self, offset, nbytes, buf.nbytes, f"global_load from {buf.name!r}", min(nbytes, 4))
        if self.wg.accesses is not None:         # waves as members: no wave may read another's store
            self.wg.accesses.note(self, buf, addr, nbytes, store=False)
        a = read_addr(self, addr)
        prov = None
        if self.machine.provenance and not (UNTRACKED_LOADS and buf.untracked):     # else nothing to carry
            if buf.whole_elements(size):          # each element's first byte is enough
                a0 = a.astype(np.int32) if buf.nbytes < 2 ** 31 else a      # the index passes in int32
                starts = a0[None, :] + np.arange(0, nbytes, size, dtype=a0.dtype)[:, None]
                prov = self._load_folded(buf, starts, size)
                if prov is None:
                    got = buf.element_prov(starts, size,
                                           views=self.fold is not None,    # fold_prov makes arrays of its own
                                           runs=True)                      # each lane's elements in order
            else:
                ba = byte_addr(self, addr, nbytes)
                prov = self._load_stored_folded(buf, ba, size)
                if prov is None:
                    got = buf.load_prov(ba, size, self.machine)
            if prov is None:
                prov = self.outside_exec(got,
                                          None if self.fold is None else f"EXEC of a global_load from {buf.name!r}",
                                          whole=True)
                if self.fold is not None and prov is not None:
                    prov = self.fold.fold_prov(prov, f"global_load from {buf.name!r}")
        if buf.written is None:
            val = load_strided(buf.raw, a, nbytes, dtype, self.lanes) if STRIDED_LOADS and self.exec_full else None
            val, every = val if val is not None else load_values(buf.raw, a, nbytes, dtype), True
        else:
            val, every = load_written(buf.raw, buf.written, a, nbytes, dtype)
        v = self.new_value(val, dtype, prov)
        if not every:
            wr = buf.written[byte_addr(self, addr, nbytes)]
            if not self.exec_full:
                wr = wr | ~self.exec[None, :]
            if not wr.all():
                for l in self.first_lanes(~wr.all(axis=0)):
                    self.finding("uninitialized-read", f"global_load from {buf.name!r} reads never-written bytes",
                                 lane=l, address=int(addr[l]), what="global", name=buf.name)
                v.valid = wr if v.valid is None else (v.valid & wr)
        self.event(ops.Op("VMEM", ops.VMEM_LOAD[nbytes]), outs=[v], buffer=buf.name, address=addr)
        return v

    def _load_folded(self, buf: Buffer, starts, size: int) -> Prov | None:
        """A folded batch's load under full EXEC from a buffer of tags alone (``whole_elements``,
        no declared encoding), where the members' elements are member 0's moved by an offset each
        (Buffer.member_tags): the folded provenance ``fold_prov`` gives, the tags looked up and
        the shifts found on member 0's elements and the members' offsets (Fold.fold_member_tags),
        not on every element. None where that cannot tell (the caller looks up and folds every
        element)."""
        if not SEPARABLE_LOAD_TAGS or self.fold is None or not self.exec_full or buf.declared_encoding is not None \
                or starts.size < SEPARABLE_LOAD_MIN:
            return None
        elem = starts if buf.itemsize == 1 else div_const(starts, buf.itemsize)
        sep = buf.member_tags(elem, self.fold.lanes, buf.tag_fields, both=True,
                              runs=size == buf.itemsize)           # each lane's elements in order
        if sep is None:
            return None
        ids = self.fold.fold_member_tags(sep, elem.shape[0])
        if ids is None:
            return None
        if buf.encoding is not None:       # one code everywhere (not declared): every member's
            ids.update(enc.buffer_planes(buf.name, buf.encoding, np.broadcast_to(np.int32(0), (elem.shape[0],
                                                                                            self.fold.width)), False))
        return Prov(size, ids, {}, None)

    def _load_stored_folded(self, buf: Buffer, ba, size: int) -> Prov | None:
        """A folded batch's load under full EXEC of whole dwords from a buffer holding what stores
        left (an earlier launch's outputs: the reduce's partials): the folded provenance
        ``fold_prov`` gives, each footprint's sets made for the representatives alone where every
        member's table rows are theirs (Fold.fold_stored). None where that cannot tell (the
        caller gathers and folds)."""
        if not STORED_LOADS_FOLDED or self.fold is None or not self.exec_full:
            return None
        idx = buf.stored_words(ba, size)
        if idx is None:
            return None
        return self.fold.fold_stored(buf.prov, idx, lambda p: buf.import_prov(p, self.machine),
                                     f"global_load from {buf.name!r}")

    def global_load_each(self, buf: Buffer, offsets: VGPRs, nbytes: int = 4, dtype=None) -> list[VGPRs]:
        """``[w.global_load(buf, offsets[i], nbytes, dtype) for i in range(offsets.n)]``: one load per
        element of the address value ``offsets``, in order, with the same values, registers, faults,
        findings and events. Where nothing but the bytes can differ (no provenance or trace, full
        EXEC, one wave reading, every byte of ``buf`` written, a 4-byte type in whole dwords) and
        every load is in bounds and aligned, the checks are made once for all and the words
        gathered in one take; anywhere else load by load (which names the fault)."""
        dt = dtype_name(dtype) if dtype is not None else getattr(buf, "dtype", None)
        if not (LOADS_TOGETHER and isinstance(buf, Buffer) and isinstance(offsets, VGPRs) and self._each_fits(
                buf, offsets, nbytes, dt)):
            return [self.global_load(buf, offsets[i], nbytes, dtype) for i in range(offsets.n)]
        addr = offsets.val.astype(np.int64)                     # [loads, width]
        idx = (addr >> 2)[:, None, :] + np.arange(nbytes // 4)[None, :, None] if nbytes > 4 else (addr >> 2)[:, None]
        got = np.take(buf.raw.view(np.uint32), idx).view(np_dtype(dt))
        op = _VMEM_OPS[("load", nbytes)]
        out = []
        for i in range(len(addr)):
            v = VGPRs(self, got[i], dt)
            self.event(op, outs=[v], buffer=buf.name, address=addr[i])
            out.append(v)
        return out

    def _each_fits(self, buf: Buffer, offsets: VGPRs, nbytes, dt) -> bool:
        """Whether ``global_load_each`` may load all at once (see there): every address in bounds
        and dword aligned, slicing ``offsets`` allocates no register (whole registers of it)."""
        if (self.machine.provenance or self.machine.trace.enabled or not self.exec_full or buf.written is not None
                or self.wg.accesses is not None or isinstance(nbytes, bool) or nbytes not in (4, 8, 12, 16)
                or dt not in _WORD_TYPES or buf.raw.size % 4 or offsets.valid is not None or offsets.regs is None
                or offsets.dtype not in ("i32", "u32", "i64", "u64")):
            return False
        raw = offsets.val
        if raw.ndim != 2 or raw.shape[1] != self.width or not raw.size:
            return False
        u = raw.view(np.uint32 if raw.dtype.itemsize == 4 else np.uint64)
        hi = buf.nbytes - nbytes        # as unsigned, a negative address is out of bounds too
        return hi >= 0 and int(np.maximum.reduce(u, axis=None)) <= hi and not int(np.bitwise_or.reduce(u, axis=None)) & 3

    def scalar_load(self, buf: Buffer, offset, dtype=None, *, identities_marked: bool = False):
        """s_load_dword: one uniform value (an SGPR), returned as a Python number; in a batched
        launch the offset may differ per workgroup and the result is a per-lane value. A Python
        number cannot carry the loaded bytes' tags, so loading tagged bytes this way is refused
        (``w.global_load`` of the same address keeps them), unless the caller marks what it
        loaded itself (``identities_marked``: the asm front end's SGPRs of unknown origin)."""
        dtype = dtype_name(dtype) if dtype is not None else buf.dtype
        if isinstance(offset, VGPRs):
            return self.global_load(buf, offset, itemsize(dtype), dtype)
        size = itemsize(dtype)
        offset = integer(self, offset, f"s_load from {buf.name!r}: the address")
        if offset < 0 or offset + size > buf.nbytes:
            raise self.error(MemoryFault, f"s_load from {buf.name!r}: bytes [{offset}, {offset + size}) outside "
                             f"[0, {buf.nbytes})", address=offset)
        if offset % min(size, 4):
            raise self.error(MemoryFault, f"s_load from {buf.name!r}: address {offset} is not aligned", address=offset)
        if self.wg.accesses is not None:
            self.wg.accesses.note_span(self, buf, offset, offset + size, store=False)
        if buf.written is not None and not buf.written[offset:offset + size].all():
            self.finding("uninitialized-read", f"s_load from {buf.name!r} reads never-written bytes",
                         address=offset, what="global", name=buf.name)
        if not identities_marked and self.machine.provenance and (buf.prov is not None or buf.tag_fields):
            p = buf.load_prov(np.arange(offset, offset + size)[:, None], 1, self.machine)
            held = [] if p is None else sorted(f for f, a in p.ids.items() if f not in RESERVED and (a >= 0).any())
            if held:
                raise self.error(ArgumentError, f"s_load from {buf.name!r} at byte {offset}: the bytes carry tags "
                                 f"({', '.join(held)}) that a scalar value cannot hold; load it with w.global_load "
                                 f"(a uniform VGPR keeps them), or leave the buffer untagged", address=offset)
        self.event(ops.Op("SMEM", ops.SMEM_LOAD.get(size, "s_load_dword")), buffer=buf.name, address=offset)
        return buf.raw[offset:offset + size].view(np_dtype(dtype))[0].item()

    def _global_words_fit(self, buf: Buffer, addr: np.ndarray, nbytes: int):
        """What both word paths ask first: no provenance or trace, whole dwords, every active lane
        in bounds and dword aligned; the active lanes' addresses, or None."""
        if self.machine.provenance or self.machine.trace.enabled or nbytes % 4 or buf.raw.size % 4:
            return None
        a = addr if self.exec_full else addr[self.exec]
        if not a.size or int(a.min()) < 0 or int(a.max()) + nbytes > buf.nbytes or (a & 3).any():
            return None
        return a

    def _global_compiled(self, buf: Buffer, nbytes: int) -> bool:
        """Whether the word paths take wavemembers' compiled passes (member_words.py): the waves
        of one workgroup side by side in their attempt (whose stores are logged by the watch's
        ``undo``: its ``before_store`` logs nothing), no provenance or trace, whole dwords."""
        acc = self.wg.accesses
        return COMPILED_WORDS and acc is not None and acc.undo is not None and self.members > 1 and \
            not self.machine.provenance and not self.machine.trace.enabled and not nbytes % 4 and \
            not buf.raw.size % 4

    def _global_compiled_alone(self, buf: Buffer, nbytes: int) -> bool:
        """Whether the word paths take member_words' passes without a watch: members that are
        not waves side by side (one wave, or a batch of workgroups), no provenance or trace, whole
        dwords (a store also asks that no attempt logs what it overwrites), and numba running or worth
        starting at this width (jit.worth_starting: a wide batch keeps numpy)."""
        return COMPILED_WORDS and self.wg.accesses is None and not self.machine.provenance and \
            not self.machine.trace.enabled and not nbytes % 4 and not buf.raw.size % 4 and jit.worth_starting(self.width)

    def global_load_words(self, buf: Buffer, addr: np.ndarray, nbytes: int):
        """What ``global_load`` of ``nbytes`` (whole dwords) per lane at byte ``addr`` (int64
        [width]) of ``buf`` gives where every active lane is in bounds, dword aligned and reads
        written bytes, without provenance or a trace: uint32 words [nbytes/4, width] (inactive
        lanes: any words), with its side-by-side note and its event. None, having done nothing,
        anywhere else (``global_load`` then names the fault or the never-written bytes)."""
        if self._global_compiled(buf, nbytes):
            words = self.wg.accesses.load_words(self, buf, addr, nbytes)
            if words is not None:
                self.event(_VMEM_OPS[("load", nbytes)])
            return words
        if self._global_compiled_alone(buf, nbytes):
            words = np.empty((nbytes // 4, addr.shape[0]), np.uint32)
            written = buf.written if buf.written is not None else _NO_WRITTEN
            if member_words.load_alone(buf.raw.view(np.uint32), written.view(np.uint32), buf.written is not None,
                                       addr, self.exec, nbytes, buf.nbytes, words) != member_words.DONE:
                return None
            self.event(_VMEM_OPS[("load", nbytes)])
            return words
        if self._global_words_fit(buf, addr, nbytes) is None:
            return None
        ex, full = self.exec, self.exec_full
        at = (addr if full else np.where(ex, addr, 0)) >> 2
        at = at[None, :] + np.arange(nbytes // 4)[:, None] if nbytes > 4 else at[None, :]
        if buf.written is not None:
            wr = buf.written.view(np.uint32)[at]
            if not ((wr == _ALL_WRITTEN) if full else (wr == _ALL_WRITTEN)[:, ex]).all():
                return None
        if self.wg.accesses is not None:
            self.wg.accesses.note(self, buf, addr, nbytes, store=False)
        words = buf.raw.view(np.uint32)[at]
        self.event(_VMEM_OPS[("load", nbytes)])
        return words

    def global_store_words(self, buf: Buffer, addr: np.ndarray, words: np.ndarray, nbytes: int) -> bool:
        """``global_store`` of the first ``nbytes`` (whole dwords) of uint32 ``words`` [n, width],
        written in every active lane, at byte ``addr`` of ``buf`` where every active lane is in
        bounds and dword aligned, without provenance or a trace: the bytes, their written bits,
        the side-by-side note and the event, and True. False, having done nothing, anywhere else."""
        if self._global_compiled(buf, nbytes):
            if not self.wg.accesses.store_words(self, buf, addr, words, nbytes):
                return False
            self.event(_VMEM_OPS[("store", nbytes)])
            return True
        if self._global_compiled_alone(buf, nbytes) and self.machine.attempt is None:
            written = buf.written if buf.written is not None else _NO_WRITTEN
            if member_words.store_alone(buf.raw.view(np.uint32), written.view(np.uint32), buf.written is not None, addr,
                                        self.exec, nbytes, buf.nbytes,
                                        np.ascontiguousarray(words, np.uint32)) != member_words.DONE:
                return False
            self.event(_VMEM_OPS[("store", nbytes)])
            return True
        a = self._global_words_fit(buf, addr, nbytes)
        if a is None:
            return False
        ex, full = self.exec, self.exec_full
        if self.wg.accesses is not None:
            self.wg.accesses.note(self, buf, addr, nbytes, store=True)
        if self.machine.attempt is not None:                         # a folded attempt may be taken back
            self.machine.attempt.before_store(buf, a[None, :] + np.arange(nbytes)[:, None])
        store_values(buf.raw, buf.written, addr, nbytes, words, None if full else ex)
        self.event(_VMEM_OPS[("store", nbytes)])
        return True

    def scalar_load_dwords(self, buf: Buffer, offset: int, n: int) -> list[int]:
        """``n`` dwords from byte ``offset`` of ``buf`` as ``n`` calls of ``scalar_load`` (``u32``,
        ``identities_marked``) give them, one event each (s_load_dwordx*): the checks made once
        for the whole range where it is in bounds, aligned and written and no trace records each
        dword's address; otherwise dword by dword (the fault, finding or event of each in turn)."""
        size = 4 * n
        if (self.machine.trace.enabled or offset < 0 or offset + size > buf.nbytes or offset % 4
                or (buf.written is not None and not buf.written[offset:offset + size].all())):
            return [self.scalar_load(buf, offset + 4 * k, "u32", identities_marked=True) for k in range(n)]
        if self.wg.accesses is not None:
            self.wg.accesses.note_span(self, buf, offset, offset + size, store=False)
        op = ops.Op("SMEM", ops.SMEM_LOAD[4])
        for _ in range(n):
            self.event(op)
        return buf.raw[offset:offset + size].view(np.uint32).tolist()

    def _check_store(self, buf: Buffer, sel, stored, value, act) -> set:
        """Store provenance: where the value and the destination element both name a field (query
        head, dim, ...), they must agree — else the value landed in another element's place. The
        fields whose identities are, byte for byte, the destination's tags (MemProv.scatter's agree)."""
        fields = sorted(stored.ids.keys() & buf.tag_fields)
        agree = set()
        if not fields:
            return agree
        if COMPACT_STORE_CHECK and _element_rows(stored, buf, sel):
            # a row per element (a scale's f32): its bytes' identities and tags are the row's, so
            # one row an element is compared, not the bytes; a field that differs: the bytes' check
            g = stored.g
            expected = buf.tags_at(sel[::g] // g, fields)
            if all(np.array_equal(stored.ids[f], expected[f]) for f in fields):
                return set(fields)
        p = stored.per_byte()
        elem = sel if buf.itemsize == 1 else sel // buf.itemsize     # [nbytes, active cols]
        expected = buf.tags_at(elem, fields)                        # one coordinate pass for them all
        cols = None
        for f in fields:
            got, want = p.ids[f], expected[f]
            if np.array_equal(got, want):          # the common case: every byte where it belongs
                agree.add(f)
                continue
            bad = (got >= 0) & (want >= 0) & (got != want)
            if not bad.any():
                continue
            if cols is None:
                cols = np.nonzero(act)[0] if not self.exec_full else np.arange(self.width)
            per_col = bad.any(axis=0)
            for m in sorted({int(c) // self.lanes for c in cols[per_col]}):
                in_m = per_col & (cols // self.lanes == m)
                j = int(np.argmax(in_m))
                b = int(np.argmax(bad[:, j]))
                e = int(elem[b, j])
                index = [int(i) for i in np.unravel_index(e, buf.array.shape)]
                order = list(buf.tags) + sorted(g for g in p.ids if g not in buf.tags and not g.startswith("@"))
                holds = {g: int(p.ids[g][b, j]) for g in order if g in p.ids and p.ids[g][b, j] >= 0}
                tags = {g: int(t[e]) for g, t in buf.tags.items() if t[e] >= 0}
                lane = int(cols[j])
                self.finding("store-mismatch", f"global_store to {buf.name}{index} writes a value of {f} "
                             f"{int(got[b, j])} where the element is {f} {int(want[b, j])}: lane "
                             f"{lane % self.lanes} {value.reg_name()} holds {_ident(holds)}, the element is "
                             f"{_ident(tags)} ({int(bad[:, in_m].sum())} bytes of this store disagree)", lane=lane,
                             address=int(sel[b, j]), buffer=buf.name, field=f, element=index,
                             expected=int(want[b, j]), holds=int(got[b, j]), register=value.reg_name(),
                             elements=int(bad[:, in_m].sum()), value=holds, tags=tags)
        return agree

    def _store_folded(self, buf: Buffer, sel, value: VGPRs, nbytes: int, what: str):
        """A folded batch's store under full EXEC whose value's tag fields all land where the
        destination's tags name the same identities: (the stored provenance without those fields,
        the fields, which agree, and their makers: MemProv.scatter's ``tags``), those fields
        checked on the folded values against the tags (Fold.agrees) rather than placed for every
        member and compared (_check_store), and stored as the tags they equal (with
        DEFERRED_STORE_TAGS off, made here and held in the provenance). None for anything else (a
        field that disagrees: the caller's path, which says where)."""
        p = value.prov
        if self.fold is None or not self.exec_full or p is None or not buf.tagged:
            return None
        folded = stored_prov(p, nbytes, self.exec, True)             # full EXEC: rows cut, columns kept
        fields = sorted(folded.ids.keys() & buf.tag_fields)
        if not fields:
            return None
        g = folded.g
        each = folded.per_byte()
        elem = sel if buf.itemsize == 1 else sel // buf.itemsize     # [nbytes, columns], as _check_store
        want = self._member_tags(buf, elem, each, fields, g)
        if want is None:
            got = buf.tags_at(elem, fields)
            for f in fields:
                if not self.fold.agrees(f, each.ids[f], got[f]):
                    return None
            want = {f: functools.partial(_given, t if g == 1 else t[::g]) for f, t in got.items()}
        rest = Prov(g, {f: x for f, x in folded.ids.items() if f not in want}, folded.fp, folded.flags)
        out = self.unfold_prov(rest, what)
        # the tags, equal to the values placed (a row per g bytes): made where a plane is made
        # (MemProv.scatter's tags), never for a tag plane still lazy (a cache's token, kv head, dim)
        tags = {f: functools.partial(_as_dtype, want[f], folded.ids[f].dtype) for f in fields}
        if not DEFERRED_STORE_TAGS:
            return Prov(g, {**out.ids, **{f: make() for f, make in tags.items()}}, out.fp, out.flags), set(fields), None
        return Prov(g, dict(out.ids), out.fp, out.flags), set(fields), tags

    def _member_tags(self, buf: Buffer, elem, each: Prov, fields, g: int) -> dict | None:
        """_store_folded's tags (field -> a function making them), a row per ``g`` bytes, where the
        members' elements are member 0's moved by an offset each (Buffer.member_tags) and the folded
        values ``each`` agree with them (Fold.agrees_by): looked up and compared on member 0's
        elements and the members' offsets, not on every element. None where that cannot tell (the
        caller looks up every element)."""
        if not SEPARABLE_STORE_TAGS:
            return None
        sep = buf.member_tags(elem, self.fold.lanes, fields)
        if sep is None:
            return None
        R, M = elem.shape[0], self.fold.members
        for f in fields:
            if each.ids[f].shape[0] != R or not self.fold.agrees_by(f, each.ids[f], *sep[f]):
                return None
        rows = len(range(0, R, g))
        return {f: (functools.partial(_member_rows, x, self.fold.lanes, rows) if kind == "member"
                    else functools.partial(_lane_rows, x, g, M)) for f, (kind, x) in sep.items() if f in fields}

    def global_store(self, buf: Buffer, offset, value: VGPRs, nbytes: int | None = None):
        """global_store_*: the value's bytes (or the first ``nbytes``) to byte ``offset`` of ``buf``."""
        if not isinstance(value, VGPRs):
            raise self.error(TypeError, f"global_store to {buf.name!r} needs a per-lane value, got "
                             f"{type(value).__name__}")
        nbytes = nbytes or value.nbytes
        self.check_read(value)
        addr = addresses(self, offset, nbytes, buf.nbytes, f"global_store to {buf.name!r}", min(nbytes, 4))
        if self.wg.accesses is not None:
            self.wg.accesses.note(self, buf, addr, nbytes, store=True)
        act = self.exec
        with_prov = self.machine.provenance and (value.prov is not None or buf.prov is not None)
        sel = words = None               # the bytes the active lanes write [nbytes, active columns]
        if self.machine.attempt is not None or with_prov:
            at = addr if self.exec_full else addr[act]
            if NARROW_STORE_INDEX and buf.nbytes < 2 ** 31:      # int32: half the bytes every pass over it moves
                at = at.astype(np.int32)
            sel = at[None, :] + np.arange(nbytes, dtype=at.dtype)[:, None]
            if BYTE_WORDS:               # aligned runs of 8 bytes (an int8 cache row): a word each
                words = byteruns.words_of(sel, buf.nbytes, self.lanes)
        if self.machine.attempt is not None:                         # a folded attempt may be taken back
            self.machine.attempt.before_store(buf, sel, words)
        store_values(buf.raw, buf.written, addr, nbytes, value.val, None if self.exec_full else act, words)
        if buf.expects and self.machine.provenance and all(b is not buf for b, _ in self.machine.outputs):
            self.machine.outputs.append((buf, self.source()))          # checked at the launch's end
        if with_prov:
            what = f"global_store to {buf.name!r}"
            placed = self._store_folded(buf, sel, value, nbytes, what) if FOLDED_STORE_CHECK else None
            tags = None
            if placed is not None:
                stored, agree, tags = placed
            else:
                if self.exec_full or self.fold is None:
                    stored = stored_prov(self.unfold_prov(value.prov, what), nbytes, act, self.exec_full)
                else:              # a partial EXEC: only the writing columns unfolded (a scale's lane 0)
                    stored = stored_prov(self.unfold_prov(value.prov, what, np.flatnonzero(act)), nbytes, act,
                                         True)
                agree = self._check_store(buf, sel, stored, value, act) if stored is not None and buf.tagged else ()
            buf.store_prov(sel, stored, self.machine, agree, tags, words)
        self.event(ops.Op("VMEM", ops.VMEM_STORE[nbytes]), ins=[value], buffer=buf.name, address=addr)


_ALL_WRITTEN = np.uint32(0x01010101)      # four written bytes of a written-bit array, as one word
# a folded store's tag fields checked on the folded values (VmemOps._store_folded); tests compare
# both ways
FOLDED_STORE_CHECK = True
# a store whose provenance has a row per element checks its tags on those rows, not per byte
# (VmemOps._check_store); tests compare both ways
COMPACT_STORE_CHECK = True
# that check's tags looked up on member 0's elements and the members' offsets where the members'
# elements are moved copies of member 0's (VmemOps._member_tags); tests compare both ways
SEPARABLE_STORE_TAGS = True
# a folded store's tags (equal to the values it places) made only where the destination's plane is
# made (MemProv.scatter's tags), else at once; tests compare both ways
DEFERRED_STORE_TAGS = True
# a store's byte index (``sel``) in int32 where the buffer allows (else the addresses' int64); tests
# compare both ways
NARROW_STORE_INDEX = True
# a store's bytes in aligned runs of 8 written, logged and marked a word at a time (byteruns); tests
# compare both ways
BYTE_WORDS = True
# a folded load's tags looked up and folded on member 0's elements and the members' offsets where the
# members' elements are moved copies of member 0's (VmemOps._load_folded); tests compare both ways
SEPARABLE_LOAD_TAGS = True
# a folded load of what stores left: its footprints compared by table row and made for the
# representatives alone (Fold.fold_stored); False: every member's gathered, then folded (what it is
# held to)
STORED_LOADS_FOLDED = True
# below this many elements a load's tags looked up and folded one by one cost less than member_tags'
# small numpy calls (the decode's k/v_scale, 32,768: ~0.23 against ~0.4 ms)
SEPARABLE_LOAD_MIN = 65536

# a load from a buffer with no tags, encoding or stored provenance (a slot mapping) makes no byte
# addresses for a provenance it cannot have (Buffer.untracked); tests compare both ways
UNTRACKED_LOADS = True
# a dword load whose members read rows of consecutive dwords a stride apart copied from a strided view
# (dtypes.load_strided); tests compare both ways
STRIDED_LOADS = True

# global_load_each checks and gathers its loads at once where it can (False: load by load, the A/B)
LOADS_TOGETHER = True
_WORD_TYPES = frozenset({"f32", "i32", "u32"})      # global_load_each's types: a dword is one element

# the events of word-wise accesses (global_load_words, global_store_words): what global_load and
# global_store record for the same sizes
_VMEM_OPS = {**{("load", n): ops.Op("VMEM", m) for n, m in ops.VMEM_LOAD.items()},
             **{("store", n): ops.Op("VMEM", m) for n, m in ops.VMEM_STORE.items()}}


def _element_rows(stored, buf: Buffer, sel: np.ndarray) -> bool:
    """Whether ``stored``'s rows are ``buf``'s elements: a row of g > 1 bytes per element of g bytes,
    every access aligned to its element (``sel`` [nbytes, columns], row 0 the first bytes), so the
    bytes of row r are element ``sel[r * g] // g``'s."""
    g = stored.g
    return g > 1 and g == buf.itemsize and sel.shape[0] == g * next(iter(stored.ids.values())).shape[0] \
        and not (sel[0] % g).any()


def _member_rows(x: np.ndarray, lanes: int, rows: int) -> np.ndarray:
    """``[rows, members*lanes]``: member m's tag ``x[m]`` in each of its lanes, every row."""
    t = np.repeat(x, lanes)[None, :]
    return t if rows == 1 else np.repeat(t, rows, axis=0)


def _lane_rows(x: np.ndarray, g: int, members: int) -> np.ndarray:
    """Member 0's tags ``x`` ``[rows, lanes]`` (a row per ``g``) in every member."""
    return np.tile(x[::g], (1, members))


def _given(t: np.ndarray) -> np.ndarray:
    """``t``: the maker of tags already looked up."""
    return t


def _as_dtype(make, dtype) -> np.ndarray:
    """``make()`` as ``dtype`` (kept where it is that already)."""
    t = make()
    return t if t.dtype == dtype else t.astype(dtype)


def _ident(fields: dict) -> str:
    """``row 3, dim 17``: an identity as a finding names it."""
    return ", ".join(f"{k} {v}" for k, v in fields.items()) or "no identity"
