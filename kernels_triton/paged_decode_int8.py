"""Paged-attention decode over an INT8 KV cache: one program per (sequence, 256-token partition,
kv head), the query heads of the kv head as MFMA rows (padded to 16).

The math is kernels_py's decode (kernels_py/reference/attention.py decode_int8_partials): Q
quantized per row, S = (Qq·Kqᵀ)·sQ·sK/sqrt(d) with per-token K scales, m and l over the
partition, P = exp(S - m)/l, the per-token V scale folded into P (W = P·sV), W quantized to int8
per group, PV as int8 dots whose int32 sums are dequantized by the group's scale.

The grouping is the point. Each 64-token chunk is two int8 dots of 32 tokens, dot j taking the
tokens 16r + 8j + b (r < 4, b < 8): the K set a 16-byte V load per lane row feeds MFMA j.
GROUPING=0 (fragment) takes each W scale over exactly dot j's tokens. GROUPING=1 (contiguous)
takes it over tokens 0-31 and 32-63 of the chunk and applies group j's scale to dot j, so half of
each dot's tokens carry a scale computed from tokens the dot never sees."""
from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import libdevice
from triton.language.extra.hip import libdevice as hip_libdevice

FRAGMENT, CONTIGUOUS = 0, 1
ROWS = 16                # MFMA rows: the query heads of one kv head, padded
CHUNK = 64
PARTITION = 256


@triton.jit
def _tokens(part, c, J: tl.constexpr):
    """The 32 tokens of dot J in chunk c of partition part: 16r + 8J + b for column 8r + b."""
    i = tl.arange(0, 32)
    return part * 256 + c * 64 + 16 * (i // 8) + 8 * J + i % 8


@triton.jit
def _scores(qq, sq, k_cache, k_scale, bt_row, t, ctx, g, NUM_KV_HEADS: tl.constexpr,
            HEAD_DIM: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    """S [ROWS, 32] of tokens t (-inf at and past ctx)."""
    live = t < ctx
    blk = tl.load(bt_row + t // BLOCK_SIZE, mask=live, other=0)
    slot = t % BLOCK_SIZE
    d = tl.arange(0, HEAD_DIM)
    # k_cache [num_blocks, kv_heads, head_dim/16, block_size, 16]
    base = (blk * NUM_KV_HEADS + g) * (HEAD_DIM * BLOCK_SIZE) + slot * 16
    kq = tl.load(k_cache + base[None, :] + (d // 16)[:, None] * (BLOCK_SIZE * 16) + (d % 16)[:, None],
                 mask=live[None, :], other=0)
    sk = tl.load(k_scale + (blk * NUM_KV_HEADS + g) * BLOCK_SIZE + slot, mask=live, other=0.0)
    acc = tl.dot(qq, kq, out_dtype=tl.int32).to(tl.float32)
    s = acc * sq[:, None] * sk[None, :] * (1.0 / tl.sqrt(HEAD_DIM * 1.0))
    return tl.where(live[None, :], s, float("-inf"))


@triton.jit
def _rint_ocml(x):
    return libdevice.rint(x)


@triton.jit
def _rint_llrint(x):
    return libdevice.llrint(x).to(tl.float32)


# round half to even (the reference's np.rint); triton 3.6's HIP libdevice has only llrint
_rint = _rint_ocml if hasattr(hip_libdevice, "rint") else _rint_llrint


@triton.jit
def _quantize(w, inv, live):
    q = tl.minimum(tl.maximum(_rint(w * inv), -127.0), 127.0)
    return tl.where(live, q, 0.0).to(tl.int8)


@triton.jit
def paged_decode_int8(q, k_cache, v_cache, k_scale, v_scale, block_tables, context_lens,
                      exp_sums, max_logits, tmp_out,
                      NUM_HEADS: tl.constexpr, NUM_KV_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr,
                      BLOCK_SIZE: tl.constexpr, MAX_BLOCKS: tl.constexpr, MAX_PARTS: tl.constexpr,
                      GROUPING: tl.constexpr):
    seq = tl.program_id(0)
    part = tl.program_id(1)
    g = tl.program_id(2)
    RATIO: tl.constexpr = NUM_HEADS // NUM_KV_HEADS
    ctx = tl.load(context_lens + seq)
    if part * 256 < ctx:
        rows = tl.arange(0, 16)
        heads = g * RATIO + rows
        hrow = rows < RATIO
        d = tl.arange(0, HEAD_DIM)
        qf = tl.load(q + (seq * NUM_HEADS + heads)[:, None] * HEAD_DIM + d[None, :], mask=hrow[:, None], other=0.0)
        qmax = tl.max(tl.abs(qf), 1)
        qlive = qmax >= 127.0 / 3.4028234663852886e38
        sq = tl.where(qlive, qmax / 127.0, 0.0)
        qq = _quantize(qf, tl.where(qlive, 127.0 / qmax, 0.0)[:, None], hrow[:, None])
        bt_row = block_tables + seq * MAX_BLOCKS

        # m and l over the partition
        m = tl.full((16,), float("-inf"), tl.float32)
        for c in range(4):
            s0 = _scores(qq, sq, k_cache, k_scale, bt_row, _tokens(part, c, 0), ctx, g, NUM_KV_HEADS,
                         HEAD_DIM, BLOCK_SIZE)
            s1 = _scores(qq, sq, k_cache, k_scale, bt_row, _tokens(part, c, 1), ctx, g, NUM_KV_HEADS,
                         HEAD_DIM, BLOCK_SIZE)
            m = tl.maximum(m, tl.maximum(tl.max(s0, 1), tl.max(s1, 1)))
        l = tl.zeros((16,), tl.float32)
        for c in range(4):
            s0 = _scores(qq, sq, k_cache, k_scale, bt_row, _tokens(part, c, 0), ctx, g, NUM_KV_HEADS,
                         HEAD_DIM, BLOCK_SIZE)
            s1 = _scores(qq, sq, k_cache, k_scale, bt_row, _tokens(part, c, 1), ctx, g, NUM_KV_HEADS,
                         HEAD_DIM, BLOCK_SIZE)
            l += tl.sum(tl.exp(s0 - m[:, None]), 1) + tl.sum(tl.exp(s1 - m[:, None]), 1)

        o = tl.zeros((16, HEAD_DIM), tl.float32)
        col = tl.arange(0, 32)
        for c in range(4):
            t0 = _tokens(part, c, 0)
            t1 = _tokens(part, c, 1)
            s0 = _scores(qq, sq, k_cache, k_scale, bt_row, t0, ctx, g, NUM_KV_HEADS, HEAD_DIM, BLOCK_SIZE)
            s1 = _scores(qq, sq, k_cache, k_scale, bt_row, t1, ctx, g, NUM_KV_HEADS, HEAD_DIM, BLOCK_SIZE)
            live0 = t0 < ctx
            live1 = t1 < ctx
            b0 = tl.load(bt_row + t0 // BLOCK_SIZE, mask=live0, other=0)
            b1 = tl.load(bt_row + t1 // BLOCK_SIZE, mask=live1, other=0)
            sv0 = tl.load(v_scale + (b0 * NUM_KV_HEADS + g) * BLOCK_SIZE + t0 % BLOCK_SIZE, mask=live0, other=0.0)
            sv1 = tl.load(v_scale + (b1 * NUM_KV_HEADS + g) * BLOCK_SIZE + t1 % BLOCK_SIZE, mask=live1, other=0.0)
            # W = P·sV: the V scale folded into P
            w0 = tl.exp(s0 - m[:, None]) / l[:, None] * sv0[None, :]
            w1 = tl.exp(s1 - m[:, None]) / l[:, None] * sv1[None, :]
            a0 = tl.abs(w0)
            a1 = tl.abs(w1)
            if GROUPING == 0:        # fragment: each scale over its own dot's tokens
                amax0 = tl.max(a0, 1)
                amax1 = tl.max(a1, 1)
            else:                    # contiguous: tokens 0-31 (columns 0-15 of both dots) and 32-63
                first = (col < 16)[None, :]
                amax0 = tl.maximum(tl.max(tl.where(first, a0, 0.0), 1), tl.max(tl.where(first, a1, 0.0), 1))
                amax1 = tl.maximum(tl.max(tl.where(first, 0.0, a0), 1), tl.max(tl.where(first, 0.0, a1), 1))
            live_a0 = amax0 >= 127.0 / 3.4028234663852886e38
            live_a1 = amax1 >= 127.0 / 3.4028234663852886e38
            inv0 = tl.where(live_a0, 127.0 / amax0, 0.0)
            inv1 = tl.where(live_a1, 127.0 / amax1, 0.0)
            sw0 = tl.where(live_a0, amax0 / 127.0, 0.0)
            sw1 = tl.where(live_a1, amax1 / 127.0, 0.0)
            if GROUPING == 0:
                wq0 = _quantize(w0, inv0[:, None], live0[None, :])
                wq1 = _quantize(w1, inv1[:, None], live1[None, :])
            else:
                first = (col < 16)[None, :]
                wq0 = _quantize(w0, tl.where(first, inv0[:, None], inv1[:, None]), live0[None, :])
                wq1 = _quantize(w1, tl.where(first, inv0[:, None], inv1[:, None]), live1[None, :])
            # v_cache [num_blocks, kv_heads, head_dim, block_size]
            vb0 = (b0 * NUM_KV_HEADS + g) * (HEAD_DIM * BLOCK_SIZE) + t0 % BLOCK_SIZE
            vb1 = (b1 * NUM_KV_HEADS + g) * (HEAD_DIM * BLOCK_SIZE) + t1 % BLOCK_SIZE
            vq0 = tl.load(v_cache + vb0[:, None] + d[None, :] * BLOCK_SIZE, mask=live0[:, None], other=0)
            vq1 = tl.load(v_cache + vb1[:, None] + d[None, :] * BLOCK_SIZE, mask=live1[:, None], other=0)
            acc0 = tl.dot(wq0, vq0, out_dtype=tl.int32).to(tl.float32)
            acc1 = tl.dot(wq1, vq1, out_dtype=tl.int32).to(tl.float32)
            o += acc0 * sw0[:, None] + acc1 * sw1[:, None]

        row = (seq * NUM_HEADS + heads) * MAX_PARTS + part
        tl.store(exp_sums + row, l, mask=hrow)
        tl.store(max_logits + row, m, mask=hrow)
        tl.store(tmp_out + row[:, None] * HEAD_DIM + d[None, :], o, mask=hrow[:, None])


def launch(q, cache, grouping: str = "fragment", *, num_warps: int = 1):
    """Run the decode on gfxsim for q [num_seqs, num_heads, head_dim] f32 against a
    kernels_py PagedKVCache (its buffers tagged with seq/token, kernels_py.host.buffers): returns
    (outputs by parameter name — tmp_out, max_logits, exp_sums as decode_int8_partials gives
    them —, the Run)."""
    import numpy as np

    from gfxsim import Buffer
    from gfxsim.errors import ArgumentError
    from gfxsim.triton import run
    from kernels_py.host.buffers import cache_buffers

    if grouping not in ("fragment", "contiguous"):
        raise ArgumentError(f"grouping must be 'fragment' or 'contiguous', got {grouping!r}")
    q = np.ascontiguousarray(q, np.float32)
    S, H, D = q.shape
    kvh = cache.num_kv_heads
    if H % kvh or H // kvh > ROWS:
        raise ArgumentError(f"{H} query heads over {kvh} kv heads: at most {ROWS} query heads per kv head")
    parts = -(-int(np.max(cache.context_lens)) // PARTITION)
    b = cache_buffers(cache)
    outs, r, _ = run(paged_decode_int8, (S, parts, kvh), Buffer("q", q), b["k_cache"], b["v_cache"], b["k_scale"],
                     b["v_scale"], b["block_tables"], b["context_lens"], np.zeros((S, H, parts), np.float32),
                     np.full((S, H, parts), -np.inf, np.float32), np.zeros((S, H, parts, D), np.float32),
                     num_warps=num_warps, NUM_HEADS=H, NUM_KV_HEADS=kvh, HEAD_DIM=D, BLOCK_SIZE=cache.block_size,
                     MAX_BLOCKS=cache.block_tables.shape[1], MAX_PARTS=parts,
                     GROUPING=FRAGMENT if grouping == "fragment" else CONTIGUOUS)
    return outs, r
