"""The architectural state of one wave as the asm front end sees it, over a back-end Wave.

VGPRs and AGPRs are numbered register files of the back end (``Wave.register_file``: words, the
written bit and the provenance of every byte). A back-end Wave may hold several workgroups side
by side (``members``, member m in columns m*lanes..): the scalar state is then per member — SGPRs
``s`` [members, 128] uint32, SCC [members], a program counter per member — while EXEC is the
Wave's own mask over all columns (so every back-end operation sees it). VCC is s[106:107], M0
s124 and EXEC s[126:127] (the gfx9 SGPR encoding).

Scalar reads return one value per member (uint64 [members]); scalar writes reach only the
members executing the current instruction (``act``, set by run.execute when members' control
flow has split; None = all), so a member waiting at another pc keeps its state.
"""
from __future__ import annotations

import numpy as np

from ..machine.errors import GfxSimError, located
from ..machine.vgpr import VGPRs

VCC, M0, EXEC = 106, 124, 126
N_SGPR = 128
U64 = np.uint64
M32 = 0xFFFFFFFF


class AsmError(GfxSimError):
    """The asm front end cannot execute an instruction (unsupported opcode, operand or modifier,
    or a value it cannot model), with where it was."""


def mask_words(mask: np.ndarray, members: int) -> np.ndarray:
    """Lane masks [members * lanes] (lanes <= 64) -> one 64-bit word per member (uint64 [members])."""
    per = np.asarray(mask, bool).reshape(members, -1)
    if per.shape[1] == 64:                   # wave64: each member's eight bytes are its word
        return np.packbits(per, axis=1, bitorder="little").view(U64)[:, 0]
    bits = np.packbits(per, axis=1, bitorder="little")
    if bits.shape[1] < 8:
        bits = np.concatenate([bits, np.zeros((members, 8 - bits.shape[1]), np.uint8)], axis=1)
    return np.ascontiguousarray(bits).view(U64)[:, 0]


def words_mask(words, lanes: int) -> np.ndarray:
    """64-bit words [members] -> the lane mask [members * lanes]."""
    w = np.ascontiguousarray(np.asarray(words, U64).reshape(-1))
    if lanes == 64:                          # every bit of each word, in lane order
        return np.unpackbits(w.view(np.uint8), bitorder="little").view(bool)
    return np.unpackbits(w.view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")[:, :lanes].astype(bool).reshape(-1)


class WaveState:
    def __init__(self, w, kernel, n_vgpr: int, n_agpr: int, memory):
        self.w = w
        self.kernel = kernel                 # gfxsim.asm.Kernel
        self.memory = memory                 # launch.AddressSpace
        self.lanes = w.lanes
        self.members = w.members
        self.v = w.register_file(n_vgpr, "v")
        self.a = w.register_file(max(n_agpr, 1), "a") if n_agpr else None
        # per register and lane: holds a matrix result not yet through arithmetic (semantics/dequant.py)
        self.fresh = {"v": np.zeros((n_vgpr, w.width), bool), "a": np.zeros((max(n_agpr, 1), w.width), bool)}
        self.s = np.zeros((self.members, N_SGPR), np.uint32)
        self.s_written = np.zeros(N_SGPR, bool)
        # SGPRs of unknown origin and this instruction's marks on its writes (origin.py)
        self.s_unknown = np.zeros((self.members, N_SGPR), bool)
        self.any_unknown = False
        self.taint_s = None                  # members whose SGPR writes are of unknown origin
        self.taint_v = None                  # members whose VGPR writes are
        self.fresh_out = None                # lanes whose VGPR write stays a fresh matrix result (dequant.py)
        # no provenance: a move or an arithmetic result writes words and written bits directly, not
        # through back-end values (translate.LEAN; run_wave sets it)
        self.lean = False
        self.scc = np.zeros(self.members, U64)
        self.pc = 0                          # the pc of the instruction being executed
        self.pcs = np.zeros(self.members, np.int64)      # each member's next pc
        self.ended = np.zeros(self.members, bool)         # members past s_endpgm
        self.act = None                      # members executing this instruction (None: all)
        self.current = None                  # the Decoded instruction being executed
        self.lds = None                      # the workgroup's LDS region (launch sets it)
        self.dpp = None                      # a DPP instruction's src0 as its lanes read it (semantics/dpp.py)
        self.scratch = None                  # the wave's private segment (semantics/scratch.py)
        # MODE per member, and as the descriptor set it (semantics/mode.py)
        from .semantics.mode import initial
        self.mode0 = U64(initial(kernel.descriptor))
        self.mode = np.full(self.members, self.mode0, U64)

    @property
    def done(self) -> bool:
        return bool(self.ended.all())

    # -- coordinates -------------------------------------------------------------------------
    def where(self) -> str:
        d = self.current
        return f"{self.kernel.name}: line {d.ins.line}: {d.ins}" if d is not None else self.kernel.name

    def error(self, message: str, cls=AsmError, lane=None, address=None):
        if lane is None and self.act is not None and self.members > 1:
            lane = int(np.argmax(self.act)) * self.lanes      # the first member executing it
        wg, lane = self.w.coords_of(lane)
        ins = None if self.current is None else self.current.ins
        e = located(cls, f"{self.where()}: {message}", workgroup=wg, wave=self.w.wave_id, lane=lane,
                    instruction=None if ins is None else ins.index, address=address,
                    source=None if ins is None else ins.source)       # the HIP line, where clang gave it
        e.coords["kernel"] = self.kernel.name           # named by the message's where() already
        return e

    def first_member(self) -> int:
        return 0 if self.act is None else int(np.argmax(self.act))

    # -- per-member values -----------------------------------------------------------------------
    def lanewise(self, values) -> np.ndarray:
        """One value per member (or a number) -> uint32 [width]: each member's over its lanes."""
        v = np.asarray(values)
        if v.ndim == 0 or self.members == 1:
            return np.full(self.w.width, v.reshape(-1)[0] if v.ndim else v, np.uint64).astype(np.uint32)
        return np.repeat(v.astype(U64).astype(np.uint32), self.lanes)

    def lanewise64(self, values) -> np.ndarray:
        v = np.asarray(values, U64)
        if v.ndim == 0:
            return np.full(self.w.width, v, U64)
        return np.repeat(v, self.lanes)

    def _put(self, row: np.ndarray, values):
        """Write ``values`` (one per member, or one for all) into ``row`` [members] where active."""
        if self.act is None:
            row[...] = values
        else:
            v = np.broadcast_to(np.asarray(values), row.shape)
            row[self.act] = v[self.act]

    # -- EXEC ----------------------------------------------------------------------------------
    @property
    def exec(self) -> np.ndarray:
        return self.w.exec

    def set_exec(self, mask):
        """Set the Wave's EXEC over every column (a temporary narrowing, or a vector instruction's
        EXEC write; run.execute restores the columns of members not executing)."""
        self.w.set_exec(np.asarray(mask, bool).copy())

    def exec_words(self) -> np.ndarray:
        return mask_words(self.exec, self.members)

    # -- SGPRs ---------------------------------------------------------------------------------
    def _sgpr_check(self, first, count):
        if first < 0 or first + count > N_SGPR:
            raise self.error(f"s[{first}:{first + count - 1}] is outside the SGPR file")

    def sread(self, i: int) -> np.ndarray:
        """SGPR ``i`` of every member: uint64 [members] (EXEC read from the wave's mask)."""
        self._sgpr_check(i, 1)
        if i == EXEC:
            return self.exec_words() & U64(M32)
        if i == EXEC + 1:
            return self.exec_words() >> U64(32)
        return self.s[:, i].astype(U64)

    def sread64(self, first: int) -> np.ndarray:
        self._sgpr_check(first, 2)
        if first == EXEC:
            return self.exec_words()
        if first == EXEC - 1:
            return self.sread(first) | (self.sread(first + 1) << U64(32))
        return self.s[:, first:first + 2].copy().view(U64)[:, 0]     # a copy (not a view of the SGPRs); lo, hi

    def swrite(self, first: int, *values):
        """Write SGPRs first, first+1, ... (one value per member each, or one for all) in the
        active members."""
        self._sgpr_check(first, len(values))
        if len(values) == 1 and self.act is None and not self.any_unknown and self.taint_s is None \
                and first < EXEC:           # one SGPR of every member, no origin marks: the loop below in brief
            self.s[:, first] = np.asarray(values[0]).astype(U64) & U64(M32)
            self.s_written[first] = True
            return
        new_exec = None
        for k, x in enumerate(values):
            i = first + k
            x = np.asarray(x).astype(U64) & U64(M32)
            if i in (EXEC, EXEC + 1):
                cur = self.exec_words() if new_exec is None else new_exec
                new_exec = (cur & U64(0xFFFFFFFF00000000)) | x if i == EXEC else (cur & U64(M32)) | (x << U64(32))
            else:
                self._put(self.s[:, i], x.astype(np.uint32))
                self.s_written[i] = True
                if self.any_unknown or self.taint_s is not None:
                    self._put(self.s_unknown[:, i], False if self.taint_s is None else self.taint_s)
                    self.any_unknown = bool(self.s_unknown.any())
        if new_exec is not None:
            mask = words_mask(np.broadcast_to(new_exec, (self.members,)), self.lanes)
            if self.act is not None:
                mask = np.where(np.repeat(self.act, self.lanes), mask, self.exec)
            self.set_exec(mask)

    def swrite64(self, first: int, value):
        value = np.asarray(value).astype(U64)
        if self.act is None and not self.any_unknown and self.taint_s is None and first != EXEC - 1:
            # every member, no origin marks: what swrite does with both halves, in fewer passes
            self._sgpr_check(first, 2)
            if first == EXEC:
                per = value if value.shape == (self.members,) else np.broadcast_to(value, (self.members,))
                self.set_exec(words_mask(per, self.lanes))
                return
            self.s[:, first] = value & U64(M32)
            self.s[:, first + 1] = value >> U64(32)
            self.s_written[first:first + 2] = True
            return
        self.swrite(first, value & U64(M32), value >> U64(32))

    def set_mode(self, value):
        """MODE of the active members."""
        self._put(self.mode, np.asarray(value).astype(U64))

    def set_scc(self, value):
        self._put(self.scc, np.asarray(value).astype(U64))

    def mask_of(self, first: int) -> np.ndarray:
        """A lane mask held in an SGPR pair (VCC, EXEC, s[n:n+1]): bool [width]."""
        if first == EXEC:
            return self.exec.copy()
        return words_mask(self.sread64(first), self.lanes)

    def set_mask(self, first: int, mask: np.ndarray):
        self.swrite64(first, mask_words(np.asarray(mask, bool), self.members))

    # single-member conveniences (tests, tools): the words of member 0
    def sget(self, first: int, count: int = 1) -> list[int]:
        return [int(self.sread(i)[0]) for i in range(first, first + count)]

    def sset(self, first: int, words):
        self.swrite(first, *[int(x) & M32 for x in words])

    def sget64(self, first: int) -> int:
        return int(self.sread64(first)[0])

    def sset64(self, first: int, value: int):
        self.swrite64(first, int(value) & ((1 << 64) - 1))

    # -- VGPRs / AGPRs ---------------------------------------------------------------------------
    def regfile(self, f: str):
        if f == "v":
            return self.v
        if f == "a":
            if self.a is None:
                raise self.error("the kernel uses AGPRs but its descriptor allocates none")
            return self.a
        raise self.error(f"no vector register file {f!r}")

    def vwords(self, f: str, first: int, count: int = 1) -> np.ndarray:
        """Words [count, width] of v/a registers (a view). Reading never-written registers is not
        reported here: clang legitimately reads undefined halves whose result bits are unused (the
        high word of v_mad_u64_u32's addend when only the low word is kept); the back end reports
        them where a value is consumed (stores, LDS writes, matrix operands: ``vread``)."""
        rf = self.v if f == "v" else self.regfile(f)
        if first < 0 or first + count > rf.count:
            rf.check_range(first, count)
        return rf.words[first:first + count]

    def vhas_prov(self, f: str, first: int, count: int = 1) -> bool:
        """Whether v/a registers first.. may carry provenance (False: a read of them has none)."""
        rf = self.regfile(f)
        return rf.prov is not None and bool(rf.has[first:first + count].any())

    def vread(self, f: str, first: int, count: int, dtype="u32") -> VGPRs:
        """Registers as a back-end value (bytes, written bits and provenance), for moves and memory."""
        v = self.regfile(f).read(first, count, dtype)            # it checks the range
        if v.prov is not None and v.prov.shape is None:     # a register file whose provenance has no field yet
            v.prov = None
        return v

    def vwrite(self, f: str, first: int, words: np.ndarray):
        """Write words [n, width] (uint32) under EXEC; the registers' provenance is cleared there
        (an arithmetic result carries no identity)."""
        words = np.asarray(words)
        if words.dtype != np.uint32:
            words = words.astype(np.uint32)
        if words.ndim != 2:
            words = words.reshape(-1, self.w.width)
        rf = self.v if f == "v" else self.regfile(f)
        n = words.shape[0]
        if rf.prov is not None and rf.has[first:first + n].any():     # provenance to clear: the file's own write
            rf.write(first, VGPRs(self.w, np.ascontiguousarray(words), "u32", regs=(first, n)))
            self.fresh[f][first:first + n] &= ~self.exec
            if self.taint_v is not None:
                self.mark_unknown(f, first, n)
            return
        if first < 0 or first + n > rf.count:      # no provenance: the words and their written bits only
            rf.check_range(first, n)
        if self.w.exec_full:
            rf.words[first:first + n] = words
            rf.written[first * 4:(first + n) * 4] = True
            self.fresh[f][first:first + n] = False
        else:
            ex = self.exec
            np.copyto(rf.words[first:first + n], words, where=ex)
            rf.written[first * 4:(first + n) * 4] |= ex
            self.fresh[f][first:first + n] &= ~ex
        if self.taint_v is not None:
            self.mark_unknown(f, first, n)

    def vcopy(self, f: str, first: int, src_f: str, src_first: int, n: int):
        """Without provenance (``lean``): copy registers src_first.. of file src_f to first.. of f
        under EXEC, with their written bits and fresh marks — what a move's vwrite_value and
        set_fresh leave where no byte carries provenance."""
        rs, rd = self.regfile(src_f), self.regfile(f)
        rs.check_range(src_first, n)
        rd.check_range(first, n)
        a, b = src_first, first
        words, wr = rs.words[a:a + n].copy(), rs.written[4 * a:4 * (a + n)].copy()
        keep = self.fresh[src_f][a:a + n].copy()
        if self.w.exec_full:
            rd.words[b:b + n] = words
            rd.written[4 * b:4 * (b + n)] = wr
            self.fresh[f][b:b + n] = keep
        else:
            ex = self.exec
            np.copyto(rd.words[b:b + n], words, where=ex)
            np.copyto(rd.written[4 * b:4 * (b + n)], wr, where=ex)
            np.copyto(self.fresh[f][b:b + n], keep, where=ex)

    def vall_written(self, f: str, first: int, n: int = 1) -> bool:
        """Whether every byte of v/a registers first.. is written in every active lane (EXEC): a
        read of them reports no never-written byte (Wave.check_read asks the active lanes only)."""
        rf = self.regfile(f)
        rf.check_range(first, n)
        wr = rf.written[4 * first:4 * (first + n)]
        # a count of set bytes: numpy's fast path for bool, some times quicker than all()'s reduction
        return bool(np.count_nonzero(wr) == wr.size or (not self.w.exec_full and wr[:, self.exec].all()))

    def vwrite_value(self, f: str, first: int, value: VGPRs):
        """Write a back-end value (its bytes' provenance with it) under EXEC."""
        self.regfile(f).write(first, value)
        n = value.nbytes // 4
        self.fresh[f][first:first + n] &= ~self.exec
        if self.fresh_out is not None:
            self.fresh[f][first:first + n] |= self.fresh_out & self.exec
        if self.taint_v is not None:
            self.mark_unknown(f, first, n)

    def mark_unknown(self, f: str, first: int, n: int):
        """Flag registers first.. of the marked members' active lanes as of unknown origin
        (origin.py): they were computed from an SGPR loaded from tagged bytes."""
        from ..machine.provenance import UNKNOWN, Prov
        if not self.w.provenance:
            return
        cols = np.repeat(self.taint_v, self.lanes) & self.exec
        if not cols.any():
            return
        v = self.vread(f, first, n)
        # per element where the read is (each byte's mark is its word's): the bytes as per byte
        p = v.prov if v.prov is not None and v.prov.g == 4 else \
            (v.prov.per_byte() if v.prov is not None else Prov(1, {}))
        pc = self.w.pcols(cols[None, :], "the lanes of an SGPR of unknown origin")
        flags = np.zeros((4 * n // p.g, self.w.pw), np.uint8) if p.flags is None else p.flags.copy()
        flags |= np.where(pc, UNKNOWN, np.uint8(0)).astype(np.uint8)
        self.regfile(f).write(first, VGPRs(self.w, v.val, v.dtype, Prov(p.g, p.ids, p.fp, flags), regs=(first, n)))

    def set_fresh(self, f: str, first: int, mask):
        """Mark registers first.. as holding a fresh matrix result where ``mask`` [n, width] holds
        (active lanes only; call after the write)."""
        mask = np.asarray(mask, bool)
        np.copyto(self.fresh[f][first:first + mask.shape[0]], mask, where=self.exec)
