"""`gfxsim run KERNEL`: run a Python twin on the simulator and report metrics, matrix instructions, findings."""
from __future__ import annotations

import sys

import numpy as np

from gfxsim.procmem import mem_available

from kernels_py.host.config import FORMULAS, FRONTENDS, GROUPINGS, RunConfig
from kernels_py.host.runners import KERNELS
from kernels_py.host.runs import DEFAULTS, run_kernel
from gfxsim.errors import ArgumentError, GfxSimError


def add_parser(sub):
    kernels = ", ".join(sorted(KERNELS))
    p = sub.add_parser("run", help="run a kernel on the simulator with references and findings",
                       description=f"Run one of the Python twin kernels on gfxsim. Kernels: {kernels}. "
                                   "Default: paged_attention_decode at 4096 tokens on gfx936 with generated data.")
    add_run_options(p)
    complete_help(p)
    p.add_argument("--report", choices=("text", "json"), default="text",
                   help="text, or json (one object per context; a metric that is not finite is null)")
    p.add_argument("--trace", action="store_true", help="keep the full per-lane trace (slower)")
    p.add_argument("--force", action="store_true",
                   help="run even where the memory pre-flight estimates more than is available")
    p.set_defaults(func=run)
    return p


def add_run_options(p):
    from gfxsim.cli.launched import add_schedule_option
    """The options that choose one kernel run; `gfxsim run` and `gfxsim plot run` share them."""
    kernels = ", ".join(sorted(KERNELS))
    p.add_argument("kernel", nargs="?", default="paged_attention_decode", help=f"one of: {kernels}")
    p.add_argument("--arch", default=DEFAULTS.arch, help="gfx936 (jump C/D layout) or gfx942 (CDNA3)")
    p.add_argument("--context", type=int, nargs="+", default=[DEFAULTS.context], help="history length(s)")
    p.add_argument("--grouping", choices=GROUPINGS, default=DEFAULTS.grouping,
                   help="PV scale groups: fragment (the MMAC token sets) or contiguous (tokens 0-31 | 32-63: the bug)")
    smooth = p.add_mutually_exclusive_group()          # both given: refused, not the last one winning
    smooth.add_argument("--smooth-k", dest="smooth_k", action="store_true", default=DEFAULTS.smooth_k,
                        help="subtract the per-channel K mean before quantizing (default on)")
    smooth.add_argument("--no-smooth-k", dest="smooth_k", action="store_false")
    p.add_argument("--heads", type=int, default=DEFAULTS.heads, help="query heads")
    p.add_argument("--kv-heads", type=int, default=DEFAULTS.kv_heads)
    p.add_argument("--head-dim", type=int, default=DEFAULTS.head_dim, choices=(64, 128))
    p.add_argument("--block-size", type=int, default=DEFAULTS.block_size, choices=(16, 32))
    p.add_argument("--seed", type=int, default=DEFAULTS.seed)
    p.add_argument("--partition-size", type=int, default=DEFAULTS.partition_size,
                   help="decode partition (multiple of 256; the seed tried 512)")
    p.add_argument("--no-provenance", dest="provenance", action="store_false",
                   help="numbers only (2.5-3x faster at 16K): no tags travel, so the K-slot, scale-group and "
                        "coverage checks do not run (the report says so)")
    p.add_argument("--inputs", metavar="FILE.npz", help="run on your own q, k, v (see README 'Data')")
    p.add_argument("--formula", choices=FORMULAS, default=DEFAULTS.formula,
                   help="force one arch's hand-written output-layout formula (to see it caught on the other)")
    p.add_argument("--kernel-fn", metavar="FILE.py:FN", default=None,
                   help="run your own kernel function FN from FILE.py (the signature of KERNEL's) in place of "
                        "the project's, with the same inputs, buffers, references and checks (default: none)")
    p.add_argument("--reduce-fn", metavar="FILE.py:FN", default=None,
                   help="paged_attention_decode: run your own FN from FILE.py (paged_attention_reduce's "
                        "signature) as the second launch, in place of the project's reduce (default: none)")
    p.add_argument("--frontend", choices=FRONTENDS, default=DEFAULTS.frontend,
                   help="python: the Python twin; asm: the clang-compiled HIP twin (kernels_hip/, built as by "
                        "`gfxsim hip build`) executed instruction by instruction in its place")
    add_schedule_option(p)
    p.add_argument("--quiet", action="store_true",
                   help="no progress on stderr (shown otherwise: a bar on a terminal, a line every 5 s if not)")
    return p


def run_config(args, context: int) -> RunConfig:
    """The RunConfig of the options add_run_options added, at ``context`` (--inputs is loaded by the
    caller): built here, once per context, and handed to run_kernel as it is."""
    return RunConfig(formula=args.formula, provenance=args.provenance,
                     partition_size=args.partition_size, arch=args.arch, context=context, grouping=args.grouping,
                     smooth_k=args.smooth_k, heads=args.heads, kv_heads=args.kv_heads, head_dim=args.head_dim,
                     block_size=args.block_size, seed=args.seed, kernel_fn=getattr(args, "kernel_fn", None),
                     reduce_fn=getattr(args, "reduce_fn", None), frontend=getattr(args, "frontend", "python"),
                     trace=getattr(args, "trace", False), schedule=getattr(args, "schedule", "in-order"))


def progress_for(args, context=None):
    """The stderr progress display of one run_kernel call (silent with --quiet)."""
    from gfxsim.progress import Progress
    return Progress(quiet=getattr(args, "quiet", False), label=f"context {context}" if context is not None else "")


# help for the run options that add_run_options registers without one (the formatter adds the defaults)
RUN_OPTION_HELP = {
    "--no-smooth-k": "quantize K as it is (turns --smooth-k off)",
    "--kv-heads": "KV heads (GQA: --heads must be a multiple, ratio 1..16)",
    "--head-dim": "head dimension",
    "--block-size": "tokens per paged-cache block",
    "--seed": "seed of the generated data and block tables (>= 0)",
}

# the shape flags --inputs replaces: the file's arrays give these
SHAPE_FLAGS = (("context", "--context"), ("heads", "--heads"), ("kv_heads", "--kv-heads"),
               ("head_dim", "--head-dim"))

# bytes of host memory per (token, kv head, head dim) element of the K/V history, per kernel and
# mode, and the bytes of a run at no context: `python -m bench.calibrate_memory` measured the peak
# RSS of each kernel below at two contexts of the users' shape per mode, plus 25%; another kernel
# takes the largest of its mode (bench/memory_calibration.json)
MEMORY_PER_ELEMENT = {
    "paged_attention_decode": {"numbers": 22, "provenance": 38, "trace": 204},
    "int8_kv_cache": {"numbers": 143, "provenance": 161, "trace": 1094},
    "pv_int8": {"numbers": 19, "provenance": 21, "trace": 41},
}
MEMORY_PER_ELEMENT_DEFAULT = {"numbers": 143, "provenance": 161, "trace": 1094}
MEMORY_BASE = 207 << 20


def complete_help(p):
    """Give the run options without help text theirs (after add_run_options)."""
    for a in p._actions:
        for flag in a.option_strings:
            if not a.help and flag in RUN_OPTION_HELP:
                a.help = RUN_OPTION_HELP[flag]
    return p


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024


def memory_estimate(tokens: int, kv_heads: int, head_dim: int, *, provenance: bool = True,
                    trace: bool = False, kernel: str | None = None) -> int:
    """Estimated peak bytes of one run of ``kernel`` over ``tokens`` history tokens (all sequences)."""
    mode = "trace" if trace else "provenance" if provenance else "numbers"
    per = MEMORY_PER_ELEMENT.get(kernel, MEMORY_PER_ELEMENT_DEFAULT).get(mode, MEMORY_PER_ELEMENT_DEFAULT[mode])
    return MEMORY_BASE + tokens * kv_heads * head_dim * per


def check_memory(args, inputs=None, *, trace: bool = False, available: int | None = None) -> None:
    """Refuse, before anything is generated, a run whose estimated memory exceeds MemAvailable."""
    available = mem_available() if available is None else available
    if available is None:
        return
    if inputs is not None:
        k = inputs["k"]
        tokens, kvh, hd, flag = int(inputs["context_lens"].sum()), k.shape[2], k.shape[3], f"--inputs {args.inputs}"
    else:
        tokens, kvh, hd = max(args.context), args.kv_heads, args.head_dim
        flag = f"--context {tokens}"
    need = memory_estimate(tokens, kvh, hd, provenance=args.provenance, trace=trace,
                           kernel=getattr(args, "kernel", None))
    if need > available:
        per = (need - MEMORY_BASE) / max(tokens, 1)
        most = int((available - MEMORY_BASE) // per) if available > MEMORY_BASE else 0
        raise ArgumentError(f"{flag}: the run needs about {_size(need)} (K/V inputs, int8 caches"
                         f"{' with tags' if args.provenance else ''}{', trace' if trace else ''} and references: "
                         f"{tokens} tokens x {kvh} kv heads x {hd} dims), more than the {_size(available)} "
                         f"available (MemAvailable); at most about {most} tokens fit (--force runs it anyway)")


def check_run_args(args) -> list[RunConfig]:
    """Usage errors of the run options, before anything is loaded or runs: each context's RunConfig
    (which validates every option once) and what --inputs rules out. Returns the RunConfigs, one
    per context to run (with --inputs one: the file's shapes replace its context)."""
    configs = [run_config(args, c) for c in args.context]
    if args.inputs:
        given = getattr(args, "given_options", set())
        for dest, flag in SHAPE_FLAGS:
            if dest in given:
                raise ArgumentError(f"{flag} cannot be combined with --inputs: the shapes come from "
                                 f"{args.inputs}; drop {flag}")
    return configs


def load_run_inputs(args):
    """The --inputs arrays (validated at --block-size), or None."""
    if not args.inputs:
        return None
    from kernels_py.workloads.inputs import load_inputs
    return load_inputs(args.inputs, block_size=args.block_size)


def input_params(inputs, path) -> dict:
    """The report params a --inputs file sets: its real shapes."""
    q, k = inputs["q"], inputs["k"]
    out = dict(inputs=str(path), num_seqs=int(q.shape[0]), heads=int(q.shape[-2]), kv_heads=int(k.shape[2]),
               head_dim=int(q.shape[-1]), context_lens=[int(n) for n in inputs["context_lens"]])
    if q.ndim == 4:
        out["num_queries"] = int(q.shape[1])
    return out


def report_json(obj) -> str:
    """Strict JSON of a report, written by orjson: a non-finite float (a metric of an all-zero V)
    is null, as orjson writes every NaN and infinity, numpy's included; the per-instruction token
    table of a 16K decode is ~30 MB, which the json module takes ~10x longer to write."""
    import orjson
    # int keys as json does; numpy rows (KernelRun.report(token_arrays=True)) written as lists;
    # report(json_rows=True)'s mmacs is already JSON (an orjson.Fragment, written as it is)
    return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY).decode()


def run(args) -> int:
    configs = check_run_args(args)
    inputs = load_run_inputs(args)
    if not args.force:
        check_memory(args, inputs, trace=args.trace)
    if inputs is None:
        # the first run's K/V normals begin on a thread now, while the runners' harnesses import
        from kernels_py.workloads.data import start_normals
        shape = configs[0].shape()
        start_normals(shape["seed"], num_heads=shape["heads"], num_kv_heads=shape["kv_heads"],
                      head_dim=shape["head_dim"], context=shape["context"])
    if args.quiet:
        return _run(args, configs, inputs)
    from gfxsim.machine import jit
    with jit.announce_compiles():   # a first run compiles for seconds: say so (stderr, as the progress)
        return _run(args, configs, inputs)


def _run(args, configs, inputs) -> int:
    from gfxsim.blas import one_blas_thread
    # the report's metrics too: a first multi-threaded dot product starts OpenBLAS's threads
    # (20-30 ms) for a few microseconds of work, and its sums would depend on the core count
    with one_blas_thread():
        return _run_reports(args, configs, inputs)


def _run_reports(args, configs, inputs) -> int:
    reports = []
    for cfg in configs:
        with progress_for(args, cfg.context if inputs is None else None) as progress, \
                np.errstate(invalid="ignore", divide="ignore"):
            kr = run_kernel(args.kernel, config=cfg, inputs=inputs, progress=progress)
        if inputs is not None:
            kr.params.update(input_params(inputs, args.inputs))
        with np.errstate(invalid="ignore", divide="ignore"):     # e.g. all-zero V: cos_sim 0/0 -> null
            if args.report == "json":      # mmacs written as made (write_json_report)
                reports.append((kr.report(json_rows=_MMACS_MARK), kr))
            else:
                print(text_report(kr))
            sys.stdout.flush()
    if args.report == "json":
        write_json_report(reports)
    return 0


_MMACS_MARK = b'"\x00mmacs\x00"'    # where each report's mmacs go, in its JSON text


def write_json_report(reports: list) -> None:
    """report_json of the (report, KernelRun) pairs (one report, or a list), each report's mmacs
    written part by part as made (KernelRun.mmacs_json_parts): the same text, never held whole."""
    obj = reports[0][0] if len(reports) == 1 else [r for r, _ in reports]
    pieces = report_json(obj).encode().split(_MMACS_MARK)
    if len(pieces) != len(reports) + 1:
        raise GfxSimError("the JSON report's matrix-instruction tables could not be placed")
    for head, (_, kr) in zip(pieces, reports):
        sys.stdout.write(head.decode())
        for part in kr.mmacs_json_parts():
            sys.stdout.write(part.decode())
    sys.stdout.write(pieces[-1].decode() + "\n")


def text_report(kr) -> str:
    from gfxsim.arch.kslots import format_token_set
    m = kr.metrics()
    lines = [f"{kr.kernel} on {kr.arch}, context {kr.context}, grouping {kr.params['grouping']}, "
             f"smooth-K {'on' if kr.params['smooth_k'] else 'off'}  ({sum(r.seconds for r in kr.runs):.1f} s simulated)",
             f"  {'against':<44}{'max_abs':>10}{'rms':>10}{'cos_sim':>12}{'rel_l1':>10}"]
    for name, v in m.items():
        lines.append(f"  {name:<44}{v['max_abs']:>10.3g}{v['rms']:>10.3g}{v['cos_sim']:>12.8f}{v['rel_l1']:>10.3g}")
    n_mm = kr.mmac_count()
    lines.append(f"  {n_mm} matrix instructions" + ("; the first PV ones consumed:" if n_mm else ""))
    shown, first = 0, None
    for e in kr.mmacs_carrying("A"):     # made one by one: only the two shown are
        if shown == 2:
            break
        if first in (None, (e.workgroup, e.wave)):
            first = (e.workgroup, e.wave)
            lines.append(f"    #{e.index} {e.op}{' (' + e.label + ')' if e.label else ''} wg{e.workgroup} "
                         f"wave {e.wave}: A tokens "
                         f"{format_token_set(e.token_set('A'))}, B tokens {format_token_set(e.token_set('B'))}")
            shown += 1
    checks = kr.checks()
    if not shown and checks["not_run"]:
        lines.append(f"    (not recorded: {checks['reason']})")
    kinds = {}
    for f in kr.findings:
        kinds.setdefault(f.kind, []).append(f)
    if checks["not_run"]:
        lines.append(f"  checks not run ({checks['reason']}): {', '.join(checks['not_run'])}")
    approx = sorted({m for r in kr.runs for m in r.approximations})
    if approx:
        lines.append(f"  correctly rounded stand-ins (hardware within 1 ulp): {', '.join(approx)}")
    if checks.get("kslots_of_unknown_origin"):
        lines.append(f"  {checks['kslots_of_unknown_origin']} K slots held bytes of unknown origin: their tokens "
                     f"were not checked (kslot-unknown-origin)")
    if not kinds:
        lines.append("  findings: none" + (" among the checks that ran" if checks["not_run"] else ""))
    for k, fs in kinds.items():
        lines.append(f"  {len(fs)} {k} finding(s), e.g.:")
        for f in fs[:2]:
            lines.append(f"    {f}")
    return "\n".join(lines)
