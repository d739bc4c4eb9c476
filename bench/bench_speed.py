"""Speed of gfxsim, side by side in one run, as ratios (not a timed test).

  python3 bench/bench_speed.py [--context 1024] [--cudasim-threads 512]

Measures, on the same machine and in the same process:
  * gfxsim running the decode twin (paged_attention_decode + reduce) with provenance and without;
  * the vectorized numpy reference of the same quantized math (kernels_py.reference.attention_int8);
  * numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1) running a per-thread INT8 PV kernel of the same
    work per lane-thread (one output element over a 64-token chunk with its two group scales),
    the per-lane-Python-loop alternative gfxsim replaces.
Rates are lane-threads per second (workgroups x waves x 64 lanes / seconds).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402  (the simulator, by the variable above)


def timed(fn, repeat=1):
    best = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    return out, best


TILE = dict(rows=16, tokens=64, cols=16)


def tile_data(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.random((16, 64)).astype(np.float32),                 # W = P*sV  [row][token]
            rng.integers(-127, 128, (16, 64)).astype(np.int8))       # Vq        [col][token]


def numpy_tile(W, V):
    """The same quantized math, vectorized: groups = the two MMAC token sets."""
    out = np.zeros((16, 16), np.float32)
    for j in range(2):
        g = np.array([16 * r + 8 * j + b for r in range(4) for b in range(8)])
        amax = np.abs(W[:, g]).max(axis=1, keepdims=True)
        wq = np.clip(np.rint(W[:, g] * (np.float32(127) / amax)), -127, 127)
        out += (wq @ V[:, g].T.astype(np.float32)) * (amax / np.float32(127))
    return out


def gfxsim_tile(W, V, provenance):
    """One wave: 16-byte V loads, W quantized per MMAC group, two v_mmac_i32_16x16x32_i8."""
    from gfxsim import Buffer, launch
    tok = np.broadcast_to(np.arange(64), (16, 64))
    row = np.broadcast_to(np.arange(16)[:, None], (16, 64))

    def tile(w, wbuf, vbuf, obuf):
        rowid, lane16id = w.lane_id // 16, w.lane_id % 16
        vq = w.global_load(vbuf, lane16id * 64 + rowid * 16, 16, "i8")
        o = w.zeros("f32", 4)
        for j in range(2):
            base = (lane16id * 64 + rowid * 16 + 8 * j) * 4
            wv = w.cat(w.global_load(wbuf, base, 16, "f32"), w.global_load(wbuf, base + 16, 16, "f32"))
            a = abs(wv)
            amax = w.max(w.max(w.max(a[0], a[1]), w.max(a[2], a[3])), w.max(w.max(a[4], a[5]), w.max(a[6], a[7])))
            amax = w.max(amax, w.shfl_xor(amax, 16))
            amax = w.max(amax, w.shfl_xor(amax, 32))
            wq = w.clamp(w.rint(wv * (np.float32(127) / amax)), -127.0, 127.0).to("i32").to("i8")
            o += w.dequant(w.mma("v_mmac_i32_16x16x32_i8", wq, vq.bytes(8 * j, 8)),
                           w.group_scale(amax / np.float32(127)))
        w.global_store(obuf, w.lane_id * 16, o)

    out = Buffer.empty("out", (64, 4), np.float32)
    launch(tile, arch="gfx936", args=(Buffer("w", W, {"token": tok, "head": row}),
                                      Buffer("v", V, {"token": tok, "dim": row}), out),
           trace=False, provenance=provenance)
    return out.array


def cudasim_tile(W, V):
    """numba's CUDA simulator: 256 threads, thread (q, d) does one output over the 64 tokens."""
    @cuda.jit
    def pv(w, v, out):
        i = cuda.grid(1)
        q, d = i // 16, i % 16
        acc = 0.0
        for j in range(2):
            amax = 0.0
            for r in range(4):
                for b in range(8):
                    amax = max(amax, abs(w[q, 16 * r + 8 * j + b]))
            s = 0
            for r in range(4):
                for b in range(8):
                    t = 16 * r + 8 * j + b
                    x = w[q, t] * (127.0 / amax)
                    s += min(max(round(x), -127), 127) * v[d, t]
            acc += s * (amax / 127.0)
        out[q, d] = acc

    out = np.zeros((16, 16), np.float32)
    pv[4, 64](W, V.astype(np.int32), out)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--context", type=int, default=1024)
    args = ap.parse_args(argv)
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from kernels_py import reference as R
    from kernels_py.data import make_attention_inputs
    from kernels_py.host import make_cache, run_decode

    # 1. equal work: one INT8 PV tile (16 rows x 64 tokens x 16 columns, two K=32 instructions)
    W, V = tile_data()
    gfxsim_tile(W, V, True)                                   # compile numba kernels once
    ref, t_np = timed(lambda: numpy_tile(W, V), repeat=20)
    rows = []
    for label, fn in (("gfxsim, provenance on", lambda: gfxsim_tile(W, V, True)),
                      ("gfxsim, provenance off", lambda: gfxsim_tile(W, V, False)),
                      ("numba CUDA simulator", lambda: cudasim_tile(W, V))):
        out, dt = timed(fn, repeat=3)
        rows.append((label, dt))
    t_sim = rows[-1][1]
    print("INT8 PV tile, 16x64x16 with group scales (same math in each; one run, one machine)")
    print(f"  {'':28}{'seconds':>10}{'vs numpy':>12}{'vs cudasim':>13}")
    for label, dt in rows:
        print(f"  {label:28}{dt:>10.4f}{dt / t_np:>11.0f}x{t_sim / dt:>12.1f}x faster")
    print(f"  {'numpy, vectorized':28}{t_np:>10.5f}{1:>11.0f}x")

    # 2. the whole decode kernel against the numpy reference of the same quantized math
    d = make_attention_inputs(seed=0, num_heads=8, num_kv_heads=1, head_dim=128, context_lens=[args.context])
    cache = make_cache(d["k"], d["v"], d["context_lens"], smooth_k=True)
    _, t_ref = timed(lambda: R.attention_int8(d["q"], cache), repeat=3)
    print(f"\npaged_attention_decode + reduce, context {args.context}, 8 query heads / 1 kv head, head_dim 128")
    print(f"  {'':28}{'seconds':>10}{'vs numpy':>12}{'lane-threads/s':>16}")
    for label, kw in (("gfxsim, provenance on", dict(provenance=True)),
                      ("gfxsim, provenance off", dict(provenance=False)),
                      ("gfxsim, full trace", dict(provenance=True, trace=True))):
        res, dt = timed(lambda: run_decode(d["q"], cache, **{"trace": False, **kw}))
        lanes = sum(r.lane_threads for r in res.runs)
        print(f"  {label:28}{dt:>10.2f}{dt / t_ref:>11.0f}x{lanes / dt:>16,.0f}")
    print(f"  {'numpy reference INT8':28}{t_ref:>10.4f}{1:>11.0f}x")


if __name__ == "__main__":
    main()
