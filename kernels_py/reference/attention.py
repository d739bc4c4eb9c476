"""numpy references of the INT8 attention kernels (kernels_py/ALGORITHMS.md), without fragments.

Shapes: decode q [num_seqs, num_heads, head_dim] -> out [num_seqs, num_heads, head_dim];
prefill q [num_seqs, num_queries, num_heads, head_dim] -> out of the same shape, the queries being
the last num_queries positions of each context (causal: position pos sees tokens t <= pos).
k, v are padded [num_seqs, max_context, num_kv_heads, head_dim]; query head h reads kv head
h // (num_heads // num_kv_heads).

- attention_fp32: exact softmax attention, float64 inside.
- attention_bf16: the production BF16 kernel's math (q, k, v and P in bf16, fp32 scores and sums).
- attention_int8: the kernels' quantized math from a PagedKVCache: int8 Q per row, int8 K/V per
  token, W = P·sV quantized per (row, 64-token chunk, MMAC token set), exact integer dot products,
  fp32 everywhere else. Decode uses 256-token partitions and the log-sum-exp reduce; prefill the
  online softmax over 64-token chunks. pv="bf16" swaps in the pv_bf16 twin's PV (bf16 W, exact
  Vq, no W scale) on the same int8 cache and QK: the PV-only comparison.
The pieces (quantize_w, pv_int8_chunks, qk_int8_scores, decode_int8_partials, reduce_partitions)
are what single kernel stages compute, for stage-by-stage comparisons with the twins.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

import numpy as np

from kernels_py.reference.int8_cache import PagedKVCache, gather_int8, quantize_int8, quantize_with_amax
from gfxsim.errors import ArgumentError

Grouping = Literal["fragment", "contiguous"]
CHUNK = 64          # tokens per wave: two K=32 MMACs
PARTITION = 256     # decode partition: 4 waves x 64 tokens


def _split(q: np.ndarray, k: np.ndarray, context_lens):
    """Common shape checks; returns (q4 [S, nq, H, D], lens, ratio)."""
    q4 = q[:, None] if q.ndim == 3 else q
    if q4.ndim != 4 or k.ndim != 4:
        raise ArgumentError(f"q must be 3-D (decode) or 4-D (prefill) and k 4-D; got {q.shape}, {k.shape}")
    lens = np.asarray(context_lens, np.int64)
    num_heads, kvh = q4.shape[2], k.shape[2]
    if num_heads % kvh:
        raise ArgumentError(f"num_heads {num_heads} is not a multiple of num_kv_heads {kvh}")
    if np.any(lens < q4.shape[1]):
        raise ArgumentError(f"context_lens {lens.tolist()} shorter than num_queries {q4.shape[1]}")
    return q4, lens, num_heads // kvh


def _causal_mask(nq: int, ctx: int) -> np.ndarray:
    """[nq, ctx] True where query i (at position ctx - nq + i) may see token t."""
    return np.arange(ctx)[None, :] <= (ctx - nq + np.arange(nq))[:, None]


QUERY_TILE = 128                # prefill queries computed at once (their [rows, context] arrays)
# prefill_int8's: its PV products are [chunks, 2, rows, head_dim] f32 and their scaled sums, ~0.4
# GiB a tile of 128 queries (x 8 heads) over a 4K prefix, made beside the launch; exact integer
# products in float32, so any tiling gives the same bits (tests compare)
INT8_QUERY_TILE = 32
_F64_TOKENS = 1024              # tokens of K/V converted to float64 at a time (1 MiB at head_dim 128)


def attention_fp32(q, k, v, context_lens) -> np.ndarray:
    """Exact attention (float64 inside, returned as f32)."""
    q4, lens, ratio = _split(np.asarray(q), np.asarray(k), context_lens)
    nq, num_heads, hd = q4.shape[1:]
    out = np.zeros(q4.shape, np.float32)
    scale = 1.0 / np.sqrt(hd)
    for s, ctx in enumerate(lens):
        full_mask = _causal_mask(nq, ctx)
        for g in range(k.shape[2]):                                      # all query heads of a kv head at once
            heads = slice(g * ratio, (g + 1) * ratio)
            for q0 in range(0, nq, QUERY_TILE):                          # a row's math is its own: memory by tile
                q1 = min(nq, q0 + QUERY_TILE)
                n = q1 - q0
                mask = np.tile(full_mask[q0:q1], (ratio, 1))              # rows h*n + i
                qg = np.asarray(q4[s, q0:q1, heads], np.float64).transpose(1, 0, 2).reshape(ratio * n, hd)
                # K and V converted to float64 a block of tokens at a time (the blocks stay in cache,
                # a whole head's float64 copy would be fresh memory): the same products and sums
                sc = np.empty((ratio * n, ctx))
                for t in range(0, ctx, _F64_TOKENS):
                    np.matmul(qg, np.asarray(k[s, t:min(t + _F64_TOKENS, ctx), g], np.float64).T,
                              out=sc[:, t:t + _F64_TOKENS])
                sc *= scale
                if nq > 1:
                    sc[~mask] = -np.inf
                sc -= sc.max(axis=1, keepdims=True)
                p = np.exp(sc, out=sc)
                o = np.zeros((ratio * n, hd))
                for t in range(0, ctx, _F64_TOKENS):
                    o += p[:, t:t + _F64_TOKENS] @ np.asarray(v[s, t:min(t + _F64_TOKENS, ctx), g], np.float64)
                o /= p.sum(axis=1, keepdims=True)
                out[s, q0:q1, heads] = o.reshape(ratio, n, hd).transpose(1, 0, 2)
    return out.reshape(np.shape(q))


_BF16_ROUND = np.uint32(0x7FFF)
_BF16_MASK = np.uint32(0xFFFF0000)
_CHUNK_ELEMS = 1 << 16          # elementwise passes over blocks of this size stay in L2


def round_bf16(x) -> np.ndarray:
    """x rounded to bf16 (round to nearest even, as ml_dtypes and the hardware), as f32: on the
    float32 bits, +0x7FFF + (bit 16), keep the top 16. NaN stays NaN (quieted). Returns a new
    C-contiguous array."""
    x = np.asarray(x, np.float32)
    out = np.empty(x.shape, np.uint32)
    xs = x.reshape(1, -1) if x.ndim < 2 else x.reshape(-1, x.shape[-1])   # a view where x has rows
    os_ = out.reshape(xs.shape)
    step = max(1, _CHUNK_ELEMS // max(xs.shape[1], 1))
    for i in range(0, xs.shape[0], step):
        u, r = xs[i:i + step].view(np.uint32), os_[i:i + step]
        np.right_shift(u, 16, out=r)
        r &= 1
        r += _BF16_ROUND
        r += u
        r &= _BF16_MASK
        nan = np.isnan(xs[i:i + step])
        if nan.any():
            r[nan] = (u[nan] | np.uint32(0x00400000)) & _BF16_MASK
    return out.view(np.float32)


# attention_bf16's queries at once: its [rows, context] float32 arrays were 0.4 GiB at a 4K prompt
# over a 4K prefix. Its products are float32 GEMMs, the same bits only while each tile starts on a
# row block of the BLAS kernel (a multiple of 16 rows; 7 gives other bits): tests compare.
BF16_QUERY_TILE = 128


def attention_bf16(q, k, v, context_lens) -> np.ndarray:
    """BF16 kernel math: q, k, v rounded to bf16; scores and softmax in fp32 (one softmax over the
    whole row); P rounded to bf16; PV accumulated in fp32. Returns f32."""
    q4, lens, ratio = _split(np.asarray(q), np.asarray(k), context_lens)
    nq = q4.shape[1]
    out = np.zeros(q4.shape, np.float32)
    scale = np.float32(1.0 / np.sqrt(q4.shape[-1]))
    for s, ctx in enumerate(lens):
        mask = _causal_mask(nq, ctx)
        qb = round_bf16(q4[s])
        for g in range(k.shape[2]):                                      # K, V rounded once per kv head
            kk, vv = round_bf16(k[s, :ctx, g]), round_bf16(v[s, :ctx, g])
            for h in range(g * ratio, (g + 1) * ratio):                  # one row product per head, as before
                for q0 in range(0, nq, BF16_QUERY_TILE):                 # a row's math is its own: memory by tile
                    q1 = min(nq, q0 + BF16_QUERY_TILE)
                    sc = np.ascontiguousarray(qb[q0:q1, h]) @ kk.T
                    sc *= scale
                    if nq > 1:
                        sc[~mask[q0:q1]] = -np.inf
                    sc -= sc.max(axis=1, keepdims=True)
                    e = np.exp(sc, out=sc)
                    e /= e.sum(axis=1, keepdims=True)
                    out[s, q0:q1, h] = round_bf16(e) @ vv
    return out.reshape(np.shape(q))


# ---------------------------------------------------------------------------------------------
# The quantized math, piece by piece (each piece is what one kernel stage computes).

def mmac_set(t) -> np.ndarray:
    """Which K=32 MMAC of its 64-token chunk consumes token t: lane row r loads tokens 16r..16r+15
    with one 16-byte load and bytes 8j..8j+7 feed MMAC j, so j = (t % 16) // 8."""
    return (np.asarray(t) % 16) // 8


def contiguous_group(t) -> np.ndarray:
    """The buggy scale group: tokens 0-31 and 32-63 of each chunk."""
    return (np.asarray(t) % CHUNK) // 32


def quantize_w(w: np.ndarray, grouping: Grouping) -> tuple[np.ndarray, np.ndarray]:
    """Quantize W [..., T] (T a multiple of 64) per (row, chunk, group).

    Returns (wq int8 [..., T], sw f32 [..., T/64, 2]) where sw[..., c, j] is the scale that
    multiplies MMAC j's int32 sum for chunk c. "fragment": group j is MMAC j's token set.
    "contiguous": token t is quantized with the scale of its contiguous group t//32 and that
    group's scale is applied to MMAC j = group, so half of each MMAC's tokens carry a scale from
    the other group (the bug).
    """
    w = np.asarray(w, np.float32)
    *lead, T = w.shape
    if T % CHUNK:
        raise ArgumentError(f"W has {T} tokens, not a multiple of {CHUNK}")
    C = T // CHUNK
    if grouping == "fragment":
        wc = w.reshape(*lead, C, 4, 2, 8)                      # t = 16r + 8j + b
        amax = np.abs(wc).max(axis=(-3, -1))                    # [..., C, 2]
        wq, sw = quantize_with_amax(wc, amax[..., None, :, None])
        return wq.reshape(w.shape), sw[..., 0, :, 0]
    if grouping == "contiguous":
        wc = w.reshape(*lead, C, 2, 32)                         # t = 32g + u
        amax = np.abs(wc).max(axis=-1)
        wq, sw = quantize_with_amax(wc, amax[..., None])
        return wq.reshape(w.shape), sw[..., 0]
    raise ArgumentError(f"grouping must be 'fragment' or 'contiguous', got {grouping!r}")


def pv_int8_chunks(w: np.ndarray, vq: np.ndarray, grouping: Grouping) -> np.ndarray:
    """Per-chunk PV contributions `acc_0*sW_0 + acc_1*sW_1` (fp32, j = 0 then 1).

    w [..., rows, T] f32 (W = 0 for masked tokens), vq [..., T, head_dim] int8 -> [..., rows, T/64,
    head_dim] f32 (leading axes, e.g. kv heads, batched). acc_j sums Wq*Vq over MMAC j's 32 tokens
    exactly: |acc| <= 32*127*127 < 2^24, so a float32 product is exact in any summation order.
    """
    *lead, T, D = vq.shape
    L = len(lead)
    b = vq.reshape(*lead, T // CHUNK, 4, 2, 8, D).transpose(*range(L), L, L + 2, L + 1, L + 3, L + 4)
    return _pv_int8(w, b.astype(np.float32).reshape(*lead, T // CHUNK, 2, 32, D), grouping)


def _pv_int8(w: np.ndarray, vb: np.ndarray, grouping: Grouping) -> np.ndarray:
    """pv_int8_chunks with V given as MMAC operands: vb [..., C, 2, 32, D] f32, vb[..., c, j, 8r+b]
    = Vq of token 64c + 16r + 8j + b."""
    wq, sw = quantize_w(w, grouping)
    *lead, rows, T = wq.shape
    C, L = T // CHUNK, len(lead)
    a = wq.reshape(*lead, rows, C, 4, 2, 8).transpose(*range(L), L + 1, L + 3, L, L + 2, L + 4)
    acc = np.matmul(a.astype(np.float32).reshape(*lead, C, 2, rows, 32), vb)  # [..., C, 2, rows, D]
    sw = np.moveaxis(sw, -3, -1)[..., None]                                    # [..., C, 2, rows, 1]
    return np.swapaxes(acc[..., 0, :, :] * sw[..., 0, :, :] + acc[..., 1, :, :] * sw[..., 1, :, :], -3, -2)


def pv_bf16_chunks(w: np.ndarray, vq: np.ndarray) -> np.ndarray:
    """The pv_bf16 twin's per-chunk sums: W rounded to bf16, Vq exact in bf16, fp32 accumulation, no
    W scale. Same shapes as pv_int8_chunks."""
    *lead, T, D = vq.shape
    return _pv_bf16(w, vq.reshape(*lead, T // CHUNK, CHUNK, D).astype(np.float32))


def _pv_bf16(w: np.ndarray, vc: np.ndarray) -> np.ndarray:
    """pv_bf16_chunks with V as f32 chunks vc [..., C, 64, D]."""
    *lead, rows, T = w.shape
    a = np.swapaxes(round_bf16(w).reshape(*lead, rows, T // CHUNK, CHUNK), -3, -2)
    return np.swapaxes(a @ vc, -3, -2)


def _pv_chunks(w, vq, grouping: Grouping, pv: str) -> np.ndarray:
    if pv == "int8":
        return pv_int8_chunks(w, vq, grouping)
    if pv == "bf16":
        return pv_bf16_chunks(w, vq)
    raise ArgumentError(f"pv must be 'int8' or 'bf16', got {pv!r}")


def qk_int8_scores(qq: np.ndarray, sq: np.ndarray, kq: np.ndarray, sk: np.ndarray) -> np.ndarray:
    """S = (Qq·Kqᵀ)·sQ·sK·(1/sqrt(d)): exact int dot, dequantize first, then the softmax scale.
    qq [..., rows, d], kq [..., T, d] (leading axes batched). |Qq·Kq| <= d*127*127 < 2^24: exact
    in a float32 product."""
    acc = np.swapaxes(np.matmul(np.asarray(kq, np.float32), np.swapaxes(np.asarray(qq, np.float32), -1, -2)),
                      -1, -2)                                   # K·Qqᵀ: the faster BLAS layout here
    return _dequantized_scores(acc, sq, sk, qq.shape[-1])


def _dequantized_scores(acc: np.ndarray, sq: np.ndarray, sk: np.ndarray, d: int) -> np.ndarray:
    """The integer dot ``acc`` [..., rows, T] dequantized (sQ, then sK), then the softmax scale."""
    return acc * sq[..., :, None] * sk[..., None, :] * np.float32(1.0 / np.sqrt(d))


@dataclass(frozen=True)
class DecodePartials:
    """What paged_attention_decode writes, per (seq, head, partition); partitions past a sequence's
    context have max_logits -inf, exp_sums 0, tmp_out 0."""
    tmp_out: np.ndarray      # [num_seqs, num_heads, max_partitions, head_dim] f32
    max_logits: np.ndarray   # [num_seqs, num_heads, max_partitions] f32  (m per partition)
    exp_sums: np.ndarray     # [num_seqs, num_heads, max_partitions] f32  (l per partition)


def _decode_operands(cache: PagedKVCache, seq: int, g: int, T: int, pv: str):
    """One sequence's kv head g as the decode math consumes it, straight from the blocks (a gather
    and a converting transpose each; a kv head at a time, so that the f32 copies stay in cache):
    K f32 [ctx, hd], k_scale [ctx], V f32 as MMAC operands [T/64, 2, 32, hd] (pv "int8", see
    _pv_int8) or as 64-token chunks [T/64, 64, hd] (pv "bf16"), zero past the context, v_scale [ctx]."""
    kf, sk = _k_operands(cache, seq, g)
    vb, sv = _v_operands(cache, seq, g, T, pv)
    return kf, sk, vb, sv


def _k_operands(cache: PagedKVCache, seq: int, g: int):
    """_decode_operands' K f32 [ctx, hd] and k_scale [ctx]."""
    blk = cache.seq_blocks(seq)
    ctx, hd = int(cache.context_lens[seq]), cache.head_dim
    kf = cache.k_cache[blk, g].transpose(0, 2, 1, 3).astype(np.float32, order="C").reshape(-1, hd)[:ctx]
    return kf, cache.k_scale[blk, g].reshape(-1)[:ctx]


# K cache blocks converted to float32 at a time by qk_int8_scores_of (512 KiB at head_dim 128 and
# block 16: the copy stays in cache between its conversion and its product)
K_BLOCKS = 64


def qk_int8_scores_of(cache: PagedKVCache, seq: int, g: int, qq: np.ndarray, sq: np.ndarray) -> np.ndarray:
    """qk_int8_scores(qq, sq, *_k_operands(cache, seq, g)) with K converted and multiplied K_BLOCKS
    blocks at a time: each product Qq·Kq is an exact integer in float32, so the tiling changes no
    bit, and the float32 copy of a kv head's K (8 MiB at 16K) is never made whole."""
    blk = cache.seq_blocks(seq)
    ctx, hd, bs = int(cache.context_lens[seq]), cache.head_dim, cache.block_size
    qt = np.ascontiguousarray(np.swapaxes(np.asarray(qq, np.float32), -1, -2))          # [d, rows]
    acc = np.empty((qq.shape[-2], ctx), np.float32)
    for b0 in range(0, blk.size, K_BLOCKS):
        t0 = b0 * bs
        t1 = min(ctx, t0 + K_BLOCKS * bs)
        kf = cache.k_cache[blk[b0:b0 + K_BLOCKS], g].transpose(0, 2, 1, 3).astype(np.float32, order="C")
        acc[:, t0:t1] = np.matmul(kf.reshape(-1, hd)[:t1 - t0], qt).T
    return _dequantized_scores(acc, sq, cache.k_scale[blk, g].reshape(-1)[:ctx], hd)


def _v_operands(cache: PagedKVCache, seq: int, g: int, T: int, pv: str):
    """_decode_operands' V operands and v_scale [ctx]."""
    if pv not in ("int8", "bf16"):
        raise ArgumentError(f"pv must be 'int8' or 'bf16', got {pv!r}")
    blk = cache.seq_blocks(seq)
    ctx, bs, hd = int(cache.context_lens[seq]), cache.block_size, cache.head_dim
    sv = cache.v_scale[blk, g].reshape(-1)[:ctx]
    vb = np.zeros((T // bs, hd, bs), np.int8)
    vb[:blk.size] = cache.v_cache[blk, g]
    vb[blk.size - 1, :, ctx - (blk.size - 1) * bs:] = 0       # the last block's unwritten slots
    C = T // CHUNK
    if pv == "int8":                # token 64c + 16r + 8j + b, r = (CHUNK//bs block, bs//16 row)
        vb = vb.reshape(C, CHUNK // bs, hd, bs // 16, 2, 8).transpose(0, 4, 1, 3, 5, 2)
        return vb.astype(np.float32, order="C").reshape(C, 2, 32, hd), sv
    vb = vb.reshape(C, CHUNK // bs, hd, bs).transpose(0, 1, 3, 2)
    return vb.astype(np.float32, order="C").reshape(C, CHUNK, hd), sv


def same_v(a: PagedKVCache, b: PagedKVCache) -> bool:
    """Whether two caches hold the same V where a sequence reads it: the same V blocks and scales,
    block tables and context lengths (a cache and its without_smooth_k twin share the arrays)."""
    def same(x, y):
        return x is y or (x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y))
    return (a.block_size == b.block_size and a.num_kv_heads == b.num_kv_heads and a.head_dim == b.head_dim
            and all(same(getattr(a, n), getattr(b, n)) for n in ("context_lens", "block_tables", "v_scale",
                                                                  "v_cache")))


def decode_int8_partials(q, cache: PagedKVCache, *, grouping: Grouping = "fragment",
                         partition_size: int = PARTITION, pv: str = "int8") -> DecodePartials:
    """paged_attention_decode: per partition m, l, P = exp(S-m)/l, W = P·sV quantized per group,
    PV per 64-token chunk (one wave each), waves summed in order. pv="bf16" swaps in the pv_bf16
    twin (same int8 cache and QK), the PV-only side-by-side comparison."""
    return decode_int8_partials_of(q, (cache,), grouping=grouping, partition_size=partition_size, pv=pv)[0]


def decode_int8_partials_of(q, caches, *, grouping: Grouping = "fragment", partition_size: int = PARTITION,
                            pv: str = "int8") -> list[DecodePartials]:
    """decode_int8_partials of each of ``caches``, caches that hold the same V (``same_v``: a cache
    and its without_smooth_k twin), each sequence's and kv head's V operands made once for all."""
    q = np.asarray(q, np.float32)
    caches = list(caches)
    if not caches or not all(same_v(caches[0], c) for c in caches[1:]):
        raise ArgumentError("decode_int8_partials_of needs one or more caches holding the same V")
    if partition_size % CHUNK:
        raise ArgumentError(f"partition_size {partition_size} is not a multiple of {CHUNK}")
    if pv not in ("int8", "bf16"):
        raise ArgumentError(f"pv must be 'int8' or 'bf16', got {pv!r}")
    num_seqs, num_heads, hd = q.shape
    first = caches[0]
    kvh = first.num_kv_heads
    ratio = num_heads // kvh
    lens = first.context_lens
    n_part = -(-lens.astype(np.int64) // partition_size)
    P = int(n_part.max(initial=1))
    outs = [(np.zeros((num_seqs, num_heads, P, hd), np.float32), np.full((num_seqs, num_heads, P), -np.inf, np.float32),
             np.zeros((num_seqs, num_heads, P), np.float32)) for _ in caches]
    waves = partition_size // CHUNK
    for s in range(num_seqs):
        ctx, T, n = int(lens[s]), int(n_part[s]) * partition_size, int(n_part[s])
        for g in range(kvh):
            heads = slice(g * ratio, (g + 1) * ratio)
            vb, sv = _v_operands(first, s, g, T, pv)
            qq, sq = quantize_int8(q[s, heads])
            svp = np.zeros(T, np.float32)
            svp[:ctx] = sv
            for cache, (tmp, mx, ls) in zip(caches, outs):
                sc = np.full((ratio, T), -np.inf, np.float32)
                sc[:, :ctx] = qk_int8_scores_of(cache, s, g, qq, sq)
                sc = sc.reshape(ratio, -1, partition_size)
                m = sc.max(axis=-1)                                          # finite: every partition has a token
                sc -= m[..., None]
                e = np.exp(sc, out=sc)
                l = e.sum(axis=-1, dtype=np.float32)
                e /= l[..., None]
                w = e.reshape(ratio, T) * svp                                # W = P·sV, 0 past the context
                chunks = _pv_int8(w, vb, grouping) if pv == "int8" else _pv_bf16(w, vb)
                chunks = chunks.reshape(ratio, -1, waves, hd)
                o = chunks[:, :, 0]
                for wv in range(1, waves):                                   # LDS sum in wave order
                    o = o + chunks[:, :, wv]
                tmp[s, heads, :n] = o
                mx[s, heads, :n] = m
                ls[s, heads, :n] = l
    return [DecodePartials(*o) for o in outs]


def reduce_partitions(p: DecodePartials) -> np.ndarray:
    """paged_attention_reduce: M = max m_p, w_p = l_p·exp(m_p - M), out = Σ tmp_p·w_p / Σ w_p."""
    M = p.max_logits.max(axis=-1, keepdims=True)
    wp = p.exp_sums * np.exp(p.max_logits - M)                            # 0 for empty partitions
    return (p.tmp_out * wp[..., None]).sum(axis=-2) / wp.sum(axis=-1)[..., None]


def prefill_int8(q, cache: PagedKVCache, *, grouping: Grouping = "fragment", pv: str = "int8") -> np.ndarray:
    """prefix_prefill: online softmax over 64-token chunks, W = p~·sV (unnormalised) quantized per
    group, o = alpha·o + Σ_j sW_j·acc_j, out = o/l. Chunks wholly past a row's causal limit are exact
    no-ops (p~ = 0, alpha = 1), so every row walks every chunk."""
    q = np.asarray(q, np.float32)
    num_seqs, nq, num_heads, hd = q.shape
    ratio = num_heads // cache.num_kv_heads
    out = np.zeros(q.shape, np.float32)
    for s in range(num_seqs):
        ctx = int(cache.context_lens[s])
        C = -(-ctx // CHUNK)
        kq, sk, vq, sv = gather_int8(cache, s)
        mask = np.zeros((nq, C * CHUNK), bool)
        mask[:, :ctx] = _causal_mask(nq, ctx)
        svp = np.zeros(C * CHUNK, np.float32)
        for g in range(cache.num_kv_heads):
            heads = slice(g * ratio, (g + 1) * ratio)
            svp[:ctx] = sv[:, g]
            vqp = np.zeros((C * CHUNK, hd), np.int8)
            vqp[:ctx] = vq[:, g]
            for q0 in range(0, nq, INT8_QUERY_TILE):                     # a row's math is its own: memory by tile
                q1 = min(nq, q0 + INT8_QUERY_TILE)
                n = q1 - q0
                qq, sq = quantize_int8(q[s, q0:q1, heads].reshape(n * ratio, hd))   # row = i*ratio + h
                sc = np.full((n * ratio, C * CHUNK), -np.inf, np.float32)
                sc[:, :ctx] = qk_int8_scores(qq, sq, kq[:, g], sk[:, g])
                sc[~np.repeat(mask[q0:q1], ratio, axis=0)] = -np.inf
                sc = sc.reshape(-1, C, CHUNK)
                m_run = np.maximum.accumulate(sc.max(axis=-1), axis=1)       # m after each chunk
                p = np.exp(sc - m_run[..., None])                             # p~, 0 where masked
                contrib = _pv_chunks((p * svp.reshape(C, CHUNK)).reshape(-1, C * CHUNK), vqp, grouping, pv)
                psum = p.sum(axis=-1, dtype=np.float32)
                o, l = contrib[:, 0], psum[:, 0]                              # chunk 0 holds token 0
                for c in range(1, C):
                    alpha = np.exp(m_run[:, c - 1] - m_run[:, c])
                    l = alpha * l + psum[:, c]
                    o = alpha[:, None] * o + contrib[:, c]
                out[s, q0:q1, heads] = (o / l[:, None]).reshape(n, ratio, hd)
    return out


def attention_int8_of(q, caches, *, grouping: Grouping = "fragment", partition_size: int = PARTITION,
                      pv: str = "int8") -> list[np.ndarray]:
    """attention_int8 of a decode (3-D q) on each of ``caches``, caches that hold the same V (a cache
    and its without_smooth_k twin): V's operands made once for all, the same bits as one by one."""
    q = np.asarray(q)
    if q.ndim != 3:
        raise ArgumentError(f"attention_int8_of takes a decode's 3-D q, got shape {q.shape}")
    return [reduce_partitions(p) for p in decode_int8_partials_of(q, caches, grouping=grouping,
                                                                   partition_size=partition_size, pv=pv)]


def attention_int8(q, cache: PagedKVCache, *, grouping: Grouping = "fragment",
                   partition_size: int = PARTITION, pv: str = "int8") -> np.ndarray:
    """The kernels' INT8 math: decode (3-D q) through partitions + reduce, prefill (4-D q) online.
    pv="bf16": the same with the pv_bf16 twin's PV (grouping unused)."""
    q = np.asarray(q)
    if q.ndim == 3:
        return reduce_partitions(decode_int8_partials(q, cache, grouping=grouping,
                                                      partition_size=partition_size, pv=pv))
    if q.ndim == 4:
        return prefill_int8(q, cache, grouping=grouping, pv=pv)
    raise ArgumentError(f"q must be 3-D (decode) or 4-D (prefill), got shape {q.shape}")


# elements of the leaves metrics_against's sums are made a leaf at a time in (>= 128: numpy's block)
LEAF = 1 << 15


class MetricsAhead:
    """metrics_against's float64 work that needs no output, begun on a thread while the kernel
    runs: reference ``ref``'s flat float64 copy and its dot with itself, and a float64 buffer of
    ``size`` values for out's copy with its pages touched (a fresh 64 MiB array faults its pages
    in, 2-3 s/GiB on the 2-core VM; here that happens beside the simulation, not after it). The
    caller must not change ``ref`` afterwards. Taken once (``take``): a second metrics_against
    makes its own."""

    def __init__(self, ref: np.ndarray, size: int):
        self.ref = ref
        pool = ThreadPoolExecutor(1)
        self._done = pool.submit(self._make, ref, size, np.geterr())
        pool.shutdown(wait=False)

    @staticmethod
    def _make(ref, size: int, err: dict):
        r, rr = _copy_and_dot(ref, err)
        o = np.empty(size, np.float64)
        o.fill(0.0)
        return r, rr, o

    def take(self, ref, size: int):
        """(r, r @ r, out's buffer) where ``ref`` is the array prepared and ``size`` its size, else None."""
        done, self._done = self._done, None
        if done is None or ref is not self.ref:
            return None
        r, rr, o = done.result()
        return (r, rr, o) if o.size == size and r.size == size else None


def metrics_against(out, refs: dict, ahead: MetricsAhead | None = None) -> dict[str, dict[str, float]]:
    """``metrics(out, ref)`` for each ``refs`` name -> ref, the same numbers bit for bit with fewer
    passes over float64 copies of 2 x 4096 x 8 x 128 values (int8_kv_cache's): out's copy made
    once (its dot too), a ref whose bytes are out's (the kernel matching its INT8 reference) read
    through it, the other refs' copies in one scratch array (for the dots), and |o - r|, its max
    and the sums of it, of its square and of |r| made leaf by leaf in cache (_error_sums) instead
    of as whole arrays. The first other ref's copy and its dot are made on a second thread while
    out's are (each a fresh 8 MiB-plus array whose pages fault in; numpy and the BLAS free the GIL),
    or were made while the kernel ran (``ahead``, MetricsAhead: that ref's copy and dot, and out's
    buffer with its pages in)."""
    out = np.asarray(out)
    refs = {name: np.asarray(ref) for name, ref in refs.items()}
    if any(ref.size != out.size for ref in refs.values()):
        return {name: metrics(out, ref) for name, ref in refs.items()}
    same = {name for name, ref in refs.items() if ref.shape == out.shape and ref.dtype == out.dtype
            and out.dtype.kind == "f" and (_same_memory(ref, out) or _same_bytes(ref, out))}
    other = next((name for name in refs if name not in same), None)
    first = None
    made = ahead.take(refs[other] if other is not None else None, out.size) if ahead is not None else None
    with ThreadPoolExecutor(1) as pool:
        if other is not None and out.size >= PARALLEL_COPY and made is None:
            first = pool.submit(_copy_and_dot, refs[other], np.geterr())
        if made is not None:
            o = made[2]
            np.copyto(o.reshape(out.shape), out)
        else:
            o = np.array(out, np.float64).ravel()
        oo = o @ o
        r, r_rr = first.result() if first is not None else made[:2] if made is not None else (None, None)
    leaf = np.empty((2, min(LEAF, o.size)))
    o_sums = None
    got = {}
    for name, ref in refs.items():
        if name in same:                   # r = o byte for byte: o @ r, r @ r and sum |r| from o
            o_sums = _self_sums(o, oo, leaf) if o_sums is None else o_sums
            r_dot, r_r, (max_abs, l1, sq, r_abs) = oo, oo, o_sums
        else:
            if name == other and r_rr is not None:
                r_r = r_rr
            else:
                r = np.empty_like(o) if r is None else r
                r[:] = ref.ravel()
                r_r = r @ r
            r_dot = o @ r
            max_abs, l1, sq, r_abs = _error_sums(o, r, leaf)
        rms = float(np.sqrt(np.float64(sq / np.intp(o.size))))        # np.mean's sum / count
        got[name] = dict(max_abs=float(max_abs), rms=rms, cos_sim=float(r_dot / np.sqrt(oo * r_r)),
                         rel_l1=float(l1 / r_abs))
    return got


# values from which metrics_against copies a ref beside out (below, a thread costs more than it saves)
PARALLEL_COPY = 1 << 16


def _copy_and_dot(ref: np.ndarray, err: dict) -> tuple[np.ndarray, np.float64]:
    """A ref's float64 copy, flat, and its dot with itself (metrics_against's r and r @ r), under
    the caller's floating-point error settings ``err`` (np.errstate is per thread)."""
    with np.errstate(**err):
        r = np.array(ref, np.float64).ravel()
        return r, r @ r


def _self_sums(o: np.ndarray, oo, leaf: np.ndarray) -> tuple:
    """_error_sums(o, o, leaf): where o @ o is finite no element is an inf or a NaN (each square is
    at most the sum), so every o - o is +0 and the max and the sums of |o - o| and its square are
    +0 whatever the order; only the sum of |o| is made, down the same tree. Else the whole pass."""
    if not np.isfinite(oo):
        return _error_sums(o, o, leaf)
    zero = np.float64(0.0)

    def node(lo, hi):
        n = hi - lo
        if n <= LEAF:
            return np.add.reduce(np.abs(o[lo:hi], out=leaf[1, :n]))
        half = n // 2
        half -= half % 8
        return node(lo, lo + half) + node(lo + half, hi)
    return zero, zero, zero, node(0, o.size)


def _same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` are the same bytes: one start, shape, strides and dtype."""
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0] and a.shape == b.shape
            and a.strides == b.strides and a.dtype == b.dtype)


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays of one shape and float dtype hold the same bytes; a difference among the
    first elements answers without reading the rest (a ref off by noise differs at once)."""
    u = f"u{a.itemsize}"
    a, b = a.reshape(-1).view(u), b.reshape(-1).view(u)
    return np.array_equal(a[:1024], b[:1024]) and np.array_equal(a, b)


def _error_sums(o: np.ndarray, r: np.ndarray, leaf: np.ndarray) -> tuple:
    """(max |o - r| (at least 0), Σ|o - r|, Σ(o - r)², Σ|r|) of two float64 vectors, each sum the
    bits np.add.reduce gives over the whole array: its pairwise tree (halves rounded down to 8
    elements, down to blocks of 128) split here the same way down to LEAF elements, each leaf
    summed by np.add.reduce in ``leaf`` (two float64 rows of LEAF) while in cache."""
    def node(lo, hi):
        n = hi - lo
        if n <= LEAF:
            d = np.subtract(o[lo:hi], r[lo:hi], out=leaf[0, :n])
            np.abs(d, out=d)
            m = np.maximum.reduce(d, initial=0.0)
            s1 = np.add.reduce(d)
            s2 = np.add.reduce(np.multiply(d, d, out=d))
            return m, s1, s2, np.add.reduce(np.abs(r[lo:hi], out=leaf[1, :n]))
        half = n // 2
        half -= half % 8
        a, b = node(lo, lo + half), node(lo + half, hi)
        return np.maximum(a[0], b[0]), a[1] + b[1], a[2] + b[2], a[3] + b[3]
    return node(0, o.size)


def metrics(out, ref) -> dict[str, float]:
    """Error of `out` against `ref` (SageAttention's definitions): max_abs, rms (RMSE),
    cos_sim = ΣOO'/√(ΣO²ΣO'²), rel_l1 = Σ|O-O'|/Σ|O| (O the reference)."""
    o = np.array(out, np.float64).ravel()           # copies: the passes below reuse them in place
    r = np.array(ref, np.float64).ravel()
    cos_sim = float(o @ r / np.sqrt((o @ o) * (r @ r)))
    d = np.subtract(o, r, out=o)
    ad = np.abs(d, out=d)
    max_abs, l1 = float(ad.max(initial=0.0)), ad.sum()
    rms = float(np.sqrt(np.mean(np.multiply(ad, ad, out=ad))))     # |d|^2 = d^2, bit for bit
    return dict(max_abs=max_abs, rms=rms, cos_sim=cos_sim, rel_l1=float(l1 / np.abs(r, out=r).sum()))
