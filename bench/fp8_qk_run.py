"""The FP8 QK^T kernel (kernels_py/fp8/fp8_qk.py) as a command, timed whole by `python -m bench`
(it has no `gfxsim run` entry): `python -m bench.fp8_qk_run --context N --mode off|on|trace`.
Its inputs are what bench.yardstick gives its numpy twin: the 16 query rows of kv head 0 and its
K of the generated data (seed 0); gfx942, one wave. Prints the launch's seconds and findings."""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.fp8_qk_run")
    ap.add_argument("--context", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--mode", choices=("off", "on", "trace"), default="on")
    a = ap.parse_args(argv)
    from gfxsim import Buffer, launch
    from kernels_py.fp8.fp8_qk import fp8_qk, reference
    from kernels_py.workloads.inputs import prepare_inputs
    nq = min(-(-16 // (a.heads // a.kv_heads)), a.context)
    d = prepare_inputs(context=a.context, heads=a.heads, kv_heads=a.kv_heads, head_dim=a.head_dim, seed=0,
                       num_queries=nq)
    from kernels_py.host.twins import query_rows
    q = query_rows(d["q"], a.kv_heads)                    # the 16 rows of kv head 0, as qk_int8's
    k = np.ascontiguousarray(d["k"][0, :a.context, 0], np.float32)
    T, hd = k.shape
    tags = a.mode != "off"
    qb = Buffer("q", q, tags={"row": np.broadcast_to(np.arange(16)[:, None], (16, hd)),
                              "dim": np.broadcast_to(np.arange(hd), (16, hd))} if tags else None)
    kb = Buffer("k", k, tags={"token": np.broadcast_to(np.arange(T)[:, None], (T, hd)),
                              "dim": np.broadcast_to(np.arange(hd), (T, hd))} if tags else None)
    out = Buffer.empty("s", (16, T), np.float32)
    run = launch(fp8_qk, arch="gfx942", args=(qb, kb, out), kwargs=dict(context=T, head_dim=hd),
                 trace=a.mode == "trace", provenance=tags)
    diff = float(np.abs(out.array - reference(q, k)).max())
    print(json.dumps(dict(seconds=run.seconds, findings=len(run.findings), max_abs_vs_reference=diff)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
