"""Trace: the ordered record of what every wave did, queryable and replayable."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .dtypes import to_bytes
from ..errors import ArgumentError


def words_of(val: np.ndarray) -> np.ndarray:
    """Typed ``[n, lanes]`` -> 32-bit words ``[regs, lanes]`` (the VGPR contents)."""
    raw = to_bytes(val)
    pad = (-raw.shape[0]) % 4
    if pad:
        raw = np.concatenate([raw, np.zeros((pad, raw.shape[1]), np.uint8)])
    return np.ascontiguousarray(raw.T).view(np.uint32).T.copy()


@dataclass
class Operand:
    """One operand of an event: its VGPR range (None for an inline constant), type and values."""
    regs: tuple | None  # (first VGPR, count)
    dtype: str
    values: np.ndarray     # [n, lanes], typed
    file: str = "v"        # the register file as the code names it: "v" VGPRs, "a" AGPRs

    @classmethod
    def of(cls, v) -> Operand:
        return cls(v.regs, v.dtype, v.val.copy(), v.rfile)

    @property
    def name(self) -> str:
        if self.regs is None:
            vals = np.unique(self.values)
            return str(vals[0].item()) if len(vals) == 1 else "literal"
        base, n = self.regs
        return f"{self.file}{base}" if n == 1 else f"{self.file}[{base}:{base + n - 1}]"


@dataclass
class Event:
    index: int
    op: str                          # ISA-style name: v_mul_f32, global_load_dwordx4, ds_read_b64, v_mmac_...
    kernel: str
    workgroup: tuple
    wave: int
    source: str | None
    exec_mask: np.ndarray            # [lanes] bool
    inputs: list = field(default_factory=list)     # [Operand]
    outputs: list = field(default_factory=list)    # [Operand] written under exec_mask
    details: dict = field(default_factory=dict)

    def __repr__(self):
        ins = ", ".join(o.name for o in self.inputs)
        outs = ", ".join(o.name for o in self.outputs)
        return f"#{self.index} wg{self.workgroup} w{self.wave} {self.op} {outs}{' <- ' if ins else ''}{ins}  {self.source or ''}"


class BatchEvent:
    """One statement of a wave as recorded: its operands over every batched workgroup's columns.
    ``view(member)`` is the Event of one workgroup (its columns, no copy)."""
    __slots__ = ("index", "op", "kernel", "workgroups", "wave", "source", "exec_mask", "inputs", "outputs",
                 "details", "lanes", "record", "members")

    def __init__(self, index, op, kernel, workgroups, wave, source, exec_mask, inputs, outputs, details, lanes,
                 record=None, members=None):
        self.index, self.op, self.kernel, self.workgroups, self.wave = index, op, kernel, workgroups, wave
        self.source, self.exec_mask, self.inputs, self.outputs, self.details = source, exec_mask, inputs, outputs, details
        self.lanes, self.record = lanes, record
        self.members = None if members is None else frozenset(members)   # the members that executed it (None: all)

    def has(self, member: int) -> bool:
        """Whether workgroup ``member`` of the batch executed this statement."""
        if self.record is not None:
            return member in self.record.live
        return self.members is None or member in self.members

    def view(self, member: int) -> Event:
        cols = slice(member * self.lanes, (member + 1) * self.lanes)
        width = self.exec_mask.shape[0]
        ins = [Operand(o.regs, o.dtype, o.values[:, cols], o.file) for o in self.inputs]
        outs = [Operand(o.regs, o.dtype, o.values[:, cols], o.file) for o in self.outputs]
        if self.record is not None:
            ev = MmaEvent.from_record(self.record, member)
            ev.inputs, ev.outputs = ins, outs
            return ev
        n = len(self.workgroups)               # a detail per lane is sliced, one per workgroup indexed
        det = {k: (v[cols] if isinstance(v, np.ndarray) and v.shape[-1:] == (width,) else
                   v[member] if isinstance(v, np.ndarray) and v.shape == (n,) else v)
               for k, v in self.details.items()}
        return Event(index=self.index, op=self.op, kernel=self.kernel, workgroup=tuple(self.workgroups[member]),
                     wave=self.wave, source=self.source, exec_mask=self.exec_mask[cols], inputs=ins, outputs=outs,
                     details=det)


@dataclass(repr=False)          # Event's one-line repr, not every array
class MmaEvent(Event):
    """A matrix instruction of one workgroup: a view of its launch's compact record."""
    insn: object = None
    record: object = None                   # mmalog.MmaRecord
    member: int = 0                         # which workgroup of the record's batch

    @classmethod
    def from_record(cls, rec, member: int) -> MmaEvent:
        lanes = len(rec.exec_mask) // len(rec.workgroups)
        cols = slice(member * lanes, (member + 1) * lanes)
        ins, outs = ([[Operand(o.regs, o.dtype, o.values[:, cols], o.file) for o in side] for side in rec.operands]
                     if rec.operands is not None else ([], []))
        return cls(index=rec.first + member, op=rec.op, kernel=rec.kernel, workgroup=tuple(rec.workgroups[member]),
                   wave=rec.wave, source=rec.source, exec_mask=rec.exec_mask[cols], inputs=ins, outputs=outs,
                   insn=rec.insn, record=rec, member=member)

    @property
    def label(self) -> str | None:
        """What the kernel called this instruction (``w.mma(..., label=...)``), or None."""
        return getattr(self.record, "label", None)

    @property
    def tagged(self) -> bool:
        """Whether the operands carried provenance (a launch with provenance, tagged inputs)."""
        return self.record is not None and self.record.tagged()

    def fields(self, operand: str) -> list:
        side = self.record.a if operand.upper() == "A" else self.record.b
        return sorted(side or ())

    def slot_tags(self, operand: str, field: str = "token") -> np.ndarray:
        """Field values of every element of A ``[blocks, M, K]`` or B ``[blocks, K, N]`` (-1 = untagged)."""
        from .summaries import expand
        op = str(operand).upper()
        if op not in ("A", "B"):
            raise ArgumentError(f"operand {operand!r}: the K slots are A's and B's (\"A\" or \"B\")")
        insn = self.insn
        shape = (insn.blocks, insn.M, insn.K) if op == "A" else (insn.blocks, insn.K, insn.N)
        side = self.record.a if op == "A" else self.record.b
        if not side or field not in side:
            return np.full(shape, -1, np.int64)
        kind, arr = side[field]
        rows = self.record.member_rows(self.member)
        return np.asarray(expand(kind, arr[rows], op, insn.M, insn.N, insn.K), np.int64)

    def tokens(self, operand: str = "B", field: str = "token", block: int = 0) -> np.ndarray:
        """The token feeding each K slot ``[K]`` (of row 0 of A / column 0 of B)."""
        t = self.slot_tags(operand, field)[block]
        return t[0, :] if operand.upper() == "A" else t[:, 0]

    def token_set(self, operand: str = "B", field: str = "token") -> set:
        t = self.slot_tags(operand, field)
        return set(int(x) for x in np.unique(t) if x >= 0)


class Trace:
    """The recorded statements (``raw``: one BatchEvent per statement of a batch) and, per
    workgroup, their Event views: ``events`` (all, in issue order), ``of_wave(workgroup, wave)``."""

    def __init__(self, enabled: bool = True, max_bytes: int | None = None):
        self.enabled = enabled
        self.max_bytes = max_bytes       # the bound on what the recorded operands hold (None: none)
        self.bytes = 0
        self.raw: list[BatchEvent] = []
        self._events = None
        self._events_n = 0
        self._views: dict = {}
        self.mma_log = None              # mmalog.MmaLog of the launch (set by the machine)
        self.n_events = 0                # counted even when not recorded
        self.muted = 0                   # > 0: a front end records the instruction itself (asm VALU)

    def record(self, event: BatchEvent, error) -> None:
        """Append ``event``; past ``max_bytes`` of recorded values the launch stops with
        ``error(message)`` naming the bound, before the trace can take the machine's memory."""
        self.raw.append(event)
        if self.max_bytes is None:
            return
        self.bytes += event.exec_mask.nbytes + sum(o.values.nbytes for o in (*event.inputs, *event.outputs)) + 200
        if self.bytes > self.max_bytes:
            raise error(f"the trace holds {self.bytes / 2**30:.2f} GiB, over its bound max_trace_bytes = "
                        f"{self.max_bytes / 2**30:.2f} GiB: run with trace=False (gfxsim run: without --trace), "
                        f"or raise the bound (LaunchOptions(max_trace_bytes=...)); an endless loop also ends here")

    @property
    def events(self) -> list:
        """Every workgroup's events, statement by statement (built on first use)."""
        if self._events is None or self._events_n != len(self.raw):
            self._events_n = len(self.raw)
            self._events = [self._view(i, m) for i, b in enumerate(self.raw) for m in range(len(b.workgroups))
                            if b.has(m)]
        return self._events

    def _view(self, i, member):
        key = (i, member)
        got = self._views.get(key)
        if got is None:
            got = self._views[key] = self.raw[i].view(member)
        return got

    def truncate(self, n_raw: int, n_events: int):
        """Forget every statement from ``n_raw`` on (a folded attempt taken back)."""
        self.n_events = n_events
        del self.raw[n_raw:]
        for k in [k for k in self._views if k[0] >= n_raw]:
            del self._views[k]
        self._events = None

    def __len__(self):
        return len(self.events)

    def __getitem__(self, i):
        return self.events[i]

    def mmacs(self) -> list:
        """All matrix-instruction events, in issue order (views of the launch's MmaLog)."""
        return self.mma_log.events() if self.mma_log is not None else []

    def mmac_count(self) -> int:
        """How many matrix-instruction events ``mmacs()`` holds, without making them."""
        return self.mma_log.count() if self.mma_log is not None else 0

    def tagged_mmacs(self):
        """The matrix-instruction events whose operands carried provenance, in issue order, made lazily."""
        return self.mma_log.tagged_events() if self.mma_log is not None else iter(())

    def mmacs_carrying(self, operand: str, field: str = "token"):
        """The matrix-instruction events whose ``operand`` carries ``field`` values (a non-empty
        ``token_set(operand, field)``), in issue order, made lazily."""
        return self.mma_log.events_carrying(operand, field) if self.mma_log is not None else iter(())

    def of_wave(self, workgroup, wave) -> list:
        wg = tuple(workgroup) if not isinstance(workgroup, int) else (workgroup, 0, 0)
        out = []
        for i, b in enumerate(self.raw):
            if b.wave != wave:
                continue
            for m, w in enumerate(b.workgroups):
                if tuple(w) == wg and b.has(m):
                    out.append(self._view(i, m))
        return out

    def history(self, workgroup, wave, lane: int, reg: int) -> list:
        """Every write to VGPR ``reg`` of one lane: [(event, 32-bit word written)]."""
        out = []
        for e in self.of_wave(workgroup, wave):
            if not e.exec_mask[lane]:
                continue
            for o in e.outputs:
                base, n = o.regs
                if base <= reg < base + n:
                    out.append((e, int(words_of(o.values)[reg - base, lane])))
        return out

    def replay(self, workgroup=0, wave=0) -> Stepper:
        return Stepper(self.of_wave(workgroup, wave))


class Stepper:
    """Step forward and back through one wave's events, with its VGPR file reconstructed."""

    def __init__(self, events):
        self.events = events
        self.pos = 0                       # number of events applied
        lanes = len(events[0].exec_mask) if events else 64
        top = max((o.regs[0] + o.regs[1] for e in events for o in e.outputs), default=1)
        self.vgpr = np.zeros((top, lanes), np.uint32)
        self.written = np.zeros((top, lanes), bool)
        self._undo = []

    @property
    def current(self) -> Event | None:
        """The event about to execute (None at the end)."""
        return self.events[self.pos] if self.pos < len(self.events) else None

    @property
    def previous(self) -> Event | None:
        return self.events[self.pos - 1] if self.pos else None

    def step(self, n: int = 1):
        for _ in range(n):
            if self.pos >= len(self.events):
                break
            e = self.events[self.pos]
            undo = []
            for o in e.outputs:
                base, cnt = o.regs
                words = words_of(o.values)[:cnt]
                undo.append((base, cnt, self.vgpr[base:base + cnt].copy(), self.written[base:base + cnt].copy()))
                m = e.exec_mask
                self.vgpr[base:base + cnt, m] = words[:, m]
                self.written[base:base + cnt, m] = True
            self._undo.append(undo)
            self.pos += 1
        return self

    def back(self, n: int = 1):
        for _ in range(n):
            if not self.pos:
                break
            for base, cnt, old, oldw in reversed(self._undo.pop()):
                self.vgpr[base:base + cnt] = old
                self.written[base:base + cnt] = oldw
            self.pos -= 1
        return self

    def goto(self, index: int):
        while self.pos < index:
            self.step()
        while self.pos > index:
            self.back()
        return self

    def register(self, reg: int, lane: int | None = None, dtype: str = "u32"):
        """Contents of VGPR ``reg`` now (one lane or all), viewed as ``dtype``."""
        from .dtypes import np_dtype
        w = self.vgpr[reg] if lane is None else self.vgpr[reg, lane:lane + 1]
        return w.view(np_dtype(dtype)) if np_dtype(dtype).itemsize == 4 else w
