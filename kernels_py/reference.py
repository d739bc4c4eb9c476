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
  Vq, no W scale) on the same int8 cache and QK: the seed's PV-only comparison.
The pieces (quantize_w, pv_int8_chunks, qk_int8_scores, decode_int8_partials, reduce_partitions)
are what single kernel stages compute, for stage-by-stage comparisons with the twins.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import ml_dtypes
import numpy as np

from kernels_py.int8_cache_ref import PagedKVCache, gather_int8, quantize_int8, quantize_with_amax

Grouping = Literal["fragment", "contiguous"]
CHUNK = 64          # tokens per wave: two K=32 MMACs
PARTITION = 256     # decode partition: 4 waves x 64 tokens


def _split(q: np.ndarray, k: np.ndarray, context_lens):
    """Common shape checks; returns (q4 [S, nq, H, D], lens, ratio)."""
    q4 = q[:, None] if q.ndim == 3 else q
    if q4.ndim != 4 or k.ndim != 4:
        raise ValueError(f"q must be 3-D (decode) or 4-D (prefill) and k 4-D; got {q.shape}, {k.shape}")
    lens = np.asarray(context_lens, np.int64)
    num_heads, kvh = q4.shape[2], k.shape[2]
    if num_heads % kvh:
        raise ValueError(f"num_heads {num_heads} is not a multiple of num_kv_heads {kvh}")
    if np.any(lens < q4.shape[1]):
        raise ValueError(f"context_lens {lens.tolist()} shorter than num_queries {q4.shape[1]}")
    return q4, lens, num_heads // kvh


def _causal_mask(nq: int, ctx: int) -> np.ndarray:
    """[nq, ctx] True where query i (at position ctx - nq + i) may see token t."""
    return np.arange(ctx)[None, :] <= (ctx - nq + np.arange(nq))[:, None]


def attention_fp32(q, k, v, context_lens) -> np.ndarray:
    """Exact attention (float64 inside, returned as f32)."""
    q4, lens, ratio = _split(np.asarray(q), np.asarray(k), context_lens)
    out = np.zeros(q4.shape, np.float64)
    scale = 1.0 / np.sqrt(q4.shape[-1])
    for s, ctx in enumerate(lens):
        mask = _causal_mask(q4.shape[1], ctx)
        for h in range(q4.shape[2]):
            kk = np.asarray(k[s, :ctx, h // ratio], np.float64)
            vv = np.asarray(v[s, :ctx, h // ratio], np.float64)
            sc = np.where(mask, q4[s, :, h].astype(np.float64) @ kk.T * scale, -np.inf)
            p = np.exp(sc - sc.max(axis=1, keepdims=True))
            out[s, :, h] = (p @ vv) / p.sum(axis=1, keepdims=True)
    return out.reshape(np.shape(q)).astype(np.float32)


def _bf16(x) -> np.ndarray:
    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def attention_bf16(q, k, v, context_lens) -> np.ndarray:
    """BF16 kernel math: q, k, v rounded to bf16; scores and softmax in fp32 (one softmax over the
    whole row); P rounded to bf16; PV accumulated in fp32. Returns f32."""
    q4, lens, ratio = _split(np.asarray(q), np.asarray(k), context_lens)
    out = np.zeros(q4.shape, np.float32)
    scale = np.float32(1.0 / np.sqrt(q4.shape[-1]))
    for s, ctx in enumerate(lens):
        mask = _causal_mask(q4.shape[1], ctx)
        for h in range(q4.shape[2]):
            kk, vv = _bf16(k[s, :ctx, h // ratio]), _bf16(v[s, :ctx, h // ratio])
            sc = np.where(mask, (_bf16(q4[s, :, h]) @ kk.T) * scale, np.float32(-np.inf))
            e = np.exp(sc - sc.max(axis=1, keepdims=True))
            p = _bf16(e / e.sum(axis=1, keepdims=True))
            out[s, :, h] = p @ vv
    return out.reshape(np.shape(q))


# ---------------------------------------------------------------------------------------------
# The quantized math, piece by piece (each piece is what one kernel stage computes).

def mmac_set(t) -> np.ndarray:
    """Which K=32 MMAC of its 64-token chunk consumes token t: lane row r loads tokens 16r..16r+15
    with one 16-byte load and bytes 8j..8j+7 feed MMAC j, so j = (t % 16) // 8."""
    return (np.asarray(t) % 16) // 8


def contiguous_group(t) -> np.ndarray:
    """The seed's buggy scale group: tokens 0-31 and 32-63 of each chunk."""
    return (np.asarray(t) % CHUNK) // 32


def quantize_w(w: np.ndarray, grouping: Grouping) -> tuple[np.ndarray, np.ndarray]:
    """Quantize W [..., T] (T a multiple of 64) per (row, chunk, group).

    Returns (wq int8 [..., T], sw f32 [..., T/64, 2]) where sw[..., c, j] is the scale that
    multiplies MMAC j's int32 sum for chunk c. "fragment": group j is MMAC j's token set.
    "contiguous": token t is quantized with the scale of its contiguous group t//32 and that
    group's scale is applied to MMAC j = group, so half of each MMAC's tokens carry a scale from
    the other group (the seed's bug).
    """
    w = np.asarray(w, np.float32)
    *lead, T = w.shape
    if T % CHUNK:
        raise ValueError(f"W has {T} tokens, not a multiple of {CHUNK}")
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
    raise ValueError(f"grouping must be 'fragment' or 'contiguous', got {grouping!r}")


def pv_int8_chunks(w: np.ndarray, vq: np.ndarray, grouping: Grouping) -> np.ndarray:
    """Per-chunk PV contributions `acc_0*sW_0 + acc_1*sW_1` (fp32, j = 0 then 1).

    w [rows, T] f32 (W = 0 for masked tokens), vq [T, head_dim] int8 -> [rows, T/64, head_dim] f32.
    acc_j sums Wq*Vq over MMAC j's 32 tokens exactly (|acc| <= 32*127*127, exact in float64).
    """
    wq, sw = quantize_w(w, grouping)
    rows, T = wq.shape
    C = T // CHUNK
    a = wq.reshape(rows, C, 4, 2, 8).transpose(1, 3, 0, 2, 4).reshape(C, 2, rows, 32)
    b = vq.reshape(C, 4, 2, 8, -1).transpose(0, 2, 1, 3, 4).reshape(C, 2, 32, -1)
    acc = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)   # [C, 2, rows, D]
    sw = sw.transpose(1, 2, 0)[..., None]                                      # [C, 2, rows, 1]
    return (acc[:, 0] * sw[:, 0] + acc[:, 1] * sw[:, 1]).transpose(1, 0, 2)


def pv_bf16_chunks(w: np.ndarray, vq: np.ndarray) -> np.ndarray:
    """The pv_bf16 twin's per-chunk sums: W rounded to bf16, Vq exact in bf16, fp32 accumulation, no
    W scale. Same shapes as pv_int8_chunks."""
    rows, T = w.shape
    C = T // CHUNK
    a = _bf16(w).reshape(rows, C, CHUNK).transpose(1, 0, 2)
    return (a @ vq.reshape(C, CHUNK, -1).astype(np.float32)).transpose(1, 0, 2)


def _pv_chunks(w, vq, grouping: Grouping, pv: str) -> np.ndarray:
    if pv == "int8":
        return pv_int8_chunks(w, vq, grouping)
    if pv == "bf16":
        return pv_bf16_chunks(w, vq)
    raise ValueError(f"pv must be 'int8' or 'bf16', got {pv!r}")


def qk_int8_scores(qq: np.ndarray, sq: np.ndarray, kq: np.ndarray, sk: np.ndarray) -> np.ndarray:
    """S = (Qq·Kqᵀ)·sQ·sK·(1/sqrt(d)): exact int dot, dequantize first, then the softmax scale."""
    acc = (qq.astype(np.float64) @ kq.T.astype(np.float64)).astype(np.float32)
    return acc * sq[:, None] * sk[None, :] * np.float32(1.0 / np.sqrt(qq.shape[-1]))


@dataclass(frozen=True)
class DecodePartials:
    """What paged_attention_decode writes, per (seq, head, partition); partitions past a sequence's
    context have max_logits -inf, exp_sums 0, tmp_out 0."""
    tmp_out: np.ndarray      # [num_seqs, num_heads, max_partitions, head_dim] f32
    max_logits: np.ndarray   # [num_seqs, num_heads, max_partitions] f32  (m per partition)
    exp_sums: np.ndarray     # [num_seqs, num_heads, max_partitions] f32  (l per partition)


def decode_int8_partials(q, cache: PagedKVCache, *, grouping: Grouping = "fragment",
                         partition_size: int = PARTITION, pv: str = "int8") -> DecodePartials:
    """paged_attention_decode: per partition m, l, P = exp(S-m)/l, W = P·sV quantized per group,
    PV per 64-token chunk (one wave each), waves summed in order. pv="bf16" swaps in the pv_bf16
    twin (same int8 cache and QK), the seed's side-by-side comparison."""
    q = np.asarray(q, np.float32)
    if partition_size % CHUNK:
        raise ValueError(f"partition_size {partition_size} is not a multiple of {CHUNK}")
    num_seqs, num_heads, hd = q.shape
    ratio = num_heads // cache.num_kv_heads
    lens = cache.context_lens
    n_part = -(-lens.astype(np.int64) // partition_size)
    P = int(n_part.max(initial=1))
    tmp = np.zeros((num_seqs, num_heads, P, hd), np.float32)
    mx = np.full((num_seqs, num_heads, P), -np.inf, np.float32)
    ls = np.zeros((num_seqs, num_heads, P), np.float32)
    waves = partition_size // CHUNK
    for s in range(num_seqs):
        ctx, T = int(lens[s]), int(n_part[s]) * partition_size
        kq, sk, vq, sv = gather_int8(cache, s)
        for g in range(cache.num_kv_heads):
            heads = slice(g * ratio, (g + 1) * ratio)
            qq, sq = quantize_int8(q[s, heads])
            sc = np.full((ratio, T), -np.inf, np.float32)
            sc[:, :ctx] = qk_int8_scores(qq, sq, kq[:, g], sk[:, g])
            sc = sc.reshape(ratio, -1, partition_size)
            m = sc.max(axis=-1)                                          # finite: every partition has a token
            e = np.exp(sc - m[..., None])
            l = e.sum(axis=-1, dtype=np.float32)
            svp = np.zeros(T, np.float32)
            svp[:ctx] = sv[:, g]
            w = (e / l[..., None]).reshape(ratio, T) * svp               # W = P·sV, 0 past the context
            vqp = np.zeros((T, hd), np.int8)
            vqp[:ctx] = vq[:, g]
            chunks = _pv_chunks(w, vqp, grouping, pv).reshape(ratio, -1, waves, hd)
            o = chunks[:, :, 0]
            for wv in range(1, waves):                                   # LDS sum in wave order
                o = o + chunks[:, :, wv]
            tmp[s, heads, :n_part[s]] = o
            mx[s, heads, :n_part[s]] = m
            ls[s, heads, :n_part[s]] = l
    return DecodePartials(tmp, mx, ls)


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
            qq, sq = quantize_int8(q[s, :, heads].reshape(nq * ratio, hd))       # row = i*ratio + h
            sc = np.full((nq * ratio, C * CHUNK), -np.inf, np.float32)
            sc[:, :ctx] = qk_int8_scores(qq, sq, kq[:, g], sk[:, g])
            sc[~np.repeat(mask, ratio, axis=0)] = -np.inf
            sc = sc.reshape(-1, C, CHUNK)
            m_run = np.maximum.accumulate(sc.max(axis=-1), axis=1)           # m after each chunk
            p = np.exp(sc - m_run[..., None])                                 # p~, 0 where masked
            svp[:ctx] = sv[:, g]
            vqp = np.zeros((C * CHUNK, hd), np.int8)
            vqp[:ctx] = vq[:, g]
            contrib = _pv_chunks((p * svp.reshape(C, CHUNK)).reshape(-1, C * CHUNK), vqp, grouping, pv)
            psum = p.sum(axis=-1, dtype=np.float32)
            o, l = contrib[:, 0], psum[:, 0]                                  # chunk 0 holds token 0
            for c in range(1, C):
                alpha = np.exp(m_run[:, c - 1] - m_run[:, c])
                l = alpha * l + psum[:, c]
                o = alpha[:, None] * o + contrib[:, c]
            out[s, :, heads] = (o / l[:, None]).reshape(nq, ratio, hd)
    return out


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
    raise ValueError(f"q must be 3-D (decode) or 4-D (prefill), got shape {q.shape}")


def metrics(out, ref) -> dict[str, float]:
    """Error of `out` against `ref` (SageAttention's definitions): max_abs, rms (RMSE),
    cos_sim = ΣOO'/√(ΣO²ΣO'²), rel_l1 = Σ|O-O'|/Σ|O| (O the reference)."""
    o = np.asarray(out, np.float64).ravel()
    r = np.asarray(ref, np.float64).ravel()
    d = o - r
    return dict(max_abs=float(np.abs(d).max(initial=0.0)), rms=float(np.sqrt(np.mean(d * d))),
                cos_sim=float(o @ r / np.sqrt((o @ o) * (r @ r))),
                rel_l1=float(np.abs(d).sum() / np.abs(r).sum()))
