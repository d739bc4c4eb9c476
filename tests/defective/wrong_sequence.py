"""A user's copy of kernels_py/paged_attention_decode.py with one mistake: workgroup ``seq`` reads
the block table of the other end of the batch, ``num_seqs - 1 - seq``, instead of its own. With two
sequences of one length every token, head and dim it consumes is right and only its sequence is
wrong: the QK matrix instructions multiply Q of one sequence with K of the other, an
``ab-kslot-mismatch`` on ``seq`` (the harness tags seq where there are several sequences;
tests/kernels_py/test_decode.py).
"""
from __future__ import annotations

import numpy as np

from kernels_py.int8_attention import (NWARPS, REGS, TLOOP, TOKENS_PER_CHUNK, W_STRIDE, Config, d_col, d_row, d_row_leader, q_row,
                             load_q_operand, pv_chunk, qk_chunk, quantize_q_row, quantize_w, row_max, row_sum,
                             scale_group, sum_waves, tile_slot)
from kernels_py.paged_attention_decode import across_waves
from kernels_py.qk_int8 import ROWS

PARTITION_SIZE = NWARPS * TOKENS_PER_CHUNK      # 256 tokens, 64 per wave
PARTITION = PARTITION_SIZE                      # the name the host code imports


def paged_attention_decode(w, q, k_cache, v_cache, k_scale, v_scale, block_tables, context_lens, exp_sums,
                           max_logits, tmp_out, *, num_heads, num_kv_heads, head_dim, block_size, max_blocks,
                           max_partitions, grouping="fragment", formula="derived", partition_size=PARTITION_SIZE):
    seq, partition, kvh = w.workgroup_id
    context_len = w.scalar_load(context_lens, seq * 4, "i32")
    partition_start = partition * partition_size
    if w.end_program(partition_start >= context_len):        # s_endpgm: nothing to attend to
        return
    scale_group(0, grouping)
    gqa = num_heads // num_kv_heads                           # query heads of this kv head: rows 0..gqa-1
    cfg = Config(w, head_dim, block_size, formula)
    q, k_cache, v_cache, k_scale, v_scale, exp_sums, max_logits, tmp_out = (
        w.view(x) for x in (q, k_cache, v_cache, k_scale, v_scale, exp_sums, max_logits, tmp_out))
    num_seqs = block_tables.array.size // max_blocks
    block_table = w.view(block_tables, (num_seqs, max_blocks))[num_seqs - 1 - seq]     # the mistake
    q_lds = w.view(w.shared("q_lds", (ROWS, cfg.Q_STRIDE), np.int8))      # Qq of the GQA group, rows >= gqa zero
    sq_lds = w.view(w.shared("sq_lds", (ROWS,), np.float32))
    red_lds = w.view(w.shared("red_lds", (2, NWARPS, ROWS), np.float32))  # each wave's row max, then row sum
    w_lds = w.view(w.shared("w_lds", (NWARPS, ROWS, W_STRIDE), np.int8))  # Wq slab of each wave: [row][token]
    o_lds = w.view(w.shared("o_lds", (NWARPS - 1, ROWS, cfg.O_STRIDE), np.float32))   # partial O of waves 1..3

    warpid = w.wave_id
    lane = w.lane_id
    rowid = lane // 16
    lane16id = lane % 16

    # 1. Q rows of the GQA group, quantized per row: wave warpid takes rows q_row(warpid, rowid).
    row = q_row(warpid, rowid)
    quantize_q_row(w, q + ((seq * num_heads + kvh * gqa + row) * head_dim), row < gqa, lane16id, q_lds[row],
                   sq_lds[row], cfg=cfg)
    w.barrier()
    qa = [None] * cfg.QKHELOOP
    sq = w.undef("f32", 4)
    load_q_operand(w, qa, sq, q_lds, sq_lds, rowid, lane16id, cfg=cfg)

    # 2. QK of the wave's 64 tokens (per 256 of the partition); tokens at or past the context get
    #    -inf. Instruction labels name the chunk within the partition (4*it + warpid).
    chunks = [partition_start + PARTITION_SIZE * it + warpid * TOKENS_PER_CHUNK
              for it in range(partition_size // PARTITION_SIZE)]
    names = [f"chunk {NWARPS * it + warpid}" for it in range(len(chunks))]
    s = [[None] * TLOOP for _ in chunks]
    for c, chunk_start in enumerate(chunks):
        qk_chunk(w, s[c], qa, sq, k_cache, k_scale, block_table, num_kv_heads, kvh, chunk_start, context_len, rowid,
                 lane16id, tail=True, cfg=cfg, label=names[c])

    # 3. Partition max m and sum l per row: over the wave's lanes holding the row, then over the
    #    4 waves through LDS in wave order. P = exp(S - m) * (1/l).
    mx, m, ls, l = (w.undef("f32", 4) for _ in range(4))
    row_max(w, mx, s[0], rowid, lane16id, cfg=cfg)
    for c in range(1, len(s)):                               # partitions of several 256-token blocks
        mc = w.undef("f32", 4)
        row_max(w, mc, s[c], rowid, lane16id, cfg=cfg)
        mx[:] = w.max(mx, mc)
    across_waves(w, m, mx, red_lds[0], warpid, rowid, lane16id, op="max", cfg=cfg)
    e = [[w.exp(x - m) for x in sc] for sc in s]
    row_sum(w, ls, e[0], rowid, lane16id, cfg=cfg)
    for c in range(1, len(e)):                               # partitions of several 256-token blocks
        lc = w.undef("f32", 4)
        row_sum(w, lc, e[c], rowid, lane16id, cfg=cfg)
        ls[:] = ls + lc
    across_waves(w, l, ls, red_lds[1], warpid, rowid, lane16id, op="sum", cfg=cfg)
    inv_l = 1.0 / l

    # 4. W = P * sV, quantized per scale group, and PV over the wave's chunk.
    token_offset = d_col(w, rowid, lane16id, REGS, cfg=cfg)
    o = [w.zeros("f32", 4) for _ in range(cfg.DTILES)]
    for c, chunk_start in enumerate(chunks):
        W, sw = [None] * TLOOP, [None] * 2
        for td in range(TLOOP):
            tile_start = chunk_start + 16 * td
            W[td] = w.zeros("f32", 4)
            if not w.any(tile_start < context_len):
                continue
            with w.if_(tile_start < context_len):
                slot0 = tile_slot(w, block_table, num_kv_heads, kvh, tile_start, cfg=cfg)
                for i in range(4):
                    with w.if_(tile_start + token_offset[i] < context_len):
                        W[td][i] = e[c][td][i] * inv_l[i] * (v_scale + slot0 + token_offset[i]).load()
        quantize_w(w, sw, W, w_lds[warpid], rowid, lane16id, grouping=grouping, cfg=cfg)
        pv_chunk(w, o, w_lds[warpid], sw, v_cache, block_table, num_kv_heads, kvh, chunk_start, context_len, rowid,
                 lane16id, tail=True, cfg=cfg, label=names[c])

    # 5. The waves' partial outputs, summed in wave order: tmp_out[seq][kvh*gqa + row][partition][d]
    #    for the rows < gqa; max_logits = m and exp_sums = l from wave 0's row leaders.
    head0 = seq * num_heads + kvh * gqa
    sum_waves(w, o, o_lds, warpid, rowid, lane16id, cfg=cfg)
    if warpid == 0:
        qrow = d_row(w, rowid, lane16id, REGS, cfg=cfg)
        for dt in range(cfg.DTILES):
            for i in range(4):
                with w.if_(qrow[i] < gqa):
                    (tmp_out + ((head0 + qrow[i]) * max_partitions + partition) * head_dim + 16 * dt
                     + token_offset[i]).store(o[dt][i])
        with w.if_(d_row_leader(w, rowid, lane16id, cfg=cfg)):
            for i in range(4):
                with w.if_(qrow[i] < gqa):
                    (max_logits + (head0 + qrow[i]) * max_partitions + partition).store(m[i])
                    (exp_sums + (head0 + qrow[i]) * max_partitions + partition).store(l[i])
