"""pv_int8: O[q][d] = sum_t P[q][t] * sV[t] * Vq[t][d] on the int8 16x16x32 matrix instruction, with
W = P * sV quantized per 32-token group. Twin of kernels_hip/pv_int8.hip; the algorithm is
ALGORITHMS.md "pv_int8", the shared pieces kernels_py/int8_attention.py.

pv_int8(p, v_cache, v_scale, block_table, out, *, context_len, head_dim, block_size, grouping)
  p[16][context_len] f32, v_cache[num_blocks][num_kv_heads][head_dim][block_size] i8,
  v_scale[num_blocks][num_kv_heads][block_size] f32, block_table[] i32, out[16][head_dim] f32.
  grouping "fragment" (the fix: instruction j's scale over the tokens j consumes) or "contiguous"
  (the bug: tokens 0-31 and 32-63); HIP: the entry points pv_int8_fragment/_contiguous.
One workgroup of 4 waves; wave warpid takes the 64-token chunks warpid + 4*iter.
"""
from __future__ import annotations

import numpy as np

from .int8_attention import (GROUPINGS, NWARPS, REGS, TLOOP, TOKENS_PER_CHUNK, W_STRIDE, Config, d_col, d_row,
                             load_w, pv_chunk, quantize_w, scale_group, sum_waves)
from .qk_int8 import ROWS

__all__ = ["pv_int8", "pv_int8_chunk", "scale_group", "GROUPINGS", "W_STRIDE"]


def pv_int8_chunk(w, o, p, v_cache, v_scale, block_table, context_len, chunk_start, w_lds, rowid, lane16id, *,
                  grouping, tail, cfg):
    """One 64-token chunk of a wave: W = P * sV in the QK output layout, quantized per scale group
    into the wave's LDS slab, then PV. tail: the chunk reaches past context_len."""
    W, sw = [None] * TLOOP, [None] * 2
    load_w(w, W, p, v_scale, block_table, context_len, chunk_start, rowid, lane16id, tail=tail, cfg=cfg)
    quantize_w(w, sw, W, w_lds, rowid, lane16id, grouping=grouping, cfg=cfg)     # (HIP: between __syncwave()s)
    pv_chunk(w, o, w_lds, sw, v_cache, block_table, cfg.NUM_KV_HEADS, cfg.KVH, chunk_start, context_len, rowid,
             lane16id, tail=tail, cfg=cfg)


def pv_int8(w, p, v_cache, v_scale, block_table, out, *, context_len, head_dim, block_size, grouping="fragment",
            num_kv_heads=1, kvh=0, max_blocks=None, formula="derived"):
    scale_group(0, grouping)                        # an unknown grouping is named before anything runs
    cfg = Config(w, head_dim, block_size, formula, num_kv_heads=num_kv_heads, kvh=kvh)
    p, v_cache, v_scale, out = (w.view(x) for x in (p, v_cache, v_scale, out))
    block_table = w.view(block_table, (block_table.array.size,))
    w_lds = w.view(w.shared("w_lds", (NWARPS, ROWS, W_STRIDE), np.int8))       # Wq slab of each wave: [row][token]
    o_lds = w.view(w.shared("o_lds", (NWARPS - 1, ROWS, cfg.O_STRIDE), np.float32))  # partial O of waves 1..3

    warpid = w.wave_id
    lane = w.lane_id
    rowid = lane // 16
    lane16id = lane % 16

    o = [w.zeros("f32", 4) for _ in range(cfg.DTILES)]
    chunk = warpid
    while (chunk + 1) * TOKENS_PER_CHUNK <= context_len:
        pv_int8_chunk(w, o, p, v_cache, v_scale, block_table, context_len, chunk * TOKENS_PER_CHUNK, w_lds[warpid],
                      rowid, lane16id, grouping=grouping, tail=False, cfg=cfg)
        chunk += NWARPS
    if chunk * TOKENS_PER_CHUNK < context_len:      # this wave owns the partial last chunk
        pv_int8_chunk(w, o, p, v_cache, v_scale, block_table, context_len, chunk * TOKENS_PER_CHUNK, w_lds[warpid],
                      rowid, lane16id, grouping=grouping, tail=True, cfg=cfg)

    sum_waves(w, o, o_lds, warpid, rowid, lane16id, cfg=cfg)
    if warpid == 0:
        qrow, col = d_row(w, rowid, lane16id, REGS, cfg=cfg), d_col(w, rowid, lane16id, REGS, cfg=cfg)
        for dt in range(cfg.DTILES):
            for i in range(4):
                (out + qrow[i] * head_dim + 16 * dt + col[i]).store(o[dt][i])
