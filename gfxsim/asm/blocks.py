"""Straight runs of ALU and program-control instructions, each run as one generated function.

run._execute wraps every instruction in what the wait counters, the origin tracking and the trace
need of it. Of an instruction that touches no memory (a VALU or SALU row, a move, a branch, a
wait) most of that is decided by the program: the wait counters only ask whether it reads or
writes a register an outstanding access will write (``Plan.bits``) or, for an ``s_waitcnt``,
retire what it covers; nothing is issued, and without a trace its event is a count. A block is the
longest run of such instructions from a pc, up to and including the first that may leave the run
(a branch, ``s_endpgm``); its
function is Python source generated once (per Program, so per kernel content: cache.py; its code
object kept by content in memory and on disk, ``compiled``) that calls
each instruction's prepared step (translate.py) or semantics function in turn, counting its lanes
and its event exactly as _execute does, with no per-instruction dispatch.

The block runs only where it is exact, decided on entry (``ready``): no trace (a traced event keeps
its operands), no register of the block up to its first wait pending on an outstanding access (which
_execute's wait-counter check would report or poison; past each wait the next part is asked again,
and the block returns there if one is), and the wave's step bound not reached within the block
(the bound raises at the instruction that passes it). Otherwise run.py executes the same
instructions one at a time through _execute. Origin tracking (``st.any_unknown``, with provenance)
is asked per instruction, as _execute asks it.
"""
from __future__ import annotations

import hashlib
import marshal
import os
import sys
import threading

import numpy as np

from ..cachedir import cache_root
from ..isa.fp import APPROXIMATED
from ..machine import jit as _jit
from ..machine.jit import START_WIDTH
from .origin import taint_in
from .waitcnt import Counters
from .semantics import float_mods

# instructions that may return a pc other than the next: a block ends after one
_LEAVES = ("s_branch", "s_cbranch", "s_setpc", "s_swappc", "s_endpgm", "s_call", "s_trap", "s_rfe")
ENABLED = True          # False: every instruction through run._execute (the A/B, and the tests comparing both)
# False: a block calls every instruction's step, none written into its source (semantics.Inline;
# the A/B, and the tests comparing both)
INLINE = True
# False: runs of lane rows take the block's numpy lines, not the compiled executor (lanevm.py; the
# A/B, and the tests comparing both)
LANES = True
# True: a block runs its memory, LDS and matrix instructions too, each through run._execute as the
# one-at-a-time loop runs it (its wait counters' check and count, its back-end event), so a basic block
# is one call where it was cut at every access (prefix_prefill's twin: ~380 block calls a launch). False:
# a block ends before each (the A/B, and the tests comparing both).
MEMORY = True
# the widest wave (columns) the executor takes: its lane loops cost ~2 ns a lane a row, numpy's whole-row
# calls ~1 µs plus less per lane, so a wide batch (int8_kv_cache's thousands of members) keeps the numpy lines
LANE_WIDTH = START_WIDTH
# A wave with provenance never takes a block's lean function (st.lean is off for the whole run), so
# its blocks are made without it: no Inline templates, lane rows or second body built for a function
# never called (the asm decode's blocks: 0.18 -> 0.1 s of CPU at 4K, 0.24 -> 0.1 s at 16K). False: every
# block is made with it (the A/B, and the test comparing both)
PLAIN = True


class Block:
    """Instructions ``start``..``end - 1`` of a program, run by ``run(st, w, tr, counted)``, which
    returns the next pc (an int, or a pc per member where a branch parts them). Where it is not
    ready, its instructions up to ``alone`` run one at a time (then a block is looked up again)."""
    __slots__ = ("start", "end", "bits", "run", "alone")

    def __init__(self, start: int, end: int, bits: int, run, alone: int | None = None):
        self.start, self.end, self.bits, self.run = start, end, bits, run
        self.alone = end if alone is None else alone

    def ready(self, st, w, tr) -> bool:
        """Whether the block gives exactly what _execute gives instruction by instruction now."""
        return (not tr.enabled and not (st.counters.bits & self.bits)
                and w.steps + (self.end - self.start) <= w.machine.max_steps)


def member(program, pc: int) -> bool:
    """Whether instruction ``pc`` can be part of a block: it has semantics and is no barrier; it
    records its own event (no memory, LDS or matrix operation; a wait is one), or it is such a
    back-end instruction (``backend``) and MEMORY is on."""
    p = program.waits[pc]
    if program.fns[pc] is None or p.barrier:
        return False
    return (program.own_event[pc] and p.cls is None) or MEMORY


def backend(program, pc: int) -> bool:
    """Whether block member ``pc`` is a memory, LDS or matrix instruction: run in the block through
    run._execute, whose wait counters check its own registers and count what it issues."""
    return not program.own_event[pc] or program.waits[pc].cls is not None


def leaves(mnemonic: str) -> bool:
    return mnemonic.startswith(_LEAVES)


def blocks_of(program, lean: bool = True) -> dict:
    """The Program's blocks for a wave that may take their lean function (``lean``: WaveState.lean),
    or for one that never does (PLAIN: made without it, kept apart)."""
    return program.blocks if lean or not PLAIN else program.plain_blocks


def block_at(program, pc: int, lean: bool = True) -> Block | None:
    """The block starting at ``pc`` (made once per Program), or None where instruction ``pc``
    cannot start one. ``lean``: see blocks_of."""
    cache = blocks_of(program, lean)
    if pc in cache:
        return cache[pc]
    b = _make(program, pc, cache is program.blocks)
    cache[pc] = b
    return b


def block_until(program, pc: int, bound: int, lean: bool = True) -> Block | None:
    """The block at ``pc``, cut to end before ``bound`` where it reaches it (members of a batch run
    up to the smallest pc others wait at, usually a label inside a block); made once per (pc,
    bound), kept beside the blocks under that pair."""
    cache = blocks_of(program, lean)
    b = cache[pc] if pc in cache else block_at(program, pc, lean)
    if b is None or b.end <= bound:
        return b
    key = (pc, bound)
    cut = cache.get(key)
    if cut is None and key not in cache:
        cut = Block(pc, bound, _segment_bits(program, pc, bound), _compile(program, pc, bound, cache is program.blocks),
                    _alone_until(program, pc, bound)) if bound > pc else None
        cache[key] = cut
    return cut


def _make(program, start: int, lean: bool = True) -> Block | None:
    n = len(program.decoded)
    end = start
    while end < n and member(program, end):
        end += 1
        if leaves(program.decoded[end - 1].ins.mnemonic):
            break
    if end == start:
        return None
    return Block(start, end, _segment_bits(program, start, end), _compile(program, start, end, lean),
                 _alone_until(program, start, end))


def _alone_until(program, start: int, end: int) -> int:
    """Where a block start..end-1 that is not ready runs one instruction at a time up to: with
    MEMORY, past its first back-end instruction or wait (there the pending registers change, and a
    block from the next instruction may be ready), not to the end of its basic block; else its end."""
    if MEMORY:
        for q in range(start, end):
            if program.waits[q].wait is not None or backend(program, q):
                return q + 1
    return end


def _segment_bits(program, pc: int, end: int) -> int:
    """The registers instructions pc.. name up to the next wait (the part of a block one check
    covers), but for back-end instructions (``backend``), which run._execute checks each time."""
    bits = 0
    while pc < end and program.waits[pc].wait is None:
        if not backend(program, pc):
            bits |= program.waits[pc].bits
        pc += 1
    return bits


def _compile(program, start: int, end: int, lean: bool = True):
    """The block's function: each instruction as _execute runs it when no trace is on and no
    register it names is pending (so the wait counters neither report nor count anything). Where
    some of its instructions give their lean work as source (semantics.Inline), a second function
    runs that work in place of their steps; the first calls it when the wave state is lean
    (``lean`` False: a block for waves that never are, made without the second function)."""
    from .run import execute_one
    env = {"taint_in": taint_in, "count_nonzero": np.count_nonzero, "_blocks": sys.modules[__name__],
           "_execute": execute_one}
    inline = {pc: _inline_of(program, pc) for pc in range(start, end)} if lean else {}
    inline = {pc: x for pc, x in inline.items() if x is not None}
    runs = _lane_runs(program, start, end, inline) if lean else {}
    lean = bool(inline or runs)
    regs = [r for x in inline.values() for r in _vregs(x)] + _run_vregs(runs)
    lines = ["def run(st, w, tr, counted):"]
    if lean:
        lines += _entry_check(regs)
    lines += _body(program, start, end, env, {}, {})
    if lean:
        body = _body(program, start, end, env, inline, runs, _lean_condition(regs))
        lines += ["", "def run_lean(st, w, tr, counted):"] + _lean_prologue(inline, regs, env, start, "\n".join(body),
                                                                       sum(last - pc for pc, (_, last) in runs.items()))
        lines += body
    src = "\n".join(lines) + "\n"
    exec(compiled(src, f"<gfxsim.asm block {program.kernel.name}:{start}-{end}>"), env)
    return env["run"]


def _inline_of(program, pc: int):
    """Instruction ``pc``'s semantics.Inline, or None (no template, or a form it leaves to the step)."""
    if program.steps[pc] is None:          # no prepared step: its checks are the function's, each time
        return None
    make = getattr(program.fns[pc], "inline", None)
    return None if make is None else make(program.decoded[pc])


def _vregs(x) -> list:
    """The VGPR/AGPR ranges (file, first, count) an Inline names."""
    regs = [(f[0], f[1], 2 if t in ("u64", "pair") else 1) for (f, _), t in x.srcs if f[0] in ("v", "a")]
    return regs + ([x.dst] if x.dst[0] in ("v", "a") else [])


def _run_vregs(runs) -> list:
    """The VGPR/AGPR ranges the runs' rows name (lanevm.vregs)."""
    from . import lanevm
    return [r for rows, _ in runs.values() for row in rows for r in lanevm.vregs(row)]


def _lean_condition(regs) -> str:
    """When the inline work and the runs are exactly the steps': no provenance (st.lean, and no
    register file holding any), no origin marks, and every register the templates and rows name
    inside its file (else the steps name what is wrong)."""
    top = {"v": 0}                        # the executor takes the v file's arrays whatever its rows name
    for file, first, n in regs:
        top[file] = max(top.get(file, 0), first + n)
    cond = ["_blocks.INLINE", "st.lean", "not st.any_unknown"]
    for file, n in sorted(top.items()):
        cond.append(f"st.{file} is not None and st.{file}.prov is None and st.{file}.count >= {n}")
    return " and ".join(cond)


def _entry_check(regs) -> list[str]:
    """The lean function where it is exact (_lean_condition)."""
    return [f"    if {_lean_condition(regs)}:",
            "        return run_lean(st, w, tr, counted)"]


def _lean_prologue(inline, regs, env, start, body: str, work: int) -> list[str]:
    """The lean function's locals: the register files' arrays, each member's SGPR row, EXEC, and
    the block's constants at this wave's width (those its ``body`` reads: a block entered
    thousands of times pays for each)."""
    files = sorted({file for file, _, _ in regs} | {"v"})
    consts = {(t, f[1]) for x in inline.values() for (f, _), t in x.srcs if f[0] == "const"}
    env[f"KW{start}"] = _constants(tuple(sorted(c for t, c in consts if t in ("u32", "i32", "f32"))), np.uint32)
    env[f"KW64{start}"] = _constants(tuple(sorted(c for t, c in consts if t == "u64")), np.uint64)
    env[f"KWS{start}"] = _constants(tuple(sorted(c for t, c in consts if t in ("s32", "s64"))), np.uint64)
    lines = [f"    R_{f}, W_{f}, F_{f} = st.{f}.words, st.{f}.written, st.fresh[{f!r}]" for f in files]
    from . import lanevm
    from .semantics import dequant
    env["_lanevm"], env["_dequant"] = lanevm, dequant
    a = ("st.a.words, st.a.written" if "a" in files else "_NOREG, _NOWR")
    env["_NOREG"], env["_NOWR"] = np.zeros((1, 1), np.uint32), np.zeros((4, 1), bool)
    # numba started only where a run may take the executor (a wide batch never does); None until
    # numba is up (jit.worth_starting, counting the block's lane rows as the work): numpy lines
    env["_jit"] = _jit
    lines += ["    _lanes = (_lanevm.run_rows if _lanevm.READY else _lanevm.executor()"
              f" if w.width <= _blocks.LANE_WIDTH and _jit.worth_starting(w.width, {work}) else None)",
              f"    LF = (st.v.words, st.v.written, st.fresh['v'], {a}, st.fresh['a'])"]
    lines += ["    S, WID = st.s, w.width",
              "    ALL = _blocks.every(st.members)",
              "    EX, XF = w.exec, w.exec_full",
              "    CNT = WID if XF else int(count_nonzero(EX))"]
    if "SL(" in body:
        lines += ["    if st.members == 1:",
                  "        def SL(i):",
                  "            return np.full(WID, S[0, i], np.uint32)",
                  "    else:",
                  "        def SL(i, lanes=st.lanes):",
                  "            return np.repeat(S[:, i], lanes)"]
    lines += [f"    {name} = KW{x}{start}({arg})" for name, x, arg in (("K", "", "WID"), ("K64", "64", "WID"),
                                                                       ("KS", "S", "st.members"))
              if f"{name}[" in body]
    env["np"] = np
    env["float_mods"] = float_mods
    env["_F32"], env["_I32"], env["_U64"], env["_M32"] = np.float32, np.int32, np.uint64, np.uint64(0xFFFFFFFF)
    return lines


_EVERY: dict = {}               # members -> a bool array of ones (never written): the executor's act where all run


def every(members: int) -> np.ndarray:
    """Every member of a batch of ``members`` executing (the executor's ``act`` where ``st.act`` is
    None), made once per batch size (bounded: a few sizes per process)."""
    a = _EVERY.get(members)
    if a is None:
        if len(_EVERY) >= 64:
            _EVERY.clear()
        a = _EVERY[members] = np.ones(members, bool)
    return a


def _constants(words: tuple, dtype):
    """The block's constants at a width (lanes, or members for scalar ones): read-only arrays of
    ``dtype``, made once per width."""
    made = {}

    def at(width: int) -> dict:
        k = made.get(width)
        if k is None:
            k = {}
            for c in words:
                a = np.full(width, c, dtype)
                a.flags.writeable = False
                k[c] = a
            made[width] = k
        return k
    return at


def _read_expr(form, mods, t: str) -> str:
    """The source of one read (semantics.source's form) as the block's locals give it."""
    kind = form[0]
    if t in ("s32", "s64", "scc"):              # scalar: one number per member (sop.s_reader)
        if kind == "s":
            return f"S[:, {form[1]}].astype(_U64)" if t == "s32" else f"S[:, {form[1]}:{form[1] + 2}].copy().view(_U64)[:, 0]"
        if kind == "sread":
            return f"st.sread({form[1]})" if t == "s32" else f"st.sread64({form[1]})"
        if kind == "scc":
            return "st.scc" if t == "scc" else "st.scc.copy()"
        return f"KS[{form[1]}]"
    if t == "pair":                             # two registers' words [2, width] (packed fp32)
        if kind in ("v", "a"):
            return f"R_{kind}[{form[1]}:{form[1] + 2}]"
        return f"np.stack((st.lanewise(st.sread({form[1]})), st.lanewise(st.sread({form[1] + 1}))))"
    if t == "u64":                              # a 64-bit vector source (semantics.reader64)
        if kind in ("v", "a"):
            return f"R_{kind}[{form[1]}:{form[1] + 2}].T.copy().view(_U64)[:, 0]"
        if kind == "sread":
            return f"st.lanewise64(st.sread64({form[1]}))"
        return f"K64[{form[1]}]"
    if kind in ("v", "a"):
        x = f"R_{kind}[{form[1]}]"
    elif kind == "s":
        x = f"SL({form[1]})"
    elif kind == "sread":
        x = f"st.lanewise(st.sread({form[1]}))"
    elif kind == "scc":
        x = "st.lanewise(st.scc)"
    elif kind == "mask":
        return f"st.mask_of({form[1]})"
    else:
        x = f"K[{form[1]}]"
    if t == "f32":
        return f"float_mods({x}, {mods[0]}, {mods[1]})" if any(mods) else f"{x}.view(_F32)"
    if t == "i32":
        return f"{x}.view(_I32)"
    return x


def _inline_lines(pc: int, x, env) -> list[str]:
    """Instruction pc's lean work: the reads, the call, the keep marks and the write under EXEC (as
    WaveState.vwrite writes words into a file holding no provenance)."""
    env[f"C{pc}"] = x.call
    f, i, n = x.dst
    rows = f"{i}" if n == 1 else f"{i}:{i + n}"
    if f == "s":
        return _scalar_lines(pc, x)
    if f == "mask":                             # a compare: the lanes under EXEC to an SGPR pair
        args = ", ".join(_read_expr(form, mods, t) for (form, mods), t in x.srcs)
        out = [f"        r = np.asarray(C{pc}({args}), bool) & w.exec",
               f"        st.set_mask({i}, r)"]
        if n:
            out.append("        st.set_exec(r)")
        return out
    if x.copy:
        return _copy_lines(x)
    out = []
    if x.keep is not None:
        env[f"KP{pc}"] = x.keep
        out.append(f"        keep = KP{pc}(st)")
    args = ", ".join(_read_expr(form, mods, t) for (form, mods), t in x.srcs)
    out += [f"        r = C{pc}({args})",
            "        if XF:",
            f"            R_{f}[{rows}] = r",
            f"            W_{f}[{4 * i}:{4 * (i + n)}] = True",
            f"            F_{f}[{rows}] = False",
            "        else:",
            f"            np.copyto(R_{f}[{rows}], r, where=EX)",
            f"            W_{f}[{4 * i}:{4 * (i + n)}] |= EX",
            f"            F_{f}[{rows}] &= ~EX"]
    if x.keep is not None:
        out.append(f"        st.set_fresh({f!r}, {i}, keep[None, :])")
    return out


def _scalar_lines(pc: int, x) -> list[str]:
    """A scalar row: its result and SCC written as WaveState.swrite/swrite64 (every member: their
    one assignment; some: swrite itself) and set_scc write them."""
    _, i, n = x.dst
    args = ", ".join(_read_expr(form, mods, t) for (form, mods), t in x.srcs)
    out = [f"        r, c = C{pc}({args})",
           "        if st.act is None:",
           "            r = np.asarray(r).astype(_U64)"]
    if n == 1:
        out += [f"            S[:, {i}] = r & _M32",
                f"            st.s_written[{i}] = True",
                "        else:",
                f"            st.swrite({i}, r)"]
    else:
        out += [f"            S[:, {i}] = r & _M32",
                f"            S[:, {i + 1}] = r >> _U64(32)",
                f"            st.s_written[{i}:{i + 2}] = True",
                "        else:",
                f"            st.swrite64({i}, r)"]
    return out + ["        if c is not None: st.set_scc(c)"]


def _copy_lines(x) -> list[str]:
    """A register copy as WaveState.vcopy makes it: words, written bits and fresh marks under EXEC
    (read before any is written, where source and destination overlap)."""
    f, i, n = x.dst
    ((_, a), _), _t = x.srcs[0]
    sf = x.srcs[0][0][0][0]
    rows, src = f"{i}:{i + n}", f"{a}:{a + n}"
    wr, wsrc = f"{4 * i}:{4 * (i + n)}", f"{4 * a}:{4 * (a + n)}"
    return ["        words, wr, keep = " + f"R_{sf}[{src}].copy(), W_{sf}[{wsrc}].copy(), F_{sf}[{src}].copy()",
            "        if XF:",
            f"            R_{f}[{rows}] = words",
            f"            W_{f}[{wr}] = wr",
            f"            F_{f}[{rows}] = keep",
            "        else:",
            f"            np.copyto(R_{f}[{rows}], words, where=EX)",
            f"            np.copyto(W_{f}[{wr}], wr, where=EX)",
            f"            np.copyto(F_{f}[{rows}], keep, where=EX)"]


# the events of the inline instructions since the last flush, counted as their own events would
# count them (Wave.event: the trace's count, the wave's steps, the members' counts), before any step
# runs, at every exit, and when the block raises (a side-by-side attempt is then taken back)
_FLUSH = ["        if k:",
          "            tr.n_events += k",
          "            w.steps += k",
          "            if w.member_events is not None: w.wg.member_event(w, k)",
          "            k = 0"]


def _body(program, start: int, end: int, env, inline, runs, lean_cond: str | None = None) -> list[str]:
    """The instructions pc start..end-1, each as _execute runs it; those in ``inline`` by their
    lean work written here (no step call; EXEC and the lane count of the block's locals, refreshed
    after every instruction that may write EXEC; their events counted together, _FLUSH), each of
    ``runs`` (_lane_runs) one executor call where the wave allows it. Both empty: the steps alone.
    A back-end instruction (``backend``) is run._execute itself; past it the block goes on only
    while no register the instructions up to the next wait name is pending (it may have issued a
    load) and, in the lean function, while ``lean_cond`` (its entry condition) holds."""
    lean = bool(inline or runs)
    lines = ["    approx = w.machine.approximated",
             "    counters = st.counters",
             "    tr.muted += 1",
             "    k = 0",
             "    try:"]
    skip = 0
    for pc in range(start, end):
        d = program.decoded[pc]
        step = program.steps[pc]
        env[f"D{pc}"] = d
        m = d.ins.mnemonic
        x = inline.get(pc)
        if pc in runs:                            # a run of lane rows: one compiled call (lanevm.py)
            lines += _run_lines(program, pc, runs[pc], env, inline)
            last = runs[pc][1]
            if last == end:
                lines += [*_FLUSH, f"        return {end}"]
            skip = last
            continue
        if pc < skip:
            continue
        if x is not None:
            lines += _inline_ins(program, pc, x, env)
            if pc == end - 1:
                lines += [*_FLUSH, f"        return {pc + 1}"]
            continue
        if backend(program, pc):
            lines += _backend_lines(program, pc, end, env, lean, lean_cond, pc + 1 in inline or pc + 1 in runs)
            continue
        lines += [f"        st.pc = {pc}; st.current = D{pc}        # {m} (line {d.ins.line})",
                  f"        if st.any_unknown: taint_in(st, D{pc})"]
        if lean:
            lines += _FLUSH
        if step is not None:
            env[f"S{pc}"] = step
            call = f"S{pc}(st)"
        else:
            env[f"F{pc}"] = program.fns[pc]
            call = f"F{pc}(st, D{pc})"
        wait = program.waits[pc].wait
        lines.append("        counted[0] += w.width if w.exec_full else int(count_nonzero(w.exec))")
        if wait:                                  # what the wait counters do before it (Counters.before)
            env[f"W{pc}"] = wait
            lines.append(f"        counters.wait(W{pc})")
        lines += [f"        nxt = {call}",
                  "        st.taint_s = st.taint_v = st.fresh_out = None",
                  "        tr.n_events += 1",
                  "        w.steps += 1",
                  "        if w.member_events is not None: w.wg.member_event(w)"]      # waves as members
        lines += [f"        approx.add({a!r})" for a in _approx_names(m)]
        if pc + 1 in inline or pc + 1 in runs:    # it may have written EXEC: the next reads it
            lines += ["        EX, XF = w.exec, w.exec_full",
                      "        CNT = WID if XF else int(count_nonzero(EX))"]
        seg = _segment_bits(program, pc + 1, end) if wait is not None and pc < end - 1 else 0
        if seg:                                   # past a wait: the next part's registers must not be pending
            lines.append(f"        if counters.bits & {seg}: return {pc + 1}")
        if pc == end - 1:
            lines.append(f"        return {pc + 1} if nxt is None else nxt")
        else:
            lines.append("        if nxt is not None: return nxt")
    lines += ["    finally:",
              "        tr.muted -= 1",
              "        st.taint_s = st.taint_v = st.fresh_out = None"]
    if lean:
        lines += _FLUSH
    return lines


def _backend_lines(program, pc: int, end: int, env, lean: bool, lean_cond: str | None, refresh: bool) -> list[str]:
    """A memory, LDS or matrix instruction as run._run_together runs it: its lanes counted, then
    run._execute (its wait counters' check before and count after, the back end's event, unmuted as
    there). The block returns at the next instruction where that one may not run on as a block
    does: the step bound within the rest, a register named up to the next wait now pending, or
    (lean) the lean condition failing."""
    d = program.decoded[pc]
    env[f"D{pc}"] = d
    env[f"F{pc}"] = program.fns[pc]
    env[f"S{pc}"] = program.steps[pc]
    lines = [f"        st.pc = {pc}; st.current = D{pc}        # {d.ins.mnemonic} (line {d.ins.line})"]
    if lean:
        lines += _FLUSH
    lines += ["        counted[0] += w.width if w.exec_full else int(count_nonzero(w.exec))",
              "        tr.muted -= 1",
              "        try:"]
    p = program.waits[pc]
    acts = Counters.acts_before(p)
    if program.own_event[pc] or acts is None:
        lines.append(f"            nxt = _execute(st, {pc}, D{pc}, F{pc}, S{pc}, {program.own_event[pc]}, tr)")
    else:                                 # _execute without a trace, its wait counters' calls only where they act
        env[f"P{pc}"] = p
        call = f"S{pc}(st)" if program.steps[pc] is not None else f"F{pc}(st, D{pc})"
        lines += [f"            if st.any_unknown: taint_in(st, D{pc})",
                  "            event = tr.n_events",
                  f"            poisoned = counters.before({pc}) if {acts} else None",
                  "            try:",
                  f"                nxt = {call}",
                  "            finally:",
                  "                if poisoned:",
                  f"                    counters.after({pc}, poisoned, event)"]
        if p.cls is not None:
            lines += ["                else:",
                      f"                    counters.issue({pc}, P{pc}, event)"]
        lines.append("                st.taint_s = st.taint_v = st.fresh_out = None")
    lines += ["        finally:",
              "            tr.muted += 1"]
    if pc == end - 1:
        return lines + [f"        return {pc + 1} if nxt is None else nxt"]
    lines.append("        if nxt is not None: return nxt")
    # its events may be more than one (the bound ``ready`` checked counts one an instruction)
    lines.append(f"        if w.steps + {end - pc - 1} > w.machine.max_steps: return {pc + 1}")
    seg = _segment_bits(program, pc + 1, end)
    if seg:
        lines.append(f"        if counters.bits & {seg}: return {pc + 1}")
    if lean_cond is not None:
        lines.append(f"        if not ({lean_cond}): return {pc + 1}")
    if refresh:                           # the block's EXEC locals, as after a step
        lines += ["        EX, XF = w.exec, w.exec_full",
                  "        CNT = WID if XF else int(count_nonzero(EX))"]
    return lines


def _step_call(program, q: int, env) -> str:
    """Instruction q's step (or its semantics function) as a call in the block's source."""
    env[f"D{q}"] = program.decoded[q]
    if program.steps[q] is not None:
        env[f"S{q}"] = program.steps[q]
        return f"S{q}(st)"
    env[f"F{q}"] = program.fns[q]
    return f"F{q}(st, D{q})"


def _step_lines(program, q: int, env) -> list[str]:
    """A row the executor has without a template (lanevm.encode_step) run by its step, as _body runs
    a step, EXEC and the lane count refreshed after it (it may have written EXEC)."""
    return [f"st.pc = {q}; st.current = D{q}",
            f"if st.any_unknown: taint_in(st, D{q})", *[ln[8:] for ln in _FLUSH],
            "counted[0] += w.width if w.exec_full else int(count_nonzero(w.exec))",
            _step_call(program, q, env),
            "st.taint_s = st.taint_v = st.fresh_out = None",
            "tr.n_events += 1",
            "w.steps += 1",
            "if w.member_events is not None: w.wg.member_event(w)",
            *[f"approx.add({a!r})" for a in _approx_names(program.decoded[q].ins.mnemonic)],
            "EX, XF = w.exec, w.exec_full",
            "CNT = WID if XF else int(count_nonzero(EX))"]


def _run_lines(program, pc: int, run, env, inline) -> list[str]:
    """A run of lane rows from pc: one executor call where the wave allows it (else each row's
    numpy lines or step). Where a row may refuse (lanevm.refuses) the executor stops before it,
    its step runs here (it names the lanes, or takes the general path) and the executor goes on
    from the row after it."""
    from . import lanevm
    rows, last = run
    env[f"L{pc}"] = rows
    writes_exec = any(q not in inline for q in range(pc, last))
    refusing = [q for q in range(pc, last) if q not in inline and lanevm.refuses(rows[q - pc])]
    call = (f"_lanes(L{pc}, {{at}}, *LF, S, st.s_written, st.scc, ALL if st.act is None else st.act, EX, EXO, "
            "st.lanes, _dequant.ENABLED, *_lanevm.scratch(WID))")
    after = ["counted[0] += n"]
    if writes_exec:
        after += ["if changed:",
                  "    w.set_exec(EXO)",
                  "    EX, XF = w.exec, w.exec_full",
                  "    CNT = WID if XF else int(count_nonzero(EX))"]
    fast = [f"st.pc = {last - 1}; st.current = D{last - 1}",
            "EXO = np.empty(WID, bool)" if writes_exec else "EXO = EX"]
    env[f"D{last - 1}"] = program.decoded[last - 1]
    if not refusing:
        fast += ["n, changed, at = " + call.format(at=0), *after, f"k += {last - pc}"]
    else:
        fast += ["n, changed, at = " + call.format(at=0), *after, "k += at",
                 f"while at < {last - pc}:"]
        body = []
        for j, q in enumerate(refusing):
            body += [f"{'if' if j == 0 else 'elif'} at == {q - pc}:"]
            body += ["    " + ln for ln in _step_lines(program, q, env)]
        body += ["else:",
                 "    raise AssertionError('the lane executor stopped before a row that cannot refuse')",
                 f"if at + 1 == {last - pc}:",
                 "    break",
                 f"st.pc = {last - 1}; st.current = D{last - 1}",
                 "EXO = np.empty(WID, bool)" if writes_exec else "EXO = EX",
                 "n, changed, nxt_at = " + call.format(at="at + 1"), *after, "k += nxt_at - at - 1",
                 "at = nxt_at"]
        fast += ["    " + ln for ln in body]
    lines = ["        if _lanes is not None and _blocks.LANES and WID <= _blocks.LANE_WIDTH and not st.any_unknown:"]
    lines += ["            " + ln for ln in fast]
    lines += [f"            approx.add({a!r})" for q in range(pc, last)
              for a in _approx_names(program.decoded[q].ins.mnemonic)]
    lines.append("        else:")
    for q in range(pc, last):
        env[f"D{q}"] = program.decoded[q]
        if q in inline:
            lines += ["    " + ln for ln in _inline_ins(program, q, inline[q], env)]
        else:                                     # a row without a template (lanevm.encode_step): its step
            lines += ["            " + ln for ln in _step_lines(program, q, env)]
    return lines


def _approx_names(m: str) -> list[str]:
    """The names Machine.approximated takes for an instruction of mnemonic ``m`` (fp.APPROXIMATED)."""
    return [a for a in (m, m.rsplit("_", 1)[0]) if a in APPROXIMATED]


def _inline_ins(program, pc: int, x, env) -> list[str]:
    """Instruction pc's lines in the lean function: its lean work (_inline_lines), its lanes and
    event counted, EXEC refreshed where it may have written it."""
    d = program.decoded[pc]
    m = d.ins.mnemonic
    lines = [f"        st.pc = {pc}; st.current = D{pc}        # {m} (line {d.ins.line})",
             f"        if st.any_unknown: taint_in(st, D{pc})",
             "        counted[0] += CNT"]
    lines += _inline_lines(pc, x, env)
    if x.dst[0] == "mask":                # EXEC, or the pair a later read takes, may have changed
        lines += ["        EX, XF = w.exec, w.exec_full",
                  "        CNT = WID if XF else int(count_nonzero(EX))"]
    lines.append("        k += 1")
    lines += [f"        approx.add({a!r})" for a in _approx_names(m)]
    return lines


def _lane_runs(program, start: int, end: int, inline) -> dict:
    """The runs of consecutive instructions that each have a lane row: those in ``inline`` from
    their template (lanevm.encode), the others (no wait) from their step or function
    (lanevm.encode_step): first pc -> (rows int64 [n, lanevm.ROW], pc after the run)."""
    from . import lanevm
    runs, pc = {}, start
    while pc < end:
        rows = []
        q = pc
        while q < end:
            if q in inline:
                row = lanevm.encode(program.decoded[q], inline[q])
            elif program.waits[q].wait is None and program.fns[q] is not None and program.own_event[q] \
                    and not leaves(program.decoded[q].ins.mnemonic):
                row = lanevm.encode_step(program.decoded[q], program.steps[q])
            else:
                row = None
            if row is None:
                break
            rows.append(row)
            q += 1
        if rows:
            runs[pc] = (np.ascontiguousarray(np.stack(rows)), q)
            pc = q
        else:
            pc += 1
    return runs


DISK = True                     # False: block code compiled in every process
_codes: dict = {}               # sha256 of (file name, source) -> code object, this process


def compiled(src: str, filename: str):
    """``compile(src, filename, "exec")``, once per content: kept in memory and on disk (under
    gfxsim's cache folder, by this Python's marshal format), since compiling a kernel's blocks
    costs more than running a small launch (~1 ms a block). A disk entry that cannot be read or
    written is compiled again."""
    key = hashlib.sha256(filename.encode() + b"\0" + src.encode()).hexdigest()
    code = _codes.get(key)
    if code is not None:
        return code
    path = _disk_dir() / f"{key}.code" if DISK else None
    if path is not None:
        try:
            code = marshal.loads(path.read_bytes())
        except Exception:                # absent, unreadable or another interpreter's: compile it
            code = None
    if code is None:
        code = compile(src, filename, "exec")
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
                tmp.write_bytes(marshal.dumps(code))
                os.replace(tmp, path)
            except OSError:
                pass                     # a read-only or full cache folder: compiled again next time
    _codes[key] = code
    return code


_DIRS: dict = {}                # the environment variables cache_root reads -> the folder


def _disk_dir():
    """The block code's folder, resolved once per value of the variables cache_root reads (it
    builds Paths and may ask for the home folder: ~2% of a launch that compiles many blocks)."""
    env = os.environ
    key = (env.get("GFXSIM_CACHE_DIR"), env.get("XDG_CACHE_HOME"), env.get("HOME"))
    got = _DIRS.get(key)
    if got is None:
        if len(_DIRS) > 16:                   # bounded: a test may set many folders
            _DIRS.clear()
        got = _DIRS[key] = cache_root() / "asm" / "blocks" / f"{sys.implementation.cache_tag}-{marshal.version}"
    return got
