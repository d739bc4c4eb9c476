"""The wave: lockstep execution of one wave's statements on all lanes under EXEC.

This is the back end's execution model. A front end calls these methods (the Python front end
from kernel code: ``w.global_load(...)``, ``w.mma(...)``, ``a * b``). The operations live in one
mixin per hardware unit — ``valu`` (VALU arithmetic, compares, conversions), ``routing`` (byte
moves, permutes, cross-lane), ``vmem`` (global and scalar memory), ``ds`` (LDS), ``matrix`` (matrix
instructions) and ``scales`` (quantization-scale marks and their check) — each recording the
instructions of ``ops`` in the trace. Nothing here assumes wave64 (the lane count comes from the
arch profile) or one arch (matrix instructions come from the records).

State: ``exec`` ``[width]`` bool, where width = lanes x workgroups run side by side (``members``);
values are ``VGPRs`` handles holding their numbers and provenance; register numbers are virtual
and handed out in order (``alloc``), so a run's trace is the same whatever Python keeps alive.

Services: what the units (the mixins, the value handle, the asm front end's WaveState) may call on
the wave. Everything else with a leading underscore is the wave's own; helpers several units share
are modules of their own (``addressing``, ``plans``, ``valueprov``, ``summaries``), imported.

  service                          what                                          used by
  exec, exec_full, set_exec(m)     EXEC, whether it is all ones, narrowing it    every unit; asm state, run
  lane_mask(cond)                  a condition as a mask over the columns        valu
  lanes, members, width            lanes of a wave, batched workgroups, columns  every unit
  member_starts                    the first column of each column's member      ds, routing
  fold, pw, pmember_ids            a folded batch; the provenance columns        ds, matrix, routing, scales, valueprov
  pcols(x, what), pexec(what)      per-column data / EXEC on those columns       ds, routing, valu, valueprov; consumed
  outside_exec(p, what)            a load's provenance without inactive lanes    ds, vmem
  unfold_prov(p, what)             a folded value's provenance for every member  vgpr, vmem
  new_value(val, dtype, prov)      a value written under EXEC                    ds, matrix, routing, scales, valu, vmem
  coerce(x, dtype), alloc(n)       a literal as a value; register numbers        valu; vgpr
  check_read(*vals)                the uninitialized-read check of operands      addressing, ds, routing, valu, vmem
  lookup_op(fn, *args)             an ops-table lookup, failing at the statement routing, valu
  event(op, ins, outs), trace_operands(vals, written)
                                   count and trace one instruction               ds, routing, scales, valu,
                                                                                 vmem; matrix; asm run
  error(cls, msg), finding(kind, msg), first_lanes(mask), coords_of(lane), source()
                                   errors and findings at this statement         every unit; asm state
  coverages                        the open w.coverage scopes                    matrix, coverage
  lds_offsets, mma_memos           state the wave holds for one unit             ds; matrix
  check_scale_application(a, b)    the scale check of a product (scales)         valu; asm dequant
  route_bitwise(op, a, b)          a bitwise op as byte routing (routing)        valu
"""
from __future__ import annotations

import contextlib
import itertools
import os
import sys

import numpy as np

from . import ops
from ..arch.matrix_insn import MatrixInstruction
from .cond import Cond, mask_of
from .coverage import Coverage
from .ds import DsOps
from .dtypes import dtype_name, from_bytes, np_dtype
from ..isa.fp import APPROXIMATED
from .memory import poison
from .errors import StepLimit, located
from .fold import RESTART_KINDS, Unfolded
from .matrix import MatrixOps
from .routing import RoutingOps
from .scales import ScaleOps
from .sparse import SparseOps
from .trace import BatchEvent, Operand
from .valu import ValuOps
from .vgpr import VGPRs
from .vmem import VmemOps

_MACHINE_DIR = os.path.dirname(os.path.abspath(__file__))
# a value written under a partial EXEC holds its written bits as a read-only view of one copy of
# EXEC instead of rows x width bytes (False: the full copy, the A/B the tests compare)
EXEC_ROWS_SHARED = True
_NOT_KERNEL: dict[str, bool] = {}       # a frame's file name -> whether source() passes over it


def _not_the_kernels(filename: str) -> bool:
    """The machine's frames and contextlib's (``with w.if_(...)`` enters through it) are not the
    kernel's; asked of every frame of every statement, so answered once per file."""
    skip = _NOT_KERNEL.get(filename)
    if skip is None:
        skip = _NOT_KERNEL[filename] = (os.path.dirname(os.path.abspath(filename)) == _MACHINE_DIR
                                        or filename == contextlib.__file__)
    return skip


def _literal_array(x, dtype: str, width: int) -> np.ndarray:
    """A literal operand: one number broadcast over the columns (a read-only view, no array)."""
    dt = np_dtype(dtype)
    val = np.ndarray((1, width), dt, np.asarray(x, dt), 0, (0, 0))
    val.flags.writeable = False
    return val


class _If:
    """The scope of ``with w.if_(cond):``: EXEC narrowed on entry (the checks of ``cond`` made
    there), the EXEC before restored on exit, however the block ends."""
    __slots__ = ("w", "cond", "saved")

    def __init__(self, w, cond):
        self.w, self.cond = w, cond

    def __enter__(self) -> Cond:
        self.saved, now = self.w._enter_if(self.cond)
        return now

    def __exit__(self, *exc) -> bool:
        if self.w.exec is not self.saved:
            self.w.set_exec(self.saved)
        return False


_LITERALS: dict = {}          # (int, dtype, width) -> its read-only _literal_array
_LITERALS_MAX = 4096          # entries kept (then it starts again: a few bytes each)


def _literal(x: int, dtype: str, width: int) -> np.ndarray:
    """_literal_array of a Python int, made once per (number, type, width): a kernel's address
    arithmetic names the same few hundred numbers thousands of times."""
    key = (x, dtype, width)
    got = _LITERALS.get(key)
    if got is None:
        got = _literal_array(x, dtype, width)
        if len(_LITERALS) >= _LITERALS_MAX:
            _LITERALS.clear()
        _LITERALS[key] = got
    return got


class Wave(ValuOps, RoutingOps, VmemOps, DsOps, MatrixOps, SparseOps, ScaleOps):
    def __init__(self, machine, workgroup, wave_id: int):
        self.machine = machine
        self.wg = workgroup
        self.arch = machine.arch
        self.lanes = machine.arch.wave_size              # lanes of one wave (what kernels see)
        self.members = workgroup.members                 # workgroups run side by side in a batch
        self.width = self.lanes * self.members           # columns of every register array
        self.wave_id = wave_id
        self.exec = np.ones(self.width, bool)
        self.steps = 0                                   # instructions this wave executed (max_steps)
        # a workgroup's waves as members (wavemembers.py): each member's events, counted apart
        self.member_events = [0] * self.members if getattr(workgroup, "waves_as_members", False) else None
        # provenance columns: every member's, or a folded batch's representatives' (fold.py)
        self.fold = workgroup.fold
        self.pw = self.width if self.fold is None else self.fold.width
        self.pmember_ids = np.arange(self.members) if self.fold is None else self.fold.reps
        self.exec_full = True                            # EXEC is all ones (the fast paths)
        self._pexec = None                               # (EXEC, pexec's answer for it)
        self.member_starts = np.repeat(np.arange(self.members) * self.lanes, self.lanes)   # first lane of each member
        self.lds_offsets = {}                            # the ds unit's: each member's offset of a region
        self.mma_memos = {}                              # the matrix unit's: its remembered operands
        self._next_reg = 0
        self.coverages = []                              # open coverage scopes (w.coverage)
        self.live = None             # members a front end is executing now (asm min-pc batches); None: all
        # a front end that knows the line being executed (asm: the .s line) names it here: a
        # function returning "file:line ..." or None (then the kernel's Python line is used)
        self.source_hook = None
        # made per batch of up to 2,048 members: tiles and repeats, not a modulo over every column or
        # an array of the ids' tuples (~2.3 -> ~0.4 ms a wave of 131,072 columns)
        lane = np.tile(np.arange(self.lanes, dtype=np.int32), self.members)
        self.lane_id = self.new_value(lane[None, :], "i32")
        self.thread_id = self.new_value((lane + wave_id * self.lanes)[None, :].astype(np.int32), "i32")
        if self.members > 1:     # workgroup ids differ per member: uniform per wave, held per lane
            ids = np.fromiter(itertools.chain.from_iterable(workgroup.ids), np.int32,
                              count=3 * len(workgroup.ids)).reshape(-1, 3)                      # [members, 3]
            self._wg_ids = tuple(self.new_value(np.repeat(ids[:, d], self.lanes)[None, :], "i32") for d in range(3))

    # -- identity ----------------------------------------------------------------------------
    @property
    def workgroup_id(self) -> tuple:
        """(x, y, z): Python ints, or per-lane i32 values when workgroups run batched."""
        return self.wg.id if self.members == 1 else self._wg_ids

    def coords_of(self, lane: int | None) -> tuple:
        """(workgroup, lane within its wave) of a column of the register arrays."""
        if lane is None:
            return (self.wg.id if self.live is None else self.wg.ids[self.live[0]]), None
        lane = int(lane)
        return self.wg.ids[lane // self.lanes], lane % self.lanes

    @property
    def num_waves(self) -> int:
        return self.wg.num_waves

    @property
    def kernel(self) -> str:
        return self.machine.kernel_name

    @property
    def provenance(self) -> bool:
        return self.machine.provenance

    def insn(self, mnemonic):
        """The arch's record of ``mnemonic``; a record itself passes through (w.smfmac runs its
        record's dense form, which no arch table lists)."""
        return mnemonic if isinstance(mnemonic, MatrixInstruction) else self.arch.instruction(mnemonic)

    def alloc(self, n: int) -> tuple:
        """(first, n): ``n`` fresh virtual register numbers."""
        base = self._next_reg
        self._next_reg += n
        return (base, n)

    def pcols(self, x: np.ndarray, what: str) -> np.ndarray:
        """Per-column data (last axis: the batch's columns) as provenance sees it: a folded batch's
        representatives' columns, checked to be every member's (fold.Fold.rep); else ``x``."""
        return x if self.fold is None else self.fold.rep(x, what)

    def pexec(self, what: str) -> np.ndarray:
        """EXEC on the provenance columns (``pcols``), read-only. A folded batch's answer is kept
        until EXEC is set again (set_exec keeps the array it is given and nothing writes into it):
        a register write, a merge's check and a dequant each ask for it, several times an
        instruction, and each answer compared every member's columns with its representative's."""
        if self.fold is None:
            return self.exec
        got = self._pexec
        if got is not None and got[0] is self.exec:
            return got[1]
        if self.exec_full:
            out = np.ones(self.pw, bool)
        else:
            out = self.fold.rep(self.exec, what)      # raises Unfolded where members differ: nothing kept
            out = out.view()
        out.flags.writeable = False
        self._pexec = (self.exec, out)
        return out

    def outside_exec(self, p, what, whole: bool = False):
        """``p`` with nothing in the lanes outside EXEC: a load there reads no element, so its bytes
        carry no provenance (``whole``: p has every member's columns, not the provenance columns)."""
        if p is None or self.exec_full:
            return p
        from .provenance import Prov
        m = self.exec if whole else self.pexec(what)
        return Prov.select(m[None, :], p, None, p.shape)

    def unfold_prov(self, p, what: str, at=None):
        """A value's provenance for every member (a folded batch's expanded, fold.Fold.unfold); ``at``:
        only those columns (where not folded, ``p`` whole)."""
        return p if self.fold is None or p is None else self.fold.unfold(p, self.machine.mma_log, what, at)

    def set_exec(self, m: np.ndarray) -> None:
        """EXEC := ``m`` (bool ``[width]``, kept, not copied)."""
        self.exec = m
        self.exec_full = bool(m.all())

    # -- coordinates of the statement being executed ------------------------------------------
    def source(self) -> str | None:
        """Where the statement being executed is: the front end's ``source_hook``, else the line of
        the Python kernel that called into the machine."""
        if self.source_hook is not None:
            where = self.source_hook()
            if where is not None:
                return where
        f = sys._getframe(1)
        while f is not None and _not_the_kernels(f.f_code.co_filename):
            f = f.f_back
        if f is None:
            return None
        return f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno}"

    def error(self, cls, message, lane=None, address=None):
        wg, lane = self.coords_of(lane)
        return located(cls, message, kernel=self.kernel, workgroup=wg, wave=self.wave_id, lane=lane,
                       instruction=self.machine.trace.n_events, source=self.source(), address=address)

    def finding(self, kind, message, lane=None, address=None, instruction=None, *, for_members=False, **details):
        """Report a finding of ``kind`` (see findings.KINDS for its details record and dedupe key).
        ``for_members``: made for a member itself (``lane`` a batch column), also in a folded batch."""
        if self.fold is not None and kind in RESTART_KINDS and not for_members:
            raise Unfolded(f"a {kind} finding")      # made on a representative: run the members themselves
        if instruction is not None and lane is not None and self.members > 1:
            instruction = instruction + int(lane) // self.lanes     # a batched instruction: one index per member
        wg, lane = self.coords_of(lane)
        return self.machine.report(kind, message, workgroup=wg, wave=self.wave_id, lane=lane,
                                   instruction=self.machine.trace.n_events if instruction is None else instruction,
                                   source=self.source(), address=address, details=details)

    def lookup_op(self, fn, *args):
        """An ops-table lookup; an unknown (operation, type) is an error at this statement."""
        try:
            return fn(*args)
        except ops.UnknownOperation as e:
            raise self.error(ops.UnknownOperation, str(e)) from None

    def event(self, op, ins=(), outs=(), **details):
        """Count (and, when tracing, record) one instruction; ``op`` an ops.Op or a mnemonic."""
        tr = self.machine.trace
        idx = tr.n_events
        if tr.muted:                     # the back-end operations of one front-end instruction
            return idx
        tr.n_events += 1
        self.steps += 1
        if self.member_events is not None:
            self.wg.member_event(self)
        if isinstance(op, ops.Op):
            if op.approximated:
                self.machine.approximated.update(op.approximated)
        else:
            for m in (op, op.rsplit("_", 1)[0]):
                if m in APPROXIMATED:    # (an asm mnemonic carries its encoding: v_exp_f32_e32)
                    self.machine.approximated.add(m)
        if self.steps > self.machine.max_steps:
            raise self.error(StepLimit, f"more than {self.machine.max_steps:,} instructions executed by one wave: an "
                             f"endless loop? (the bound is max_steps, LaunchOptions(max_steps=...))")
        if not tr.enabled:
            return idx
        if isinstance(op, ops.Op):
            if op.pseudo:
                details["expands"] = op.expands
            op = op.mnemonic
        tr.record(BatchEvent(idx, op, self.kernel, self.wg.ids, self.wave_id, self.source(), self.exec.copy(),
                             self.trace_operands(ins, False), self.trace_operands(outs, True), details, self.lanes,
                             members=self.live), lambda msg: self.error(StepLimit, msg))
        return idx

    def trace_operands(self, vals, written: bool) -> list:
        """Trace operands: an output's values are copied (and remembered on the value); an input
        that is still what an earlier event wrote refers to that copy."""
        out = []
        for v in vals:
            if not isinstance(v, VGPRs) or v.regs is None:
                continue
            op = None if written else v.traced
            if op is None or op.dtype != v.dtype:
                op = Operand.of(v)
                if written:
                    v.traced = op
            out.append(op)
        return out

    # -- value construction --------------------------------------------------------------------
    def new_value(self, val, dtype, prov=None) -> VGPRs:
        """A value written under EXEC: inactive lanes are never-written (poison)."""
        valid = None
        if not self.exec_full:
            shape = (val.shape[0] * np_dtype(dtype).itemsize, self.width)
            if EXEC_ROWS_SHARED:
                # every byte's row is EXEC: one read-only copy of it seen as all the rows (written
                # bits are replaced, never written into; a write into these raises)
                e = self.exec.copy()
                e.flags.writeable = False
                valid = np.broadcast_to(e, shape)
            else:
                valid = np.broadcast_to(self.exec, shape).copy()
        return VGPRs(self, val, dtype, prov, valid)

    def const(self, value, dtype="i32", n: int = 1) -> VGPRs:
        """A uniform value in every lane (v_mov_b32 of an SGPR/literal)."""
        dtype = dtype_name(dtype)
        self._check_count(n, dtype, "const")
        v = self.new_value(np.full((n, self.width), value, dtype=np_dtype(dtype)), dtype)
        self.event(ops.VALU[("mov", "any")], outs=[v])
        return v

    def zeros(self, dtype="f32", n: int = 1) -> VGPRs:
        self._check_count(n, dtype_name(dtype), "zeros")
        return self.const(0, dtype, n)

    def undef(self, dtype="f32", n: int = 1) -> VGPRs:
        """Registers allocated but never written (a declaration without an initialiser): they hold
        the poison pattern (a quiet NaN in every 32-bit word), and reading them is an
        ``uninitialized-read`` — a missing zero-init shows in the findings and in the numbers."""
        dtype = dtype_name(dtype)
        self._check_count(n, dtype, "undef")
        size = np_dtype(dtype).itemsize
        # every lane holds the same bytes: one lane's elements, repeated across the columns
        one = from_bytes(poison(n * size)[:, None], dtype)                # [n, 1]
        return VGPRs(self, np.repeat(one, self.width, axis=1), dtype, None,
                     np.zeros((n * size, self.width), bool))

    def _check_count(self, n, dtype: str, what: str) -> None:
        """``n`` elements of ``dtype`` fit one wave's registers (zeros, const, undef)."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise self.error(ValueError, f"w.{what}({dtype!r}, {n!r}): the element count must be an integer >= 1")
        regs = -(-int(n) * np_dtype(dtype).itemsize // 4)
        if regs > self.arch.vgprs:
            raise self.error(ValueError, f"w.{what}({dtype!r}, {n}): {regs} registers, more than the "
                                         f"{self.arch.vgprs} VGPRs a wave of {self.arch.name} has")

    def from_lanes(self, values, dtype) -> VGPRs:
        """A value given per lane: ``values`` is ``[lanes]`` or ``[n, lanes]``."""
        dtype = dtype_name(dtype)
        val = np.asarray(values).astype(np_dtype(dtype))
        if val.ndim == 1:
            val = val[None, :]
        if val.shape[1] == self.lanes and self.members > 1:
            val = np.tile(val, (1, self.members))            # the same per-lane values in every member
        if val.shape[1] != self.width:
            raise self.error(ValueError, f"per-lane values have {val.shape[1]} lanes, the wave has {self.lanes}")
        v = self.new_value(val.copy(), dtype)
        self.event(ops.VALU[("mov", "any")], outs=[v])
        return v

    # -- checks ----------------------------------------------------------------------------------
    def check_read(self, *vals: VGPRs) -> None:
        """An ``uninitialized-read`` finding for each operand with never-written bytes in active lanes."""
        for v in vals:
            if v.valid is None:
                continue
            bad = ~v.valid & self.exec[None, :]
            if not bad.any():
                continue
            for lane in self.first_lanes(bad.any(axis=0)):
                m = slice(lane - lane % self.lanes, lane - lane % self.lanes + self.lanes)
                self.finding("uninitialized-read", f"read of never-written {v.reg_name()} "
                             f"(byte {int(np.argmax(bad[:, lane]))}) in {int(bad[:, m].any(axis=0).sum())} "
                             f"active lane(s)", lane=lane, what="register", name=v.reg_name())

    def first_lanes(self, mask: np.ndarray) -> list:
        """The first column where ``mask`` holds, in every workgroup of the batch that has one."""
        per = np.asarray(mask, bool).reshape(self.members, self.lanes)
        return [int(m * self.lanes + np.argmax(per[m])) for m in np.nonzero(per.any(axis=1))[0]]

    def coerce(self, x, dtype: str) -> VGPRs:
        """``x`` as a value of ``dtype``: a value as it is, a number as a literal in every lane."""
        if isinstance(x, VGPRs):
            return x
        if type(x) is int:                   # an address term: its array made once (_literal)
            return VGPRs(self, _literal(x, dtype, self.width), dtype, literal=True)
        if isinstance(x, (bool, int, float, np.integer, np.floating)):
            return VGPRs(self, _literal_array(x, dtype, self.width), dtype, literal=True)
        raise self.error(TypeError, f"expected a per-lane value or a number, got {type(x).__name__}")

    # -- divergent control ----------------------------------------------------------------------------
    def if_(self, cond):
        """``with w.if_(c):`` narrows EXEC to the lanes where c holds (s_and_saveexec_b64)."""
        return _If(self, cond)

    def _enter_if(self, cond):
        """_If's entry: EXEC narrowed by ``cond``; returns (EXEC before, the Cond of EXEC now)."""
        saved = self.exec
        if cond is True:                 # every lane: EXEC stays as it is (set_exec never writes into it)
            return saved, Cond(saved.copy())
        # a number would be read as true or false: only a condition or bools are conditions
        if not (isinstance(cond, (Cond, bool, np.bool_)) or (isinstance(cond, np.ndarray) and cond.dtype == bool)):
            raise self.error(TypeError, f"w.if_ needs a condition (a comparison of per-lane values, a bool or a "
                                        f"bool mask per lane), got {type(cond).__name__} {cond!r}"[:300])
        m = self.lane_mask(cond)
        if m.shape not in ((), (self.width,)):
            raise self.error(ValueError, f"w.if_'s mask has shape {m.shape}; it needs one bit per lane "
                                         f"({self.lanes})")
        if m.ndim != 1:
            raise self.error(ValueError, "w.if_ needs a one-element condition (one bit per lane)")
        self.set_exec(saved & m)
        return saved, Cond(self.exec.copy())

    def lane_mask(self, cond) -> np.ndarray:
        """A condition as a mask over the register columns: a Python bool is uniform, a per-lane
        numpy mask of one wave applies to every workgroup of a batch."""
        m = mask_of(cond)
        if m.ndim == 0:
            return np.full(self.width, bool(m))
        if m.shape[-1] == self.lanes and self.members > 1:
            m = np.tile(m, (1,) * (m.ndim - 1) + (self.members,))
        return m

    def any(self, cond) -> bool:
        return bool((self.lane_mask(cond) & self.exec).any())

    def all(self, cond) -> bool:
        return bool((self.lane_mask(cond) | ~self.exec).all())

    def end_program(self, cond) -> bool:
        """s_endpgm where ``cond`` holds (uniform per wave): those lanes stop for good. Returns True
        when no lane is left, so a kernel writes ``if w.end_program(part * P >= ctx): return``."""
        m = self.lane_mask(cond)
        if m.ndim != 1:
            raise self.error(ValueError, "w.end_program needs a one-element condition")
        self.set_exec(self.exec & ~m)
        return not self.exec.any()

    def view(self, mem, shape=None, dtype=None):
        """``mem`` (a Buffer or an LDS region) indexed like HIP code: ``v[row][col]``, ``v.at(offset)``
        (views.View); ``shape``/``dtype`` default to the memory's own."""
        from .views import View
        return View(self, mem, shape, dtype)

    def register_file(self, count: int = 256, prefix: str = "v"):
        """Numbered registers of this wave (regfile.RegisterFile), for front ends that address
        registers by number; values move in and out with their bytes' provenance."""
        from .regfile import RegisterFile
        return RegisterFile(self, count, prefix)

    # -- finer checks --------------------------------------------------------------------------------
    def coverage(self, key, expect, field: str = "token", operand: str = "B") -> Coverage:
        """``with w.coverage(tile, expect=tokens):`` — every expected token must feed a K slot of the
        matrix instructions issued inside exactly once (see coverage.Coverage)."""
        return Coverage(self, key, expect, field, operand)
