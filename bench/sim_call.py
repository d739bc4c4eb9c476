"""What `gfxsim.hip.run_on_sim` adds to a launch: `python -m bench.sim_call [--repeat N]`.

run_on_sim finds the kernel (the project's build, the parse and decode caches), checks and copies
the caller's arrays into Buffers, launches, and hands the buffers back. Its overhead is the call's
seconds minus those of the launch inside it (gfxsim.asm.run.run_asm, timed where run_on_sim calls
it), for each call after a first one that pays the imports and the caches. The kernel is the pv_int8 twin with fragment
groups (gfx942, 256 tokens, one workgroup), provenance off. Prints one JSON object.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

ENTRY, ARCH, CONTEXT, HEAD_DIM, BLOCK = "pv_int8_fragment", "gfx942", 256, 128, 16
TARGET_SECONDS = 0.050


def inputs(context: int = CONTEXT, seed: int = 0) -> dict:
    """pv_int8's arguments: 16 probability rows, a block table over a shuffled INT8 V cache with
    per-token scales."""
    rng = np.random.default_rng(seed)
    blocks = -(-context // BLOCK)
    p = rng.random((16, context), dtype=np.float32)
    p /= p.sum(1, keepdims=True)
    return dict(p=p, v_cache=rng.integers(-127, 128, (blocks + 2, 1, HEAD_DIM, BLOCK), dtype=np.int8),
                v_scale=rng.uniform(1e-3, 2e-2, (blocks + 2, 1, BLOCK)).astype(np.float32),
                block_table=rng.permutation(blocks + 2)[:blocks].astype(np.int32),
                context_len=np.int32(context), out=np.zeros((16, HEAD_DIM), np.float32))


def measure(repeat: int) -> dict:
    from pathlib import Path

    import gfxsim.asm.run as asm_run
    from gfxsim.hip.project import Project
    from gfxsim.hip.sim import run_on_sim
    root = Path(__file__).resolve().parent.parent
    project = Project(root / "kernels_hip", root / "build" / "hip")
    args = inputs()
    t = time.perf_counter()
    first = run_on_sim(ENTRY, (1,), args, project=project, arch=ARCH, provenance=False)
    first_s = time.perf_counter() - t
    launch = asm_run.run_asm
    calls, launches = [], []

    def timed(*a, **k):
        t0 = time.perf_counter()
        try:
            return launch(*a, **k)
        finally:
            launches.append(time.perf_counter() - t0)
    asm_run.run_asm = timed
    try:
        for _ in range(repeat):
            t = time.perf_counter()
            out = run_on_sim(ENTRY, (1,), args, project=project, arch=ARCH, provenance=False)
            calls.append(time.perf_counter() - t)
            if not np.array_equal(out["out"], first["out"]):
                raise SystemExit("run_on_sim gave another result on a later call")
    finally:
        asm_run.run_asm = launch
    if len(launches) != len(calls):
        raise SystemExit("run_on_sim did not launch through gfxsim.asm.run.run_asm once per call")
    over = [c - lo for c, lo in zip(calls, launches)]
    return dict(first_call=first_s, calls=calls, launches=launches, overheads=over,
                overhead=float(np.median(over)), target=TARGET_SECONDS)


def figure(bench) -> None:
    """The bench's figure (group "asm"): the median overhead of --repeat calls, in a child process."""
    from bench.common import failure_text, run_worker
    a = bench.args
    label = "run_on_sim: overhead per call after the first (pv_int8, one launch, provenance off)"
    data, r = run_worker("sim_call", ["--repeat", str(max(3, a.repeat))], timeout=a.timeout)
    if data is None:
        bench.add("asm", label, error=failure_text(r, a.timeout), mode="sim-call")
        return
    over = data["overhead"]
    bench.add("asm", label, seconds=over, runs=data["overheads"], rss=r["rss_bytes"],
              ratio_text=f"{over * 1e3:.1f} ms over the launch", target=f"<= {TARGET_SECONDS * 1e3:g} ms",
              met=over <= TARGET_SECONDS, mode="sim-call", first_call_seconds=data["first_call"],
              launch_seconds=data["launches"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sim_call")
    ap.add_argument("--repeat", type=int, default=5)
    print(json.dumps(measure(max(1, ap.parse_args(argv).repeat))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
