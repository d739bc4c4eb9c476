"""qk_int8: S[q][t] = (sum_d Qq[q][d] * Kq[t][d]) * sQ[q] * sK[t] * (1/sqrt(head_dim)) on the int8
16x16x32 matrix instruction; Q is quantized per row in the kernel. Twin of kernels_hip/qk_int8.hip;
the algorithm is ALGORITHMS.md "qk_int8", the shared pieces kernels_py/int8_attention.py.

qk_int8(q, k_cache, k_scale, block_table, s_out, *, context_len, head_dim, block_size)
  q[16][head_dim] f32, k_cache[num_blocks][num_kv_heads][head_dim/16][block_size][16] i8,
  k_scale[num_blocks][num_kv_heads][block_size] f32, block_table[] i32, s_out[16][context_len] f32.
One workgroup of 4 waves; wave warpid takes the 64-token chunks warpid + 4*iter. Tokens at or past
context_len load nothing and are not written. (kv head ``kvh`` of a cache of ``num_kv_heads``; the
HIP twin's cache holds one.)
"""
from __future__ import annotations

import numpy as np

from .int8_attention import (NWARPS, REGS, TLOOP, TOKENS_PER_CHUNK, Config, d_col, d_row, load_q_operand, q_row, qk_chunk,
                             quantize_q_row)

ROWS = 16          # M rows of every tile: the GQA query heads (decode) or query tokens (prefill)


def qk_int8_chunk(w, qa, sq, k_cache, k_scale, block_table, context_len, s_out, chunk_start, rowid, lane16id, *,
                  tail, cfg):
    """S of one 64-token chunk, stored from the QK output layout. tail: the chunk reaches past
    context_len."""
    s = [None] * TLOOP
    qk_chunk(w, s, qa, sq, k_cache, k_scale, block_table, cfg.NUM_KV_HEADS, cfg.KVH, chunk_start, context_len, rowid,
             lane16id, tail=tail, cfg=cfg)
    qrow = d_row(w, rowid, lane16id, REGS, cfg=cfg)
    token_offset = d_col(w, rowid, lane16id, REGS, cfg=cfg)
    for td in range(TLOOP):
        t = chunk_start + 16 * td + token_offset
        for i in range(4):
            with w.if_(not tail or t[i] < context_len):
                (s_out + qrow[i] * context_len + t[i]).store(s[td][i])


def qk_int8(w, q, k_cache, k_scale, block_table, s_out, *, context_len, head_dim, block_size, num_kv_heads=1, kvh=0,
            max_blocks=None, formula="derived"):
    cfg = Config(w, head_dim, block_size, formula, num_kv_heads=num_kv_heads, kvh=kvh)
    q, k_cache, k_scale, s_out = (w.view(x) for x in (q, k_cache, k_scale, s_out))
    block_table = w.view(block_table, (block_table.array.size,))
    q_lds = w.view(w.shared("q_lds", (ROWS, cfg.Q_STRIDE), np.int8))        # Qq[row][head element]
    sq_lds = w.view(w.shared("sq_lds", (ROWS,), np.float32))                 # sQ[row]

    warpid = w.wave_id
    lane = w.lane_id
    rowid = lane // 16
    lane16id = lane % 16

    # Q: wave warpid quantizes 4 rows, q_row(warpid, rowid).
    row = q_row(warpid, rowid)
    quantize_q_row(w, q + row * head_dim, True, lane16id, q_lds[row], sq_lds[row], cfg=cfg)
    w.barrier()
    qa = [None] * cfg.QKHELOOP
    sq = w.undef("f32", 4)
    load_q_operand(w, qa, sq, q_lds, sq_lds, rowid, lane16id, cfg=cfg)

    chunk = warpid
    while (chunk + 1) * TOKENS_PER_CHUNK <= context_len:
        qk_int8_chunk(w, qa, sq, k_cache, k_scale, block_table, context_len, s_out, chunk * TOKENS_PER_CHUNK, rowid,
                      lane16id, tail=False, cfg=cfg)
        chunk += NWARPS
    if chunk * TOKENS_PER_CHUNK < context_len:      # this wave owns the partial last chunk
        qk_int8_chunk(w, qa, sq, k_cache, k_scale, block_table, context_len, s_out, chunk * TOKENS_PER_CHUNK, rowid,
                      lane16id, tail=True, cfg=cfg)
