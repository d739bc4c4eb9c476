"""What the run pictures draw, read from a kernel run: no drawing here.

A "run" is a gfxsim Run or a kernels_py KernelRun (its decode and reduce Runs). Everything comes
from the run's own records: the K-slot tags of each matrix instruction (MmaEvent), the findings
(a scale-group-mismatch names the tokens its scale was computed over), and, for the coverage and
the LDS views, the trace. Nothing is re-derived from the kernel's source.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from gfxsim.arch.kslots import format_token_set
from gfxsim.machine.trace import MmaEvent
from gfxsim.errors import ArgumentError


def runs_of(run) -> list:
    """The gfxsim Runs behind ``run`` (a Run, or a KernelRun with ``.runs``)."""
    runs = getattr(run, "runs", None)
    return list(runs) if runs is not None else [run]


def name_of(run) -> str:
    """'paged_attention_decode on gfx936, context 300, grouping contiguous' (what a title names)."""
    r = runs_of(run)[0]
    words = [f"{getattr(run, 'kernel', r.kernel)} on {r.arch}"]
    if getattr(run, "context", None) is not None:
        words.append(f"context {run.context}")
    if "grouping" in getattr(run, "params", {}):
        words.append(f"grouping {run.params['grouping']}")
    return ", ".join(words)


def instruction_name(e: MmaEvent) -> str:
    """``#12 chunk 0 tile 1 j 0``: the instruction's trace index and, when the kernel gave one
    (``w.mma(..., label=...)``), its label."""
    return f"#{e.index}" + (f" {e.label}" if e.label else "")


def slot_tokens(e: MmaEvent) -> np.ndarray:
    """The token feeding each K slot ``[K]``: A's (row 0) where A carries tokens, else B's (column 0)."""
    a = e.tokens("A")
    return a if (a >= 0).any() else e.tokens("B")


def sums_over_tokens(e: MmaEvent) -> bool:
    """True for an instruction whose K slots hold several tokens (PV), not one token per column (QK)."""
    if not e.tagged:
        return False
    return any(np.unique(t[t >= 0]).size > 1 for t in (e.tokens("A"), e.tokens("B")))


@dataclass(frozen=True)
class SlotScales:
    """One matrix instruction's K slots and the scale group applied to its result."""
    event: MmaEvent
    tokens: np.ndarray                 # [K] token per K slot (-1: untagged, e.g. past the context)
    scale_over: frozenset | None    # tokens the scale was computed over; None: no mismatch found
    finding: object = None

    @property
    def group(self) -> frozenset:
        """The token set the slots' scale came from: the finding's, or the instruction's own K set."""
        return self.scale_over if self.scale_over is not None else frozenset(int(t) for t in self.tokens if t >= 0)

    @property
    def misaligned(self) -> np.ndarray:
        """[K] True where the slot's token is not in the set its scale was computed over."""
        if self.scale_over is None:
            return np.zeros(self.tokens.shape, bool)
        return np.array([t >= 0 and int(t) not in self.scale_over for t in self.tokens])


def _need_provenance(run):
    for r in runs_of(run):
        if not r.provenance:
            raise ArgumentError(f"{r.kernel}: the run has no provenance (tags), so its K slots carry no tokens; "
                             "run it with provenance (drop --no-provenance)")


def token_mmacs(run, workgroup=None, wave=None) -> list:
    """[(Run, MmaEvent)] of the instructions summing over tokens, in issue order, optionally of one wave."""
    _need_provenance(run)
    wg = None if workgroup is None else _wg(workgroup)
    out = []
    for r in runs_of(run):
        for e in r.mmacs():
            if (wg is None or e.workgroup == wg) and (wave is None or e.wave == wave) and sums_over_tokens(e):
                out.append((r, e))
    return out


def slot_scales(run, workgroup=None, wave=None) -> list:
    """[SlotScales] of every token-summing instruction (of one wave, if given)."""
    out = []
    by_run = {}
    for r, e in token_mmacs(run, workgroup, wave):
        if id(r) not in by_run:
            by_run[id(r)] = {f.details["mma_event"]: f for f in r.findings_of("scale-group-mismatch")}
        f = by_run[id(r)].get(e.index)
        over = frozenset(int(t) for t in f.details["scale_over"]) if f is not None else None
        out.append(SlotScales(e, slot_tokens(e), over, f))
    return out


def select(run, workgroup=(0, 0, 0), wave=0, limit=None) -> list:
    """SlotScales of one wave's token-summing instructions (every wave's when ``wave`` is None),
    the first ``limit`` of them; an empty selection is an error naming the waves that have some."""
    slots = slot_scales(run, None if wave is None else workgroup, wave)
    if not slots:
        have = waves(s.event for s in slot_scales(run))
        if not have:
            raise ArgumentError(f"{name_of(run)} issued no matrix instruction whose K slots hold several tokens "
                             "(a QK instruction sums over head elements, one token per column)")
        raise ArgumentError(f"workgroup {_wg(workgroup)} wave {wave} issued no matrix instruction that sums over "
                         "tokens; waves that did: " + ", ".join(f"workgroup {wg} wave {w}" for wg, w in have[:6]))
    if limit is not None and limit < 1:
        raise ArgumentError(f"the number of instructions to draw must be >= 1, got {limit}")
    return slots[:limit]


def scale_groups(slots) -> list:
    """The distinct token sets scales were computed over, ordered by their smallest token."""
    groups = {s.group for s in slots if s.group}
    return sorted(groups, key=lambda g: (min(g), len(g)))


def waves(events) -> list:
    """Distinct (workgroup, wave) of events, in first-issue order."""
    return list(dict.fromkeys((e.workgroup, e.wave) for e in events))


def describe_group(g) -> str:
    return format_token_set(sorted(g))


# -- coverage: which tokens each output tile consumed ------------------------------------------

def accumulators(events) -> dict:
    """{matrix-instruction index: accumulator} for one wave's traced events, in issue order.

    An output tile is the register range a result is summed into in place (``o += acc * scale``
    is a v_add_f32 whose destination is one of its sources). The result is followed through the
    instructions that read it (v_cvt, v_mul) to that add; the accumulator is named by the event
    that started it (its last write that was not such an add) and its VGPRs."""
    carried: dict = {}       # VGPR -> instruction indices whose results it holds
    started: dict = {}       # VGPR -> index of the event that started the value held there
    out = {}
    for e in events:
        ins = [o for o in e.inputs if o.regs is not None]
        src = frozenset().union(*(carried.get(r, frozenset()) for o in ins for r in _regs(o)))
        if isinstance(e, MmaEvent):
            src = src | {e.index}
        for o in e.outputs:
            regs = _regs(o)
            into = [i for i in ins if i.regs == o.regs and not any(carried.get(r) for r in regs)]
            if src and into:                     # summed into an accumulator in place
                for m in src:
                    out.setdefault(m, (started.get(o.regs[0], e.index), o.regs))
                continue
            for r in regs:
                if src:
                    carried[r] = src
                else:
                    carried.pop(r, None)
                started[r] = e.index
    return out


def _regs(operand):
    base, n = operand.regs
    return range(base, base + n)


@dataclass(frozen=True)
class Tile:
    """One output tile: an accumulator of one wave, and how often each token fed its K slots."""
    workgroup: tuple
    wave: int
    started: int                      # event index that started the accumulator
    regs: tuple                       # (first VGPR, count)
    mmacs: tuple                      # indices of the instructions summed into it
    counts: dict                      # token -> times consumed

    @property
    def label(self) -> str:
        base, n = self.regs
        v = f"v{base}" if n == 1 else f"v[{base}:{base + n - 1}]"
        wg = ",".join(str(x) for x in self.workgroup)
        return f"wg ({wg}) wave {self.wave} {v}"


def coverage(run) -> list:
    """[Tile] of every accumulator the token-summing instructions feed (needs a traced run)."""
    tiles = []
    for r in runs_of(run):
        if not r.trace.enabled:
            raise ArgumentError(f"{r.kernel}: coverage follows results through the trace; run with trace=True "
                             "(gfxsim run --trace)")
        mm = [e for _, e in token_mmacs(r)]
        for wg, wv in waves(mm):
            acc = accumulators(r.trace.of_wave(wg, wv))
            groups = defaultdict(list)
            for e in mm:
                if (e.workgroup, e.wave) == (wg, wv):
                    groups[acc.get(e.index, (e.index, e.outputs[0].regs if e.outputs else (0, 0)))].append(e)
            for (start, regs), es in sorted(groups.items(), key=lambda kv: kv[0][0]):
                counts = defaultdict(int)
                for e in es:
                    for t in e.tokens("B"):
                        if t >= 0:
                            counts[int(t)] += 1
                tiles.append(Tile(wg, wv, start, tuple(regs), tuple(e.index for e in es), dict(counts)))
    return tiles


def _wg(x) -> tuple:
    if isinstance(x, (int, np.integer)):
        x = (int(x),)
    x = tuple(int(v) for v in x)
    return x + (0,) * (3 - len(x))
