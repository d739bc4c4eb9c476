"""The math of each shipped kernel, vectorized in numpy: the yardsticks of `python -m bench`'s kernel figures.

Written here on purpose (not kernels_py.reference): what a user would write to get the same numbers
fast, from what the kernel reads (the paged INT8 cache, its 16 query rows) to what it writes.
Integer dot products run as float32 GEMMs: every partial sum is an integer below 2**24 (head_dim
128 x 127 x 127, or 32 x 127 x 127), so float32 is exact and equals the int32 result. Each is
checked against the project's reference in bench/yardstick.py before it is timed.

- int8_kv_cache: per (token, kv head) amax over head_dim, q = clamp(rint(x*127/amax)), written
  through the slot mapping into the paged layouts (decode_numpy.build_cache's math, for any slots);
- qk_int8: Q rows quantized per row, S = (Qq.Kq^T)*sQ*sK/sqrt(d) over kv head 0's whole cache;
- pv_int8: W = P*sV quantized per (row, 64-token chunk, MMAC token set), acc_j = Wq_j.Vq_j, chunk
  output acc_0*sW_0 + acc_1*sW_1, chunks summed as the kernel's 4 waves do;
- pv_bf16: W rounded to bf16 (round to nearest even), Vq exact in bf16, fp32 sums, same order;
- prefix_prefill: per kv head and query tile, over the chunks the tile sees: causal scores,
  per-chunk running max, p~ = exp(S - m_c), W = p~*sV quantized per group, the chunks rescaled to the final max in closed form;
- the decode: bench/decode_numpy.py.
"""
from __future__ import annotations

import numpy as np

from bench.decode_numpy import CHUNK, quantize_amax

WAVES = 4


def int8_kv_cache(key, value, slot_mapping, num_blocks: int, block_size: int):
    """key, value [tokens, kvh, d] f32, slot_mapping [tokens] -> (k_cache, v_cache, k_scale, v_scale)."""
    n, kvh, d = key.shape
    kq, ks = quantize_amax(key, np.abs(key).max(axis=-1, keepdims=True))
    vq, vs = quantize_amax(value, np.abs(value).max(axis=-1, keepdims=True))
    blk, off = np.divmod(np.asarray(slot_mapping, np.int64), block_size)
    k_cache = np.zeros((num_blocks, kvh, d // 16, block_size, 16), np.int8)
    v_cache = np.zeros((num_blocks, kvh, d, block_size), np.int8)
    k_scale = np.zeros((num_blocks, kvh, block_size), np.float32)
    v_scale = np.zeros((num_blocks, kvh, block_size), np.float32)
    k_cache.transpose(0, 3, 1, 2, 4)[blk, off] = kq.reshape(n, kvh, d // 16, 16)
    v_cache.transpose(0, 3, 1, 2)[blk, off] = vq
    k_scale.transpose(0, 2, 1)[blk, off] = ks[..., 0]
    v_scale.transpose(0, 2, 1)[blk, off] = vs[..., 0]
    return k_cache, v_cache, k_scale, v_scale


def gather_head0(k_cache, v_cache, k_scale, v_scale, blocks, ctx: int):
    """kv head 0 of one sequence from its blocks: Kq [ctx, d] int8, sK [ctx], Vq [ctx, d], sV [ctx]."""
    _, _, d16, bs, _ = k_cache.shape
    d = d16 * 16
    kq = k_cache[blocks, 0].transpose(0, 2, 1, 3).reshape(-1, d)[:ctx]
    vq = v_cache[blocks, 0].transpose(0, 2, 1).reshape(-1, d)[:ctx]
    return kq, k_scale[blocks, 0].reshape(-1)[:ctx], vq, v_scale[blocks, 0].reshape(-1)[:ctx]


def qk_int8(rows, k_cache, k_scale, blocks, ctx: int):
    """rows [16, d] f32 -> S [16, ctx] f32 against kv head 0."""
    _, _, d16, bs, _ = k_cache.shape
    d = d16 * 16
    kq = k_cache[blocks, 0].transpose(0, 2, 1, 3).reshape(-1, d)[:ctx].astype(np.float32)
    sk = k_scale[blocks, 0].reshape(-1)[:ctx]
    qq, sq = quantize_amax(rows, np.abs(rows).max(axis=-1, keepdims=True))
    acc = np.matmul(kq, qq.astype(np.float32).T).T                          # [16, ctx], exact
    return acc * sq * sk[None, :] * np.float32(1.0 / np.sqrt(d))


def _wave_order(chunks):
    """[rows, C, d] chunk outputs summed as the kernels' 4 waves do: wave w its chunks w, w+4, ..."""
    rows, C, d = chunks.shape
    pad = -C % WAVES
    if pad:
        chunks = np.concatenate([chunks, np.zeros((rows, pad, d), np.float32)], axis=1)
    per = chunks.reshape(rows, -1, WAVES, d)
    acc = per[:, 0]
    for i in range(1, per.shape[1]):
        acc = acc + per[:, i]
    total = acc[:, 0]
    for w in range(1, WAVES):
        total = total + acc[:, w]
    return total


def _padded(P, vq, sv):
    rows, ctx = P.shape
    T = -(-ctx // CHUNK) * CHUNK
    w = np.zeros((rows, T), np.float32)
    w[:, :ctx] = P * sv
    v = np.zeros((T, vq.shape[1]), np.int8)
    v[:ctx] = vq
    return w, v, T // CHUNK


def _pv_int8_chunks(w, v, C):
    """w [rows, T] f32, v [T, d] int8 -> [rows, C, d] chunk outputs (fragment groups)."""
    rows, d = w.shape[0], v.shape[1]
    wc = w.reshape(rows, C, 4, 2, 8)
    wq, sw = quantize_amax(wc, np.abs(wc).max(axis=(2, 4), keepdims=True))     # sw [rows, C, 1, 2, 1]
    a = wq.astype(np.float32).transpose(1, 3, 0, 2, 4).reshape(C, 2, rows, 32)
    b = v.reshape(C, 4, 2, 8, d).transpose(0, 2, 1, 3, 4).reshape(C, 2, 32, d).astype(np.float32)
    acc = np.matmul(a, b)                                                        # [C, 2, rows, d], exact
    s = sw.reshape(rows, C, 2).transpose(1, 2, 0)[..., None]                     # [C, 2, rows, 1]
    return (acc[:, 0] * s[:, 0] + acc[:, 1] * s[:, 1]).transpose(1, 0, 2)


def pv_int8(P, v_cache, v_scale, blocks, ctx: int):
    """P [16, ctx] f32 -> out [16, d] f32 against kv head 0."""
    d = v_cache.shape[2]
    vq = v_cache[blocks, 0].transpose(0, 2, 1).reshape(-1, d)[:ctx]
    sv = v_scale[blocks, 0].reshape(-1)[:ctx]
    w, v, C = _padded(P, vq, sv)
    return _wave_order(_pv_int8_chunks(w, v, C))


def bf16_round(x):
    """float32 -> the nearest bfloat16 (ties to even), as float32."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32)
    r = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return r.view(np.float32)


def pv_bf16(P, v_cache, v_scale, blocks, ctx: int):
    d = v_cache.shape[2]
    vq = v_cache[blocks, 0].transpose(0, 2, 1).reshape(-1, d)[:ctx]
    sv = v_scale[blocks, 0].reshape(-1)[:ctx]
    w, v, C = _padded(P, vq, sv)
    rows = w.shape[0]
    a = bf16_round(w).reshape(rows, C, CHUNK).transpose(1, 0, 2)                 # [C, rows, 64]
    chunks = np.matmul(a, v.reshape(C, CHUNK, d).astype(np.float32))             # [C, rows, d]
    return _wave_order(chunks.transpose(1, 0, 2))


def prefix_prefill(q, k_cache, v_cache, k_scale, v_scale, blocks, ctx: int, tile: int = 128):
    """q [nq, H, d] f32 (the last nq of ctx tokens) -> out [nq, H, d] f32. Per kv head and per
    ``tile`` queries (a row's math is its own), over the chunks the tile's last query sees: memory
    is bounded by the tile, and chunks no row of it sees are not computed."""
    nq, H, d = q.shape
    _, kvh, _, bs, _ = k_cache.shape
    ratio = H // kvh
    C = -(-ctx // CHUNK)
    T = C * CHUNK
    nb = -(-ctx // bs)
    kq = np.zeros((kvh, T, d), np.float32)
    kq[:, :nb * bs] = k_cache[blocks].transpose(1, 0, 3, 2, 4).reshape(kvh, nb * bs, d)
    sk = np.zeros((kvh, T), np.float32)
    sk[:, :nb * bs] = k_scale[blocks].transpose(1, 0, 2).reshape(kvh, -1)
    v = np.zeros((kvh, T, d), np.int8)
    v[:, :nb * bs] = v_cache[blocks].transpose(1, 0, 3, 2).reshape(kvh, nb * bs, d)
    v[:, ctx:] = 0
    sv = np.zeros((kvh, T), np.float32)
    sv[:, :ctx] = v_scale[blocks].transpose(1, 0, 2).reshape(kvh, -1)[:, :ctx]
    out = np.empty((nq, kvh, ratio, d), np.float32)
    inv_sqrt_d = np.float32(1.0 / np.sqrt(d))
    for q0 in range(0, nq, tile):
        q1 = min(q0 + tile, nq)
        pos = (ctx - nq + np.arange(q0, q1)).repeat(ratio)                      # each row's last visible token
        c = -(-(int(pos[-1]) + 1) // CHUNK)                                      # the chunks the tile sees
        t = c * CHUNK
        hidden = np.arange(t)[None, :] > pos[:, None]
        for g in range(kvh):
            rows = q[q0:q1, g * ratio:(g + 1) * ratio].reshape(-1, d)                 # row = i*ratio + h
            qq, sq = quantize_amax(rows, np.abs(rows).max(axis=-1, keepdims=True))
            sc = np.matmul(qq.astype(np.float32), kq[g, :t].T) * sq * sk[g, None, :t] * inv_sqrt_d
            sc[hidden] = -np.inf
            sc = sc.reshape(len(rows), c, CHUNK)
            m = np.maximum.accumulate(sc.max(axis=-1), axis=1)                   # [rows, c]
            p = np.exp(sc - m[..., None])
            psum = p.sum(axis=-1, dtype=np.float32)
            w = (p * sv[g, :t].reshape(1, c, CHUNK)).reshape(len(rows), t)
            contrib = _pv_int8_chunks(w, v[g, :t], c)                            # [rows, c, d]
            scale = np.exp(m - m[:, -1:])                                        # to the final max
            o = (contrib * scale[..., None]).sum(axis=1)
            ls = np.zeros((len(rows), C), np.float32)              # summed over every chunk: numpy's
            ls[:, :c] = psum * scale                                # pairwise sum groups by the length
            l = ls.sum(axis=1)
            out[q0:q1, g] = (o / l[:, None]).reshape(q1 - q0, ratio, d)
    return out.reshape(nq, H, d)
