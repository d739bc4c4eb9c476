"""Every shipped kernel at the users' shape, the whole command as users run it (the text report),
provenance off, on and the full trace, each run paired with its numpy implementation (bench/ab.py).

Shapes (64 query heads on 8 KV heads, head_dim 128, block 16; --quick: gfxsim run's default shape
and short contexts):
- paged_attention_decode: 4096, 16384 and 65536 tokens (group "decode");
- int8_kv_cache, qk_int8, pv_int8, pv_bf16: 4096 tokens, gfx936;
- prefix_prefill: a 1024- and a 4096-token prompt over a 4096-token prefix, gfx936, given as
  `--inputs` (the generated data of that many queries, written once per run of the bench);
- sage_attention: 4096 tokens, sm_90 (the NVIDIA warp32 profile it is written for);
- fp8_qk: 16 query rows over 4096 tokens, gfx942, through bench/fp8_qk_run.py (no `gfxsim run` entry).
"""
from __future__ import annotations

import os
import sys
import tempfile
import traceback
from dataclasses import dataclass, field

from bench.ab import Yardstick, pairs, ratio_fields

from bench.common import gfxsim_cmd, median, repeat_child

GIB = 2 ** 30
MODES = {"off": ["--no-provenance"], "on": [], "trace": ["--trace"]}
MODE_LABEL = {"off": "provenance off", "on": "provenance on", "trace": "full trace"}
USERS_SHAPE = dict(heads=64, kv_heads=8, head_dim=128, block_size=16)
QUICK_SHAPE = dict(heads=8, kv_heads=1, head_dim=128, block_size=16)   # gfxsim run's default
# (ratio to numpy, peak RSS) each mode must stay under, whole command
KERNEL_TARGETS = {"off": (10.0, 2 * GIB), "on": (25.0, 2 * GIB), "trace": (None, None)}
DECODE_TARGETS = {16384: {"off": (6.0, 2 * GIB), "on": (15.0, 2 * GIB)}, 65536: {"on": (None, 4 * GIB)}}
PREFILL_4K_SECONDS = 60.0


@dataclass
class Case:
    """One kernel at one shape: the gfxsim command's arguments and the yardstick's."""
    kernel: str
    name: str                        # e.g. "qk_int8 4096", "prefix_prefill 1024 over 4096"
    context: int
    arch: str = "gfx936"
    queries: int | None = None       # prefix_prefill: the prompt (given through --inputs)
    group: str = "kernels"
    targets: dict = field(default_factory=dict)


def cases(quick: bool, decode_contexts) -> list[Case]:
    ctx = 256 if quick else 4096
    t = {} if quick else KERNEL_TARGETS
    out = [Case("paged_attention_decode", f"decode {c}", c, group="decode",
                targets={} if quick else DECODE_TARGETS.get(c, {})) for c in decode_contexts]
    out += [Case(k, f"{k} {ctx}", ctx, targets=t) for k in ("int8_kv_cache", "qk_int8", "pv_int8", "pv_bf16")]
    prompts = [64] if quick else [1024, 4096]
    prefix = 192 if quick else 4096
    out += [Case("prefix_prefill", f"prefix_prefill {p} over {prefix}", prefix + p, queries=p, targets=t)
            for p in prompts]
    out += [Case("sage_attention", f"sage_attention {ctx}", ctx, arch="sm_90", targets=t),
            Case("fp8_qk", f"fp8_qk {ctx}", ctx, arch="gfx942", targets=t)]
    return out


def shape_args(shape: dict) -> list[str]:
    return ["--heads", str(shape["heads"]), "--kv-heads", str(shape["kv_heads"]), "--head-dim",
            str(shape["head_dim"]), "--block-size", str(shape["block_size"])]


def write_inputs(case: Case, shape: dict, where: str) -> str:
    """The prefill's generated inputs with ``case.queries`` queries, as an .npz for --inputs."""
    import numpy as np

    from kernels_py.workloads.data import make_attention_inputs
    d = make_attention_inputs(seed=0, num_seqs=1, num_heads=shape["heads"], num_kv_heads=shape["kv_heads"],
                              head_dim=shape["head_dim"], context_lens=[case.context], num_queries=case.queries)
    path = os.path.join(where, f"prefill_{case.queries}_{case.context}.npz")
    np.savez(path, **d)
    return path


def commands(case: Case, shape: dict, inputs: str | None) -> tuple[list[str], dict]:
    """(the command of each mode, the yardstick's arguments)."""
    if case.kernel == "fp8_qk":
        base = [sys.executable, "-m", "bench.fp8_qk_run", "--context", str(case.context),
                "--heads", str(shape["heads"]), "--kv-heads", str(shape["kv_heads"]), "--head-dim",
                str(shape["head_dim"])]
        cmds = {m: base + ["--mode", m] for m in MODES}
    else:
        base = gfxsim_cmd() + ["run", case.kernel, "--arch", case.arch]
        base += (["--inputs", inputs, "--block-size", str(shape["block_size"])] if inputs
                 else shape_args(shape) + ["--context", str(case.context)])
        cmds = {m: base + MODES[m] for m in MODES}
    yard = [case.kernel, "--arch", case.arch] + shape_args(shape) + (["--inputs", inputs] if inputs
                                                                     else ["--context", str(case.context)])
    return cmds, yard


def run_cases(bench, group: str, selected: list[Case]) -> None:
    a = bench.args
    shape = QUICK_SHAPE if a.quick else USERS_SHAPE
    gave_up: dict = {}                # (kernel, mode) -> why its larger shapes are skipped
    with tempfile.TemporaryDirectory(prefix="gfxsim-bench-") as tmp:
        for case in selected:
            try:
                run_case(bench, case, shape, tmp, gave_up)
            except Exception as e:                              # noqa: BLE001  report, do not crash
                traceback.print_exc()
                bench.add(group, f"{case.name} (case)", error=f"{type(e).__name__}: {e}", context=case.context)


def _labels(case: Case) -> tuple[str, str]:
    if case.kernel == "paged_attention_decode":       # the decode's labels, as the README's table reads them
        return (f"decode {case.context}: numpy INT8 implementation (bench/decode_numpy.py)",
                f"decode {case.context}: gfxsim run, {{mode}}")
    return f"{case.name}: numpy", f"{case.name}: {'command' if case.kernel == 'fp8_qk' else 'gfxsim run'}, {{mode}}"


def run_case(bench, case: Case, shape: dict, tmp: str, gave_up: dict) -> None:
    a = bench.args
    inputs = write_inputs(case, shape, tmp) if case.queries else None
    cmds, yard_args = commands(case, shape, inputs)
    np_label, label = _labels(case)
    modes = [m for m in a.modes]
    common = dict(kernel=case.kernel, context=case.context, queries=case.queries, arch=case.arch)
    try:
        yard = Yardstick(yard_args, timeout=a.timeout)
    except RuntimeError as e:
        yard = None
        bench.add(case.group, np_label, error=str(e), mode="numpy", **common)
    for mode in modes:
        lab = label.format(mode=MODE_LABEL[mode])
        if (case.kernel, mode) in gave_up:
            bench.add(case.group, lab, error=f"skipped: {gave_up[case.kernel, mode]}", mode=mode, **common)
            continue
        res = pairs(yard, cmds[mode], a.repeat, a.timeout, bench.mem_limit)
        shown = "gfxsim " + " ".join(cmds[mode][3:]) if cmds[mode][1:3] == ["-m", "gfxsim"] else \
            "python " + " ".join(cmds[mode][1:])
        if res["error"]:
            if res["timed_out"]:
                gave_up[case.kernel, mode] = f"{case.name} ran over {a.timeout:.0f} s"
            bench.add(case.group, lab, runs=res["runs"], error=res["error"], mode=mode, command=shown,
                      load_before=res["load_before"], load_after=res["load_after"], **common)
            continue
        rf = ratio_fields(res["ratios"])
        sec = median(res["runs"])
        target, met = _target(case, mode, rf["ratio"], res["rss"], sec)
        bench.add(case.group, lab, seconds=sec, runs=res["runs"], rss=res["rss"], target=target, met=met, mode=mode,
                  command=shown, load_before=res["load_before"], load_after=res["load_after"],
                  report_head=res["stdout"].strip().splitlines()[:1], **rf, **common)
    if case.group == "kernels" and case.kernel != "fp8_qk" and "off" in modes:
        floor(bench, case, cmds["off"], common)
    if yard is not None:
        rss = yard.close()
        if yard.runs:
            r = yard.ready
            bench.add(case.group, np_label, seconds=median(yard.runs), runs=yard.runs, rss=rss, ratio=1.0,
                      ratio_text="1x (yardstick, 1 thread)", mode="numpy", max_abs_vs_reference=r["max_abs"],
                      reference_max_abs=r["ref_max_abs"], written_in_bench=r["own"], **common)


FLOOR_SHAPE = ["--heads", "1", "--kv-heads", "1", "--context", "64"]


def floor(bench, case: Case, cmd: list[str], common: dict) -> None:
    """The same command at 1 head and 64 tokens, provenance off: what start-up, argument parsing,
    loading numba's cached functions and the report cost whatever the shape. A ratio to a yardstick
    of a millisecond is bounded below by this over the yardstick."""
    a = bench.args
    small = list(cmd)
    for flag in ("--heads", "--kv-heads", "--context", "--inputs"):       # drop the users' shape
        while flag in small:
            i = small.index(flag)
            del small[i:i + 2]
    small += FLOOR_SHAPE
    label = f"{case.name}: start-up floor (1 head, 64 tokens, provenance off)"
    runs, rss, err, r = repeat_child(small, a.repeat, a.timeout)
    shown = "gfxsim " + " ".join(small[3:])
    if err:
        bench.add(case.group, label, error=err, mode="floor", command=shown, **common)
        return
    bench.add(case.group, label, seconds=median(runs), runs=runs, rss=max(rss), mode="floor", command=shown,
              **common)


def _target(case: Case, mode: str, ratio, rss, seconds):
    tr, tm = case.targets.get(mode, (None, None))
    parts, oks = [], []
    if tr:
        parts.append(f"<= {tr:g}x numpy")
        oks.append(ratio is not None and ratio <= tr)
    if tm:
        parts.append(f"RSS < {tm / GIB:g} GiB")
        oks.append(rss is not None and rss < tm)
    if case.queries == 4096 and mode == "on":
        parts.append(f"< {PREFILL_4K_SECONDS:g} s")
        oks.append(seconds < PREFILL_4K_SECONDS)
    return ", ".join(parts), (all(oks) if oks else None)
