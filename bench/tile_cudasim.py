"""Figure 2 on numba's CUDA simulator: a faithful SIMT port of the INT8 PV tile (bench/tile.py).

  python -m bench.tile_cudasim --tiles N [--repeat R]

One 64-thread block = one wave per tile; each thread holds what the MMAC layout gives its lane:
  A (W): row lane%16, K elements 8*(lane//16)..+7 of each instruction, i.e. tokens
         16*(lane//16) + 8j + b of instruction j;
  B (V): col lane%16, the 16 consecutive tokens 16*(lane//16)..+15, bytes 8j..8j+7 to instruction j;
  D:     D[m][n] at lane m + 16*(n%4), reg n//4 (gfx936), kept in 4 registers per thread.
The row amax is reduced across the 4 lanes holding the row by shuffle-xor 16 and 32 done through
shared memory; the matrix instruction gathers its operands across lanes through shared memory too
(each lane computes the 4 D elements it holds). NUMBA_ENABLE_CUDASIM is set before numba is
imported, in this process only (`python -m bench` runs it as a subprocess).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

import numpy as np  # noqa: E402
from numba import cuda, float32, int32  # noqa: E402

from bench.tile import AMAX_MIN, d_layout_to_matrix, numpy_tiles, tile_data  # noqa: E402

AMAX_MIN_F = float(AMAX_MIN)


@cuda.jit
def pv_tile(w, v, out):
    tile = cuda.blockIdx.x
    lane = cuda.threadIdx.x
    m = lane % 16                     # A row / B col / D row of this lane
    rowid = lane // 16
    red = cuda.shared.array(64, float32)
    sa = cuda.shared.array((64, 8), int32)        # the A bytes each lane feeds the instruction
    sb = cuda.shared.array((64, 8), int32)        # the B bytes
    wr = cuda.local.array(16, float32)
    vr = cuda.local.array(16, int32)
    o = cuda.local.array(4, float32)
    for e in range(16):
        wr[e] = w[tile, m, 16 * rowid + e]         # e = 8j + b
        vr[e] = v[tile, m, 16 * rowid + e]
    for i in range(4):
        o[i] = float32(0.0)
    for j in range(2):
        amax = float32(0.0)
        for b in range(8):
            amax = max(amax, abs(wr[8 * j + b]))
        for step in range(2):                      # shuffle-xor 16, then 32, through shared memory
            red[lane] = amax
            cuda.syncthreads()
            amax = max(amax, red[lane ^ (16 << step)])
            cuda.syncthreads()
        if amax >= AMAX_MIN_F:
            inv = float32(float32(127.0) / amax)
            scale = float32(amax / float32(127.0))
        else:
            inv = float32(0.0)
            scale = float32(0.0)
        for b in range(8):
            x = round(float32(wr[8 * j + b] * inv))   # round half to even
            sa[lane, b] = min(max(x, -127), 127)
            sb[lane, b] = vr[8 * j + b]
        cuda.syncthreads()
        # the matrix instruction: A[m][k] at lane m + 16*(k//8) byte k%8, B[k][n] at lane n + 16*(k//8)
        for i in range(4):
            n = rowid + 4 * i                      # D[m][n] at lane m + 16*(n%4), reg n//4 = i
            acc = 0
            for k in range(32):
                acc += sa[m + 16 * (k // 8), k % 8] * sb[n + 16 * (k // 8), k % 8]
            o[i] = float32(o[i] + float32(float32(acc) * scale))   # row m's scale: this lane's amax
        cuda.syncthreads()
    for i in range(4):
        out[tile, lane, i] = o[i]


def run_tiles(W, V):
    out = np.zeros((W.shape[0], 64, 4), np.float32)
    pv_tile[W.shape[0], 64](W, V.astype(np.int32), out)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiles", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    W, V = tile_data(a.tiles)
    ref = numpy_tiles(W, V)
    out = run_tiles(W[:1], V[:1])                     # warm-up
    ts = []
    for _ in range(a.repeat):
        t = time.perf_counter()
        out = run_tiles(W, V)
        ts.append(time.perf_counter() - t)
    med = statistics.median(ts)
    print(json.dumps({"tiles": a.tiles, "seconds": med, "runs": ts, "per_tile": med / a.tiles,
                      "max_abs_vs_numpy": float(np.abs(d_layout_to_matrix(out) - ref).max())}))


if __name__ == "__main__":
    main()
