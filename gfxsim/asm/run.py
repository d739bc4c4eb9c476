"""Run a clang-compiled kernel on the back end, instruction by instruction.

    from gfxsim.asm.run import run_asm
    run = run_asm("qk_int8", grid=(1,), block=256, args=dict(q=q_buf, k_cache=..., context_len=300))

``entry`` is a kernel of kernels_hip/ (built with ``gfxsim hip build`` rules for ``arch``), or a
(gfxsim.asm Kernel) parsed from any clang .s. Each wave of each workgroup executes the
kernel's instructions from its AMDHSA initial state (launch.py) until s_endpgm; the waves of a
workgroup meet at s_barrier through the back end's Workgroup. Workgroups run side by side in a
batch (``batch=``; under gfxsim.launch the harness's batch): one back-end wave holds the same wave
of every member, each member with its own SGPRs and pc, and ``execute`` schedules them so that a
batch gives exactly what one workgroup at a time gives. The result is the back end's Run: trace,
matrix-instruction records, findings, and the Buffers as the kernel left them.
"""
from __future__ import annotations

import gc
import time
from dataclasses import dataclass


import numpy as np

from ..machine import ops
from ..machine.consumed import check_outputs
from ..machine.launch import GC_BATCH, Machine, Run
from ..machine.memory import Buffer
from ..machine.wave import Wave
from ..machine.workgroup import Workgroup
from . import semantics
from .launch import KERNARG, AddressSpace, KernelABI, LaunchError, bind_args, initial_state, kernarg_segment
from .operands import Operands, parse_instruction_operands
from .state import AsmError, WaveState

SUFFIXES = ("_e32", "_e64", "_sdwa", "_dpp")
MATRIX = ("v_mfma_", "v_mmac_", "v_smfmac_")


@dataclass(frozen=True)
class Decoded:
    ins: object                 # gfxsim.asm.Instruction
    mnemonic: str               # base mnemonic (encoding suffix stripped)
    enc: str                    # "e32" | "e64" | "sdwa" | "dpp" | ""
    ops: Operands


def decode(ins, kernel_name: str) -> Decoded:
    mn, enc = ins.mnemonic, ""
    for s in SUFFIXES:
        if mn.endswith(s):
            mn, enc = mn[:-len(s)], s[1:]
            break
    return Decoded(ins, mn, enc, parse_instruction_operands(ins, kernel_name))


class Program:
    """A kernel's decoded instructions and the semantics of each (looked up once)."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.decoded = tuple(decode(i, kernel.name) for i in kernel.instructions)
        self.abi = KernelABI.of(kernel)
        self.fns = tuple(_semantics(d) for d in self.decoded)
        self.own_event = tuple(own_event(d.ins.mnemonic) for d in self.decoded)
        self.barrier = np.array([d.mnemonic == "s_barrier" for d in self.decoded] or [False], bool)

    def unsupported(self) -> list[str]:
        """'line N: mnemonic' of every instruction with no semantics (or an unsupported encoding)."""
        return [f"line {d.ins.line}: {d.ins.mnemonic}" for d, f in zip(self.decoded, self.fns) if f is None]


def _semantics(d: Decoded):
    if d.enc == "dpp":
        return None
    if d.mnemonic.startswith(MATRIX):
        return semantics.mfma.mfma
    return semantics.OPS.get(d.mnemonic)


def execute(st: WaveState, program: Program, max_steps: int = 50_000_000):
    """Run one wave (every member of its batch) from st.pcs until each member's s_endpgm.

    Members side by side follow their own control flow by min-pc scheduling: each step executes
    the instruction at the smallest pc of the members still running, for exactly the members at
    that pc (``st.act``; the others' EXEC columns masked off, their SGPR writes suppressed, and
    ``Wave.live`` naming the executing members so events, findings and records are theirs only).
    clang's structured control flow (forward branches around ifs, backward ones closing loops)
    brings the members back together where their pcs meet; while they agree (the common case)
    there is no masking. A member at s_barrier waits there until every running member is at one
    (or has ended), so each member's waves meet at its own barriers as when run alone."""
    counted = [0]                             # active lanes x instructions (the speed figure's count)
    try:
        _run_members(st, program, max_steps, counted)
    finally:
        m = st.w.machine
        m.asm_lane_instructions = getattr(m, "asm_lane_instructions", 0) + counted[0]


def _run_members(st, program, max_steps, counted):
    n = len(program.decoded)
    w = st.w
    tr = w.machine.trace
    M, lanes = st.members, st.lanes
    pcs, ended = st.pcs, st.ended
    barrier = program.barrier
    steps = 0
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
            if 0 <= pc < n and barrier[pc] and act is not None:
                waiting = live & barrier[np.clip(pcs, 0, n - 1)] & (pcs < n)
                if not (waiting == live).all():         # others run on to a barrier (or their end) first
                    run_on = live & ~waiting
                    pc = int(pcs[run_on].min())
                    act = run_on & (pcs == pc)
                else:                                   # every running member is at a barrier
                    _barrier(st, program, live)
                    steps += 1
                    continue
        if not 0 <= pc < n:
            st.current, st.act = None, act
            raise st.error(f"execution ran off the end of {program.kernel.name} (pc {pc}) without s_endpgm")
        d = program.decoded[pc]
        st.pc, st.current = pc, d
        fn = program.fns[pc]
        if fn is None:
            what = "DPP" if d.enc == "dpp" else "opcode"
            raise st.error(f"unsupported {what} {d.ins.mnemonic}")
        if act is not None:                   # the members not at this pc sit it out
            st.act = act
            cols = np.repeat(act, lanes)
            saved = w.exec
            w.set_exec(saved & cols)
            w.live = np.nonzero(act)[0].tolist()
        counted[0] += int(np.count_nonzero(w.exec))
        try:
            own = program.own_event[pc]
            if own:                           # arithmetic, moves, scalar, branches: one event of its own,
                ins = _vector_sources(st, d) if tr.enabled else ()       # its back-end steps muted
                tr.muted += 1
                try:
                    nxt = fn(st, d)
                finally:
                    tr.muted -= 1
                _record(st, d, ins)
            else:                             # memory, LDS, matrix, barrier: the back end's event
                n0 = len(tr.raw)
                nxt = fn(st, d)
                if tr.enabled and len(tr.raw) > n0:
                    _name_outputs(tr.raw[n0:], d)
        finally:
            if act is not None:
                w.set_exec(np.where(cols, w.exec, saved))
                w.live = None
                st.act = None
        if nxt is None:
            nxt = pc + 1
        if act is None:
            pcs[:] = nxt
        elif isinstance(nxt, np.ndarray):
            pcs[act] = nxt[act]
        else:
            pcs[act] = nxt
        steps += 1
        if steps > max_steps:
            raise st.error(f"more than {max_steps} instructions executed: an endless loop?")


def _name_outputs(events, d):
    """The back end numbers the values its loads return virtually; the events of a load show the
    VGPRs the instruction wrote (read2: its two halves in turn), so the stepper rebuilds the
    registers the assembly names."""
    if not d.ops.positional or not d.ins.mnemonic.startswith(("global_load", "ds_read", "ds_bpermute")):
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
        try:
            w.event(ops.OTHER["barrier"])
        finally:
            w.live = None
    w.wg.barrier(w)
    pcs[live] += 1


def _vector_sources(st, d) -> list:
    """The VGPR/AGPR sources of an instruction as back-end values, read before it runs (a trace
    event's inputs); the first operand of a v_* instruction other than a compare is its destination."""
    regs = [o for o in d.ops.positional if o.kind == "reg" and o.file in "va"]
    if _writes_first(d) and regs and regs[0] is d.ops.positional[0]:
        regs = regs[1:]
    return [st.vread(o.file, o.first, o.count) for o in regs]


_BACK_END_EVENTS = ("v_mfma", "v_mmac", "s_load", "s_buffer", "s_store", "s_barrier", "s_dcache", "ds_",
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


def _program_of(kernel) -> Program:
    """The kernel's Program, decoded once per Kernel object (kept on it, like its cached blocks)."""
    p = kernel.__dict__.get("_asm_program")
    if p is None:
        p = Program(kernel)
        kernel.__dict__["_asm_program"] = p
    return p


def find_kernel(entry: str, arch: str, *, project, defines=()):
    """The parsed Kernel of ``project``'s (a gfxsim.hip.Project) entry point ``entry`` built for ``arch``."""
    from ..hip.build import find_entry
    _, f = find_entry(entry, arch, project=project, defines=defines)
    return f.kernel(entry)


def run_asm(entry, grid=(1,), block=64, *, args, arch: str = "gfx942", trace: bool = True,
            provenance: bool = True, check_races: bool = True, project=None, defines=(), batch: int = 1) -> Run:
    """Run kernel ``entry`` (a kernels_hip/ entry point name, or a parsed Kernel) over ``grid``
    workgroups of ``block`` work-items, with ``args`` (a dict by argument name, or a sequence in
    the metadata's order: Buffers for pointers, numbers for by-value arguments). ``batch``:
    workgroups run side by side (x-fastest order, as gfxsim.launch), each following its own
    control flow (execute); results, findings and each workgroup's events are those of batch=1."""
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    if isinstance(entry, str) and project is None:
        raise ValueError(f"run_asm({entry!r}): an entry point by name needs project= (a gfxsim.hip.Project)")
    kernel = find_kernel(entry, arch, project=project, defines=defines) if isinstance(entry, str) else entry
    program = _program_of(kernel)
    abi = program.abi
    grid = _dims(grid, "grid")
    block = _dims(block, "block")
    n_items = block[0] * block[1] * block[2]
    if n_items > abi.max_workgroup:
        raise LaunchError(f"{kernel.name}: block {block} has {n_items} work-items, the kernel allows "
                          f"{abi.max_workgroup} (.max_flat_workgroup_size)")
    bufs, scalars = bind_args(abi, args)
    # clang merges the argument loads into s_load_dwordx8/x16 that may read past the last argument
    # (the runtime's kernarg allocation is padded): the segment is zero-padded to 64 bytes
    kernarg = Buffer(KERNARG, np.zeros(-(-max(abi.kernarg_size, 4) // 64) * 64, np.uint8))
    seen = {}
    for b in bufs.values():
        if b.name in seen and seen[b.name] is not b:
            raise LaunchError(f"{kernel.name}: two different Buffers are named {b.name!r}")
        seen[b.name] = b
    if KERNARG in seen:
        raise LaunchError(f"{kernel.name}: a Buffer may not be named {KERNARG!r} (the kernarg segment)")
    space = AddressSpace([kernarg, *seen.values()])
    kernarg.raw[:] = kernarg_segment(abi, space, bufs, scalars)
    m = Machine(arch, kernel.name, trace=trace, provenance=provenance, check_races=check_races,
                lds_bytes=abi.lds_bytes or None)
    if abi.wave_size != m.arch.wave_size:
        raise LaunchError(f"{kernel.name} is compiled for wave{abi.wave_size}, {m.arch.name} runs wave{m.arch.wave_size}")
    waves = -(-n_items // m.arch.wave_size)
    if waves > 16:
        raise LaunchError(f"{kernel.name}: {waves} waves per workgroup (at most 16)")
    m.mma_log.declared = {f for b in seen.values() for f in b.expects}    # what the outputs must consume
    t0 = time.perf_counter()
    ids = [(x, y, z) for z in range(grid[2]) for y in range(grid[1]) for x in range(grid[0])]
    for i in range(0, len(ids), batch):
        wg = Workgroup(m, ids[i:i + batch], waves)
        wg.run(lambda w: _wave(w, program, space, kernarg, w.wg.ids, block), lambda g, k: AsmWave(m, g, k))
        del wg
        if batch >= GC_BATCH and i + batch < len(ids):
            gc.collect()         # a wave and its values point at each other: free a big batch's now
    if m.provenance:
        check_outputs(m)                 # the Buffer.expect declarations of what it stored (as gfxsim.launch)
    return Run(kernel.name, m.arch.name, grid, waves, m.trace, m.findings, m, seconds=time.perf_counter() - t0,
               lane_threads=int(np.prod(grid)) * n_items)


class AsmWave(Wave):
    """A back-end wave whose findings and errors name the assembly line being executed."""
    asm = None                      # its WaveState

    def source(self):
        return _asm_source(self.asm) or super().source()


def _asm_source(st):
    if st is None or st.current is None:
        return None
    ins = st.current.ins
    hip = f" <- {ins.source}" if ins.source else ""          # clang's line tables, where it emitted them
    return f"{st.kernel.name}.s:{ins.line} ({ins.mnemonic}){hip}"


# compiled code carries no group_scale marks: with the dequant recognition switched off
# (semantics/dequant.py) a run says so rather than report "no scale-group findings"
NO_SCALE_MARKS = "asm front end: compiled code has no scale marks (dequant recognition off)"


def run_wave(w, program, space, kernarg, wg_ids, block):
    """Execute ``program`` on back-end wave ``w``, which holds the workgroups ``wg_ids`` (one
    (x, y, z) per member of its batch; block = work-items per workgroup, (x, y, z)), from their
    AMDHSA initial state to s_endpgm."""
    abi = program.abi
    st = WaveState(w, program.kernel, abi.n_vgpr, abi.n_agpr, space)
    if w.provenance and not semantics.dequant.ENABLED:
        w.machine.not_checked.setdefault("scale-group-mismatch", NO_SCALE_MARKS)
    if isinstance(w, AsmWave):
        w.asm = st
    else:                           # a plain Wave of gfxsim.launch: its findings still name the line
        w.source = lambda: _asm_source(st) or Wave.source(w)
    if abi.lds_bytes:
        st.lds = w.shared("lds", (abi.lds_bytes,), "u8")
    initial_state(st, abi, space, kernarg, wg_ids, block, w.wave_id)
    try:
        if st.exec.any():
            execute(st, program)
    finally:
        # the wave and its state point at each other: undone here, the register files (with their
        # provenance, GiBs for a batch) are freed when the batch ends, not at some later collection
        if isinstance(w, AsmWave):
            w.asm = None
        else:
            w.__dict__.pop("source", None)
    return st


def _wave(w, program, space, kernarg, wg_ids, block):
    run_wave(w, program, space, kernarg, wg_ids, block)


# ---- the compiled twin in a Python twin's place -------------------------------------------------
# Python-twin keywords that the HIP twins fix at compile time (kernels_hip/int8_attention.h)
DEFINES = {"head_dim": ("GFXSIM_HEAD_DIM", 128), "block_size": ("GFXSIM_BLOCK_SIZE", 16)}
# keywords of the Python twins that only choose between equivalent Python index formulas, or
# that the standalone HIP twins fix: (allowed value, why)
FIXED = {"kvh": (0, "the standalone HIP twins read kv head 0"),
         "num_kv_heads": (1, "the standalone HIP twins' cache holds one kv head"),
         "max_blocks": (None, "the HIP twin reads the block table's first row"),
         "formula": ("derived", "the HIP twin's index formulas are compiled in"),
         "partition_size": (256, "the HIP decode's PARTITION_SIZE is compiled in"),
         "grouping": ("fragment", "the HIP twin has one grouping")}


# Workgroups side by side in a harness's launch with provenance: the register files hold the
# provenance of every VGPR and AGPR byte, ~15 MiB a decode workgroup at head_dim 128 (2.3 GiB for
# the 128 workgroups of a 4K decode at 64 query heads on 8 KV heads), so larger grids run in
# batches of this many (a 16K decode: four). Without provenance a batch holds every workgroup.
PROVENANCE_BATCH = 128


def twin_kernel(entry, python_kernel, *, project):
    """A kernel function with ``python_kernel``'s signature, for gfxsim.launch and the harnesses
    (run_kernel(kernel_fn=...), gfxsim run --frontend asm), that runs the compiled HIP entry point
    ``entry`` on each wave instead: Buffers bind to the HIP arguments by name, a keyword that is a
    HIP argument becomes a scalar argument, head_dim/block_size select the compile-time defines
    (a build of their own), and any other keyword must have the value the HIP twin fixes.
    ``entry`` may also be ``{keyword: {value: entry}}``: the entry point chosen by a keyword
    (pv_int8's grouping)."""
    import inspect
    sig = inspect.signature(python_kernel)
    chooser, choices, default = None, None, None
    if isinstance(entry, dict):
        (chooser, choices), = entry.items()
        default = sig.parameters[chooser].default if chooser in sig.parameters else None
    positional = [p.name for p in list(sig.parameters.values())[1:]
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    launches = {}

    def kernel(w, *buffers, **kwargs):
        name = entry
        if chooser is not None:
            value = kwargs.pop(chooser, default)
            if value not in choices:
                raise LaunchError(f"{python_kernel.__name__}: {chooser}={value!r} has no compiled entry point "
                                  f"(one of {', '.join(map(repr, choices))})")
            name = choices[value]
        if len(buffers) != len(positional):
            raise LaunchError(f"{name}: {len(buffers)} buffers for {python_kernel.__name__}'s {positional}")
        defines = []
        for k, (macro, compiled) in DEFINES.items():
            if k in kwargs and kwargs[k] != compiled:
                defines.append(f"{macro}={int(kwargs[k])}")
        key = (name, tuple(defines))
        if launches.get("machine") is not w.machine:
            launches.clear()                    # one launch at a time: drop the last one's state
            launches["machine"] = w.machine
        if key not in launches:
            proj = project
            if defines:                          # a build of their own beside the project's
                proj = project.with_build(project.build.parent / (project.build.name + "-" + "-".join(
                    d.lower().replace("gfxsim_", "").replace("=", "") for d in defines)))
            kern = find_kernel(name, w.arch.name, project=proj, defines=tuple(defines))
            program = _program_of(kern)
            names = {a.name for a in program.abi.args}
            args = dict(zip(positional, buffers))
            for k, v in kwargs.items():
                if k in names:
                    args[k] = v
                elif k in FIXED and v != FIXED[k][0]:
                    raise LaunchError(f"{name}: {k}={v!r} does not apply ({FIXED[k][1]}: {k}={FIXED[k][0]!r})")
                elif k not in FIXED and k not in DEFINES:
                    raise LaunchError(f"{name}: keyword {k}={v!r} of {python_kernel.__name__} has no HIP argument "
                                      f"or define")
            extra = set(args) - names
            if extra:
                raise LaunchError(f"{name} has no argument {', '.join(sorted(extra))}")
            bufs, scalars = bind_args(program.abi, args)
            kernarg = Buffer(KERNARG, np.zeros(-(-max(program.abi.kernarg_size, 4) // 64) * 64, np.uint8))
            space = AddressSpace([kernarg, *{b.name: b for b in bufs.values()}.values()])
            kernarg.raw[:] = kernarg_segment(program.abi, space, bufs, scalars)
            launches[key] = (program, space, kernarg)
        program, space, kernarg = launches[key]
        run_wave(w, program, space, kernarg, w.wg.ids, (w.num_waves * w.lanes, 1, 1))

    shown = entry if chooser is None else "|".join(choices.values())
    kernel.batch_limit = lambda provenance: PROVENANCE_BATCH if provenance else None
    kernel.__name__ = f"{python_kernel.__name__}_asm"
    kernel.__qualname__ = f"twin_kernel({shown})"
    kernel.__signature__ = sig
    return kernel


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


__all__ = ["run_asm", "Program", "decode", "execute", "AsmError"]
