"""The INT8 decode math of kernels_py/ALGORITHMS.md, vectorized in numpy: the yardstick of figure 1.

Written here on purpose (not kernels_py.reference.attention): it is what a user would write to get the same
numbers fast. One paged INT8 cache in, the decode output out:

- gather K/V of each sequence through its block table (whole blocks, no per-token indexing);
- Q quantized per row: sQ = amax/127, Qq = clamp(rint(Q * 127/amax), +-127);
- S = (Qq.Kq^T) * sQ * sK * (1/sqrt(d)), with the integer dot product done as a float32 GEMM: every
  partial sum is an integer of magnitude <= 128*127*127 < 2**24, so float32 is exact here and the
  result equals the int32 one;
- per 256-token partition: m = max, e = exp(S - m), l = sum e, P = e / l, W = P * sV;
- W quantized per (row, 64-token chunk, MMAC token set): token t of a chunk belongs to group
  (t % 16) // 8, i.e. {0-7,16-23,32-39,48-55} and {8-15,24-31,40-47,56-63};
- acc_j = Wq_j . Vq_j over the group's 32 tokens (float32 GEMM, exact: <= 32*127*127), chunk
  output acc_0*sW_0 + acc_1*sW_1, the 4 chunks of a partition summed in order;
- partitions merged by log-sum-exp: M = max m_p, w_p = l_p*exp(m_p - M), out = sum tmp_p*w_p / sum w_p.
All float math in float32, in the kernels' order, so the result matches the reference to a few ulp.
"""
from __future__ import annotations

import numpy as np

QMAX = np.float32(127.0)
AMAX_MIN = QMAX / np.finfo(np.float32).max
PARTITION = 256
CHUNK = 64


def quantize_amax(x, amax):
    """(q int8, scale f32): scale = amax/127, q = clamp(rint(x*127/amax)); tiny amax gives 0, 0."""
    live = amax >= AMAX_MIN
    inv = np.where(live, QMAX / np.where(live, amax, np.float32(1)), np.float32(0)).astype(np.float32)
    q = np.clip(np.rint(x * inv), -127, 127).astype(np.int8)
    return q, np.where(live, amax / QMAX, np.float32(0)).astype(np.float32)


def build_cache(k, v, context_len, block_tables, num_blocks, block_size=16, smooth_k=True):
    """The INT8 paged cache of one sequence (the producer's math, vectorized): k, v [ctx, kvh, d] f32.
    Returns (k_cache, v_cache, k_scale, v_scale) in the ALGORITHMS.md layouts (unused slots 0)."""
    ctx, kvh, d = k.shape
    if smooth_k:
        k = k - np.asarray(k, np.float64).mean(axis=0).astype(np.float32)
    kq, ks = quantize_amax(k, np.abs(k).max(axis=-1, keepdims=True))
    vq, vs = quantize_amax(v, np.abs(v).max(axis=-1, keepdims=True))
    nb = -(-ctx // block_size)
    pad = nb * block_size - ctx
    blocks = block_tables[:nb]

    def paged(a):                                        # [ctx, ...] -> [nb, bs, ...]
        return np.pad(a, [(0, pad)] + [(0, 0)] * (a.ndim - 1)).reshape(nb, block_size, *a.shape[1:])

    k_cache = np.zeros((num_blocks, kvh, d // 16, block_size, 16), np.int8)
    v_cache = np.zeros((num_blocks, kvh, d, block_size), np.int8)
    k_scale = np.zeros((num_blocks, kvh, block_size), np.float32)
    v_scale = np.zeros((num_blocks, kvh, block_size), np.float32)
    k_cache[blocks] = paged(kq).reshape(nb, block_size, kvh, d // 16, 16).transpose(0, 2, 3, 1, 4)
    v_cache[blocks] = paged(vq).transpose(0, 2, 3, 1)
    k_scale[blocks] = paged(ks[..., 0]).transpose(0, 2, 1)
    v_scale[blocks] = paged(vs[..., 0]).transpose(0, 2, 1)
    return k_cache, v_cache, k_scale, v_scale


def decode_int8(q, k_cache, v_cache, k_scale, v_scale, block_tables, context_lens):
    """q [num_seqs, num_heads, d] f32 -> out [num_seqs, num_heads, d] f32 (see the module docstring)."""
    q = np.asarray(q, np.float32)
    S, H, d = q.shape
    _, kvh, _, bs, _ = k_cache.shape
    ratio = H // kvh
    out = np.empty((S, H, d), np.float32)
    softmax_scale = np.float32(1.0 / np.sqrt(d))
    for s in range(S):
        ctx = int(context_lens[s])
        P = -(-ctx // PARTITION)
        T = P * PARTITION
        nb = -(-ctx // bs)
        blk = block_tables[s, :nb]
        # gather whole blocks as int8 (cheap), then one contiguous int8 -> float32 pass (exact)
        Tk = nb * bs
        kt = k_cache[blk].transpose(1, 0, 3, 2, 4).reshape(kvh, Tk, d).astype(np.float32)   # [kvh, Tk, d]
        vt = np.zeros((kvh, d, T), np.int8)
        vt[:, :, :Tk] = v_cache[blk].transpose(1, 2, 0, 3).reshape(kvh, d, Tk)
        vt[:, :, ctx:] = 0
        sk = k_scale[blk].transpose(1, 0, 2).reshape(kvh, Tk)
        sv = np.zeros((kvh, T), np.float32)
        sv[:, :ctx] = v_scale[blk].transpose(1, 0, 2).reshape(kvh, Tk)[:, :ctx]
        # Q per row
        qs = q[s].reshape(kvh, ratio, d)
        qq, sq = quantize_amax(qs, np.abs(qs).max(axis=-1, keepdims=True))     # sq [kvh, ratio, 1]
        qqt = np.ascontiguousarray(qq.astype(np.float32).transpose(0, 2, 1))   # [kvh, d, ratio]
        acc = np.matmul(kt, qqt).transpose(0, 2, 1)                            # [kvh, ratio, Tk], exact
        sc = np.full((kvh, ratio, T), -np.inf, np.float32)
        sc[:, :, :ctx] = (acc * sq * sk[:, None, :] * softmax_scale)[:, :, :ctx]
        sc = sc.reshape(kvh, ratio, P, PARTITION)
        m = sc.max(axis=-1)                                                     # [kvh, ratio, P]
        e = np.exp(sc - m[..., None])
        l = e.sum(axis=-1, dtype=np.float32)
        w = (e / l[..., None]).reshape(kvh, ratio, T) * sv[:, None, :]         # W = P * sV
        # fragment groups: t = 64c + 16r + 8j + b -> group j, amax over (r, b)
        C = T // CHUNK
        wc = w.reshape(kvh, ratio, C, 4, 2, 8)
        wq, sw = quantize_amax(wc, np.abs(wc).max(axis=(3, 5), keepdims=True))  # sw [kvh, ratio, C, 1, 2, 1]
        # A^T [kvh, C, 2, 32, ratio] and B^T [kvh, C, 2, d, 32] (V is token-innermost already)
        at = wq.astype(np.float32).transpose(0, 2, 4, 3, 5, 1).reshape(kvh, C, 2, 32, ratio)
        bt = vt.reshape(kvh, d, C, 4, 2, 8).transpose(0, 2, 4, 1, 3, 5).reshape(kvh, C, 2, d, 32)
        pv = np.matmul(bt.astype(np.float32), at)                               # [kvh, C, 2, d, ratio], exact
        swj = sw.reshape(kvh, ratio, C, 2).transpose(0, 2, 3, 1)[:, :, :, None, :]   # [kvh, C, 2, 1, ratio]
        chunk = pv[:, :, 0] * swj[:, :, 0] + pv[:, :, 1] * swj[:, :, 1]         # [kvh, C, d, ratio]
        chunk = chunk.transpose(0, 1, 3, 2)                                     # [kvh, C, ratio, d]
        chunk = chunk.reshape(kvh, P, 4, ratio, d)
        o = chunk[:, :, 0] + chunk[:, :, 1] + chunk[:, :, 2] + chunk[:, :, 3]  # [kvh, P, ratio, d]
        # log-sum-exp merge of the partitions
        mt, lt = m.transpose(0, 2, 1), l.transpose(0, 2, 1)                     # [kvh, P, ratio]
        M = mt.max(axis=1, keepdims=True)
        wp = lt * np.exp(mt - M)
        res = (o * wp[..., None]).sum(axis=1) / wp.sum(axis=1)[..., None]      # [kvh, ratio, d]
        out[s] = res.reshape(H, d)
    return out
