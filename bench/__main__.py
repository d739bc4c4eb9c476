"""`python -m bench`: gfxsim's speed, side by side in one run, each figure the median of several runs.

  python -m bench [--quick] [--repeat N] [-o bench/results.json] [--calculator PATH]
                  [--contexts 4096 8192 16384] [--modes off on trace] [--timeout S]

1. decode at the users' shape (64 query heads on 8 KV heads, head_dim 128, block 16, gfx936), the
   whole `gfxsim run paged_attention_decode ... --report json` command as a subprocess, with
   --no-provenance, with provenance and with --trace, against bench/decode_numpy.py (the same INT8
   math vectorized, timed in this process on the same inputs and checked against
   kernels_py.reference.attention.attention_int8);
2. the INT8 PV tile on gfxsim (bench/tile.py; one tile, and N tiles batched) against a SIMT port on
   numba's CUDA simulator (bench/tile_cudasim.py), each in its own process;
3. `gfxsim layout` queries, the whole command including start-up, against AMD's matrix
   instruction calculator when given (--calculator or GFXSIM_AMD_CALCULATOR);
4. the asm front end (bench/asm_decode.py): lane-instructions per second of the compiled decode at
   the users' shape, 4096 tokens, provenance off and on;
5. a Triton flash-attention forward on the asm front end (bench/triton_fa.py, where triton is
   installed): lane-instructions per second, provenance off and on.
Peak RSS: of the child (os.wait4) for subprocesses, of this process (VmHWM reset before the figure)
for in-process figures. Writes a JSON file with every figure and a description of the machine.
A figure that fails (e.g. the back end broken mid-rewrite) is reported as failed, not raised.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback

from bench.common import (ROOT, failure_text, gfxsim_cmd, machine_info, median, repeat_child, run_child,
                          run_worker, time_in_process)

USERS_SHAPE = dict(heads=64, kv_heads=8, head_dim=128, block_size=16, arch="gfx936")
QUICK_SHAPE = dict(heads=8, kv_heads=1, head_dim=128, block_size=16, arch="gfx936")   # gfxsim run's default
MODES = {"off": ["--no-provenance"], "on": [], "trace": ["--trace"]}
MODE_LABEL = {"off": "provenance off", "on": "provenance on", "trace": "full trace"}
GIB = 2 ** 30
# the decode targets at 16K: ratio to numpy and peak RSS
DECODE_TARGETS = {"off": (12.0, 2 * GIB), "on": (40.0, 2 * GIB), "trace": (None, 4 * GIB)}
TILE_TARGET = 1000.0
LAYOUT_QUERIES = [
    ("get-register", ["layout", "gfx942", "v_mfma_i32_16x16x32_i8", "--operand", "B", "--get-register", "13", "2"]),
    ("list", ["layout", "gfx942", "--list"]),
    ("detail", ["layout", "gfx942", "v_mfma_i32_16x16x32_i8", "--detail"]),
    ("matrix view", ["layout", "gfx936", "v_mmac_i32_16x16x32_i8", "--operand", "D"]),
    ("--help", ["--help"]),
]
CALC_ARGS = ["-a", "CDNA3", "-i", "v_mfma_i32_16x16x32_i8", "-B", "-g", "-K", "13", "-J", "2"]


class Bench:
    def __init__(self, args):
        self.args = args
        self.figures: list[dict] = []
        self.notes: list[str] = []
        self.t0 = time.perf_counter()
        self.machine = machine_info()
        mem = self.machine.get("memory_bytes", 0)
        self.mem_limit = int(args.mem_limit_gib * GIB) if args.mem_limit_gib else int(0.8 * mem)
        ft = self.machine.get("first_touch")
        if ft:          # every figure below pays this for its peak RSS (page faults, system time)
            self.notes.append(f"fresh memory on this machine: {ft['mib']} MiB first written by a new process in "
                              f"{ft['after_a_pause_seconds']:.2f} s after a pause ({ft['after_a_pause_per_gib']:.2f} "
                              f"s/GiB), {ft['back_to_back_seconds']:.2f} s back to back "
                              f"({ft['back_to_back_per_gib']:.2f} s/GiB)")

    # -- bookkeeping -------------------------------------------------------------------------
    def add(self, group, label, *, seconds=None, runs=None, rss=None, ratio=None, ratio_text="", target="",
            met=None, error=None, **extra):
        fig = dict(group=group, figure=label, seconds=seconds, runs=runs or [], peak_rss_bytes=rss, ratio=ratio,
                   ratio_text=ratio_text, target=target, met=met, error=error, **extra)
        self.figures.append(fig)
        print(f"  [{time.perf_counter() - self.t0:7.1f} s] {label}: "
              + (f"FAILED ({error})" if error else f"{seconds:.4g} s"), file=sys.stderr, flush=True)
        self.write()
        return fig

    def write(self):
        res = dict(command="python -m bench " + " ".join(self.argv_shown), quick=self.args.quick,
                   repeat=self.args.repeat, machine=self.machine, figures=self.figures, notes=self.notes,
                   elapsed_s=round(time.perf_counter() - self.t0, 1))
        tmp = self.args.output + ".tmp"
        with open(tmp, "w") as f:
            json.dump(res, f, indent=1, default=float)
        os.replace(tmp, self.args.output)

    # -- 1. decode ---------------------------------------------------------------------------
    def decode(self):
        a = self.args
        shape = QUICK_SHAPE if a.quick else USERS_SHAPE
        shape_text = (f"{shape['heads']}q/{shape['kv_heads']}kv heads, d{shape['head_dim']}, "
                      f"block {shape['block_size']}, {shape['arch']}")
        self.notes.append(f"decode shape: {shape_text}; gfxsim command: {' '.join(gfxsim_cmd())} run "
                          "paged_attention_decode ... --report json (this checkout on PYTHONPATH)")
        gave_up = {}
        for ctx in a.contexts:
            np_fig = self.decode_numpy(ctx, shape)
            t_np = np_fig.get("seconds")
            for mode in a.modes:
                label = f"decode {ctx}: gfxsim run, {MODE_LABEL[mode]}"
                if mode in gave_up:
                    self.add("decode", label, error=f"skipped: a shorter context timed out ({gave_up[mode]})",
                             context=ctx, mode=mode)
                    continue
                cmd = gfxsim_cmd() + ["run", "paged_attention_decode", "--heads", str(shape["heads"]),
                                      "--kv-heads", str(shape["kv_heads"]), "--head-dim", str(shape["head_dim"]),
                                      "--block-size", str(shape["block_size"]), "--arch", shape["arch"],
                                      "--context", str(ctx), "--report", "json"] + MODES[mode]
                runs, rss, err, report = [], [], None, None
                for _ in range(a.repeat):
                    r = run_child(cmd, timeout=a.timeout, mem_limit_bytes=self.mem_limit)
                    if r["rc"] != 0 or r["timed_out"]:
                        err = failure_text(r, a.timeout)
                        if r["timed_out"]:
                            gave_up[mode] = err
                        break
                    runs.append(r["seconds"])
                    rss.append(r["rss_bytes"])
                    try:
                        report = json.loads(r["stdout"])
                    except ValueError:
                        err = "the command's stdout is not JSON"
                        break
                if err:
                    self.add("decode", label, runs=runs, error=err, context=ctx, mode=mode,
                             command=" ".join(cmd[2:]))
                    continue
                sec = median(runs)
                ratio = sec / t_np if t_np else None
                tr, tm = DECODE_TARGETS[mode]
                target, met = "", None
                if ctx == 16384 and not a.quick:
                    parts, oks = [], []
                    if tr:
                        parts.append(f"<= {tr:g}x numpy")
                        oks.append(ratio is not None and ratio <= tr)
                    parts.append(f"RSS < {tm // GIB} GiB")
                    oks.append(max(rss) < tm)
                    target, met = ", ".join(parts), all(oks)
                m = (report or {}).get("metrics", {}).get("vs_reference_int8", {})
                self.add("decode", label, seconds=sec, runs=runs, rss=max(rss), ratio=ratio,
                         ratio_text=f"{ratio:.1f}x numpy" if ratio else "", target=target, met=met, context=ctx,
                         mode=mode, command="gfxsim " + " ".join(cmd[3:]),
                         simulated_seconds=(report or {}).get("seconds"),
                         gfxsim_max_abs_vs_reference_int8=m.get("max_abs"),
                         findings=len((report or {}).get("findings", [])))

    def decode_numpy(self, ctx, shape) -> dict:
        """The numpy implementation on the inputs `gfxsim run` generates (same seed, same cache)."""
        label = f"decode {ctx}: numpy INT8 implementation (bench/decode_numpy.py)"
        try:
            import numpy as np

            from bench.decode_numpy import build_cache, decode_int8
            from kernels_py.reference import attention as R
            from kernels_py.workloads.data import make_attention_inputs
            from kernels_py.reference.int8_cache import build_paged_cache
            t = time.perf_counter()
            d = make_attention_inputs(seed=0, num_seqs=1, num_heads=shape["heads"], num_kv_heads=shape["kv_heads"],
                                      head_dim=shape["head_dim"], context_lens=[ctx])
            t_gen = time.perf_counter() - t
            t = time.perf_counter()
            cache = build_paged_cache(d["k"], d["v"], d["context_lens"], block_size=shape["block_size"],
                                      smooth_k=True, seed=0)
            t_cache_ref = time.perf_counter() - t
            t = time.perf_counter()
            ref = R.attention_int8(d["q"], cache)
            t_ref = time.perf_counter() - t
            args = (d["q"], cache.k_cache, cache.v_cache, cache.k_scale, cache.v_scale, cache.block_tables,
                    cache.context_lens)
            sec, runs, rss, out = time_in_process(lambda: decode_int8(*args), self.args.repeat)
            diff = float(np.abs(out - ref).max())
            t_build, _, _, built = time_in_process(
                lambda: build_cache(d["k"][0, :ctx], d["v"][0, :ctx], ctx, cache.block_tables[0],
                                    cache.k_cache.shape[0], block_size=shape["block_size"]), self.args.repeat)
            nb = -(-ctx // shape["block_size"])
            blk = cache.block_tables[0, :nb]
            same_cache = bool(np.array_equal(built[0][blk], cache.k_cache[blk])
                              and np.array_equal(built[1][blk], cache.v_cache[blk]))
            self.notes.append(f"decode {ctx}: numpy implementation vs kernels_py.reference.attention.attention_int8: "
                              f"max abs diff {diff:.3g} (outputs up to {float(np.abs(ref).max()):.3g}); "
                              f"its INT8 cache build equals build_paged_cache's: {same_cache}")
            fig = self.add("decode", label, seconds=sec, runs=runs, rss=rss, ratio=1.0, ratio_text="1x (yardstick)",
                           context=ctx, mode="numpy", max_abs_vs_reference_int8=diff,
                           cache_build_seconds=t_build, cache_build_equal=same_cache,
                           datagen_seconds=t_gen, reference_cache_build_seconds=t_cache_ref,
                           reference_int8_seconds=t_ref)
            self.add("decode", f"decode {ctx}: numpy INT8 cache build (smooth-K, not in the ratio)", seconds=t_build,
                     context=ctx, mode="numpy-cache")
            self.add("decode", f"decode {ctx}: data generation + kernels_py reference (not in the ratio)",
                     seconds=t_gen + t_cache_ref + t_ref, context=ctx, mode="datagen+reference",
                     datagen_seconds=t_gen, reference_cache_build_seconds=t_cache_ref, reference_int8_seconds=t_ref)
            return fig
        except Exception as e:                                  # noqa: BLE001  report, do not crash
            traceback.print_exc()
            return self.add("decode", label, error=f"{type(e).__name__}: {e}", context=ctx, mode="numpy")

    # -- 4. the asm front end ------------------------------------------------------------------
    def asm(self):
        from bench.asm_decode import asm_decode
        asm_decode(self, QUICK_SHAPE if self.args.quick else USERS_SHAPE)

    # -- 5. a Triton kernel on the asm front end ------------------------------------------------
    def triton(self):
        from bench.triton_fa import triton_fa
        triton_fa(self)

    # -- 2. PV tile --------------------------------------------------------------------------
    def tile(self):
        a = self.args
        n_sim, n_cuda = (16, 2) if a.quick else (a.tiles, a.cudasim_tiles)
        cud = {}
        for n, key in ((1, "one"), (n_cuda, "batched")):
            data, r = run_worker("tile_cudasim", ["--tiles", str(n), "--repeat", str(a.repeat)],
                                 timeout=a.timeout)
            label = f"PV tile, numba CUDA simulator, {'1 tile' if n == 1 else f'{n} tiles (grid {n}), per tile'}"
            if data is None:
                self.add("tile", label, error=failure_text(r, a.timeout), tiles=n)
                continue
            cud[key] = data["per_tile"]
            self.add("tile", label, seconds=data["per_tile"], runs=[x / n for x in data["runs"]], rss=r["rss_bytes"],
                     ratio_text="1x (yardstick)", tiles=n, launch_seconds=data["seconds"],
                     max_abs_vs_numpy=data["max_abs_vs_numpy"])
        for n, batch, prov in ((1, False, "off"), (1, False, "on"), (n_sim, True, "off"), (n_sim, True, "on")):
            what = "1 tile" if n == 1 else f"{n} tiles (grid {n}, batch={n}), per tile"
            label = f"PV tile, gfxsim, {what}, provenance {prov}"
            args = ["--tiles", str(n), "--provenance", prov, "--repeat", str(a.repeat)] + (["--batch"] if batch else [])
            data, r = run_worker("tile", args, timeout=a.timeout)
            if data is None:
                self.add("tile", label, error=failure_text(r, a.timeout), tiles=n, provenance=prov)
                continue
            base = cud.get("batched" if batch else "one")
            speed = base / data["per_tile"] if base else None
            target, met = "", None
            if batch and prov == "off":
                target, met = f">= {TILE_TARGET:g}x faster than cudasim", (speed is not None and speed >= TILE_TARGET)
            self.add("tile", label, seconds=data["per_tile"], runs=[x / n for x in data["runs"]], rss=r["rss_bytes"],
                     ratio=speed, ratio_text=f"{speed:.3g}x faster than cudasim" if speed else "",
                     target=target, met=met, tiles=n, provenance=prov, batch=batch, launch_seconds=data["seconds"],
                     max_abs_vs_numpy=data["max_abs_vs_numpy"], numpy_seconds=data["numpy_seconds"])

    # -- 3. layout ---------------------------------------------------------------------------
    def layout(self):
        a = self.args
        calc = a.calculator or os.environ.get("GFXSIM_AMD_CALCULATOR")
        t_calc = None
        if calc:
            cmd = [a.calculator_python or sys.executable, calc] + CALC_ARGS
            runs, rss, err, r = repeat_child(cmd, a.repeat, a.timeout, env=dict(os.environ))
            if err:
                self.add("layout", "AMD matrix_calculator.py -B -g -K 13 -J 2", error=err, command=" ".join(cmd))
            else:
                t_calc = median(runs)
                self.add("layout", "AMD matrix_calculator.py -B -g -K 13 -J 2", seconds=t_calc, runs=runs,
                         rss=max(rss), ratio_text="1x (yardstick)", command=" ".join(cmd[1:]),
                         output=r["stdout"].strip().splitlines()[-1:])
        else:
            self.notes.append("AMD's matrix instruction calculator not given (--calculator PATH or "
                              "GFXSIM_AMD_CALCULATOR): the layout query is not compared with it")
        for name, sub in LAYOUT_QUERIES:
            cmd = gfxsim_cmd() + sub
            label = f"gfxsim {' '.join(sub)}"
            runs, rss, err, r = repeat_child(cmd, a.repeat, a.timeout)
            if err:
                self.add("layout", label, error=err, query=name)
                continue
            sec = median(runs)
            ratio = sec / t_calc if (t_calc and name == "get-register") else None
            target, met = "", None
            if name == "get-register":
                target = "<= AMD calculator"
                met = (sec <= t_calc) if t_calc else None
                if not t_calc:
                    target += " (calculator not given)"
            self.add("layout", label, seconds=sec, runs=runs, rss=max(rss), ratio=ratio,
                     ratio_text=f"{ratio:.2f}x calculator" if ratio else "", target=target, met=met, query=name,
                     output=r["stdout"].strip().splitlines()[:1] if name == "get-register" else None)

    # -- output ------------------------------------------------------------------------------
    def table(self) -> str:
        rows = [("figure", "seconds", "peak RSS", "ratio", "target", "met?")]
        for f in self.figures:
            if f["error"]:
                rows.append((f["figure"], "FAILED", "", f["error"][:70], f["target"], "no" if f["target"] else ""))
                continue
            rss = f"{f['peak_rss_bytes'] / 2**20:,.0f} MiB" if f["peak_rss_bytes"] else ""
            met = "" if f["met"] is None else ("yes" if f["met"] else "NO")
            rows.append((f["figure"], f"{f['seconds']:.4g}", rss, f["ratio_text"], f["target"], met))
        widths = [max(len(r[i]) for r in rows) for i in range(6)]
        lines = []
        for i, r in enumerate(rows):
            lines.append("  ".join(c.ljust(w) if j in (0, 3, 4) else c.rjust(w) for j, (c, w) in enumerate(zip(r, widths))))
            if i == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines)


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="small contexts (256, 512) and gfxsim run's default shape, 1 run each (the test suite)")
    ap.add_argument("--repeat", type=int, help="runs per figure, the median is reported (default 3; --quick 1)")
    ap.add_argument("-o", "--output", default=None, help="results JSON (default bench/results.json)")
    ap.add_argument("--contexts", type=int, nargs="+", help="decode contexts (default 4096 8192 16384)")
    ap.add_argument("--modes", nargs="+", choices=tuple(MODES), help="decode modes (default off on trace)")
    ap.add_argument("--only", nargs="+", choices=("decode", "tile", "layout", "asm", "triton"),
                    help="run only these groups")
    ap.add_argument("--tiles", type=int, default=256, help="tiles of the batched gfxsim PV launch")
    ap.add_argument("--cudasim-tiles", type=int, default=8, help="tiles (blocks) of the batched cudasim launch")
    ap.add_argument("--timeout", type=float, default=900.0,
                    help="seconds per subprocess run; a decode mode that times out is not tried at longer contexts")
    ap.add_argument("--mem-limit-gib", type=float, default=0.0,
                    help="address-space limit of each decode child (default 80%% of the machine's memory)")
    ap.add_argument("--calculator", help="path of AMD's matrix_calculator.py (or env GFXSIM_AMD_CALCULATOR)")
    ap.add_argument("--calculator-python", help="python to run the calculator with (it needs tabulate); "
                                                "default this one, or env GFXSIM_AMD_CALCULATOR_PYTHON")
    a = ap.parse_args(argv)
    if a.repeat is not None and a.repeat < 1:
        ap.error(f"--repeat must be at least 1, got {a.repeat}")
    a.repeat = a.repeat or (1 if a.quick else 3)
    a.contexts = a.contexts or ([256, 512] if a.quick else [4096, 8192, 16384])
    a.modes = a.modes or list(MODES)
    a.output = a.output or str(ROOT / "bench" / "results.json")
    from gfxsim.errors import UsageError
    from visualize.cli import check_output
    try:
        check_output(a.output)           # before the runs: a bad -o would otherwise fail at the end
    except UsageError as e:
        ap.error(str(e))
    a.calculator_python = a.calculator_python or os.environ.get("GFXSIM_AMD_CALCULATOR_PYTHON")
    return a


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    a = parse_args(argv)
    b = Bench(a)
    b.argv_shown = argv
    print(f"gfxsim bench on {b.machine.get('cpu')} ({b.machine.get('cores')} cores, "
          f"{b.machine.get('memory_gib')} GiB), commit {str(b.machine.get('gfxsim_commit'))[:10]}; "
          f"median of {a.repeat} run(s) per figure", flush=True)
    groups = a.only or ["layout", "tile", "decode", "asm", "triton"]     # cheapest first
    for g in ("layout", "tile", "decode", "asm", "triton"):
        if g in groups:
            try:
                getattr(b, g)()
            except Exception as e:                              # noqa: BLE001  report, do not crash
                traceback.print_exc()
                b.add(g, f"{g} (group)", error=f"{type(e).__name__}: {e}")
    b.write()
    print(b.table())
    for n in b.notes:
        print("note:", n)
    print(f"results: {os.path.relpath(a.output, os.getcwd())}")
    bad = [f for f in b.figures if f["seconds"] is not None and not (math.isfinite(f["seconds"]) and f["seconds"] > 0)]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
