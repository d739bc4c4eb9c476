"""Figure 2 on gfxsim: the INT8 PV tile (16 rows x 64 tokens x 16 cols, two K=32
v_mmac_i32_16x16x32_i8, W quantized per MMAC token group) as a small kernel, one tile per workgroup.

  python -m bench.tile --tiles N [--batch] [--provenance on|off] [--repeat R]

prints one JSON object: seconds per launch (median and all), per-tile seconds, max |diff| against the
numpy tile. A worker of `python -m bench`: run in its own process so that its peak RSS is its own.

Tile data (per tile): W [16 rows][64 tokens] f32 (W = P*sV, positive) and Vq [16 cols][64 tokens] i8.
Outputs in the gfx936 D layout: D[m][n] at lane m + 16*(n%4), reg n//4 -> out[tile][lane][reg].
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

QMAX = np.float32(127.0)
AMAX_MIN = QMAX / np.finfo(np.float32).max


def tile_data(n_tiles: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    W = (rng.random((n_tiles, 16, 64)) * 0.05).astype(np.float32)
    V = rng.integers(-127, 128, (n_tiles, 16, 64)).astype(np.int8)
    return W, V


def numpy_tiles(W, V):
    """O [N, 16 rows, 16 cols] = sum_j dequant(Wq_j . Vq_j, sW_j), group j = tokens (t%16)//8 == j."""
    N = W.shape[0]
    wc = W.reshape(N, 16, 4, 2, 8)                                      # t = 16r + 8j + b
    amax = np.abs(wc).max(axis=(2, 4), keepdims=True)
    live = amax >= AMAX_MIN
    inv = np.where(live, QMAX / np.where(live, amax, 1), 0).astype(np.float32)
    wq = np.clip(np.rint(wc * inv), -127, 127).astype(np.float32)
    scale = np.where(live, amax / QMAX, 0).astype(np.float32)[:, :, 0, :, 0]   # [N, 16, 2]
    vc = V.reshape(N, 16, 4, 2, 8).astype(np.float32)
    acc = np.einsum("nmrjb,ncrjb->njmc", wq, vc)                         # exact integers in f32
    return acc[:, 0] * scale[:, :, 0, None] + acc[:, 1] * scale[:, :, 1, None]


def d_layout_to_matrix(out):
    """out [N, 64 lanes, 4 regs] in the gfx936 D layout -> [N, 16, 16]."""
    m = np.arange(16)[:, None]
    n = np.arange(16)[None, :]
    return out[:, m + 16 * (n % 4), n // 4]


def pv_tile(w, wbuf, vbuf, obuf):
    """One wave per tile: lane (rowid, lane16id) loads V col lane16id, tokens 16*rowid..+15 (one
    16-byte load; bytes 8j..8j+7 feed MMAC j) and W row lane16id, tokens 16*rowid+8j..+7; the group
    amax is reduced over the 4 lanes holding the row (shuffle-xor 16, 32)."""
    tile = w.workgroup_id[0]                           # an int, or per-lane i32 when batched
    rowid, lane16id = w.lane_id // 16, w.lane_id % 16
    base = tile * 1024 + lane16id * 64 + rowid * 16    # element offset of the lane's 16 tokens
    vq = w.global_load(vbuf, base, nbytes=16, dtype="i8")
    o = w.zeros("f32", 4)
    for j in range(2):
        lo = w.global_load(wbuf, (base + 8 * j) * 4, nbytes=16, dtype="f32")
        hi = w.global_load(wbuf, (base + 8 * j + 4) * 4, nbytes=16, dtype="f32")
        a = w.cat(abs(lo), abs(hi))
        amax = w.max(w.max(w.max(a[0], a[1]), w.max(a[2], a[3])), w.max(w.max(a[4], a[5]), w.max(a[6], a[7])))
        amax = w.max(amax, w.shfl_xor(amax, 16))
        amax = w.max(amax, w.shfl_xor(amax, 32))
        live = amax >= AMAX_MIN
        inv = w.select(live, QMAX / w.max(amax, AMAX_MIN), 0.0)
        scale = w.select(live, amax / QMAX, amax * np.float32(0))
        wq = w.clamp(w.rint(w.cat(lo, hi) * inv), -127.0, 127.0).to("i32").to("i8")
        acc = w.mma("v_mmac_i32_16x16x32_i8", wq, vq.bytes(8 * j, 8))
        o += w.dequant(acc, w.group_scale(scale))
    w.global_store(obuf, (tile * 64 + w.lane_id) * 16, o)


def gfxsim_tiles(W, V, *, provenance: bool, batch: bool):
    """Launch pv_tile over N tiles (grid N; batch=N runs them side by side). Returns out [N, 64, 4]."""
    from gfxsim import Buffer, launch
    N = W.shape[0]
    tok = np.broadcast_to(np.arange(64), (N, 16, 64))
    row = np.broadcast_to(np.arange(16)[None, :, None], (N, 16, 64))
    wbuf = Buffer("w", W, tags={"token": tok, "head": row})
    vbuf = Buffer("v", V, tags={"token": tok, "dim": row})
    obuf = Buffer.empty("out", (N, 64, 4), np.float32)
    launch(pv_tile, grid=N, arch="gfx936", args=(wbuf, vbuf, obuf), trace=False, provenance=provenance,
           batch=N if batch else 1)
    return obuf.array


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiles", type=int, default=1)
    ap.add_argument("--batch", action="store_true", help="launch(..., batch=N): all tiles side by side")
    ap.add_argument("--provenance", choices=("on", "off"), default="off")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    W, V = tile_data(a.tiles)
    ref = numpy_tiles(W, V)
    run = lambda: gfxsim_tiles(W, V, provenance=a.provenance == "on", batch=a.batch)   # noqa: E731
    out = run()                                                         # warm-up: imports, first launch
    ts = []
    for _ in range(a.repeat):
        t = time.perf_counter()
        out = run()
        ts.append(time.perf_counter() - t)
    t_np = []
    for _ in range(max(a.repeat, 5)):
        t = time.perf_counter()
        numpy_tiles(W, V)
        t_np.append(time.perf_counter() - t)
    med = statistics.median(ts)
    print(json.dumps({"tiles": a.tiles, "batch": a.batch, "provenance": a.provenance, "seconds": med,
                      "runs": ts, "per_tile": med / a.tiles, "numpy_seconds": statistics.median(t_np),
                      "max_abs_vs_numpy": float(np.abs(d_layout_to_matrix(out) - ref).max())}))


if __name__ == "__main__":
    main()
