"""The compiled twins on gfxsim's asm front end and on tinygrad's CDNA emulator, side by side:
`python -m bench.tinygrad_side --tinygrad PATH [--twins ...]` (run by `python -m bench --tinygrad PATH`).

Each twin's first launch at a unit-test shape (gfx942, head_dim 128, block 16; bench/kernels.py
names the shapes) runs on gfxsim through its harness (provenance off, no trace; the launch's
lane-instructions counted by the front end), once to warm up. The same launch — the same code
object (build/hip/gfx942/NAME.co), kernarg bytes, grid and input bytes, at host addresses — runs on
tinygrad's emulator (test/mockgpu/amd/emu.py run_asm, "cdna"), once to compile its instructions
(warm); then the two alternate, REPEAT timed launches each (A B A B: a pair sees the load of the
moment), and each side's figure is its fastest. tinygrad runs through tinygrad's LLVM renderer for its CPU device
(``DEV=CPU:LLVM``, RENDERER): the C renderer's kernel for v_mfma_i32_16x16x32_i8 stores an int4 through
an unsigned_int4 pointer, which clang rejects, while the LLVM IR of the same kernel compiles and runs
every twin (the renderer only changes how tinygrad's instructions are compiled). Both rates divide
gfxsim's lane-instruction count by the launch's seconds; tinygrad's run is counted only if it leaves
every buffer as gfxsim did (float32 results within CLOSE: its matrix instructions round their sums in
another order; the note says how many differ).
Prints one JSON object per twin; an error (an instruction tinygrad cannot run, ...) is its note.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import struct
import sys
import time
import traceback

import numpy as np

ARCH = "gfx942"
CONTEXT = 256
RENDERER = "LLVM"       # tinygrad's CPU renderer (module docstring: why not its C renderer)
TWINS = ("qk_int8", "pv_int8", "pv_bf16", "int8_kv_cache", "prefix_prefill", "paged_attention_decode")


def harness(twin: str):
    """A function running the twin's harness once on the asm front end: its first Run."""
    from kernels_py.host.buffers import make_cache, run_decode
    from kernels_py.host.hip_twins import asm_kernel_fn
    from kernels_py.host.twins import query_rows, run_int8_kv_cache, run_prefill, run_pv, run_qk_int8, softmax_rows
    from kernels_py.workloads.data import make_attention_inputs
    kw = dict(arch=ARCH, trace=False, provenance=False)
    nq = None if twin == "paged_attention_decode" else 16
    d = make_attention_inputs(seed=0, num_heads=1, head_dim=128, context_lens=[CONTEXT], num_queries=nq)
    cache = make_cache(d["k"], d["v"], d["context_lens"], block_size=16, smooth_k=True, seed=0)
    fn = asm_kernel_fn(twin)
    if twin == "qk_int8":
        rows = query_rows(d["q"], 1)
        return lambda: run_qk_int8(rows, cache, kernel=fn, **kw)[1]
    if twin in ("pv_int8", "pv_bf16"):
        p = softmax_rows(query_rows(d["q"], 1), cache)
        return lambda: run_pv(fn, p, cache, **kw)[1]
    if twin == "prefix_prefill":
        return lambda: run_prefill(d["q"], cache, kernel=fn, **kw)[1][0]
    if twin == "int8_kv_cache":
        key, value = d["k"][0, :CONTEXT], d["v"][0, :CONTEXT]
        return lambda: run_int8_kv_cache(key, value, cache.slot_mapping, num_blocks=cache.k_cache.shape[0],
                                         block_size=16, kernel=fn, **kw)[1]
    return lambda: run_decode(d["q"], cache, kernel=fn, **kw).runs[0]


class Capture:
    """The first launch's bound program, arguments and buffers (CompiledTwin._bind), its grid and
    block (the waves that ran), the buffers' bytes before it ran."""

    def __init__(self):
        from kernels_py.host.hip_twins import CompiledTwin
        self.cls, self.bind, self.call = CompiledTwin, CompiledTwin._bind, CompiledTwin.__call__
        self.first, self.ids, self.block = None, set(), None
        cap = self

        def bind(twin, name, defines, arch, args, kwargs):
            out = cap.bind(twin, name, defines, arch, args, kwargs)
            if cap.first is None:
                program, space, kernarg = out
                cap.first = dict(program=program, space=space, args=dict(args),
                                 before={b.name: b.raw.copy() for b in space.buffers})
            return out

        def call(twin, w, *a, **k):
            if cap.first is None or not cap.ids or w.machine is cap.machine:
                cap.machine = w.machine
                cap.ids.update(tuple(int(x) for x in i) for i in w.wg.ids)
                cap.block = (w.num_waves * w.lanes, 1, 1)
            return cap.call(twin, w, *a, **k)
        self.machine = None
        CompiledTwin._bind, CompiledTwin.__call__ = bind, call

    def restore(self):
        self.cls._bind, self.cls.__call__ = self.bind, self.call

    def grid(self):
        return tuple(max(i[k] for i in self.ids) + 1 for k in range(3))


def load_code(path, symbol: str):
    """The code object's loadable segments laid out at their addresses in host memory: (the image
    (kept alive), its size, the entry address, compute_pgm_rsrc2 of SYMBOL.kd)."""
    data = open(path, "rb").read()
    (phoff, shoff) = struct.unpack_from("<QQ", data, 0x20)
    phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", data, 0x36)
    loads = []
    for i in range(phnum):
        p_type, _, p_offset, p_vaddr, _, p_filesz, p_memsz, _ = struct.unpack_from("<IIQQQQQQ", data, phoff + i * phentsize)
        if p_type == 1:
            loads.append((p_offset, p_vaddr, p_filesz, p_memsz))
    size = max(v + m for _, v, _, m in loads)
    image = (ctypes.c_char * size)()
    for off, vaddr, filesz, _ in loads:
        ctypes.memmove(ctypes.addressof(image) + vaddr, data[off:off + filesz], filesz)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    symtab = next(s for s in sections if s[1] == 2)                      # SHT_SYMTAB
    strtab = sections[symtab[6]]
    syms = {}
    for k in range(symtab[5] // 24):
        name_off, _, _, _, value, _ = struct.unpack_from("<IBBHQQ", data, symtab[4] + k * 24)
        end = data.index(b"\0", strtab[4] + name_off)
        syms[data[strtab[4] + name_off:end].decode()] = value
    kd = syms[symbol + ".kd"]
    entry = kd + struct.unpack_from("<q", bytes(image[kd + 16:kd + 24]))[0]
    rsrc2 = struct.unpack_from("<I", bytes(image[kd + 52:kd + 56]))[0]
    return image, size, ctypes.addressof(image) + entry, rsrc2


class HostSpace:
    """Each buffer of the launch at a host address (tinygrad's emulator reads host memory)."""

    def __init__(self, before: dict):
        self.arrays = {n: np.array(b, copy=True) for n, b in before.items()}

    def address(self, name: str) -> int:
        return self.arrays[name].ctypes.data

    def pointer(self, buf) -> int:
        from gfxsim.asm.launch import is_null
        return 0 if is_null(buf) else self.address(buf.name)


def tinygrad_launch(cap: Capture, twin: str, emu):
    """The captured launch on tinygrad's emulator: (a function running it once -> (seconds, its
    buffers compared with gfxsim's)), after one run that compiles each instruction (warm)."""
    from gfxsim.asm.launch import DISPATCH, KERNARG, Dispatch, bind_args, dispatch_packet, kernarg_segment
    from kernels_py.host.hip_twins import hip_project
    first = cap.first
    abi = first["program"].abi
    if abi.preload:
        raise RuntimeError(f"{abi.name} preloads kernargs into SGPRs, which this driver does not set up")
    grid, block = cap.grid(), cap.block
    image, size, entry, rsrc2 = load_code(hip_project().build / ARCH / f"{twin}.co", abi.name)
    # the descriptor's LDS field is 0 (the dispatch gives the size); the emulator sizes its LDS from it
    rsrc2 = rsrc2 & ~(0x1FF << 15) | (-(-abi.lds_bytes // 512) << 15)
    after = {b.name: b.raw.copy() for b in first["space"].buffers}

    def once() -> tuple[float, HostSpace]:
        host = HostSpace(first["before"])
        bufs, scalars = bind_args(abi, first["args"])
        host.arrays[KERNARG][:] = kernarg_segment(abi, host, bufs, scalars, Dispatch(grid, block))
        if DISPATCH in host.arrays:
            host.arrays[DISPATCH][:] = dispatch_packet(abi, Dispatch(grid, block), host.address(KERNARG)).raw
        user = []
        for what, n in abi.user:
            addr = {"kernarg_segment_ptr": KERNARG, "dispatch_ptr": DISPATCH}.get(what)
            value = host.address(addr) if addr in host.arrays else 0
            user += [value & 0xFFFFFFFF, value >> 32][:n] + [0] * max(0, n - 2)
        t = time.perf_counter()
        emu.run_asm(entry, size, *grid, *block, host.address(KERNARG), rsrc2=rsrc2, arch="cdna", user_data=user)
        return time.perf_counter() - t, host
    once()                                           # compiles each instruction once

    def timed(code=image) -> tuple[float, dict]:     # the code image lives as long as this function
        seconds, host = once()
        return seconds, compare(after, host.arrays)
    return timed


CLOSE = 2.0 ** -20    # float32 results within this much of the buffer's largest: the same sums rounded in
                      # another order (a matrix instruction's accumulation model)


def compare(mine: dict, theirs: dict) -> dict:
    """How tinygrad's buffers differ from gfxsim's: same (bit for bit, or as float32 within CLOSE
    of the buffer's largest magnitude), and where float32 values differ, how many and by how much."""
    from gfxsim.asm.launch import DISPATCH, KERNARG
    out = dict(same=True, differ={})
    for n, a in mine.items():
        b = theirs[n]
        if n in (KERNARG, DISPATCH) or np.array_equal(a, b):
            continue
        if a.size % 4:
            out["same"] = False
            out["differ"][n] = "bytes"
            continue
        fa, fb = a.view(np.float32).astype(np.float64), b.view(np.float32).astype(np.float64)
        both = np.isfinite(fa) & np.isfinite(fb)
        if not np.array_equal(both, np.isfinite(fa)) or not np.array_equal(both, np.isfinite(fb)):
            out["same"] = False
            out["differ"][n] = "non-finite values in other places"
            continue
        diff, scale = np.abs(fa - fb)[both], max(float(np.abs(fa[both]).max(initial=0)), 1e-30)
        out["differ"][n] = (f"{int((diff > 0).sum())} of {diff.size} float32 values, at most "
                            f"{diff.max() / scale:.2g} of the largest")
        out["same"] &= bool(diff.max() <= CLOSE * scale)
    return out


REPEAT = 5         # timed launches per side, alternating gfxsim and tinygrad; each figure is the fastest


def side_by_side(twin: str, emu, repeat: int = REPEAT) -> dict:
    """gfxsim's and tinygrad's warm launch of ``twin``, alternating (A B A B: each pair sees the
    load of the moment), ``repeat`` each; the rates are from each side's fastest."""
    from gfxsim.machine import jit
    run = harness(twin)
    jit.prewarm()                                    # warm: numba up (a short process's narrow waves
    jit.join_start()                                 # would keep numpy: jit.START_BESIDE),
    run()                                            # the build, the parse
    cap = Capture()
    try:
        r = run()
    finally:
        cap.restore()
    mine = [r.seconds]
    out = dict(twin=twin, arch=ARCH, context=CONTEXT, lane_instructions=r.lane_instructions, grid=cap.grid(),
               block=cap.block, repeat=repeat)
    theirs, cmp = [], None
    try:
        with _stderr_lines() as said:
            timed = tinygrad_launch(cap, twin, emu)
        for k in range(repeat):
            sec, cmp = timed()
            theirs.append(sec)
            if k < repeat - 1:
                mine.append(run().seconds)
        same = cmp["same"]
        out.update(tinygrad_seconds=min(theirs), tinygrad_all=theirs, same_buffers=same, differ=cmp["differ"],
                   tinygrad_rate=r.lane_instructions / min(theirs) if same else None)
        if cmp["differ"]:
            out["note"] = "tinygrad's results differ from gfxsim's: " + "; ".join(f"{n}: {d}" for n, d in
                                                                                   cmp["differ"].items())
        if not same:
            out["error"] = out["note"]
    except Exception as e:                            # noqa: BLE001  the figure's note
        why = [ln for ln in said if "error:" in ln][:2]   # e.g. the C compiler's, for an instruction's kernel
        first = str(e).splitlines()[0].split(": CalledProcessError")[0][:300] if str(e) else ""
        out["error"] = (f"tinygrad's emulator: {type(e).__name__}: {first}"
                        + (f" ({'; '.join(why)})" if why else ""))
        traceback.print_exc()
    mine += [run().seconds for _ in range(repeat - len(mine))]
    out.update(gfxsim_seconds=min(mine), gfxsim_all=mine, gfxsim_rate=r.lane_instructions / min(mine))
    return out


class _stderr_lines:
    """Collect what is written to file descriptor 2 (child compilers included) while inside."""

    def __enter__(self) -> list[str]:
        import os
        import tempfile
        self.lines: list[str] = []
        sys.stderr.flush()
        self.tmp = tempfile.TemporaryFile()
        self.saved = os.dup(2)
        os.dup2(self.tmp.fileno(), 2)
        return self.lines

    def __exit__(self, *exc) -> None:
        import os
        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.tmp.seek(0)
        self.lines += self.tmp.read().decode(errors="replace").splitlines()
        self.tmp.close()


TARGET = 3.0        # gfxsim's rate at least this many times tinygrad's


def figures(bench, path: str) -> None:
    """The side-by-side figures of `python -m bench --tinygrad PATH` (this module as a child)."""
    from bench.common import failure_text, run_child
    twins = [t for t in TWINS if not bench.args.kernels or t in bench.args.kernels] or list(TWINS)
    r = run_child([sys.executable, "-m", "bench.tinygrad_side", "--tinygrad", path, "--twins", *twins],
                  timeout=bench.args.timeout * len(twins), mem_limit_bytes=bench.mem_limit)
    got = {}
    for line in r["stdout"].splitlines():
        try:
            d = json.loads(line)
            got[d["twin"]] = d
        except (ValueError, KeyError):
            continue
    for twin in twins:
        label = f"{twin}: asm front end vs tinygrad's emulator, one launch, warm, provenance off"
        d = got.get(twin)
        if d is None:
            bench.add("tinygrad", label, error=failure_text(r, bench.args.timeout * len(twins)), twin=twin)
            continue
        g, t = d["gfxsim_rate"], d.get("tinygrad_rate")
        text = f"gfxsim {g / 1e6:.3g} M lane-instr/s" + (f", tinygrad {t / 1e6:.3g} M ({g / t:.2f}x)" if t else "")
        if d.get("error") or d.get("note"):
            bench.notes.append(f"tinygrad side by side, {twin}: {d.get('error') or d['note']}")
        bench.add("tinygrad", label, seconds=d["gfxsim_seconds"], rss=r["rss_bytes"], ratio=g / t if t else None,
                  ratio_text=text, target=f">= {TARGET:g}x tinygrad" if t else "", met=(g / t >= TARGET) if t else None,
                  error=None if t else f"tinygrad did not run it: {d.get('error')}", **{k: v for k, v in d.items()
                                                                                       if k != "error"})


def _clang_on_path() -> None:
    """tinygrad's CPU back end (which runs its emulator's instructions) calls `clang`; where only a
    versioned clang is installed (Debian's clang-19), a private directory on PATH names it so."""
    import os
    import shutil
    import tempfile
    if shutil.which("clang"):
        return
    for v in range(30, 13, -1):
        found = shutil.which(f"clang-{v}")
        if found:
            d = tempfile.mkdtemp(prefix="gfxsim-bench-clang-")
            os.symlink(found, os.path.join(d, "clang"))
            os.environ["PATH"] = d + os.pathsep + os.environ.get("PATH", "")
            return


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.tinygrad_side")
    ap.add_argument("--tinygrad", required=True, help="a tinygrad checkout")
    ap.add_argument("--twins", nargs="+", default=list(TWINS), choices=TWINS)
    ap.add_argument("--repeat", type=int, default=REPEAT, help=f"timed launches per side (default {REPEAT})")
    ap.add_argument("--renderer", default=RENDERER,
                    help=f"tinygrad's CPU renderer for its emulator's instructions (default {RENDERER}; CLANG: its C)")
    a = ap.parse_args(argv)
    sys.path.insert(0, a.tinygrad)
    _clang_on_path()
    import os
    os.environ["DEV"] = f"CPU:{a.renderer}"          # read when tinygrad first picks the CPU device's renderer
    from test.mockgpu.amd import emu
    for twin in a.twins:
        print(json.dumps(side_by_side(twin, emu, max(1, a.repeat)), default=float), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
