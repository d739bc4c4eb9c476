"""Calibrate `gfxsim run`'s memory pre-flight (kernels_py/cli.py MEMORY_PER_ELEMENT, MEMORY_BASE)
against measured peaks: `python -m bench.calibrate_memory [-o bench/memory_calibration.json]`.

Each (kernel, mode) runs as a whole command (`--quiet --force`) at two contexts of the users' shape
(64 query heads on 8 KV heads, head_dim 128, block 16); the child's peak RSS (os.wait4) at both
gives a line: bytes = base + per_element x (tokens x kv heads x head_dim). The pre-flight's constants
are each measured kernel's slopes, the largest slope of each mode for the other kernels, and the
largest base, all rounded up with MARGIN. The file it writes records every measurement and the
constants it produced; kernels_py/cli.py holds the same numbers (tests/bench checks that).
"""
from __future__ import annotations

import argparse
import json
import math
import sys

from bench.common import ROOT, gfxsim_cmd, machine_info, run_child

SHAPE = ["--heads", "64", "--kv-heads", "8", "--head-dim", "128", "--block-size", "16"]
ELEMENTS_PER_TOKEN = 8 * 128
MODES = {"numbers": ["--no-provenance"], "provenance": [], "trace": ["--trace"]}
# kernel -> the two contexts it is measured at (the slow ones at shorter contexts)
RUNS = {"paged_attention_decode": (2048, 8192), "int8_kv_cache": (512, 2048), "pv_int8": (1024, 4096)}
MARGIN = 1.25
MIB = 2 ** 20


def measure(kernel: str, mode: str, context: int, timeout: float) -> dict:
    cmd = gfxsim_cmd() + ["run", kernel, "--context", str(context), "--quiet", "--force"] + SHAPE + MODES[mode]
    r = run_child(cmd, timeout=timeout, keep_stdout=False)
    if r["rc"] != 0 or r["timed_out"]:
        return dict(kernel=kernel, mode=mode, context=context, error=r["stderr_tail"][-300:] or "timed out")
    return dict(kernel=kernel, mode=mode, context=context, elements=context * ELEMENTS_PER_TOKEN,
                peak_rss_bytes=r["rss_bytes"], seconds=round(r["seconds"], 2))


def fit(points: list[dict]) -> dict:
    (a, b) = sorted(points, key=lambda p: p["elements"])
    slope = (b["peak_rss_bytes"] - a["peak_rss_bytes"]) / (b["elements"] - a["elements"])
    return dict(per_element=round(slope, 1), base_bytes=int(a["peak_rss_bytes"] - slope * a["elements"]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.calibrate_memory")
    ap.add_argument("-o", "--output", default=str(ROOT / "bench" / "memory_calibration.json"))
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--kernels", nargs="+", default=list(RUNS), choices=list(RUNS))
    ap.add_argument("--refit", metavar="FILE", help="fit the points recorded in FILE again, measuring nothing")
    a = ap.parse_args(argv)
    points, fits = [], {}
    if a.refit:
        with open(a.refit) as f:
            points = json.load(f)["points"]
    for kernel in a.kernels:
        for mode in MODES:
            got = [p for p in points if p["kernel"] == kernel and p["mode"] == mode]
            if not a.refit:
                got = [measure(kernel, mode, c, a.timeout) for c in RUNS[kernel]]
                points += got
                print(json.dumps(got), file=sys.stderr, flush=True)
            if len(got) == 2 and all("error" not in g for g in got):
                fits[f"{kernel} {mode}"] = fit(got)
    constants = {}
    for name, f in fits.items():
        kernel, mode = name.rsplit(" ", 1)
        constants.setdefault(kernel, {})[mode] = math.ceil(max(f["per_element"], 0) * MARGIN)
    default = {mode: max(c[mode] for c in constants.values() if mode in c) for mode in MODES
               if any(mode in c for c in constants.values())}
    bases = [f["base_bytes"] for f in fits.values()]
    base = math.ceil(max(bases) * MARGIN / MIB) * MIB if bases else None
    info = machine_info()
    res = dict(command="python -m bench.calibrate_memory", refit=bool(a.refit), shape=" ".join(SHAPE), margin=MARGIN,
               points=points,
               fits=fits, memory_per_element=constants, memory_per_element_default=default, memory_base_bytes=base,
               machine={k: info.get(k) for k in ("cpu", "cores", "memory_gib", "python", "numpy", "numba",
                                                 "gfxsim_commit")})
    with open(a.output, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(dict(memory_per_element=constants, memory_per_element_default=default,
                          memory_base_bytes=base, fits=fits), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
