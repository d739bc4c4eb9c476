"""The wait counters of a gfx9 wave: vmcnt, lgkmcnt and expcnt, in issue order.

The simulator completes every memory access when it is issued; the hardware does not. A load's
destination holds its data only once an ``s_waitcnt`` has waited the counter down far enough, so
this model keeps, per wave (per member of a batch), the accesses still outstanding and, per
register, the access that will write it. An instruction that reads (or overwrites) a register
before the wait that covers its producer reads poison in those lanes and reports
``missing-wait``, naming the load, the read and the ``s_waitcnt`` that would have covered it.

What covers what (CDNA ISA, "Data dependency resolution"; gfx90a, gfx940-942):

- vmcnt counts vector memory accesses, loads and stores alike (gfx9 has no separate store
  counter), and they complete in issue order: ``vmcnt(N)`` covers an access with at least N
  younger ones issued after it.
- lgkmcnt counts LDS (``ds_*``) accesses, which complete in order among themselves, and scalar
  memory (``s_load``, ``s_buffer_load``, ``s_store``, ``s_memtime``, ``s_dcache_*``), which
  completes out of order: an LDS access is covered by ``lgkmcnt(N)`` with N younger LDS
  accesses, a scalar one only by ``lgkmcnt(0)``.
- FLAT counts in both. One whose lanes all address global or private memory completes in order
  with the vector memory accesses (``vmcnt(N)`` as theirs, or ``lgkmcnt(0)``); one that reaches the
  LDS may return out of order: ``vmcnt(0)`` or ``lgkmcnt(0)`` covers it.
- expcnt counts exports and GDS, which no compute kernel the front end runs issues; its waits
  are accepted.

A counter field at its maximum (vmcnt 63, lgkmcnt 15, expcnt 7: the packed immediate's value
when the field is left out) waits for nothing. Of memory an outstanding access has yet to write,
the LDS bytes of ``buffer_load_dword ... lds`` are followed: a ``ds_read``/``ds_write`` of them
before its vmcnt is a missing-wait too (reported; the bytes are not poisoned). Other memory (a
store over bytes a scalar load has not read) is not.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass

import numpy as np

from ..errors import GfxSimError
from ..machine.dtypes import POISON_WORD
from .operands import AsmSyntaxError
from .state import M0, N_SGPR

VMEM, LDS, SMEM, FLAT = range(4)
CLASS_NAMES = ("vector memory", "LDS", "scalar memory", "FLAT")
# which access classes each counter counts; the in-order ones complete in issue order among themselves
COUNTS = {"vmcnt": (VMEM, FLAT), "lgkmcnt": (LDS, SMEM, FLAT), "expcnt": ()}
IN_ORDER = (True, True, False, False)
MAX = {"vmcnt": 63, "lgkmcnt": 15, "expcnt": 7}          # gfx9's field widths: 6, 4 and 3 bits
COUNTER_OF = ("vmcnt", "lgkmcnt", "lgkmcnt", "vmcnt")     # the counter a covering wait names
POISON = np.uint32(POISON_WORD)
_FILES = {"v": 0, "a": 512, "s": 1024}                   # bit offsets of the register files in a plan's mask

_SMEM = ("s_load_", "s_buffer_load_", "s_store_", "s_buffer_store_", "s_dcache_", "s_memtime", "s_memrealtime",
         "s_atomic_", "s_buffer_atomic_", "s_scratch_")
# instructions that read a VGPR in other lanes than the ones they write (or in lanes out of EXEC)
_CROSS_LANE = ("ds_bpermute", "ds_permute", "ds_swizzle", "v_readlane", "v_readfirstlane", "v_mfma", "v_smfmac",
               "v_mmac")
# scalar instructions whose first operand is read, not written
_S_FIRST_READ = ("s_cmp", "s_bitcmp", "s_cbranch", "s_setpc", "s_set", "s_wait", "s_branch", "s_sendmsg")


def decode_packed(imm: int) -> dict:
    """gfx9's s_waitcnt immediate: vmcnt in bits 3:0 and 15:14, expcnt 6:4, lgkmcnt 11:8."""
    return {"vmcnt": (imm & 0xF) | (((imm >> 14) & 0x3) << 4), "expcnt": (imm >> 4) & 0x7,
            "lgkmcnt": (imm >> 8) & 0xF}


@dataclass(frozen=True)
class Plan:
    """What one instruction does to the counters, found once per program."""
    bits: int                   # its register operands, as a mask (file offset + register number)
    regs: tuple                 # (file, first, count, text, written, bits): the operands it reads or writes
    cls: int | None = None      # the access class it issues, if a memory instruction
    dst: tuple | None = None    # (file, first, count, text): the registers its data returns to
    wait: dict | None = None    # an s_waitcnt: counter -> the count it waits down to
    cross_lane: bool = False    # reads VGPR lanes other than (or outside) its EXEC lanes
    lds_write: bool = False     # writes LDS (a ds_ store or atomic): must land before the next s_barrier
    barrier: bool = False       # s_barrier: the waves past it read what the others wrote to LDS
    vaddr: int | None = None    # FLAT: the first VGPR of its 64-bit address
    lds_dma: int | None = None  # buffer_load_dword ... lds: its offset (the LDS bytes at M0 + offset + 4 * lane)
    lds_span: tuple | None = None   # ds_read*/ds_write*: (address VGPR, byte offsets, bytes, "read"|"write")


def access_class(mnemonic: str) -> int | None:
    if mnemonic.startswith("ds_"):
        return LDS
    if mnemonic.startswith(("global_", "buffer_", "scratch_")):
        return VMEM
    if mnemonic.startswith("flat_"):
        return FLAT
    if mnemonic.startswith(_SMEM):
        return SMEM
    return None


def _returns(d) -> tuple | None:
    """The register operand a memory instruction's data returns to, as (file, first, count, text)."""
    m, pos = d.mnemonic, d.ops.positional
    if not pos or pos[0].kind != "reg":
        return None
    o = pos[0]
    if m.startswith("ds_"):
        back = "read" in m or "_rtn_" in m or m.startswith(("ds_bpermute", "ds_permute", "ds_swizzle"))
    elif "_atomic_" in m:
        back = bool(d.ops.mods.get("glc") or d.ops.mods.get("sc0"))
        if back and m.startswith("buffer_") and "cmpswap" in m:     # vdata holds data and compare; returns the first
            return (o.file, o.first, o.count // 2, o.text)
    elif m.startswith(("s_load_", "s_buffer_load_", "s_memtime", "s_memrealtime")):
        back = True
    else:
        back = "_load_" in m and not d.ops.mods.get("lds")
    return (o.file, o.first, o.count, o.text) if back else None


_DS_BYTES = {"b8": 1, "u8": 1, "i8": 1, "b16": 2, "u16": 2, "i16": 2, "b32": 4, "b64": 8, "b96": 12, "b128": 16}
_DS = re.compile(r"^ds_(read|write)(2st64|2)?_([a-z]\d+)(?:_d16_hi)?$")


def _ds_span(d) -> tuple | None:
    """(address VGPR, byte offsets, bytes per offset, "read"|"write") of an LDS read or write."""
    mt = _DS.match(d.mnemonic)
    pos = d.ops.positional
    if not mt or mt.group(3) not in _DS_BYTES or len(pos) < 2:
        return None
    kind, two, n = mt.group(1), mt.group(2), _DS_BYTES[mt.group(3)]
    addr = pos[1] if kind == "read" else pos[0]
    if addr.kind != "reg" or addr.file != "v":
        return None
    mods = d.ops.mods
    if two:
        unit = n * (64 if two == "2st64" else 1)
        offs = (unit * int(mods.get("offset0", 0)), unit * int(mods.get("offset1", 0)))
    else:
        offs = (int(mods.get("offset", 0)),)
    return (addr.first, offs, n, kind)


def _wait_of(d) -> dict | None:
    m = d.mnemonic
    if m == "s_waitcnt":
        if d.ops.positional:
            o = d.ops.positional[0]
            if o.kind != "int" or len(d.ops.positional) != 1 or d.ops.mods:
                raise AsmSyntaxError(f"line {d.ins.line}: {d.ins.mnemonic} {d.ins.operands}: a wait is "
                                     "vmcnt(N)/expcnt(N)/lgkmcnt(N) fields or one immediate")
            return {k: v for k, v in decode_packed(int(o.value) & 0xFFFF).items() if v < MAX[k]}
        return {k: int(v) for k, v in d.ops.mods.items() if k in MAX and int(v) < MAX[k]}
    if m in ("s_waitcnt_vmcnt", "s_waitcnt_lgkmcnt", "s_waitcnt_expcnt"):
        pos = d.ops.positional       # SOPK form: null, count (an SGPR's value is not a constant)
        if len(pos) == 2 and pos[0].text == "null" and pos[1].kind == "int":
            k = m[len("s_waitcnt_"):]
            return {k: int(pos[1].value)} if int(pos[1].value) < MAX[k] else {}
    return None


def _first_written(m: str) -> bool:
    return m.startswith("v_") or (m.startswith("s_") and not m.startswith(_S_FIRST_READ))


def plan(d) -> Plan:
    m = d.mnemonic
    cls = access_class(m)
    dst = _returns(d) if cls is not None else None
    regs, bits = [], 0
    for i, o in enumerate(d.ops.positional):
        if o.kind != "reg" or o.file not in _FILES:
            continue
        if dst is not None and i == 0 and not ("_atomic_" in m and m.startswith("buffer_")):
            continue                 # the destination: checked as a write of this access (issue())
        written = i == 0 and cls is None and _first_written(m) and not any(
            s.kind == "reg" and s.file == o.file and s.first < o.first + o.count and o.first < s.first + s.count
            for s in d.ops.positional[1:])          # a destination also read (v_add v1, 1.0, v1) is a read
        b = ((1 << o.count) - 1) << (_FILES[o.file] + o.first)
        regs.append((o.file, o.first, o.count, o.text, written, b))
        bits |= b
    if dst is not None:
        bits |= ((1 << dst[2]) - 1) << (_FILES[dst[0]] + dst[1])
    vaddr = None
    if cls == FLAT and len(d.ops.positional) > (dst is not None):
        o = d.ops.positional[1 if dst is not None else 0]
        vaddr = o.first if o.kind == "reg" and o.file == "v" and o.count == 2 else None
    dma = int(d.ops.mods.get("offset", 0)) if cls == VMEM and d.ops.mods.get("lds") else None
    return Plan(bits, tuple(regs), cls, dst, _wait_of(d), cross_lane=m.startswith(_CROSS_LANE) or d.enc == "dpp",
                vaddr=vaddr, lds_dma=dma, lds_span=_ds_span(d) if cls == LDS else None,
                lds_write=cls == LDS and _writes_lds(m), barrier=m == "s_barrier")


def _writes_lds(m: str) -> bool:
    """A DS instruction that changes LDS (not a read, not a lane permute that only uses the LDS path)."""
    return m.startswith(("ds_write", "ds_add", "ds_sub", "ds_inc", "ds_dec", "ds_min", "ds_max", "ds_and", "ds_or",
                         "ds_xor", "ds_mskor", "ds_cmpst", "ds_cmpswap", "ds_wrxchg", "ds_append", "ds_consume"))


def plans(decoded) -> tuple:
    return tuple(plan(d) for d in decoded)


class Access:
    """One outstanding memory access of a wave (of each member that issued it)."""
    __slots__ = ("id", "pc", "event", "cls", "_rank", "rank_l", "members", "dst", "ins", "flat_rank", "lds")

    def __init__(self, id_, pc, event, cls, rank, members, dst, ins, flat_rank=None):
        """``rank``: its rank in its class per member, an array or a list of Python numbers."""
        self.id, self.pc, self.event, self.cls = id_, pc, event, cls
        self._rank, self.rank_l = (None, rank) if isinstance(rank, list) else (rank, rank.tolist())
        self.members, self.dst, self.ins = members, dst, ins
        self.flat_rank = flat_rank          # a FLAT access of global memory: also retired as a FLAT one
        self.lds = None                     # an LDS DMA: (first byte, end) per member

    @property
    def rank(self) -> np.ndarray:
        if self._rank is None:
            self._rank = np.array(self.rank_l, np.int64)
        return self._rank

    def where(self, kernel: str) -> str:
        """Its assembly line, as findings name one: kernel.s:line (mnemonic registers)."""
        what = self.dst[3] if self.dst is not None else "lds"
        return f"{kernel}.s:{self.ins.line} ({self.ins.mnemonic} {what})"


class LdsWrite:
    """An LDS write of a wave not yet known complete (of each member that issued it)."""
    __slots__ = ("pc", "event", "_rank", "rank0", "members", "exec", "ins")

    def __init__(self, pc, event, rank, members, exec_, ins):
        """``rank``: its LDS rank per member (an array), or one Python number for every member."""
        self.pc, self.event, self.members, self.ins = pc, event, members, ins
        self._rank, self.rank0 = (None, rank) if isinstance(rank, int) else (rank, int(rank[0]))
        self.exec = exec_                   # its EXEC (bool [width]; None: every lane), for a finding's lanes

    @property
    def rank(self) -> np.ndarray:
        if self._rank is None:
            self._rank = np.full(self.members.shape[0], self.rank0, np.int64)
        return self._rank

    def lanes(self, members: int, lanes: int) -> list:
        """The lanes it wrote in any member (the lanes a barrier's finding names)."""
        if self.exec is None:
            return list(range(lanes))
        return np.nonzero(self.exec.reshape(members, lanes).any(axis=0))[0].tolist()

    def where(self, kernel: str) -> str:
        return f"{kernel}.s:{self.ins.line} ({self.ins.mnemonic})"


class Counters:
    """The outstanding accesses of one WaveState and the registers they will write."""
    SCALAR = True         # a wave of one member counts on Python numbers (False: the per-member arrays, the A/B)

    def __init__(self, st, plans_: tuple):
        self.st = st
        self.plans = plans_
        M = st.members
        self.all = np.ones(M, bool)                   # every member (never written)
        self.none = np.zeros(M, bool)                 # no member: a retired access's (never written)
        self.issued = np.zeros((4, M), np.int64)      # accesses issued, per class and member
        self.done = np.zeros((4, M), np.int64)        # of which those known complete (a prefix in issue order)
        self.out: dict[int, Access] = {}
        self.next_id = 1
        self.bits = 0                                 # registers some outstanding access will write
        self.vpend: dict[str, np.ndarray] = {}        # file -> access id per register and column (0: none)
        self.spend = np.zeros((M, N_SGPR), np.int32)
        self.notes: list[str] = []                    # this instruction's missing waits, for an error it raises
        self.lds_writes: list[LdsWrite] = []            # LDS writes not yet known complete (s_barrier's check)
        self.flat_lds = True                          # the FLAT instruction being executed reaches the LDS
        self.dma: list[Access] = []                   # outstanding LDS DMAs (buffer_load_dword ... lds)
        # every access so far issued and every wait made by all members together (none sat one
        # out): each member's counts are the same, so they are decided on member 0's numbers
        self.together = True
        # while ``fast``, every member's counts are these Python numbers (issued, done per class)
        # and ``issued``/``done`` are brought up to date only where read (_sync)
        self.fast = self.SCALAR
        self.issued0, self.done0 = [0] * 4, [0] * 4

    def _sync(self):
        """``issued`` and ``done`` as the Python numbers have them (while ``fast``)."""
        if self.fast:
            self.issued[...] = np.array(self.issued0, np.int64)[:, None]
            self.done[...] = np.array(self.done0, np.int64)[:, None]

    def _slow(self):
        """Count on the per-member arrays from here on."""
        self._sync()
        self.fast = False

    def _fast(self):
        """Count on Python numbers from here on (every member's counts are member 0's)."""
        if not self.fast:
            self.issued0, self.done0 = self.issued[:, 0].tolist(), self.done[:, 0].tolist()
            self.fast = True

    # -- issue ---------------------------------------------------------------------------------
    def _members(self) -> np.ndarray:
        act = self.st.act
        return self.all if act is None else act.copy()

    def issue(self, pc: int, p: Plan, event: int):
        """Count the access instruction ``pc`` issued, and mark the registers its data returns to."""
        st = self.st
        if self.fast and st.act is None and p.cls != FLAT and p.lds_dma is None:
            self._issue_fast(pc, p, event)
            return
        self._slow()
        if st.act is not None:
            self.together = False
        mem = self._members()
        cls, flat_rank = p.cls, None
        if cls == FLAT and not self.flat_lds:          # global or private memory only: in order with them
            flat_rank = self.issued[FLAT].copy()
            self.issued[FLAT][mem] += 1
            cls = VMEM
        if p.lds_write:
            self.lds_writes.append(LdsWrite(pc, event, self.issued[LDS].copy(), mem,
                                            None if st.w.exec_full else st.exec.copy(), st.current.ins))
        if p.lds_dma is not None:
            a = Access(self.next_id, pc, event, cls, self.issued[cls].copy(), mem, None, st.current.ins)
            self.next_id += 1
            lo = st.sread(M0).astype(np.int64) + p.lds_dma
            a.lds = (lo, lo + 4 * st.lanes)
            self.dma.append(a)
        if p.dst is None:
            if st.act is None:
                self.issued[cls] += 1
            else:
                self.issued[cls][mem] += 1
            return
        rank = self.issued[cls].copy()
        if st.act is None:
            self.issued[cls] += 1
        else:
            self.issued[cls][mem] += 1
        f, first, n, text = p.dst
        a = Access(self.next_id, pc, event, cls, rank, mem, p.dst, st.current.ins, flat_rank)
        self.next_id += 1
        self._pend(a, f, first, n, mem)

    def _issue_fast(self, pc: int, p: Plan, event: int):
        """issue() of an access every member makes (neither FLAT nor an LDS DMA) on Python numbers."""
        st = self.st
        cls = p.cls
        rank = self.issued0[cls]
        self.issued0[cls] = rank + 1
        if p.lds_write:
            self.lds_writes.append(LdsWrite(pc, event, rank, self.all, None if st.w.exec_full else st.exec.copy(),
                                            st.current.ins))
        if p.dst is None:
            return
        f, first, n, text = p.dst
        a = Access(self.next_id, pc, event, cls, [rank] * st.members, self.all, p.dst, st.current.ins)
        self.next_id += 1
        self._pend(a, f, first, n, self.all)

    def _pend(self, a: Access, f: str, first: int, n: int, mem):
        """Access ``a`` is the one that will write registers first.. of file f (in the EXEC lanes)."""
        st = self.st
        if f == "s":
            self.spend[mem, first:first + n] = a.id
        else:
            if f not in self.vpend:
                self.vpend[f] = np.zeros((st.regfile(f).count, st.w.width), np.int32)
            if st.w.exec_full:
                self.vpend[f][first:first + n] = a.id
            else:
                np.copyto(self.vpend[f][first:first + n], np.int32(a.id), where=st.exec[None, :])
        self.out[a.id] = a
        self.bits |= ((1 << n) - 1) << (_FILES[f] + first)

    def overwritten(self, p: Plan):
        """A returning access over registers an earlier access still has to write: fine where both
        complete in order (the later lands last), a missing-wait otherwise."""
        f, first, n, text = p.dst
        ids = self._pending(f, first, n, self._cols(False))
        cls = VMEM if p.cls == FLAT and not self.flat_lds else p.cls
        for aid in np.unique(ids[ids > 0]).tolist():
            a = self.out[aid]
            if a.cls != cls or not IN_ORDER[a.cls]:
                self._report(a, ids == aid, f, first, text, "overwrite")

    # -- wait ------------------------------------------------------------------------------------
    def wait(self, counts: dict):
        """s_waitcnt: for each counter, the accesses it covers are complete in the executing members."""
        act = self.st.act
        if act is not None:
            self._slow()
            self.together = False
        # one member, or all that issued every access together: member 0's counts as numbers
        one = self.SCALAR and (self.st.members == 1 or self.together) and act is None
        if one:
            self._fast()
            issued0, done0 = self.issued0, self.done0
        for ctr, n in counts.items():
            for cls in COUNTS[ctr]:
                if one:
                    i, d = issued0[cls], done0[cls]
                    if IN_ORDER[cls]:
                        done0[cls] = max(d, i - n)
                    elif n == 0:
                        done0[cls] = i
                    continue
                done, issued = self.done[cls], self.issued[cls]
                if IN_ORDER[cls]:
                    np.maximum(done, issued - n if act is None else np.where(act, issued - n, done), out=done)
                elif n == 0:
                    np.copyto(done, issued, where=True if act is None else act)
        if self.out:
            self._retire()
        else:
            self.bits = 0
        if self.lds_writes and "lgkmcnt" in counts:
            if one:                                        # every member issued each, at member 0's rank
                d = self.done0[LDS]
                self.lds_writes = [a for a in self.lds_writes if a.rank0 >= d]
            else:
                self.lds_writes = [a for a in self.lds_writes if (a.members & (a.rank >= self.done[LDS])).any()]
        if self.dma:
            self._sync()
            for a in self.dma:
                a.members = a.members & ~(a.rank < self.done[a.cls])
            self.dma = [a for a in self.dma if a.members.any()]
        if act is None and not self.together and self.SCALAR and self.st.members > 1:
            self.together = self._rejoined()

    def _rejoined(self) -> bool:
        """Whether members that parted hold the same counts again, every outstanding access and LDS
        write theirs all at one rank (what issuing and waiting together leaves): then member 0's
        numbers decide for all, as if they had never parted."""
        iss, done = self.issued, self.done
        if self.dma:
            return False
        for cls in np.nonzero((iss != iss[:, :1]).any(axis=1) | (done != done[:, :1]).any(axis=1))[0].tolist():
            # counts that differ where nothing of the class is outstanding: only differences of
            # counts are ever read (a rank against done, younger accesses), so they restart at 0
            if (done[cls] != iss[cls]).any() or (cls == LDS and self.lds_writes) or any(
                    a.cls == cls or (cls == FLAT and a.flat_rank is not None) for a in self.out.values()):
                return False
            iss[cls] = done[cls] = 0
        for a in self.out.values():
            r = a.rank_l
            if r.count(r[0]) != len(r) or not a.members.all() or (
                    a.flat_rank is not None and not (a.flat_rank == a.flat_rank[0]).all()):
                return False
        return all(a.members.all() and (a.rank == a.rank[0]).all() for a in self.lds_writes)

    def _zero(self, a: Access, f: str, first: int, n: int, blk):
        """Clear access ``a``'s id from its registers' pending ids ``blk``: the whole block where no
        other outstanding access returns to any of them (only ``a``'s id or 0 can be there then)."""
        for b in self.out.values():
            if b is not a and b.dst[0] == f and b.dst[1] < first + n and first < b.dst[1] + b.dst[2]:
                blk[blk == a.id] = 0
                return
        blk[...] = 0

    def _retire(self):
        st = self.st
        if self.SCALAR and (st.members == 1 or self.together):    # the same decisions on Python numbers
            self._retire_one()
        else:
            self._retire_members()

    def _retire_members(self):
        st = self.st
        done = self.done.tolist()                         # the decisions on Python numbers (a few members)
        for a in list(self.out.values()):
            on, d = a.members.tolist(), done[a.cls]
            fr, dflat = (None, None) if a.flat_rank is None else (a.flat_rank.tolist(), done[FLAT])
            gone_l = [m and (r < dm or (fr is not None and fr[i] < dflat[i]))
                      for i, (m, r, dm) in enumerate(zip(on, a.rank_l, d))]
            if not any(gone_l):
                continue
            f, first, n, _ = a.dst
            if gone_l == on:                              # all its members: its id, wherever it still is
                self._zero(a, f, first, n, self.spend[:, first:first + n] if f == "s" else self.vpend[f][first:first + n])
                a.members = self.none
                del self.out[a.id]
                continue
            gone = np.array(gone_l)
            if f == "s":
                rows = self.spend[gone, first:first + n]
                rows[rows == a.id] = 0
                self.spend[gone, first:first + n] = rows
            else:
                blk = self.vpend[f][first:first + n]
                cols = np.repeat(gone, st.lanes)
                blk[:, cols] = np.where(blk[:, cols] == a.id, 0, blk[:, cols])
            a.members = a.members & ~gone
            if not a.members.any():
                del self.out[a.id]
        self._pending_bits()

    def _pending_bits(self):
        """``bits``: the registers the outstanding accesses will write."""
        bits = 0
        for a in self.out.values():
            f, first, n, _ = a.dst
            bits |= ((1 << n) - 1) << (_FILES[f] + first)
        self.bits = bits

    def _retire_one(self):
        """_retire for a wave of one member, or of members that issued every access together and
        waited together (each access is every member's, at member 0's rank): an access is
        outstanding in all of them or gone from ``out``."""
        done = self.done0 if self.fast else self.done[:, 0].tolist()
        for a in list(self.out.values()):
            if not a.members[0] or not (a.rank_l[0] < done[a.cls] or (a.flat_rank is not None and a.flat_rank[0] < done[FLAT])):
                continue
            f, first, n, _ = a.dst
            self._zero(a, f, first, n, self.spend[:, first:first + n] if f == "s" else self.vpend[f][first:first + n])
            a.members = self.none
            del self.out[a.id]
        self._pending_bits()

    # -- reads -----------------------------------------------------------------------------------
    def _cols(self, cross_lane: bool) -> np.ndarray:
        st = self.st
        if cross_lane:
            return np.repeat(self._members(), st.lanes)
        return st.exec

    def _pending(self, f, first, n, cols):
        """Access ids pending on registers first.. of file f: [n, width] (vector) or [n, members]."""
        if f == "s":
            return np.where(self._members()[None, :], self.spend[:, first:first + n].T, 0)
        pend = self.vpend.get(f)
        if pend is None:
            return np.zeros((n, self.st.w.width), np.int32)
        return np.where(cols[None, :], pend[first:first + n], 0)

    def barrier(self):
        """s_barrier with LDS writes still outstanding: a wave past the barrier may read LDS before
        they land (the hardware's s_barrier does not wait for them; a release fence's
        ``s_waitcnt lgkmcnt(0)`` does)."""
        self._sync()
        done = self.done[LDS]
        st = self.st
        for a in self.lds_writes:
            for m in np.nonzero(a.members & (a.rank >= done))[0].tolist():
                younger = int(self.issued[LDS][m] - a.rank[m] - 1)
                needed = f"s_waitcnt lgkmcnt({younger})"
                load = a.event + (m if st.members > 1 else 0)
                lanes = a.lanes(st.members, st.lanes)
                st.w.finding(
                    "missing-wait",
                    f"s_barrier while an LDS write is outstanding: {a.where(st.kernel.name)}; a wave past "
                    f"the barrier may read those bytes before they land; `{needed}` before the barrier covers it "
                    f"(lanes {_ranges(lanes)})",
                    lane=m * st.lanes + (lanes[0] if lanes else 0), register="LDS", access="barrier", load=load,
                    load_line=a.where(st.kernel.name), counter="lgkmcnt", needed=needed, lanes=lanes)

    @staticmethod
    def acts_before(p: Plan) -> str | None:
        """Where ``before`` has something to do for an instruction of plan ``p`` that is no wait
        and no barrier, as a Python expression over ``counters`` (its early exits, for a block's
        source: blocks._backend_lines); None: always (a FLAT access asks where its address points)."""
        if p.wait is not None or p.barrier or p.vaddr is not None:
            return None
        return f"counters.bits & {p.bits}" + (" or counters.dma" if p.lds_span is not None else "")

    def before(self, pc: int):
        """Before instruction ``pc`` runs: its wait, or its reads of registers still pending. Returns
        what was poisoned (to be undone by after()), or None."""
        p = self.plans[pc]
        if p.barrier and self.lds_writes:
            if self.st.w.wg.num_waves > 1:     # a lone wave's LDS accesses are in order: nothing to race
                self.barrier()
            self.lds_writes = []      # reported once: the next barrier's question is about later writes
            return None
        if p.wait is not None:
            if p.wait:
                self.wait(p.wait)
            return None
        if p.vaddr is not None:
            self.flat_lds = self._reaches_lds(p.vaddr)
        if self.dma and p.lds_span is not None:
            self._lds_bytes(p.lds_span)
        if not self.bits & p.bits:
            return None
        if p.dst is not None:
            self.overwritten(p)
        poisoned, self.notes = [], []
        for f, first, n, text, written, b in p.regs:
            if not self.bits & b:
                continue
            ids = self._pending(f, first, n, self._cols(p.cross_lane))
            if not ids.any():
                continue
            for aid in np.unique(ids[ids > 0]).tolist():
                self._report(self.out[aid], ids == aid, f, first, text, "overwrite" if written else "read")
            hit = ids > 0
            poisoned.append(self._poison(f, first, n, hit))
        return poisoned or None

    def _lds_bytes(self, span):
        """An LDS read or write of bytes an outstanding LDS DMA has yet to write."""
        st = self.st
        first, offs, n, kind = span
        base = st.vwords("v", first, 1)[0].astype(np.int64)
        ex = st.exec
        for a in self.dma:
            lo, hi = (np.repeat(x, st.lanes) for x in a.lds)
            hit = np.zeros(st.w.width, bool)
            for off in offs:
                addr = base + off
                hit |= (addr < hi) & (addr + n > lo)
            hit &= ex & np.repeat(a.members, st.lanes)
            for m in np.unique(np.nonzero(hit)[0] // st.lanes).tolist():
                lanes = np.nonzero(hit[m * st.lanes:(m + 1) * st.lanes])[0].tolist()
                region = f"LDS[{int(a.lds[0][m])}:{int(a.lds[1][m])}]"
                self._finding(a, m, lanes, m * st.lanes + lanes[0], region, region, "read" if kind == "read" else
                              "overwrite")

    def _reaches_lds(self, first: int) -> bool:
        """Whether an active lane's generic address (v[first:first+1], the offset aside: it cannot
        leave the 4 GiB aperture) is in the LDS aperture."""
        from .launch import APERTURE, SHARED_BASE
        w = self.st.vwords("v", first, 2)[:, self.st.exec]
        hi = w[1].astype(np.uint64) << np.uint64(32)
        return bool((((hi | w[0]) - np.uint64(SHARED_BASE)) < np.uint64(APERTURE)).any())

    def _poison(self, f, first, n, hit):
        st = self.st
        if f == "s":
            words = st.s[:, first:first + n]                 # [members, n]
            saved = words.copy()
            words[hit.T] = POISON
            return (f, first, n, hit.T, saved)
        words = st.regfile(f).words[first:first + n]
        saved = words.copy()
        words[hit] = POISON
        return (f, first, n, hit, saved)

    def after(self, pc: int, poisoned, event: int):
        """After instruction ``pc``: a poisoned register the instruction did not overwrite holds its
        load's data again (it lands later); an access it issued is counted."""
        st = self.st
        if poisoned:
            exc = sys.exc_info()[1]
            if isinstance(exc, GfxSimError) and self.notes:     # an error from what it read: say where that came from
                exc.message += f" (after a missing-wait: it read {'; '.join(self.notes)})"
                exc.args = (" ".join([exc.message, *exc.where()]),)
            for f, first, n, hit, saved in poisoned:
                words = st.s[:, first:first + n] if f == "s" else st.regfile(f).words[first:first + n]
                back = hit & (words == POISON)
                words[back] = saved[back]
                self._clear(f, first, n, hit & ~back)     # overwritten: the hazard was reported, the write stands
        p = self.plans[pc]
        if p.cls is not None:
            self.issue(pc, p, event)

    def _clear(self, f, first, n, where):
        if not where.any():
            return
        if f == "s":
            self.spend[:, first:first + n][where] = 0
        else:
            self.vpend[f][first:first + n][where] = 0

    # -- the finding -----------------------------------------------------------------------------
    def _report(self, a: Access, hit, f, first, text, access):
        st = self.st
        for m in np.nonzero(a.members)[0].tolist():
            if f == "s":
                if not hit[:, m].any():
                    continue
                lanes, col = list(range(st.lanes)), m * st.lanes        # an SGPR is read by every lane
                reg = f"s{first + int(np.argmax(hit[:, m]))}"
            else:
                sl = hit[:, m * st.lanes:(m + 1) * st.lanes]
                if not sl.any():
                    continue
                lanes = np.nonzero(sl.any(axis=0))[0].tolist()
                col = m * st.lanes + lanes[0]
                reg = f"{f}{first + int(np.argmax(sl.any(axis=1)))}"
            self._finding(a, m, lanes, col, reg, text, access)

    def _finding(self, a: Access, m: int, lanes: list, col: int, reg: str, text: str, access: str):
        """One missing-wait of member m: ``reg`` (of operand ``text``) read or overwritten in ``lanes``."""
        st = self.st
        self._sync()
        ctr = COUNTER_OF[a.cls]
        younger = int(self.issued[a.cls][m] - a.rank[m] - 1)
        n = younger if IN_ORDER[a.cls] else 0
        needed = "s_waitcnt vmcnt(0) lgkmcnt(0)" if a.cls == FLAT else f"s_waitcnt {ctr}({n})"
        load = a.event + (m if st.members > 1 else 0)
        where = a.where(st.kernel.name)
        lds = a.lds is not None
        verb = "reads" if access == "read" else "overwrites"
        if lds:
            tail = "read the bytes before the DMA writes them" if access == "read" else "may be overwritten by the DMA"
        else:
            tail = ("read poison (on hardware: the register's old contents)" if access == "read" else
                    "may be overwritten by the load's data after this write")
            note = f"{reg} as poison before `{needed}` covered {where}"
            if note not in self.notes:
                self.notes.append(note)
        named = reg if reg == text else f"{reg} (of {text})"
        st.w.finding(
            "missing-wait",
            f"{st.current.ins.mnemonic} {verb} {named} before the {CLASS_NAMES[a.cls]} access that writes it "
            f"has returned: {where}, instruction {load}; `{needed}` before this instruction covers it; "
            f"lanes {_ranges(lanes)} {tail}",
            lane=col, register=reg, access=access, load=load, load_line=where, counter=ctr,
            needed=needed, lanes=lanes)


def _ranges(lanes: list) -> str:
    out, i = [], 0
    while i < len(lanes):
        j = i
        while j + 1 < len(lanes) and lanes[j + 1] == lanes[j] + 1:
            j += 1
        out.append(str(lanes[i]) if i == j else f"{lanes[i]}-{lanes[j]}")
        i = j + 1
    return ",".join(out)
