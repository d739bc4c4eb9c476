"""A numpy yardstick in its own process, timed on request: `python -m bench.yardstick KERNEL [shape]`.

It builds the inputs `gfxsim run KERNEL` builds (same generator, seed and cache), checks the bench's
numpy implementation (bench/kernels_numpy.py, bench/decode_numpy.py) against the project's
reference, prints one JSON line ({"ready": ..., "max_abs": ...}), then times one call per "run"
line on stdin ({"seconds": ...}) and, at the end of stdin, prints the peak RSS of the timed calls.
`python -m bench` alternates these calls with the gfxsim command (A B A B), so both see the same
load; it starts this process with one BLAS/OpenMP thread, as the simulator's arithmetic runs.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from gfxsim.procmem import peak_rss_bytes, reset_peak_rss

# the kernels with a numpy implementation written in bench/; the others are timed on the project's reference
OWN = ("paged_attention_decode", "int8_kv_cache", "qk_int8", "pv_int8", "pv_bf16", "prefix_prefill")


def _cache_args(cache):
    return cache.k_cache, cache.v_cache, cache.k_scale, cache.v_scale


def build(kernel: str, a) -> tuple:
    """(the timed function, its output checked against the reference: max abs diff, reference's max abs)."""
    from kernels_py.reference import attention as R
    from kernels_py.reference.int8_cache import build_paged_cache, gather_int8, quantize_int8
    from kernels_py.workloads.inputs import load_inputs, prepare_inputs

    from bench import kernels_numpy as K
    ratio = a.heads // a.kv_heads
    nq = None
    if kernel in ("qk_int8", "pv_int8", "pv_bf16", "fp8_qk"):
        nq = min(-(-16 // ratio), a.context)
    elif kernel == "sage_attention":
        from kernels_py.fp8.sage_layout import WARPQ
        nq = WARPQ
    elif kernel == "prefix_prefill":
        nq = min(64, a.context)                              # the runner's PREFILL_QUERIES
    if a.inputs:
        d = load_inputs(a.inputs, block_size=a.block_size)
    else:
        d = prepare_inputs(context=a.context, heads=a.heads, kv_heads=a.kv_heads, head_dim=a.head_dim, seed=a.seed,
                           num_queries=nq)
    ctx = int(d["context_lens"][0])

    if kernel == "sage_attention":
        from kernels_py.fp8.sage_reference import SageConfig, sage_head
        q = np.ascontiguousarray(d["q"][0, -nq:, 0], np.float32)
        k = np.ascontiguousarray(d["k"][0, :ctx, 0], np.float32)
        v = np.ascontiguousarray(d["v"][0, :ctx, 0], np.float32)
        cfg = SageConfig(arch=a.arch, q_block=nq, smooth_q=True, smooth_k=True)
        pos = ctx - nq + np.arange(nq)
        fn = lambda: sage_head(q, k, v, cfg, q_pos=pos)            # noqa: E731
        return fn, 0.0, float(np.abs(fn()).max())
    if kernel == "fp8_qk":
        from kernels_py.fp8.fp8_qk import reference
        from kernels_py.host.twins import query_rows
        q = query_rows(d["q"], a.kv_heads)                # the 16 rows of kv head 0, as qk_int8's
        k = np.ascontiguousarray(d["k"][0, :ctx, 0], np.float32)
        fn = lambda: reference(q, k)                                 # noqa: E731
        return fn, 0.0, float(np.abs(fn()).max())

    cache = build_paged_cache(d["k"], d["v"], d["context_lens"], block_size=a.block_size, smooth_k=True,
                              block_tables=d.get("block_tables"), seed=a.seed)
    blocks = cache.block_tables[0, :-(-ctx // a.block_size)]
    if kernel == "paged_attention_decode":
        from bench.decode_numpy import decode_int8
        args = (d["q"],) + _cache_args(cache) + (cache.block_tables, cache.context_lens)
        fn = lambda: decode_int8(*args)                              # noqa: E731
        ref = R.attention_int8(d["q"], cache)
    elif kernel == "int8_kv_cache":
        key = (d["k"][0, :ctx] - (cache.k_mean[0] if cache.k_mean is not None else 0)).astype(np.float32)
        value = np.ascontiguousarray(d["v"][0, :ctx])
        nblocks = cache.k_cache.shape[0]
        fn = lambda: K.int8_kv_cache(key, value, cache.slot_mapping, nblocks, a.block_size)   # noqa: E731
        got = fn()
        blk, off = np.divmod(np.asarray(cache.slot_mapping, np.int64), a.block_size)   # the slots written
        slots = [lambda c: c.transpose(0, 3, 1, 2, 4)[blk, off], lambda c: c.transpose(0, 3, 1, 2)[blk, off],
                 lambda c: c.transpose(0, 2, 1)[blk, off], lambda c: c.transpose(0, 2, 1)[blk, off]]
        same = all(np.array_equal(s(g), s(r)) for s, g, r in zip(slots, got, _cache_args(cache)))
        return fn, 0.0 if same else float("inf"), 127.0
    elif kernel in ("qk_int8", "pv_int8", "pv_bf16"):
        from kernels_py.host.twins import query_rows, softmax_rows, sum_in_wave_order
        rows = query_rows(d["q"], cache.num_kv_heads)
        kq, sk, vq, sv = gather_int8(cache, 0)
        if kernel == "qk_int8":
            fn = lambda: K.qk_int8(rows, cache.k_cache, cache.k_scale, blocks, ctx)     # noqa: E731
            qq, sq = quantize_int8(rows)
            ref = R.qk_int8_scores(qq, sq, kq[:, 0], sk[:, 0])
        else:
            P = softmax_rows(rows, cache)
            impl = K.pv_int8 if kernel == "pv_int8" else K.pv_bf16
            fn = lambda: impl(P, cache.v_cache, cache.v_scale, blocks, ctx)             # noqa: E731
            T = -(-ctx // 64) * 64
            W = np.zeros((16, T), np.float32)
            W[:, :ctx] = P * sv[:, 0]
            V = np.zeros((T, cache.head_dim), np.int8)
            V[:ctx] = vq[:, 0]
            chunks = R.pv_int8_chunks(W, V, "fragment") if kernel == "pv_int8" else R.pv_bf16_chunks(W, V)
            ref = sum_in_wave_order(chunks)
    elif kernel == "prefix_prefill":
        q = d["q"]
        fn = lambda: K.prefix_prefill(q[0], *_cache_args(cache), blocks, ctx)            # noqa: E731
        ref = R.attention_int8(q, cache)[0]
    else:
        raise SystemExit(f"bench.yardstick: no numpy implementation of {kernel}")
    out = fn()
    return fn, float(np.abs(out - ref).max()), float(np.abs(ref).max())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.yardstick")
    ap.add_argument("kernel")
    ap.add_argument("--context", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--arch", default="gfx936")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--inputs", help="an .npz of inputs (as gfxsim run --inputs)")
    a = ap.parse_args(argv)
    t = time.perf_counter()
    fn, diff, scale = build(a.kernel, a)
    fn()                                                   # warm (page faults, numpy's first calls)
    print(json.dumps(dict(ready=True, max_abs=diff, ref_max_abs=scale, setup_seconds=time.perf_counter() - t,
                          own=a.kernel in OWN)), flush=True)
    reset_peak_rss()
    for line in sys.stdin:
        if line.strip() != "run":
            break
        t = time.perf_counter()
        fn()
        print(json.dumps(dict(seconds=time.perf_counter() - t)), flush=True)
    print(json.dumps(dict(peak_rss_bytes=peak_rss_bytes())), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
