"""`gfxsim run KERNEL`: run a Python twin on the simulator and report metrics, matrix instructions, findings."""
from __future__ import annotations

import json
import sys

from gfxsim.arch.kslots import format_token_set

from .runs import DEFAULTS, KERNELS, run_kernel


def add_parser(sub):
    kernels = ", ".join(sorted(KERNELS))
    p = sub.add_parser("run", help="run a kernel on the simulator with references and findings",
                       description=f"Run one of the Python twin kernels on gfxsim. Kernels: {kernels}. "
                                   "Default: paged_attention_decode at 4096 tokens on gfx936 with generated data.")
    add_run_options(p)
    p.add_argument("--report", choices=("text", "json"), default="text")
    p.add_argument("--trace", action="store_true", help="keep the full per-lane trace (slower)")
    p.set_defaults(func=run)
    return p


def add_run_options(p):
    """The options that choose one kernel run; `gfxsim run` and `gfxsim plot run` share them."""
    kernels = ", ".join(sorted(KERNELS))
    p.add_argument("kernel", nargs="?", default="paged_attention_decode", help=f"one of: {kernels}")
    p.add_argument("--arch", default=DEFAULTS["arch"], help="gfx936 (jump C/D layout) or gfx942 (CDNA3)")
    p.add_argument("--context", type=int, nargs="+", default=[DEFAULTS["context"]], help="history length(s)")
    p.add_argument("--grouping", choices=("fragment", "contiguous"), default=DEFAULTS["grouping"],
                   help="PV scale groups: fragment (the MMAC token sets) or contiguous (the seed's bug)")
    p.add_argument("--smooth-k", dest="smooth_k", action="store_true", default=DEFAULTS["smooth_k"],
                   help="subtract the per-channel K mean before quantizing (default on)")
    p.add_argument("--no-smooth-k", dest="smooth_k", action="store_false")
    p.add_argument("--heads", type=int, default=DEFAULTS["heads"], help="query heads")
    p.add_argument("--kv-heads", type=int, default=DEFAULTS["kv_heads"])
    p.add_argument("--head-dim", type=int, default=DEFAULTS["head_dim"], choices=(64, 128))
    p.add_argument("--block-size", type=int, default=DEFAULTS["block_size"], choices=(16, 32))
    p.add_argument("--seed", type=int, default=DEFAULTS["seed"])
    p.add_argument("--partition-size", type=int, default=DEFAULTS["partition_size"],
                   help="decode partition (multiple of 256; the seed tried 512)")
    p.add_argument("--no-provenance", dest="provenance", action="store_false",
                   help="numbers only (2-2.5x faster at 8K-16K): no tags travel, so the K-slot, scale-group and "
                        "coverage checks do not run (the report says so)")
    p.add_argument("--inputs", metavar="FILE.npz", help="run on your own q, k, v (see README 'Data')")
    p.add_argument("--formula", choices=("derived", "gfx936", "gfx942"), default="derived",
                   help="force one arch's hand-written output-layout formula (to see it caught on the other)")
    p.add_argument("--kernel-fn", metavar="FILE.py:FN", default=None,
                   help="run your own kernel function FN from FILE.py (the signature of KERNEL's) in place of "
                        "the project's, with the same inputs, buffers, references and checks (default: none)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress on stderr (shown otherwise: a bar on a terminal, a line every 5 s if not)")
    return p


def run_options(args, context) -> dict:
    """run_kernel keyword arguments of the options add_run_options added (--inputs is loaded by the caller)."""
    return dict(formula=args.formula, provenance=args.provenance,
                partition_size=args.partition_size, arch=args.arch, context=context, grouping=args.grouping,
                smooth_k=args.smooth_k, heads=args.heads, kv_heads=args.kv_heads, head_dim=args.head_dim,
                block_size=args.block_size, seed=args.seed, kernel_fn=getattr(args, "kernel_fn", None))


def progress_for(args, context=None):
    """The stderr progress display of one run_kernel call (silent with --quiet)."""
    from gfxsim.progress import Progress
    return Progress(quiet=getattr(args, "quiet", False), label=f"context {context}" if context is not None else "")


def run(args) -> int:
    inputs = None
    if args.inputs:
        from .inputs import load_inputs
        inputs = load_inputs(args.inputs)
    reports = []
    contexts = [None] if inputs is not None else args.context
    for ctx in contexts:
        with progress_for(args, ctx) as progress:
            kr = run_kernel(args.kernel, inputs=inputs, trace=args.trace, progress=progress,
                            **run_options(args, ctx if ctx is not None else DEFAULTS["context"]))
        if args.report == "json":
            reports.append(kr.report())
        else:
            print(text_report(kr))
            sys.stdout.flush()
    if args.report == "json":
        print(json.dumps(reports[0] if len(reports) == 1 else reports))
    return 0


def text_report(kr) -> str:
    m = kr.metrics()
    lines = [f"{kr.kernel} on {kr.arch}, context {kr.context}, grouping {kr.params['grouping']}, "
             f"smooth-K {'on' if kr.params['smooth_k'] else 'off'}  ({sum(r.seconds for r in kr.runs):.1f} s simulated)",
             f"  {'against':<44}{'max_abs':>10}{'rms':>10}{'cos_sim':>12}{'rel_l1':>10}"]
    for name, v in m.items():
        lines.append(f"  {name:<44}{v['max_abs']:>10.3g}{v['rms']:>10.3g}{v['cos_sim']:>12.8f}{v['rel_l1']:>10.3g}")
    mm = kr.mmacs()
    lines.append(f"  {len(mm)} matrix instructions; the first PV ones consumed:")
    shown, first = 0, None
    for e in mm:
        if e.tagged and e.token_set("A") and shown < 2 and first in (None, (e.workgroup, e.wave)):
            first = (e.workgroup, e.wave)
            lines.append(f"    #{e.index} {e.op} wg{e.workgroup} wave {e.wave}: A tokens "
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
    if not kinds:
        lines.append("  findings: none" + (" among the checks that ran" if checks["not_run"] else ""))
    for k, fs in kinds.items():
        lines.append(f"  {len(fs)} {k} finding(s), e.g.:")
        for f in fs[:2]:
            lines.append(f"    {f}")
    return "\n".join(lines)
