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
from .origin import taint_in

# instructions that may return a pc other than the next: a block ends after one
_LEAVES = ("s_branch", "s_cbranch", "s_setpc", "s_swappc", "s_endpgm", "s_call", "s_trap", "s_rfe")
ENABLED = True          # False: every instruction through run._execute (the A/B, and the tests comparing both)


class Block:
    """Instructions ``start``..``end - 1`` of a program, run by ``run(st, w, tr, counted)``, which
    returns the next pc (an int, or a pc per member where a branch parts them)."""
    __slots__ = ("start", "end", "bits", "run")

    def __init__(self, start: int, end: int, bits: int, run):
        self.start, self.end, self.bits, self.run = start, end, bits, run

    def ready(self, st, w, tr) -> bool:
        """Whether the block gives exactly what _execute gives instruction by instruction now."""
        return (not tr.enabled and not (st.counters.bits & self.bits)
                and w.steps + (self.end - self.start) <= w.machine.max_steps)


def member(program, pc: int) -> bool:
    """Whether instruction ``pc`` can be part of a block: it has semantics and records its own
    event (no memory, LDS, matrix or barrier operation; a wait is one)."""
    p = program.waits[pc]
    return program.fns[pc] is not None and program.own_event[pc] and p.cls is None and not p.barrier


def leaves(mnemonic: str) -> bool:
    return mnemonic.startswith(_LEAVES)


def block_at(program, pc: int) -> Block | None:
    """The block starting at ``pc`` (made once per Program), or None where instruction ``pc``
    cannot start one."""
    cache = program.blocks
    if pc in cache:
        return cache[pc]
    b = _make(program, pc)
    cache[pc] = b
    return b


def _make(program, start: int) -> Block | None:
    n = len(program.decoded)
    end = start
    while end < n and member(program, end):
        end += 1
        if leaves(program.decoded[end - 1].ins.mnemonic):
            break
    if end == start:
        return None
    return Block(start, end, _segment_bits(program, start, end), _compile(program, start, end))


def _segment_bits(program, pc: int, end: int) -> int:
    """The registers instructions pc.. name up to the next wait (the part of a block one check covers)."""
    bits = 0
    while pc < end and program.waits[pc].wait is None:
        bits |= program.waits[pc].bits
        pc += 1
    return bits


def _compile(program, start: int, end: int):
    """The block's function: each instruction as _execute runs it when no trace is on and no
    register it names is pending (so the wait counters neither report nor count anything)."""
    env = {"taint_in": taint_in, "count_nonzero": np.count_nonzero}
    lines = ["def run(st, w, tr, counted):",
             "    approx = w.machine.approximated",
             "    counters = st.counters",
             "    tr.muted += 1",
             "    try:"]
    for pc in range(start, end):
        d = program.decoded[pc]
        step = program.steps[pc]
        env[f"D{pc}"] = d
        if step is not None:
            env[f"S{pc}"] = step
            call = f"S{pc}(st)"
        else:
            env[f"F{pc}"] = program.fns[pc]
            call = f"F{pc}(st, D{pc})"
        m = d.ins.mnemonic
        wait = program.waits[pc].wait
        lines += [f"        st.pc = {pc}; st.current = D{pc}        # {m} (line {d.ins.line})",
                  f"        if st.any_unknown: taint_in(st, D{pc})",
                  "        counted[0] += w.width if w.exec_full else int(count_nonzero(w.exec))"]
        if wait:                                  # what the wait counters do before it (Counters.before)
            env[f"W{pc}"] = wait
            lines.append(f"        counters.wait(W{pc})")
        lines += [f"        nxt = {call}",
                  "        st.taint_s = st.taint_v = st.fresh_out = None",
                  "        tr.n_events += 1",
                  "        w.steps += 1",
                  "        if w.member_events is not None: w.wg.member_event(w)"]      # waves as members
        lines += [f"        approx.add({a!r})" for a in (m, m.rsplit("_", 1)[0]) if a in APPROXIMATED]
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
    src = "\n".join(lines) + "\n"
    exec(compiled(src, f"<gfxsim.asm block {program.kernel.name}:{start}-{end}>"), env)
    return env["run"]


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


def _disk_dir():
    return cache_root() / "asm" / "blocks" / f"{sys.implementation.cache_tag}-{marshal.version}"
