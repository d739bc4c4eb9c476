"""Prefix prefill with INT8 QK, INT8 PV and an online softmax (ALGORITHMS.md "prefix_prefill").

New query tokens, at the last query_len positions of the context and already in the cache, attend
causally over the paged INT8 cache: query row qi at position pos = context_len - query_len + qi sees
the tokens t <= pos. Grid (ceil(query_len/64), num_heads), 4 waves; wave warpid owns the 16 query
rows 16*(4*blockIdx.x + warpid) .. of query head blockIdx.y (kv head h / ratio) and walks the
64-token chunks up to the last token any of its rows sees, keeping (m, l, o) per row:
  m_new = max(m, rowmax), alpha = exp(m - m_new), p~ = exp(s - m_new), l = alpha*l + sum p~,
  W = p~·sV quantized per group exactly as pv_int8, o = alpha*o + sum_j sW_j·acc_j;  out = o / l.
The waves share no rows: no barrier, no LDS sum.
"""
from __future__ import annotations

import numpy as np

from .fragments import DLayout, int8_mma
from .pv_int8 import W_STRIDE, fold_v_scale, pv_chunk
from .qk_int8 import ROWS, load_row_scales, q_lds_stride, qk_tile, quantize_q_rows


def prefix_prefill(w, q, k_cache, v_cache, k_scale, v_scale, block_table, out, *, context_len, query_len, num_heads,
                   num_kv_heads, head_dim, block_size, max_blocks=None, grouping="fragment", formula="derived"):
    """q [query_len][num_heads][head_dim] f32, out the same; block_table[] of the sequence."""
    h = w.workgroup_id[1]
    kvh = h // (num_heads // num_kv_heads)
    warpid = w.wave_id
    wave_q0 = ROWS * (w.num_waves * w.workgroup_id[0] + warpid)    # the wave's first query row
    if wave_q0 >= query_len:
        return                                                     # the waves share no LDS and no barrier
    query_start = context_len - query_len                          # position of query row 0
    mma = int8_mma(w.arch)
    dlay = DLayout(w, w.insn(mma), formula)
    # Qq and sQ of the wave's own 16 rows (the HIP twin's q_lds[warpid]: qk_int8's helpers address
    # one 16-row slab); the Wq slabs are one region, w_lds[warpid][16 rows][64 tokens + pad].
    q_lds = w.shared(f"q_lds[{warpid}]", (ROWS, q_lds_stride(head_dim)), np.int8)
    sq_lds = w.shared(f"sq_lds[{warpid}]", (ROWS,), np.float32)
    w_lds = w.shared("w_lds", (w.num_waves, ROWS, W_STRIDE), np.int8)
    rows_valid = min(ROWS, query_len - wave_q0)
    quantize_q_rows(w, q, lambda r: ((r + wave_q0) * num_heads + h) * head_dim * 4, q_lds, sq_lds,
                    head_dim=head_dim, rows_valid=rows_valid)
    sq = load_row_scales(w, sq_lds, dlay)

    # Register i's row sees t < row_end[i]; rows past query_len (never stored) take the last row's
    # limit. wave_end: the tokens any row of the wave sees.
    qrow = dlay.rows()
    row_end = w.min(qrow + wave_q0, query_len - 1) + (query_start + 1)
    wave_end = query_start + wave_q0 + rows_valid
    geo = dict(block_size=block_size, num_kv_heads=num_kv_heads, max_blocks=max_blocks or block_table.array.shape[-1])
    m = w.const(-np.inf, "f32", dlay.n_regs)
    l = w.zeros("f32", dlay.n_regs)
    n_dt = head_dim // 16
    o = w.zeros("f32", dlay.n_regs * n_dt)                         # o[4*dt + i]: column tile dt, register i
    for chunk_start in range(0, wave_end, 64):
        S, tokens = [], []
        for td in range(4):
            s, token = qk_tile(w, mma, q_lds, k_cache, k_scale, block_table, 0, kvh, chunk_start + 16 * td, wave_end,
                               head_dim=head_dim, dlay=dlay, sq=sq, **geo)
            # causal mask, with a -inf that still names its row and token: the token's V is loaded
            # for the wave's other rows, so its zero W must say which token it is
            S.append(w.select(token < row_end, s, s - np.inf))
            tokens.append(token)
        rowmax = dlay.reduce_rows(w.max(w.max(S[0], S[1]), w.max(S[2], S[3])), "max")
        m_new = w.max(m, rowmax)                # finite: token 0 of chunk 0 is seen by every row
        alpha = w.exp(m - m_new)                # m = -inf before the first chunk: alpha = 0
        P = [w.exp(s - m_new) for s in S]       # p~
        l = alpha * l + dlay.reduce_rows((P[0] + P[1]) + (P[2] + P[3]), "sum")
        m = m_new
        # W = p~·sV: 0 for masked tokens (p~ = exp(-inf)), and set to 0 past wave_end, where no V is loaded
        W = [fold_v_scale(w, P[td], v_scale, block_table, 0, kvh, chunk_start + 16 * td, wave_end, dlay, **geo)
             for td in range(4)]
        part = pv_chunk(w, mma, W, [tok - chunk_start for tok in tokens], chunk_start, wave_end, w_lds, v_cache,
                        block_table, 0, kvh, head_dim=head_dim, dlay=dlay, grouping=grouping, **geo)
        o = w.cat(*[alpha] * n_dt) * o + w.cat(*part)

    # out = o / l, rows past query_len not stored
    res = o / w.cat(*[l] * n_dt)
    addr = (((qrow + wave_q0) * num_heads + h) * head_dim + dlay.cols()) * 4
    addr = w.cat(*[addr + 64 * dt for dt in range(n_dt)])         # in o's order
    for i in range(dlay.n_regs):
        with w.if_(qrow[i] < rows_valid):
            for dt in range(n_dt):
                w.global_store(out, addr[dlay.n_regs * dt + i], res[dlay.n_regs * dt + i])
