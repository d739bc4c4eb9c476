"""The PV tile kernel (16 rows x 64 tokens, two K=32 MMACs) and a run of it."""
import numpy as np

from gfxsim import Buffer, launch

MMAC = "v_mmac_i32_16x16x32_i8"
TOK = np.broadcast_to(np.arange(64), (16, 64))
ROW = np.broadcast_to(np.arange(16)[:, None], (16, 64))


def pv_tile(w, wbuf, vbuf, obuf, *, grouping="fragment", load_bytes=16):
    """The PV tile: 16 rows x 64 tokens, V [dim][token] int8, two K=32 MMACs."""
    rowid, lane16id = w.lane_id // 16, w.lane_id % 16
    vq = w.global_load(vbuf, lane16id * 64 + rowid * 16, nbytes=load_bytes, dtype="i8")
    o = w.zeros("f32", 4)
    with w.coverage("O", expect=range(64)):
        for j in range(2):
            base = (lane16id * 64 + rowid * 16 + 8 * j) * 4          # my fragment of W
            wv = w.cat(w.global_load(wbuf, base, 16, "f32"), w.global_load(wbuf, base + 16, 16, "f32"))
            if grouping == "fragment":
                grp = wv
            else:                                                   # tokens 32j + 8*rowid .. +7
                cb = (lane16id * 64 + 32 * j + 8 * rowid) * 4
                grp = w.cat(w.global_load(wbuf, cb, 16, "f32"), w.global_load(wbuf, cb + 16, 16, "f32"))
            amax = abs(grp[0])
            for b in range(1, 8):
                amax = w.max(amax, abs(grp[b]))
            amax = w.max(amax, w.shfl_xor(amax, 16))
            amax = w.max(amax, w.shfl_xor(amax, 32))
            sw = w.group_scale(amax * (1 / 127))
            wq = w.clamp(w.rint(wv * (127.0 / amax)), -127.0, 127.0).to("i32").to("i8")
            vj = vq.bytes(8 * j, 8) if load_bytes == 16 else vq
            o += w.dequant(w.mma(MMAC, wq, vj), sw)
    w.global_store(obuf, w.lane_id * 16, o)


def run_pv(grouping="fragment", load_bytes=16, seed=0):
    rng = np.random.default_rng(seed)
    W = rng.random((16, 64)).astype(np.float32)
    V = rng.integers(-127, 128, (16, 64)).astype(np.int8)
    out = Buffer.empty("out", (64, 4), np.float32)
    run = launch(pv_tile, grid=1, arch="gfx936", args=(Buffer("w", W, {"token": TOK, "head": ROW}),
                                                      Buffer("v_cache", V, {"token": TOK, "dim": ROW}), out),
                 kwargs=dict(grouping=grouping, load_bytes=load_bytes))
    return run, W, V, out.array
