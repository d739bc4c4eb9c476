"""`python -m bench`: gfxsim's speed, side by side in one run.

  python -m bench [--quick] [--only GROUP|KERNEL ...] [--repeat N] [--timeout S] [-o bench/results.json]
                  [--contexts 4096 16384 65536] [--modes off on trace] [--calculator PATH] [--tinygrad PATH]

1. every shipped kernel at the users' shape (64 query heads on 8 KV heads, head_dim 128, block 16;
   bench/kernels.py lists the shapes): the whole `gfxsim run KERNEL ...` command as users run it
   (the text report), with --no-provenance, with provenance and with --trace, each run paired with
   the kernel's numpy implementation (bench/kernels_numpy.py, bench/decode_numpy.py; its own process,
   one BLAS thread), alternating A B A B (bench/ab.py): per-pair ratios, min/median/max, and the
   load average around each figure. Group "decode" (4K/16K/64K) and group "kernels";
2. the INT8 PV tile on gfxsim (bench/tile.py; one tile, and N tiles batched) against a SIMT port on
   numba's CUDA simulator (bench/tile_cudasim.py), each in its own process;
3. `gfxsim layout` queries, the whole command including start-up, against AMD's matrix
   instruction calculator when given (--calculator or GFXSIM_AMD_CALCULATOR);
4. the asm front end (bench/asm_decode.py): lane-instructions per second of the compiled decode at
   the users' shape, 4096 and 16384 tokens, provenance off and on; and what gfxsim.hip.run_on_sim
   adds to a launch per call after the first (bench/sim_call.py);
5. a Triton flash-attention forward on the asm front end (bench/triton_fa.py, where triton is
   installed): lane-instructions per second, provenance off and on;
6. each compiled twin (gfx942), one launch, warm, on the asm front end and on tinygrad's CDNA
   emulator (bench/tinygrad_side.py, given a tinygrad checkout with --tinygrad PATH; skipped with a
   note otherwise): lane-instructions per second of each, provenance off.
A figure that runs past --timeout is killed and reported as "over N s"; its mode is not tried at
the kernel's larger shapes. Peak RSS: of the child (os.wait4) for subprocesses, of the process
(VmHWM reset before the timed calls) for the yardsticks. Writes a JSON file with every figure, the
machine and its load. A figure that fails is reported as failed, not raised.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback

from bench.ab import load
from bench.common import ROOT, failure_text, gfxsim_cmd, machine_info, median, repeat_child, run_worker
from bench.kernels import MODES

USERS_SHAPE = dict(heads=64, kv_heads=8, head_dim=128, block_size=16, arch="gfx936")
QUICK_SHAPE = dict(heads=8, kv_heads=1, head_dim=128, block_size=16, arch="gfx936")   # gfxsim run's default
GIB = 2 ** 30
GROUPS = ("layout", "tile", "decode", "kernels", "asm", "triton", "tinygrad")     # cheapest first
KERNEL_NAMES = ("int8_kv_cache", "qk_int8", "pv_int8", "pv_bf16", "prefix_prefill", "sage_attention", "fp8_qk")
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
        self.machine["load_at_start"] = load()
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
                   elapsed_s=round(time.perf_counter() - self.t0, 1), load_now=load())
        tmp = self.args.output + ".tmp"
        with open(tmp, "w") as f:
            json.dump(res, f, indent=1, default=float)
        os.replace(tmp, self.args.output)

    # -- 1. every kernel, the decode first (bench/kernels.py) ----------------------------------
    def decode(self):
        from bench.kernels import cases, run_cases
        run_cases(self, "decode", [c for c in cases(self.args.quick, self.args.contexts) if c.group == "decode"])

    def kernels(self):
        from bench.kernels import cases, run_cases
        chosen = [c for c in cases(self.args.quick, []) if c.group == "kernels"
                  and (not self.args.kernels or c.kernel in self.args.kernels)]
        run_cases(self, "kernels", chosen)

    # -- 4. the asm front end ------------------------------------------------------------------
    def asm(self):
        from bench.asm_decode import asm_decode
        from bench.sim_call import figure
        asm_decode(self, QUICK_SHAPE if self.args.quick else USERS_SHAPE)
        figure(self)

    # -- 5. a Triton kernel on the asm front end ------------------------------------------------
    def triton(self):
        from bench.triton_fa import triton_fa
        triton_fa(self)

    # -- 6. the compiled twins on tinygrad's CDNA emulator ------------------------------------
    def tinygrad(self):
        if not self.args.tinygrad:
            self.notes.append("tinygrad figure skipped: no tinygrad checkout given (python -m bench --tinygrad PATH)")
            return
        from bench.tinygrad_side import figures
        figures(self, self.args.tinygrad)

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
    ap.add_argument("--contexts", type=int, nargs="+", help="decode contexts (default 4096 16384 65536)")
    ap.add_argument("--modes", nargs="+", choices=tuple(MODES), help="modes of the kernel figures "
                                                                     "(default off on trace)")
    ap.add_argument("--only", nargs="+", choices=GROUPS + KERNEL_NAMES, metavar="GROUP|KERNEL",
                    help=f"run only these groups ({', '.join(GROUPS)}) or kernels ({', '.join(KERNEL_NAMES)})")
    ap.add_argument("--tinygrad", metavar="PATH", help="a tinygrad checkout: each compiled twin, one launch, on "
                                                        "gfxsim and on its CDNA emulator (test/mockgpu/amd/emu.py)")
    ap.add_argument("--tiles", type=int, default=256, help="tiles of the batched gfxsim PV launch")
    ap.add_argument("--cudasim-tiles", type=int, default=8, help="tiles (blocks) of the batched cudasim launch")
    ap.add_argument("--timeout", type=float, default=900.0,
                    help="seconds per run of a figure: one over it is reported as 'over N s', and its mode is "
                         "not tried at the kernel's larger shapes")
    ap.add_argument("--mem-limit-gib", type=float, default=0.0,
                    help="address-space limit of each decode child (default 80%% of the machine's memory)")
    ap.add_argument("--calculator", help="path of AMD's matrix_calculator.py (or env GFXSIM_AMD_CALCULATOR)")
    ap.add_argument("--calculator-python", help="python to run the calculator with (it needs tabulate); "
                                                "default this one, or env GFXSIM_AMD_CALCULATOR_PYTHON")
    a = ap.parse_args(argv)
    if a.repeat is not None and a.repeat < 1:
        ap.error(f"--repeat must be at least 1, got {a.repeat}")
    a.repeat = a.repeat or (1 if a.quick else 3)
    a.contexts = a.contexts or ([256, 512] if a.quick else [4096, 16384, 65536])
    only = a.only or list(GROUPS)
    a.kernels = [k for k in only if k in KERNEL_NAMES]
    a.groups = [g for g in GROUPS if g in only or (g == "kernels" and a.kernels)]
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
    for g in GROUPS:
        if g in a.groups:
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
