"""Run a clang-compiled kernel on the back end, instruction by instruction.

    from gfxsim.asm.run import run_asm
    run = run_asm(kernel, grid=(1,), block=256, args=dict(q=q_buf, k_cache=..., context_len=300))

``kernel`` is a parsed Kernel (gfxsim.asm.parse of any clang .s, however it was built). Each
wave of each workgroup executes the kernel's instructions from its AMDHSA initial state
(launch.py) until s_endpgm; the waves of a workgroup meet at s_barrier through the back end's
Workgroup. The launch loop is the back end's (gfxsim.machine.launch.run_grid, under
LaunchOptions): workgroups run side by side in a batch (``batch=``), one back-end wave holding the
same wave of every member, each member with its own SGPRs and pc, and ``execute`` schedules them so
that a batch gives exactly what one workgroup at a time gives; with provenance the batch folds
(fold.py: the register files keep the representatives' provenance columns) or, where its members
part, runs again unfolded. The result is the back end's Run:
trace, matrix-instruction records, findings, and the Buffers as the kernel left them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..machine import ops
from ..machine.launch import Machine, Run, declared_fields, distinct_buffers, launch_options, run_grid
from ..machine.memory import Buffer
from ..machine.options import LaunchOptions
from ..machine.wavemembers import WavesPart
from . import blocks as _blocks
from . import semantics, translate, waitcnt
from .launch import entry as kernel_entry
from .launch import (DISPATCH, KERNARG, STACK_BYTES, AddressSpace, Dispatch, KernelABI, LaunchError, bind_args, dispatch_packet,
                     PointerArray, initial_state, kernarg_segment, null_pointers, struct_buffers)
from .operands import AsmSyntaxError, Operands, parse_instruction_operands
from .origin import taint_in
from .state import AsmError, WaveState
from ..errors import ArgumentTypeError

if TYPE_CHECKING:
    from .parse import Kernel

SUFFIXES = ("_e32", "_e64", "_sdwa", "_dpp")
MATRIX = ("v_mfma_", "v_mmac_", "v_smfmac_")


@dataclass(frozen=True)
class Decoded:
    ins: object                 # gfxsim.asm.Instruction
    mnemonic: str               # base mnemonic (encoding suffix stripped)
    enc: str                    # "e32" | "e64" | "sdwa" | "dpp" | ""
    ops: Operands
    dpp: object = None          # the DPP form's control (semantics.dpp.Control)


def decode(ins, kernel_name: str) -> Decoded:
    mn, enc = ins.mnemonic, ""
    for s in SUFFIXES:
        if mn.endswith(s):
            mn, enc = mn[:-len(s)], s[1:]
            break
    ops = parse_instruction_operands(ins, kernel_name)
    ctrl = None
    if enc == "dpp":
        try:
            ctrl = semantics.dpp.check(ops)
        except semantics.dpp.DppError as e:
            raise AsmSyntaxError(f"{kernel_name}: line {ins.line}: {ins.mnemonic} {ins.operands}: {e}") from None
    return Decoded(ins, mn, enc, ops, ctrl)


class Program:
    """A kernel's decoded instructions and the semantics of each (looked up once)."""

    def __init__(self, kernel):
        self.kernel = kernel
        check_target(kernel)             # before decoding: another ISA's operands would be named instead
        self.decoded = _decoded(kernel)
        self.abi = KernelABI.of(kernel)
        self.entry = kernel_entry(kernel, self.abi)      # past a kernarg preload header
        self.fns = tuple(_semantics(d) for d in self.decoded)
        self.own_event = tuple(own_event(d.ins.mnemonic) for d in self.decoded)
        self.steps = translate.steps(self)
        self.barrier = np.array([d.mnemonic == "s_barrier" for d in self.decoded] or [False], bool)
        self.waits = waitcnt.plans(self.decoded)          # each instruction's wait-counter effect
        # (blocks.MEMORY, lean) -> {pc (or pc, bound: blocks.block_until) -> blocks.Block or None}, made as
        # waves reach them; lean False: blocks for waves with provenance (blocks.PLAIN: no lean function)
        self._blocks: dict = {(m, lean): {} for m in (True, False) for lean in (True, False)}
        self.waves_as_members = waves_side_by_side(self.decoded, self.fns)
        self._unsupported = None        # unsupported()'s answer, once asked

    @property
    def blocks(self) -> dict:
        """The blocks made so far, under the setting of blocks.MEMORY (which cuts them otherwise)."""
        return self._blocks[_blocks.MEMORY, True]

    @property
    def plain_blocks(self) -> dict:
        """The same for waves that never take a block's lean function (blocks.PLAIN)."""
        return self._blocks[_blocks.MEMORY, False]

    def unsupported(self) -> list[str]:
        """'line N: mnemonic' of every instruction with no semantics (or an unsupported encoding);
        made once (program_of asks at every launch; decoded and fns do not change)."""
        if self._unsupported is None:
            self._unsupported = tuple(f"line {d.ins.line}: {d.ins.mnemonic}"
                                      for d, f in zip(self.decoded[self.entry:], self.fns[self.entry:]) if f is None)
        return list(self._unsupported)


# a run of a workgroup's waves side by side watches the accesses of global, scalar and LDS loads
# and stores (wavemembers.py); a kernel with atomics, flat, buffer or scratch accesses (LDS DMA
# among them) or scalar stores runs its waves one after another
_NOT_SIDE_BY_SIDE = ("atomic", "buffer", "flat", "scratch")


def waves_side_by_side(decoded, fns) -> bool:
    """Whether a kernel's waves of one workgroup may run side by side (launch.run_batch tries it,
    and runs them serially where it cannot be exact): no memory instruction that run does not watch."""
    for d, f in zip(decoded, fns):
        module = getattr(f, "__module__", "") or ""
        if module.rsplit(".", 1)[-1] in _NOT_SIDE_BY_SIDE or d.mnemonic.startswith(("s_store", "s_atomic", "s_scratch",
                                                                                  "s_buffer_store", "s_buffer_atomic")):
            return False
    return True


def _decoded(kernel) -> tuple[Decoded, ...]:
    """Every instruction decoded: from the disk cache where the kernel's file was parsed through
    cache.parse_cached before, else decoded here (and kept there)."""
    from . import cache
    kept = cache.load_decoded(kernel)
    if kept is not None:
        return tuple(Decoded(i, *rest) for i, rest in zip(kernel.instructions, kept))
    decoded = tuple(decode(i, kernel.name) for i in kernel.instructions)
    cache.store_decoded(kernel, decoded)
    return decoded


def check_target(kernel) -> None:
    """An AsmError unless the kernel's .amdgcn_target is a wave64 AMD arch gfxsim models."""
    from ..arch import get_arch
    from .parse import processor_of
    proc = processor_of(kernel.target)
    if not proc:
        return
    try:
        arch = get_arch(proc)
    except (KeyError, ValueError):
        arch = None
    if arch is None or not proc.startswith("gfx") or arch.wave_size != 64:
        raise AsmError(f"{kernel.name} is compiled for {proc} ({kernel.target}); the asm front end executes "
                       f"wave64 CDNA code: gfx90a, gfx940, gfx941, gfx942 (and the gfx936 builds, made for gfx942)")


def _semantics(d: Decoded):
    if d.enc == "dpp":                  # VOP1/VOP2 only: gfx9 has no DPP form of VOPC or VOP3
        base = semantics.OPS.get(d.mnemonic)
        if base is None or d.mnemonic.startswith("v_cmp"):
            return None
        return semantics.dpp.executor(base, semantics.dpp.strip(d, d.dpp, semantics.dpp.src0_index(d.ops)))
    if d.mnemonic.startswith(MATRIX):
        return semantics.mfma.mfma
    return semantics.OPS.get(d.mnemonic)


semantics_of = _semantics          # the function executing a Decoded, or None (gfxsim.asm.inspect.check_kernel)


def execute(st: WaveState, program: Program):
    """Run one wave (every member of its batch) from st.pcs until each member's s_endpgm.

    Members side by side follow their own control flow by min-pc scheduling: each step executes
    the instruction at the smallest pc of the members still running, for exactly the members at
    that pc (``st.act``; the others' EXEC columns masked off, their SGPR writes suppressed, and
    ``Wave.live`` naming the executing members so events, findings and records are theirs only).
    clang's structured control flow (forward branches around ifs, backward ones closing loops)
    brings the members back together where their pcs meet; while they agree (the common case)
    there is no masking. A member at s_barrier waits there until every running member is at one
    (or has ended), so each member's waves meet at its own barriers as when run alone. Every
    instruction is one of the wave's events, which bound it (LaunchOptions.max_steps)."""
    counted = [0]                             # active lanes x instructions (the speed figure's count)
    try:
        _run_members(st, program, counted)
    finally:
        m = st.w.machine
        m.lane_instructions = (m.lane_instructions or 0) + counted[0]


def _run_members(st, program, counted):
    st.counters = waitcnt.Counters(st, program.waits)
    n = len(program.decoded)
    w = st.w
    tr = w.machine.trace
    M, lanes = st.members, st.lanes
    pcs, ended = st.pcs, st.ended
    barrier = program.barrier
    while True:
        if M == 1:
            if ended[0]:
                break
            pc, act = int(pcs[0]), None
        else:
            live = ~ended
            if not live.any():
                break
            lp = pcs[live]
            pc = int(lp.min())
            if pc == int(lp.max()):
                act = None if not ended.any() else live
            else:
                act = live & (pcs == pc)
            scheduled = live                            # the members this loop picks the smallest pc of
            if 0 <= pc < n and barrier[pc] and act is not None:
                waiting = live & barrier[np.clip(pcs, 0, n - 1)] & (pcs < n)
                if not (waiting == live).all():         # others run on to a barrier (or their end) first
                    run_on = scheduled = live & ~waiting
                    pc = int(pcs[run_on].min())
                    act = run_on & (pcs == pc)
                else:                                   # every running member is at a barrier
                    _barrier(st, program, live)
                    continue
        if act is None:
            _run_together(st, program, pc, counted)
            continue
        if not 0 <= pc < n:
            st.current, st.act = None, act
            raise st.error(f"execution ran off the end of {program.kernel.name} (pc {pc}) without s_endpgm")
        # the members at pc run on while their pc stays below every other scheduled member's (this
        # loop would pick them again each step), up to a barrier or a branch that parts them
        rest = scheduled & ~act
        bound = int(pcs[rest].min()) if rest.any() else n
        _at(st, program, pc)
        st.act = act                          # the members not at this pc sit it out
        cols = np.repeat(act, lanes)
        saved = w.exec
        w.set_exec(saved & cols)
        w.live = np.nonzero(act)[0].tolist()
        blocks = _blocks.blocks_of(program, st.lean) if _blocks.ENABLED else None
        alone = -1                            # instructions below this pc run one at a time (a block not ready)
        try:
            while True:
                b = None if blocks is None or pc < alone else _blocks.block_until(program, pc, bound, st.lean)
                if b is not None and b.ready(st, w, tr):        # the block, ending before the others' pc
                    nxt = b.run(st, w, tr, counted)
                else:
                    if b is not None:
                        alone = b.alone
                    d = _at(st, program, pc)
                    counted[0] += int(np.count_nonzero(w.exec))
                    nxt = _execute(st, pc, d, program.fns[pc], program.steps[pc], program.own_event[pc], tr)
                    if nxt is None:
                        nxt = pc + 1
                    elif not isinstance(nxt, np.ndarray) and nxt != pc + 1:
                        alone = -1                # a jump: look for the block there
                if isinstance(nxt, np.ndarray) or not 0 <= nxt < bound or barrier[nxt]:
                    break
                pc = nxt
        finally:
            w.set_exec(np.where(cols, w.exec, saved))
            w.live = None
            st.act = None
        if isinstance(nxt, np.ndarray):
            pcs[act] = nxt[act]
        else:
            pcs[act] = nxt


def _run_together(st, program, pc, counted):
    """Every running member at ``pc`` (none ended): straight on, the pc a Python int, until a
    branch parts the members, one ends or the pc leaves the program (the caller's loop then
    schedules, stops or names the error)."""
    decoded, fns, steps, own_event = program.decoded, program.fns, program.steps, program.own_event
    n = len(decoded)
    w = st.w
    tr = w.machine.trace
    pcs = st.pcs
    blocks = _blocks.blocks_of(program, st.lean) if _blocks.ENABLED else None
    while 0 <= pc < n:
        b = None if blocks is None else blocks[pc] if pc in blocks else _blocks.block_at(program, pc, st.lean)
        if b is not None and b.ready(st, w, tr):      # the run of ALU instructions as one function
            nxt = b.run(st, w, tr, counted)
            if isinstance(nxt, np.ndarray):
                pcs[:] = nxt
                return
            pc = nxt
            continue
        end = pc + 1 if b is None else b.alone        # else one at a time, as _execute runs each alone
        while pc < end:
            d = _at(st, program, pc)
            counted[0] += w.width if w.exec_full else int(np.count_nonzero(w.exec))
            nxt = _execute(st, pc, d, fns[pc], steps[pc], own_event[pc], tr)
            if nxt is None:
                pc += 1
                continue
            if isinstance(nxt, np.ndarray):
                pcs[:] = nxt
                return
            pc = nxt
            break
    pcs[:] = pc


def _at(st, program, pc):
    """The instruction at ``pc``, made the one being executed (an error unless it has semantics)."""
    d = program.decoded[pc]
    st.pc, st.current = pc, d
    if program.fns[pc] is None:
        what = "DPP" if d.enc == "dpp" else "opcode"
        raise st.error(f"unsupported {what} {d.ins.mnemonic}")
    return d


def _execute(st, pc, d, fn, step, own, tr):
    """One instruction for the executing members: its translated step (translate.py) or its
    semantics function, and its event, between the wait counters' look at what it reads
    (waitcnt.py) and their count of what it issues. Returns the next pc (None: the next instruction)."""
    if st.any_unknown:
        taint_in(st, d)
    counters = st.counters
    event = tr.n_events
    poisoned = counters.before(pc)            # a wait, or reads of registers whose loads are outstanding
    try:
        if own:                               # arithmetic, moves, scalar, branches: one event of its own,
            ins = _vector_sources(st, d) if tr.enabled else ()           # its back-end steps muted
            tr.muted += 1
            try:
                nxt = fn(st, d) if step is None else step(st)
            finally:
                tr.muted -= 1
            _record(st, d, ins)
        else:                                 # memory, LDS, matrix, barrier: the back end's event
            n0 = len(tr.raw)
            nxt = fn(st, d) if step is None else step(st)
            if tr.enabled and len(tr.raw) > n0:
                _name_outputs(tr.raw[n0:], d)
    finally:
        counters.after(pc, poisoned, event)
        st.taint_s = st.taint_v = st.fresh_out = None
    return nxt


execute_one = _execute       # one instruction as the one-at-a-time loop runs it (a block's back-end instructions)


def _name_outputs(events, d):
    """The back end numbers the values its loads return virtually; the events of a load show the
    VGPRs the instruction wrote (read2: its two halves in turn), so the stepper rebuilds the
    registers the assembly names."""
    if not d.ops.positional or not d.ins.mnemonic.startswith(("global_load", "flat_load", "ds_read", "ds_bpermute",
                                                              "scratch_load", "buffer_load")):
        return
    dst = d.ops[0]
    if dst.kind != "reg" or dst.file != "v":
        return
    first = dst.first
    for e in events:
        if e.record is not None:
            continue
        for o in e.outputs:
            n = -(-o.values.shape[0] * o.values.dtype.itemsize // 4)
            o.regs = (first, n)
            if "read2" in d.ins.mnemonic:
                first += n


def _barrier(st, program, live):
    """s_barrier for every running member (each at one, perhaps not the same one): one event per
    barrier instruction for the members at it, then the wave waits for the workgroup's others."""
    w = st.w
    pcs = st.pcs
    groups = sorted(set(pcs[live].tolist()))
    for pc in groups:
        at = live & (pcs == pc)
        st.pc, st.current = pc, program.decoded[pc]
        w.live = None if at.all() else np.nonzero(at)[0].tolist()
        st.act = None if at.all() else at
        try:
            st.counters.before(pc)            # LDS writes still outstanding at the barrier
            w.event(ops.OTHER["barrier"])
        finally:
            w.live = None
            st.act = None
    w.wg.barrier(w)
    pcs[live] += 1


def _vector_sources(st, d) -> list:
    """The VGPR/AGPR sources of an instruction as back-end values, read before it runs (a trace
    event's inputs); the first operand of a v_* instruction other than a compare is its destination."""
    regs = [o for o in d.ops.positional if o.kind == "reg" and o.file in "va"]
    if _writes_first(d) and regs and regs[0] is d.ops.positional[0]:
        regs = regs[1:]
    vals = [st.vread(o.file, o.first, o.count) for o in regs]
    if d.dpp is not None and vals:              # src0 as the lanes read it
        src0 = d.ops.positional[semantics.dpp.src0_index(d.ops)]
        st.w.machine.trace.muted += 1
        try:
            vals[regs.index(src0)] = semantics.dpp.read(st, src0, d.dpp)[0].value
        finally:
            st.w.machine.trace.muted -= 1
    return vals


_BACK_END_EVENTS = ("v_mfma", "v_smfmac", "v_mmac", "s_load", "s_buffer", "s_store", "s_barrier", "s_dcache", "ds_",
                    "global_", "buffer_", "flat_", "scratch_")


def own_event(mnemonic: str) -> bool:
    """Whether an instruction is recorded by the asm front end (not by a back-end memory, LDS,
    matrix or barrier operation, which records its own event with its details)."""
    return not mnemonic.startswith(_BACK_END_EVENTS)


def _writes_first(d) -> bool:
    m = d.ins.mnemonic
    return m.startswith("v_") and not m.startswith(("v_cmp", "v_readfirstlane", "v_readlane")) and bool(d.ops.positional)


def _record(st, d, ins):
    """Every instruction is one event, traced or not (so instruction numbers do not depend on
    --trace); traced, it keeps its vector sources (read before it ran) and its vector destination."""
    w = st.w
    outs = []
    if w.machine.trace.enabled and _writes_first(d):
        o = d.ops.positional[0]
        if o.kind == "reg" and o.file in "va":
            outs = [st.vread(o.file, o.first, o.count)]
    w.event(d.ins.mnemonic, ins=ins, outs=outs)


def program_of(kernel) -> Program:
    """The kernel's Program, decoded once per Kernel object (Kernel.program); an instruction the asm
    front end cannot execute is named when the kernel is loaded, not when (if ever) a wave reaches it."""
    p = kernel.program
    missing = p.unsupported()
    if missing:
        raise AsmError(f"{kernel.name}: {len(missing)} instruction(s) the asm front end cannot execute: "
                       f"{'; '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}")
    return p


def run_asm(kernel: Kernel, grid=(1,), block=64, *, args, arch: str = "gfx942", trace: bool = True,
            provenance: bool = True, check_races: bool = True, batch: int = 1,
            progress=None, fold: bool | None = None, options: LaunchOptions | None = None,
            dynamic_lds: int = 0, stack_bytes: int = STACK_BYTES) -> Run:
    """Run ``kernel`` (a parsed gfxsim.asm Kernel) over ``grid`` workgroups of ``block`` work-items,
    with ``args`` (a dict by argument name, or a sequence in the metadata's order: Buffers for
    pointers, numbers for by-value arguments). The keywords trace .. fold (or ``options=``) are
    LaunchOptions', as gfxsim.launch takes them; the LDS size is the kernel descriptor's fixed group
    segment plus ``dynamic_lds`` bytes (``extern __shared__``, sized at launch; Triton's
    ``metadata.shared``), which hidden_dynamic_lds_size reports to the kernel.
    A kernel with a dynamic stack (``.amdhsa_uses_dynamic_stack``) gets ``stack_bytes`` per lane after
    its fixed private segment (HIP's default stack size limit, 1024).
    A pointer argument may be None (null); a struct passed by value a launch.Struct.
    ``batch``: workgroups run side by side (x-fastest order), each following its own control flow
    (execute); results, findings and each workgroup's events are those of batch=1."""
    options = launch_options(options, dict(trace=trace, provenance=provenance, check_races=check_races, batch=batch,
                                     progress=progress, fold=fold))
    if isinstance(kernel, str):
        raise ArgumentTypeError(f"run_asm({kernel!r}): pass a parsed Kernel (gfxsim.asm.parse), not a name")
    if options.lds_bytes is not None:
        raise LaunchError(f"{kernel.name}: the kernel descriptor sets its LDS size; options.lds_bytes must be None")
    program = program_of(kernel)
    abi = program.abi
    grid = _dims(grid, "grid")
    block = _dims(block, "block")
    n_items = block[0] * block[1] * block[2]
    if n_items > abi.max_workgroup:
        raise LaunchError(f"{kernel.name}: block {block} has {n_items} work-items, the kernel allows "
                          f"{abi.max_workgroup} (.max_flat_workgroup_size)")
    for what, v in (("dynamic_lds", dynamic_lds), ("stack_bytes", stack_bytes)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise LaunchError(f"{kernel.name}: {what} must be a byte count >= 0, got {v!r}")
    dispatch = Dispatch(grid, block, int(dynamic_lds), int(stack_bytes))
    lds = abi.lds_bytes + dispatch.dynamic_lds
    space, kernarg = address_space(program, args, dispatch)
    m = Machine(arch, kernel.name, trace=options.trace, provenance=options.provenance,
                check_races=options.check_races, lds_bytes=lds or None,
                declared=declared_fields(space.buffers), max_steps=options.max_steps,
                max_trace_bytes=options.max_trace_bytes)
    if abi.wave_size != m.arch.wave_size:
        raise LaunchError(f"{kernel.name} is compiled for wave{abi.wave_size}, {m.arch.name} runs "
                          f"wave{m.arch.wave_size}")
    waves = -(-n_items // m.arch.wave_size)
    if waves > 16:
        raise LaunchError(f"{kernel.name}: {waves} waves per workgroup (at most 16)")
    return run_grid(m, grid, waves, lambda w: run_wave(w, program, space, kernarg, w.wg.ids, block, lds_bytes=lds,
                                                          private_bytes=abi.lane_private(dispatch.stack)),
                    options, lane_threads=int(np.prod(grid)) * n_items, waves_as_members=True)


def address_space(program: Program, args, dims=None) -> tuple[AddressSpace, Buffer]:
    """The launch's AddressSpace (the kernarg segment, every Buffer argument and those inside
    by-value Structs, the dispatch packet where the kernel loads its pointer) and its kernarg
    segment, filled from ``args`` as the kernel's metadata lays them out (``dims``: a
    launch.Dispatch, or (grid, block): the hidden arguments' values)."""
    abi = program.abi
    name = program.kernel.name
    bufs, scalars = bind_args(abi, args)
    if dims is not None and not isinstance(dims, Dispatch):
        dims = Dispatch(*dims)
    # clang merges the argument loads into s_load_dwordx8/x16 that may read past the last argument
    # (the runtime's kernarg allocation is padded): the segment is zero-padded to 64 bytes
    kernarg = Buffer(KERNARG, np.zeros(-(-max(abi.kernarg_size, 4) // 64) * 64, np.uint8))
    seen = distinct_buffers([b for b in bufs.values() if b is not None] + struct_buffers(scalars, bufs), name,
                            LaunchError)
    for reserved in (KERNARG, DISPATCH):
        if reserved in seen:
            raise LaunchError(f"{name}: a Buffer may not be named {reserved!r} (the launch's own)")
    extra = []
    if any(w == "dispatch_ptr" for w, _ in abi.user) and dims is not None:
        extra = [dispatch_packet(abi, dims, 0)]
    space = AddressSpace([kernarg, *extra, *seen.values()], null_pointers(abi, bufs, scalars))
    for b in space.buffers:
        if isinstance(b, PointerArray):
            b.fill(space)
    if extra:
        extra[0].raw[40:48] = np.frombuffer(space.address(KERNARG).to_bytes(8, "little"), np.uint8)
    kernarg.raw[:] = kernarg_segment(abi, space, bufs, scalars, dims)
    return space, kernarg


def asm_source(st: WaveState | None) -> str | None:
    """The assembly line ``st`` is executing ("kernel.s:line (mnemonic) <- hip:line"), or None."""
    if st is None or st.current is None:
        return None
    ins = st.current.ins
    hip = f" <- {ins.source}" if ins.source else ""          # clang's line tables, where it emitted them
    return f"{st.kernel.name}.s:{ins.line} ({ins.mnemonic}){hip}"


# compiled code carries no group_scale marks: with the dequant recognition switched off
# (semantics/dequant.py) a run says so rather than report "no scale-group findings"
NO_SCALE_MARKS = "asm front end: compiled code has no scale marks (dequant recognition off)"


def run_wave(w, program: Program, space, kernarg, wg_ids, block, *, lds_bytes: int | None = None,
             private_bytes: int | None = None) -> WaveState:
    """Execute ``program`` on back-end wave ``w``, which holds the workgroups ``wg_ids`` (one
    (x, y, z) per member of its batch; block = work-items per workgroup, (x, y, z)), from their
    AMDHSA initial state to s_endpgm. ``lds_bytes``: the workgroup's LDS (default the descriptor's
    fixed size); ``private_bytes``: each lane's private segment (default the fixed size, plus
    HIP's default stack for a kernel with a dynamic stack). The wave's findings and errors name
    the assembly line."""
    abi = program.abi
    if w.wg.waves_as_members and (not program.waves_as_members or abi.private_segment):
        raise WavesPart(f"{program.kernel.name} has memory accesses a run of its waves side by side does not "
                        "watch (atomics, flat, buffer, scratch, scalar stores, a private segment)")
    st = WaveState(w, program.kernel, abi.n_vgpr, abi.n_agpr, space)
    st.lean = translate.LEAN and not w.provenance
    if w.provenance and not semantics.dequant.ENABLED:
        for kind in ("scale-group-mismatch", "dequant-direction"):     # both are checked at a dequant
            w.machine.not_checked.setdefault(kind, NO_SCALE_MARKS)
    w.source_hook = lambda: asm_source(st)
    lds = abi.lds_bytes if lds_bytes is None else lds_bytes
    if lds:
        st.lds = w.shared("lds", (lds,), "u8")
    if abi.private_segment:
        st.scratch = semantics.scratch.private_segment(
            st, abi.lane_private() if private_bytes is None else private_bytes)
    initial_state(st, abi, space, kernarg, wg_ids, block, w.wave_id if w.wg.member_waves is None else w.wg.member_waves)
    st.pcs[:] = program.entry
    try:
        if st.exec.any():
            execute(st, program)
    finally:
        # the wave and its state point at each other: undone here, the register files (with their
        # provenance, GiBs for a batch) are freed when the batch ends, not at some later collection
        w.source_hook = None
    return st


def kernel_from_text(body: str, name: str = "snippet", *, args=(), lds: int = 0, vgprs: int = 64, agprs: int = 0,
                     workgroup_ids: str = "x", workitem_ids: int = 0, arch: str = "gfx942", extra_descriptor=None):
    """A Kernel from hand-written instructions (one per line, labels allowed; s_endpgm appended):
    the .s clang would write around them, with a kernarg pointer in s[0:1], the workgroup ids
    ``workgroup_ids`` enabled and ``args`` = [(name, "global_buffer" | "by_value", size), ...] at
    8-byte-aligned offsets. For lane-level tests of instructions and small hand-written kernels."""
    from .parse import parse
    lines, offsets, off = [], [], 0
    for a_name, kind, size in args:
        off = -(-off // 8) * 8 if kind == "global_buffer" else -(-off // size) * size
        offsets.append(off)
        lines.append(f"      - .name: {a_name}\n        .offset: {off}\n        .size: {size}\n"
                     f"        .value_kind: {kind}" + ("\n        .address_space: global" if kind == "global_buffer" else ""))
        off += size
    desc = {".amdhsa_group_segment_fixed_size": lds, ".amdhsa_private_segment_fixed_size": 0,
            ".amdhsa_kernarg_size": off, ".amdhsa_user_sgpr_count": 2, ".amdhsa_user_sgpr_kernarg_segment_ptr": 1,
            **{f".amdhsa_system_sgpr_workgroup_id_{c}": int(c in workgroup_ids) for c in "xyz"},
            ".amdhsa_system_vgpr_workitem_id": workitem_ids, ".amdhsa_next_free_vgpr": vgprs + agprs,
            ".amdhsa_next_free_sgpr": 100, ".amdhsa_accum_offset": vgprs, ".amdhsa_float_denorm_mode_32": 3,
            ".amdhsa_ieee_mode": 1, ".amdhsa_dx10_clamp": 1, **(extra_descriptor or {})}
    text = "\n".join([
        f'\t.amdgcn_target "amdgcn-amd-amdhsa--{arch}"', "\t.text", f"\t.globl\t{name}",
        f"\t.type\t{name},@function", f"{name}:", *(ln if ln.rstrip().endswith(":") else f"\t{ln.strip()}"
                                                    for ln in body.strip().splitlines() if ln.strip()),
        "\ts_endpgm", ".Lfunc_end0:", "\t.rodata", f"\t.amdhsa_kernel {name}",
        *(f"\t\t{k} {v}" for k, v in desc.items()), "\t.end_amdhsa_kernel", "\t.amdgpu_metadata", "---",
        "amdhsa.kernels:", f"  - .name: {name}", f"    .symbol: {name}.kd", "    .args:" if lines else "    .args: []",
        *lines, f"    .vgpr_count: {vgprs + agprs}", f"    .agpr_count: {agprs}", "    .wavefront_size: 64",
        "    .max_flat_workgroup_size: 1024", "...", "\t.end_amdgpu_metadata", ""])
    return parse(text).kernel(name)


def _dims(x, what):
    if isinstance(x, (int, np.integer)):
        x = (int(x),)
    x = tuple(int(v) for v in x)
    if not 1 <= len(x) <= 3 or any(v < 1 for v in x):
        raise LaunchError(f"{what} must be 1 to 3 positive extents, got {x}")
    return x + (1,) * (3 - len(x))


__all__ = ["run_asm", "run_wave", "address_space", "Program", "program_of", "decode", "execute", "AsmError"]
