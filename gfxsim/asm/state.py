"""The architectural state of one wave as the asm front end sees it, over a back-end Wave.

VGPRs and AGPRs are numbered register files of the back end (``Wave.register_file``: words, the
written bit and the provenance of every byte); SGPRs are 32-bit words uniform over the wave (this
front end runs one workgroup per wave, no batching); VCC is s[106:107], M0 s124 and EXEC
s[126:127] (the gfx9 SGPR encoding), EXEC held by the Wave itself so every back-end operation
sees it; SCC is one bit; ``pc`` indexes the kernel's instruction list.
"""
from __future__ import annotations

import numpy as np

from ..machine.errors import GfxSimError, located
from ..machine.vgpr import VGPRs

VCC, M0, EXEC = 106, 124, 126
N_SGPR = 128


class AsmError(GfxSimError):
    """The asm front end cannot execute an instruction (unsupported opcode, operand or modifier,
    or a value it cannot model), with where it was."""


def _mask_words(mask: np.ndarray) -> tuple[int, int]:
    bits = np.packbits(mask.astype(np.uint8), bitorder="little")
    b = np.zeros(8, np.uint8)
    b[:len(bits)] = bits
    q = int(b.view(np.uint64)[0])
    return q & 0xFFFFFFFF, q >> 32


def words_to_mask(lo: int, hi: int, lanes: int) -> np.ndarray:
    q = np.array([(int(hi) << 32) | int(lo)], np.uint64)
    return np.unpackbits(q.view(np.uint8), bitorder="little")[:lanes].astype(bool)


class WaveState:
    def __init__(self, w, kernel, n_vgpr: int, n_agpr: int, memory):
        self.w = w
        self.kernel = kernel                 # gfxsim.asm.Kernel
        self.memory = memory                 # launch.AddressSpace
        self.lanes = w.lanes
        self.v = w.register_file(n_vgpr, "v")
        self.a = w.register_file(max(n_agpr, 1), "a") if n_agpr else None
        # per register and lane: holds a matrix result not yet through arithmetic (semantics/dequant.py)
        self.fresh = {"v": np.zeros((n_vgpr, w.width), bool), "a": np.zeros((max(n_agpr, 1), w.width), bool)}
        self.s = np.zeros(N_SGPR, np.uint32)
        self.s_written = np.zeros(N_SGPR, bool)
        self.scc = 0
        self.pc = 0
        self.current = None                  # the Decoded instruction being executed
        self.lds = None                      # the workgroup's LDS region (launch sets it)
        self.done = False

    # -- coordinates -------------------------------------------------------------------------
    def where(self) -> str:
        d = self.current
        return f"{self.kernel.name}: line {d.ins.line}: {d.ins}" if d is not None else self.kernel.name

    def error(self, message: str, cls=AsmError, lane=None, address=None):
        wg, lane = self.w._coords(lane)
        return located(cls, f"{self.where()}: {message}", workgroup=wg, wave=self.w.wave_id, lane=lane,
                       instruction=None if self.current is None else self.current.ins.index, address=address)

    # -- EXEC ----------------------------------------------------------------------------------
    @property
    def exec(self) -> np.ndarray:
        return self.w.exec

    def set_exec(self, mask):
        self.w._set_exec(np.asarray(mask, bool).copy())

    # -- SGPRs ---------------------------------------------------------------------------------
    def _sgpr_check(self, first, count):
        if first < 0 or first + count > N_SGPR:
            raise self.error(f"s[{first}:{first + count - 1}] is outside the SGPR file")

    def sget(self, first: int, count: int = 1) -> list[int]:
        """SGPR words (EXEC read from the wave's mask)."""
        self._sgpr_check(first, count)
        out = []
        for i in range(first, first + count):
            if i in (EXEC, EXEC + 1):
                out.append(_mask_words(self.exec)[i - EXEC])
            else:
                out.append(int(self.s[i]))
        return out

    def sset(self, first: int, words):
        words = [int(x) & 0xFFFFFFFF for x in words]
        self._sgpr_check(first, len(words))
        new_exec = None
        for k, x in enumerate(words):
            i = first + k
            if i in (EXEC, EXEC + 1):
                lo, hi = _mask_words(self.exec) if new_exec is None else new_exec
                new_exec = (x, hi) if i == EXEC else (lo, x)
            else:
                self.s[i] = x
                self.s_written[i] = True
        if new_exec is not None:
            self.set_exec(words_to_mask(*new_exec, self.lanes))

    def sget64(self, first: int) -> int:
        lo, hi = self.sget(first, 2)
        return (hi << 32) | lo

    def sset64(self, first: int, value: int):
        value &= (1 << 64) - 1
        self.sset(first, [value & 0xFFFFFFFF, value >> 32])

    def mask_of(self, first: int) -> np.ndarray:
        """A lane mask held in an SGPR pair (VCC, EXEC, s[n:n+1])."""
        return words_to_mask(*self.sget(first, 2), self.lanes)

    def set_mask(self, first: int, mask: np.ndarray):
        self.sset(first, _mask_words(np.asarray(mask, bool)))

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
        rf = self.regfile(f)
        rf._check(first, count)
        return rf.words[first:first + count]

    def vread(self, f: str, first: int, count: int, dtype="u32") -> VGPRs:
        """Registers as a back-end value (bytes, written bits and provenance), for moves and memory."""
        rf = self.regfile(f)
        rf._check(first, count)
        v = rf.read(first, count, dtype)
        if v.prov is not None and v.prov.shape is None:     # a register file whose provenance has no field yet
            v.prov = None
        return v

    def vwrite(self, f: str, first: int, words: np.ndarray):
        """Write words [n, width] (uint32) under EXEC; the registers' provenance is cleared there
        (an arithmetic result carries no identity)."""
        words = np.ascontiguousarray(np.asarray(words).astype(np.uint32, copy=False).reshape(-1, self.w.width))
        self.regfile(f).write(first, VGPRs(self.w, words, "u32", regs=(first, words.shape[0])))
        self.fresh[f][first:first + words.shape[0], self.exec] = False

    def vwrite_value(self, f: str, first: int, value: VGPRs):
        """Write a back-end value (its bytes' provenance with it) under EXEC."""
        self.regfile(f).write(first, value)
        self.fresh[f][first:first + value.nbytes // 4, self.exec] = False

    def set_fresh(self, f: str, first: int, mask):
        """Mark registers first.. as holding a fresh matrix result where ``mask`` [n, width] holds
        (active lanes only; call after the write)."""
        mask = np.asarray(mask, bool)
        rows = self.fresh[f][first:first + mask.shape[0]]
        rows[:, self.exec] = mask[:, self.exec]
