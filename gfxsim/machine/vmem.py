"""VMEM and SMEM: per-lane loads and stores of 1/2/4/8/12/16 bytes to global buffers, and scalar loads.

A load's bytes carry the buffer's tags (or what an earlier store with provenance left there); a
store leaves the value's per-byte provenance in the buffer. Out-of-bounds or misaligned accesses
raise MemoryFault naming lane and address.
"""
from __future__ import annotations

import numpy as np

from . import ops
from .dtypes import dtype_name, itemsize, load_values, load_written, np_dtype, store_values
from .errors import MemoryFault
from .ds import _stored
from .memory import Buffer
from .vgpr import VGPRs


class VmemOps:
    def _addresses(self, offset, nbytes, limit, what, align, one_member=False):
        """The per-column byte addresses of an access (int64 ``[width]``), checked in the active
        lanes: in bounds of ``limit`` and ``align``-aligned. ``one_member``: the first batched
        member's lanes alone (``[lanes]``), for an access ``_member_uniform`` found the same in
        every member (checked once: the other members' are the same)."""
        if nbytes not in ops.VMEM_LOAD:
            raise self.error(ValueError, f"{what}: {nbytes}-byte accesses do not exist (use 1, 2, 4, 8, 12 or 16)")
        n = self.lanes if one_member else self.width
        if isinstance(offset, VGPRs):
            self._check_read(offset)
            if offset.dtype not in ("i32", "u32", "i64", "u64") or offset.n != 1:
                raise self.error(TypeError, f"{what}: address must be one i32/u32/i64 per lane, got "
                                 f"{offset.n} x {offset.dtype}")
            raw = offset.val[0][:n]
            addr = raw.astype(np.int64)
            # the common case in one pass each: as unsigned, a negative address is out of bounds too
            u = raw.view(np.uint32 if raw.dtype.itemsize == 4 else np.uint64)
            hi = limit - nbytes
            if self._full and hi >= 0 and not (u > hi).any() and not (align > 1 and (u & (align - 1)).any()):
                return addr
        else:
            addr = np.full(n, int(offset), np.int64)
        act = self.exec[:n]
        bad = (addr < 0) | (addr + nbytes > limit)
        if not self._full:
            bad &= act
        if bad.any():
            l = int(np.argmax(bad))
            raise self.error(MemoryFault, f"{what}: lane {l % self.lanes} accesses bytes [{addr[l]}, "
                             f"{addr[l] + nbytes}) outside [0, {limit})", lane=l, address=int(addr[l]))
        mis = (addr % align) != 0
        if not self._full:
            mis &= act
        if mis.any():
            l = int(np.argmax(mis))
            raise self.error(MemoryFault, f"{what}: lane {l % self.lanes} address {addr[l]} is not {align}-byte "
                             f"aligned for a {nbytes}-byte access", lane=l, address=int(addr[l]))
        return addr

    def _member_uniform(self, offset) -> bool:
        """Whether every batched member accesses the same offsets under the same EXEC."""
        if self.members == 1:
            return True
        a2 = self.exec.reshape(self.members, self.lanes)
        if not (self._full or (a2 == a2[0]).all()):
            return False
        if not isinstance(offset, VGPRs):
            return True
        r2 = offset.val[0].reshape(self.members, self.lanes)
        return bool((r2 == r2[0]).all())

    def _read_addr(self, addr):
        """A load's per-lane byte addresses: inactive lanes read byte 0 (their result is poison)."""
        return addr if self._full else np.where(self.exec, addr, 0)

    def _byte_addr(self, addr, nbytes):
        """[nbytes, width] byte addresses of a load (``_read_addr``)."""
        return self._read_addr(addr)[None, :] + np.arange(nbytes)[:, None]

    def global_load(self, buf: Buffer, offset, nbytes: int = 4, dtype=None) -> VGPRs:
        """global_load_*: ``nbytes`` per lane from byte ``offset`` of ``buf`` (dtype defaults to the buffer's)."""
        if not isinstance(buf, Buffer):
            raise self.error(TypeError, f"global_load needs a Buffer, got {type(buf).__name__}")
        dtype = dtype_name(dtype) if dtype is not None else buf.dtype
        size = itemsize(dtype)
        if nbytes % size:
            raise self.error(ValueError, f"global_load of {nbytes} bytes as {dtype} from {buf.name!r}")
        addr = self._addresses(offset, nbytes, buf.nbytes, f"global_load from {buf.name!r}", min(nbytes, 4))
        a = self._read_addr(addr)
        prov = None
        if self.machine.provenance:
            prov = self._outside_exec(buf.load_prov(self._byte_addr(addr, nbytes), size, self.machine),
                                      None if self.fold is None else f"EXEC of a global_load from {buf.name!r}",
                                      whole=True)
            if self.fold is not None and prov is not None:
                prov = self.fold.fold_prov(prov, f"global_load from {buf.name!r}")
        if buf.written is None:
            val, every = load_values(buf.raw, a, nbytes, dtype), True
        else:
            val, every = load_written(buf.raw, buf.written, a, nbytes, dtype)
        v = self._new(val, dtype, prov)
        if not every:
            wr = buf.written[self._byte_addr(addr, nbytes)]
            if not self._full:
                wr = wr | ~self.exec[None, :]
            if not wr.all():
                for l in self._first_lanes(~wr.all(axis=0)):
                    self.finding("uninitialized-read", f"global_load from {buf.name!r} reads never-written bytes",
                                 lane=l, address=int(addr[l]), what="global", name=buf.name)
                v.valid = wr if v.valid is None else (v.valid & wr)
        self._event(ops.Op("VMEM", ops.VMEM_LOAD[nbytes]), outs=[v], buffer=buf.name, address=addr)
        return v

    def scalar_load(self, buf: Buffer, offset, dtype=None):
        """s_load_dword: one uniform value (an SGPR), returned as a Python number; in a batched
        launch the offset may differ per workgroup and the result is a per-lane value."""
        dtype = dtype_name(dtype) if dtype is not None else buf.dtype
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
                         address=offset, what="global", name=buf.name)
        self._event(ops.Op("SMEM", ops.SMEM_LOAD.get(size, "s_load_dword")), buffer=buf.name, address=offset)
        return buf.raw[offset:offset + size].view(np_dtype(dtype))[0].item()

    def _check_store(self, buf: Buffer, sel, stored, value, act):
        """Store provenance: where the value and the destination element both name a field (query
        head, dim, ...), they must agree — else the value landed in another element's place."""
        p = stored.per_byte()
        elem = sel // buf.itemsize                                   # [nbytes, active cols]
        cols = np.nonzero(act)[0] if not self._full else np.arange(self.width)
        fields = sorted(p.ids.keys() & buf.tag_fields)
        expected = buf.tags_at(elem, fields)                        # one coordinate pass for them all
        for f in fields:
            got, want = p.ids[f], expected[f]
            bad = (got >= 0) & (want >= 0) & (got != want)
            if not bad.any():
                continue
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

    def global_store(self, buf: Buffer, offset, value: VGPRs, nbytes: int | None = None):
        """global_store_*: the value's bytes (or the first ``nbytes``) to byte ``offset`` of ``buf``."""
        if not isinstance(value, VGPRs):
            raise self.error(TypeError, f"global_store to {buf.name!r} needs a per-lane value, got "
                             f"{type(value).__name__}")
        nbytes = nbytes or value.nbytes
        self._check_read(value)
        addr = self._addresses(offset, nbytes, buf.nbytes, f"global_store to {buf.name!r}", min(nbytes, 4))
        act = self.exec
        if self.machine.attempt is not None:
            self.machine.attempt.before_store(buf)                   # a folded attempt may be taken back
        store_values(buf.raw, buf.written, addr, nbytes, value.val, None if self._full else act)
        if buf.expects and self.machine.provenance and all(b is not buf for b, _ in self.machine.outputs):
            self.machine.outputs.append((buf, self.source()))          # checked at the launch's end
        if self.machine.provenance and (value.prov is not None or buf.prov is not None):
            ba = addr[None, :] + np.arange(nbytes)[:, None]
            sel = ba if self._full else np.take(ba, np.flatnonzero(act), axis=1)
            stored = _stored(self._unfold(value.prov, f"global_store to {buf.name!r}"), nbytes, act, self._full)
            if stored is not None and buf.tagged:
                self._check_store(buf, sel, stored, value, act)
            buf.store_prov(sel, stored, self.machine)
        self._event(ops.Op("VMEM", ops.VMEM_STORE[nbytes]), ins=[value], buffer=buf.name, address=addr)


def _ident(fields: dict) -> str:
    """``row 3, dim 17``: an identity as a finding names it."""
    return ", ".join(f"{k} {v}" for k, v in fields.items()) or "no identity"
