"""SageAttention2's accuracy table: `python -m kernels_py.fp8.sage_accuracy [--inputs FILE.npz]`.

Prefill attention (the last N positions of each context, causal) through kernels_py.fp8.sage_reference
(the math of the kernels_py.fp8.sage_attention twin) against exact fp32 attention, with cos-sim, rel-L1
and RMSE, for every quantization granularity (per-block, per-thread, per-token), INT8 and INT4 QK,
and smoothing off / smooth-K / smooth-Q + smooth-K (+ smooth-V). PV is FP8 e4m3 with the arch's
mma.sync accumulator (sm_89: FP22) and two-level accumulation.

``--make-inputs FILE`` writes a second data set, the kind SageAttention2's smoothing is for: the
default data with per-channel offsets added to Q (what smooth-Q removes) and to V (smooth-V).
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from kernels_py.reference.attention import attention_fp32, metrics
from .sage_reference import GRANULARITIES, SageConfig, sage_prefill

SMOOTHING = {"none": dict(smooth_q=False, smooth_k=False), "K": dict(smooth_q=False, smooth_k=True),
             "Q+K": dict(smooth_q=True, smooth_k=True), "Q+K+V": dict(smooth_q=True, smooth_k=True, smooth_v=True)}


def default_inputs(context=1024, queries=128, seed=0, heads=8):
    from kernels_py.workloads.data import make_attention_inputs
    return make_attention_inputs(seed, context_lens=context, num_queries=queries, num_heads=heads)


def offset_inputs(context=1024, queries=128, seed=0, heads=8):
    """Default data plus per-channel offsets on Q (std 2, a few channels at ±8) and V (std 1)."""
    d = default_inputs(context, queries, seed, heads)
    rng = np.random.default_rng(seed + 1000)
    hd = d["q"].shape[-1]
    qoff = 2.0 * rng.standard_normal((d["q"].shape[2], hd))
    qoff[:, rng.choice(hd, 4, replace=False)] += rng.choice([-8.0, 8.0], 4)
    d["q"] = (d["q"] + qoff).astype(np.float32)
    d["v"] = (d["v"] + rng.standard_normal((d["v"].shape[2], hd))).astype(np.float32)
    return d


def as_prefill(d):
    """Decode data (q [S, H, d]) as one query row per sequence."""
    if d["q"].ndim == 3:
        d = dict(d, q=d["q"][:, None])
    return d


def table(d, *, arch="sm_89", qks=("int8", "int4"), smoothing=("none", "K", "Q+K"), granularities=GRANULARITIES,
          progress=None):
    """Rows (qk, smoothing, granularity, metrics vs fp32). ``progress``: a text stream that gets a
    line per configuration done (the whole table takes minutes)."""
    d = as_prefill(d)
    ref = attention_fp32(d["q"], d["k"], d["v"], d["context_lens"])
    configs = [(qk, sm, g) for qk in qks for sm in smoothing for g in granularities]
    rows, t0 = [], time.perf_counter()
    for i, (qk, sm, g) in enumerate(configs, 1):
        cfg = SageConfig(arch=arch, qk=qk, granularity=g, **SMOOTHING[sm])
        out = sage_prefill(d["q"], d["k"], d["v"], d["context_lens"], cfg)
        rows.append((qk, sm, g, metrics(out, ref)))
        if progress is not None:
            spent = time.perf_counter() - t0
            print(f"sage_accuracy: {i}/{len(configs)} done ({qk} QK, smoothing {sm}, {g}), {spent:.0f} s, "
                  f"about {spent / i * (len(configs) - i):.0f} s left", file=progress, flush=True)
    return rows


def markdown(rows) -> str:
    lines = ["| QK | smoothing | granularity | cos-sim | rel-L1 | RMSE |", "|---|---|---|---|---|---|"]
    lines += [f"| {qk} | {sm} | {g} | {m['cos_sim']:.6f} | {m['rel_l1']:.4f} | {m['rms']:.2e} |"
              for qk, sm, g, m in rows]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", metavar="FILE.npz",
                    help="your q/k/v (kernels_py.workloads.inputs format) instead of the default data")
    ap.add_argument("--make-inputs", metavar="FILE.npz", help="write the offset data set (Q and V channel offsets) and exit")
    ap.add_argument("--arch", default="sm_89", choices=["sm_89", "sm_90"])
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--queries", type=int, default=128)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--smooth-v", action="store_true", help="add the smooth-Q+K+V rows")
    ap.add_argument("--quiet", action="store_true", help="no progress line per configuration on stderr")
    a = ap.parse_args(argv)
    if a.make_inputs:
        d = offset_inputs(a.context, a.queries, a.seed, a.heads)
        np.savez(a.make_inputs, q=d["q"], k=d["k"], v=d["v"], context_lens=d["context_lens"])
        print(f"wrote {a.make_inputs}: q {d['q'].shape}, k/v {d['k'].shape}")
        return 0
    if a.inputs:
        from kernels_py.workloads.inputs import load_inputs
        d, what = load_inputs(a.inputs), a.inputs
    else:
        d, what = default_inputs(a.context, a.queries, a.seed, a.heads), \
            f"default data, context {a.context}, {a.queries} queries, {a.heads} heads, seed {a.seed}"
    sm = ("none", "K", "Q+K") + (("Q+K+V",) if a.smooth_v else ())
    t = time.perf_counter()
    rows = table(d, arch=a.arch, smoothing=sm, progress=None if a.quiet else sys.stderr)
    print(f"SageAttention2 on {a.arch} vs exact fp32 ({what}; FP8 PV, two-level accumulation)")
    print(markdown(rows))
    print(f"({time.perf_counter() - t:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
