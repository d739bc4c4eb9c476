"""A user's copy of kernels_py/qk_int8.py with one mistake: the int32 accumulator of QK is zeroed
once per 64-token chunk instead of once per 16-token output tile, so every tile after the first
starts from the previous tile's sums (``int acc[4] = {};`` hoisted out of the tile loop). Tile td's
C holds the scores of tokens 16*(td-1) + n while its D is token 16*td + n: an
``accumulator-carried`` finding naming the instruction, the element and both tokens.
``qk_zero_per_tile`` is the fix (qk_int8 itself).

    gfxsim run qk_int8 --kernel-fn tests/defective/carried_acc.py:qk_carried_acc
"""
from __future__ import annotations

import numpy as np

from kernels_py.int8_attention import (NWARPS, REGS, TLOOP, TOKENS_PER_CHUNK, Config, d_col, d_row, load_q_operand,
                                       q_row, quantize_q_row, tile_slot)
from kernels_py.qk_int8 import ROWS


def _qk_chunk(w, qa, sq, k_cache, k_scale, block_table, s_out, chunk_start, context_len, rowid, lane16id, *, tail,
              cfg, zero_per_tile):
    token_offset = d_col(w, rowid, lane16id, REGS, cfg=cfg)
    qrow = d_row(w, rowid, lane16id, REGS, cfg=cfg)
    acc = w.zeros("i32", 4)                       # THE MISTAKE: once per chunk
    for td in range(TLOOP):
        tile_start = chunk_start + 16 * td
        if tail and tile_start >= context_len:
            continue
        if zero_per_tile:
            acc = w.zeros("i32", 4)               # the fix: once per output tile
        slot0 = tile_slot(w, block_table, cfg.NUM_KV_HEADS, cfg.KVH, tile_start, cfg=cfg)
        valid = not tail or tile_start + lane16id < context_len
        kb = [w.zeros("i8", 8) for _ in range(cfg.QKHELOOP)]
        with w.if_(valid):
            slot = slot0 + lane16id
            k_tok = k_cache + (slot // cfg.BLOCK_SIZE) * cfg.HEAD_DIM * cfg.BLOCK_SIZE + (slot % cfg.BLOCK_SIZE) * 16
            for kstep in range(cfg.QKHELOOP):
                d = 32 * kstep + 8 * rowid
                kb[kstep][:] = (k_tok + (d // 16) * cfg.BLOCK_SIZE * 16 + d % 16).load(8)
        for kstep in range(cfg.QKHELOOP):
            acc = w.mma(cfg.MMA, qa[kstep], kb[kstep], acc, label=f"chunk {chunk_start // TOKENS_PER_CHUNK} "
                        f"tile {td} j {kstep}")
        sk = w.zeros("f32", 4)
        t = tile_start + token_offset
        for i in range(4):
            with w.if_(not tail or t[i] < context_len):
                sk[i] = (k_scale + slot0 + token_offset[i]).load()
        s = w.dequant(acc, sq) * sk * cfg.SM_SCALE
        for i in range(4):
            with w.if_(not tail or t[i] < context_len):
                (s_out + qrow[i] * context_len + t[i]).store(s[i])


def _qk(w, q, k_cache, k_scale, block_table, s_out, *, context_len, head_dim, block_size, num_kv_heads, kvh, formula,
        zero_per_tile):
    cfg = Config(w, head_dim, block_size, formula, num_kv_heads=num_kv_heads, kvh=kvh)
    q, k_cache, k_scale, s_out = (w.view(x) for x in (q, k_cache, k_scale, s_out))
    block_table = w.view(block_table, (block_table.array.size,))
    q_lds = w.view(w.shared("q_lds", (ROWS, cfg.Q_STRIDE), np.int8))
    sq_lds = w.view(w.shared("sq_lds", (ROWS,), np.float32))
    rowid, lane16id = w.lane_id // 16, w.lane_id % 16
    row = q_row(w.wave_id, rowid)
    quantize_q_row(w, q + row * head_dim, True, lane16id, q_lds[row], sq_lds[row], cfg=cfg)
    w.barrier()
    qa = [None] * cfg.QKHELOOP
    sq = w.undef("f32", 4)
    load_q_operand(w, qa, sq, q_lds, sq_lds, rowid, lane16id, cfg=cfg)
    for chunk in range(w.wave_id, -(-context_len // TOKENS_PER_CHUNK), NWARPS):
        start = chunk * TOKENS_PER_CHUNK
        _qk_chunk(w, qa, sq, k_cache, k_scale, block_table, s_out, start, context_len, rowid, lane16id,
                  tail=start + TOKENS_PER_CHUNK > context_len, cfg=cfg, zero_per_tile=zero_per_tile)


def qk_carried_acc(w, q, k_cache, k_scale, block_table, s_out, *, context_len, head_dim, block_size, num_kv_heads=1,
                   kvh=0, max_blocks=None, formula="derived"):
    """qk_int8 with the accumulator zeroed once per chunk: the defect."""
    _qk(w, q, k_cache, k_scale, block_table, s_out, context_len=context_len, head_dim=head_dim, block_size=block_size,
        num_kv_heads=num_kv_heads, kvh=kvh, formula=formula, zero_per_tile=False)


def qk_zero_per_tile(w, q, k_cache, k_scale, block_table, s_out, *, context_len, head_dim, block_size,
                     num_kv_heads=1, kvh=0, max_blocks=None, formula="derived"):
    """The fix: zeroed once per output tile."""
    _qk(w, q, k_cache, k_scale, block_table, s_out, context_len=context_len, head_dim=head_dim, block_size=block_size,
        num_kv_heads=num_kv_heads, kvh=kvh, formula=formula, zero_per_tile=True)
