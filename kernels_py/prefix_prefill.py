"""prefix_prefill: new query tokens attend causally over the paged INT8 cache (the prefix and the
new tokens themselves), with an online softmax; W = p~ * sV is quantized per scale group as in
pv_int8. Twin of kernels_hip/prefix_prefill.hip; the algorithm is ALGORITHMS.md "prefix_prefill",
the shared pieces kernels_py/int8_attention.py.

prefix_prefill(q, k_cache, v_cache, k_scale, v_scale, block_table, out, *, context_len, query_len,
               num_heads, num_kv_heads, head_dim, block_size, grouping)
  q[query_len][num_heads][head_dim] f32: the new tokens, already written to the cache, at positions
  context_len - query_len .. context_len - 1; block_table[] i32 of the sequence; out like q.
  Grid (ceil(query_len / 64), num_heads), 4 waves: wave warpid owns the 16 query rows
  16*(4*blockIdx.x + warpid) .. of query head blockIdx.y (kv head h / ratio). Query row qi at
  position pos = context_len - query_len + qi sees the tokens t <= pos. The waves share no rows:
  no barrier, no LDS sum. (HIP: grouping "fragment" only.)
"""
from __future__ import annotations

import numpy as np

from .int8_attention import (NWARPS, REGS, TLOOP, TOKENS_PER_CHUNK, W_STRIDE, Config, d_col, d_row, load_q_operand, q_row,
                             pv_chunk, qk_chunk, quantize_q_row, quantize_w, row_max, row_sum, scale_group, tile_slot)
from .qk_int8 import ROWS


def prefix_prefill_chunk(w, o, m, l, row_end, qa, sq, k_cache, v_cache, k_scale, v_scale, block_table, num_kv_heads,
                         kvh, chunk_start, wave_end, w_lds, rowid, lane16id, *, grouping, tail, cfg):
    """One 64-token chunk of a wave: S, the online-softmax update of m and l, W, o = alpha*o + PV.
    tail: the chunk reaches past wave_end (the tokens any of the wave's rows sees)."""
    s = [None] * TLOOP
    qk_chunk(w, s, qa, sq, k_cache, k_scale, block_table, num_kv_heads, kvh, chunk_start, wave_end, rowid, lane16id,
             tail=tail, cfg=cfg)
    token_offset = d_col(w, rowid, lane16id, REGS, cfg=cfg)
    for td in range(TLOOP):        # causal mask, with a -inf that still names its row and token: the
        # token's V is loaded for the wave's other rows, so its zero W must say which token it is
        s[td] = w.select(chunk_start + 16 * td + token_offset < row_end, s[td], s[td] - np.inf)

    # m_new = max(m, rowmax), alpha = exp(m - m_new), p~ = exp(s - m_new), l = alpha*l + sum p~.
    rowmax, rowsum = w.undef("f32", 4), w.undef("f32", 4)
    row_max(w, rowmax, s, rowid, lane16id, cfg=cfg)
    m_new = w.max(m, rowmax)          # finite: token 0 of chunk 0 is seen by every row
    alpha = w.exp(m - m_new)          # m = -inf before the first chunk: alpha = 0
    p = [w.exp(s[td] - m_new) for td in range(TLOOP)]
    row_sum(w, rowsum, p, rowid, lane16id, cfg=cfg)
    l[:] = alpha * l + rowsum
    m[:] = m_new

    # W = p~ * sV; masked tokens have p~ = 0, tokens at or past wave_end load no scale.
    W, sw = [None] * TLOOP, [None] * 2
    for td in range(TLOOP):
        tile_start = chunk_start + 16 * td
        W[td] = w.zeros("f32", 4)
        live = not tail or tile_start < wave_end
        if not w.any(live):
            continue
        with w.if_(live):
            slot0 = tile_slot(w, block_table, num_kv_heads, kvh, tile_start, cfg=cfg)
            for i in range(4):
                with w.if_(not tail or tile_start + token_offset[i] < wave_end):
                    W[td][i] = p[td][i] * (v_scale + slot0 + token_offset[i]).load()
    quantize_w(w, sw, W, w_lds, rowid, lane16id, grouping=grouping, cfg=cfg)       # (HIP: between __syncwave()s)
    for dt in range(cfg.DTILES):
        o[dt] *= alpha
    pv_chunk(w, o, w_lds, sw, v_cache, block_table, num_kv_heads, kvh, chunk_start, wave_end, rowid, lane16id,
             tail=tail, cfg=cfg)


def prefix_prefill(w, q, k_cache, v_cache, k_scale, v_scale, block_table, out, *, context_len, query_len, num_heads,
                   num_kv_heads, head_dim, block_size, max_blocks=None, grouping="fragment", formula="derived"):
    scale_group(0, grouping)
    h = w.workgroup_id[1]
    kvh = h // (num_heads // num_kv_heads)
    warpid = w.wave_id
    lane = w.lane_id
    rowid = lane // 16
    lane16id = lane % 16

    wave_q0 = 16 * (NWARPS * w.workgroup_id[0] + warpid)   # the wave's first query row
    if w.end_program(wave_q0 >= query_len):                # the waves share no LDS and no barrier
        return
    query_start = context_len - query_len                  # position of query row 0
    cfg = Config(w, head_dim, block_size, formula)
    q, k_cache, v_cache, k_scale, v_scale, out = (w.view(x) for x in (q, k_cache, v_cache, k_scale, v_scale, out))
    block_table = w.view(block_table, (block_table.array.size,))
    q_lds = w.view(w.shared("q_lds", (NWARPS, ROWS, cfg.Q_STRIDE), np.int8))     # Qq of each wave's 16 rows
    sq_lds = w.view(w.shared("sq_lds", (NWARPS, ROWS), np.float32))
    w_lds = w.view(w.shared("w_lds", (NWARPS, ROWS, W_STRIDE), np.int8))        # Wq slab of each wave: [row][token]

    # Q: the wave's 16 rows, 4 per pass (row q_row(pass, rowid)), quantized per row.
    for ps in range(4):
        row = q_row(ps, rowid)
        qi = wave_q0 + row
        quantize_q_row(w, q + (qi * num_heads + h) * head_dim, qi < query_len, lane16id, q_lds[warpid][row],
                       sq_lds[warpid][row], cfg=cfg)
    qa = [None] * cfg.QKHELOOP                             # (HIP: after a __syncwave())
    sq = w.undef("f32", 4)
    load_q_operand(w, qa, sq, q_lds[warpid], sq_lds[warpid], rowid, lane16id, cfg=cfg)

    # Row i of the D layout sees t < row_end[i]; rows past query_len (never stored) take the last
    # row's limit. wave_end: the tokens any row of the wave sees.
    row_end = query_start + w.min(wave_q0 + d_row(w, rowid, lane16id, REGS, cfg=cfg), query_len - 1) + 1
    wave_end = query_start + w.min(wave_q0 + 15, query_len - 1) + 1

    o = [w.zeros("f32", 4) for _ in range(cfg.DTILES)]
    m = w.const(-np.inf, "f32", 4)
    l = w.zeros("f32", 4)
    # whole chunks, then the tail; side by side, a workgroup of another query block (another
    # wave_end) waits with its lanes off while the others run a chunk it does not have
    chunk_start = 0
    while w.any(chunk_start < wave_end):
        for tail, runs in ((False, chunk_start + TOKENS_PER_CHUNK <= wave_end),
                           (True, (chunk_start < wave_end) & (chunk_start + TOKENS_PER_CHUNK > wave_end))):
            if w.any(runs):
                with w.if_(runs):
                    prefix_prefill_chunk(w, o, m, l, row_end, qa, sq, k_cache, v_cache, k_scale, v_scale,
                                         block_table, num_kv_heads, kvh, chunk_start, wave_end, w_lds[warpid], rowid,
                                         lane16id, grouping=grouping, tail=tail, cfg=cfg)
        chunk_start += TOKENS_PER_CHUNK

    # out = o / l, as o * (1/l)
    qrow = d_row(w, rowid, lane16id, REGS, cfg=cfg)
    col = d_col(w, rowid, lane16id, REGS, cfg=cfg)
    qi = wave_q0 + qrow
    inv_l = 1.0 / l
    for i in range(4):
        with w.if_(qi[i] < query_len):
            for dt in range(cfg.DTILES):
                (out + (qi[i] * num_heads + h) * head_dim + 16 * dt + col[i]).store(o[dt][i] * inv_l[i])
