"""python -m public_kernels [--vllm CHECKOUT] [--amd-lab-notes CHECKOUT] [--users] [--json FILE]

Compiles vLLM's ROCm paged-attention kernels (device code only) for gfx942, runs each on gfxsim's
asm front end at a small shape (and, with --users, the mfma16 kernel at the users' shape), checks
them against a float64 reference and prints what ran, what matched and what stopped the rest;
likewise AMD's matrix-core examples (amd_matrix_cores.py).

Each kernel is tried twice: as vLLM builds and launches it ("unchanged": clang's default metadata,
which names no arguments, and null optional pointers), then with two launch-side workarounds
that change nothing the kernel computes: argument names in the metadata
(-fhip-kernel-arg-name) and, for the optional pointers, a decode query_start_loc (0, 1, ...), an
unread alibi buffer and an fp8 output scale of 1.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .amd_matrix_cores import run_example, sources
from .paged_cases import SMALL, USERS, USERS_ONE
from .vllm_run import Outcome, blocker, run_qkv, run_reduce
from .vllm_source import Instance, compile_instance

INSTANCES = [
    Instance("mfma16", "bf16"), Instance("mfma16", "fp16"),
    Instance("mfma16", "bf16", "fp8"), Instance("mfma16", "fp16", "fp8"),
    Instance("mfma16", "bf16", "fp8", "Fp8"),
    Instance("mfma4", "bf16", gqa=4), Instance("mfma4", "fp16", gqa=4), Instance("mfma4", "bf16", "fp8", gqa=4),
]
REDUCES = {"bf16": Instance("reduce", "bf16"), "fp16": Instance("reduce", "fp16")}


def shape_for(inst: Instance, base):
    from dataclasses import replace
    return replace(base, heads=inst.gqa * base.kv_heads)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m public_kernels")
    ap.add_argument("--vllm", type=Path, help="root of a vLLM checkout")
    ap.add_argument("--amd-lab-notes", type=Path, help="root of an amd/amd-lab-notes checkout")
    ap.add_argument("--build", type=Path, default=Path("build/public"))
    ap.add_argument("--users", action="store_true", help="also the mfma16 kernels at the users' shape")
    ap.add_argument("--users-one", action="store_true",
                    help="the users' shape with one 4096-token sequence (gfxsim run paged_attention_decode's)")
    ap.add_argument("--only", default="", help="run instances whose label contains this")
    ap.add_argument("--no-provenance", action="store_true")
    ap.add_argument("--check", action="store_true", help="compile and list blockers only; run nothing")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    rows = []
    shapes = [SMALL] + ([USERS] if a.users else []) + ([USERS_ONE] if a.users_one else [])
    if a.check:
        return check(a)
    for src in sources(a.amd_lab_notes) if a.amd_lab_notes else []:
        if a.only and a.only not in src.stem:
            continue
        for arch in ("gfx90a", "gfx942"):
            o = run_example(src, a.amd_lab_notes, a.build / "amd", arch=arch)
            rows.append((o, o.extra.get("unchanged", "")))
            print(_line(o, rows[-1][1]), flush=True)
    for inst in INSTANCES if a.vllm else []:
        if a.only and a.only not in inst.label:
            continue
        raw = compile_instance(inst, a.vllm, a.build)
        unchanged = blocker(raw)
        named = compile_instance(inst, a.vllm, a.build, arg_names=True)
        if unchanged and not blocker(named) and "has no name" in unchanged:
            # the next blocker in line: the null optional pointers vLLM's decode passes
            o, _, _ = run_qkv(inst, named, shape_for(inst, SMALL), nulls=True, provenance=False)
            if not o.ran:
                unchanged += f"; then, with names: {o.error}"
        for base in shapes:
            if base is not SMALL and inst.kernel != "mfma16":
                continue
            shape = shape_for(inst, base)
            if not unchanged:
                o, _, _ = run_qkv(inst, raw, shape, nulls=True, provenance=False)
                unchanged = o.error if not o.ran else ("ran unchanged and matched" if o.ok else
                                                       f"ran unchanged, MISMATCH: {o.errors}")
            o, case, outs = run_qkv(inst, named, shape, nulls=False, provenance=not a.no_provenance)
            rows.append((o, unchanged))
            print(_line(o, unchanged), flush=True)
            if o.ran and inst.kernel == "mfma16" and inst.mfma == "F16":
                red = REDUCES[inst.dtype]
                raw_red = compile_instance(red, a.vllm, a.build)
                r_un = blocker(raw_red)
                if not r_un:       # as vLLM launches it: null query_start_loc and fp8_out_scale_ptr
                    ru = run_reduce(red, raw_red, case, outs, nulls=True)
                    r_un = ru.error if not ru.ran else ("ran unchanged and matched" if ru.ok else
                                                        f"ran unchanged, MISMATCH: {ru.errors}")
                ro = run_reduce(red, compile_instance(red, a.vllm, a.build, arg_names=True), case, outs, nulls=False)
                ro.label += f" (after {inst.label})"
                rows.append((ro, r_un))
                print(_line(ro, r_un), flush=True)
    if a.json:
        a.json.write_text(json.dumps([dict(o.__dict__, unchanged=u, lane_rate=o.lane_rate) for o, u in rows],
                                     indent=1, default=str))
    ran = sum(o.ran for o, _ in rows)
    ok = sum(o.ok for o, _ in rows)
    print(f"{len(rows)} runs: {ran} ran with the workarounds, {ok} matched the reference; "
          f"{sum(u.startswith('ran unchanged') for _, u in rows)} ran unchanged ({time.strftime('%H:%M')})")
    return 0


def check(a) -> int:
    """Each instance's blockers as compiled (unchanged) and with argument names, nothing run."""
    for inst in [*INSTANCES, *REDUCES.values()] if a.vllm else []:
        if a.only and a.only not in inst.label:
            continue
        raw = blocker(compile_instance(inst, a.vllm, a.build))
        named = blocker(compile_instance(inst, a.vllm, a.build, arg_names=True))
        print(f"{inst.label}\n  unchanged: {raw or '-'}\n  with names: {named or 'nothing before running'}")
    return 0


def _line(o: Outcome, unchanged: str) -> str:
    state = "MATCH" if o.ok else ("MISMATCH" if o.ran else "FAILED")
    errs = ", ".join(f"{k} {v:.2g}" for k, v in o.errors.items())
    rate = f", {o.lane_rate / 1e3:.0f} k lane-instr/s" if o.lane_rate else ""
    return (f"{state:8} {o.label} [{o.shape}]\n  unchanged: {unchanged or '-'}\n"
            f"  workarounds: {o.error or errs}{rate} ({o.seconds:.1f} s); {o.findings}\n"
            + (f"  tokens: {o.tokens}\n" if o.tokens else "")
            + (f"  max_logits / reference (median): {o.extra['max_logits_ratio']:.4g}\n"
               if "max_logits_ratio" in o.extra else "")
            + (f"  against the model of its (q_max/224)^2 logit scaling: {o.extra['vs_defect_model']}\n"
               if "vs_defect_model" in o.extra else ""))


if __name__ == "__main__":
    sys.exit(main())
