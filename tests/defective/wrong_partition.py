"""A user's copy of kernels_py/paged_attention_decode.py with one mistake: the chunks of partition
``part`` start at ``part * PARTITION`` (256) instead of ``part * partition_size``. With
``--partition-size 512`` partition 1 re-reads tokens 256-511 of partition 0 and the last 256 tokens
of a 1024-token context are never read. The per-chunk ``w.coverage`` scopes start from the same
wrong offset and see nothing; the output declarations of the harness do. (tests/test_consumed.py)
"""
from __future__ import annotations

import numpy as np

from kernels_py.fragments import DLayout, int8_mma
from kernels_py.pv_int8 import W_STRIDE, fold_v_scale, o_lds_shape, pv_chunk, sum_waves_to
from kernels_py.qk_int8 import ROWS, load_row_scales, q_lds_stride, qk_tile, quantize_q_rows

PARTITION = 256


def paged_attention_decode(w, q, k_cache, v_cache, k_scale, v_scale, block_tables, context_lens,
                           exp_sums, max_logits, tmp_out, *, num_heads, num_kv_heads, head_dim, block_size,
                           max_blocks, max_partitions, grouping="fragment", formula="derived",
                           partition_size=PARTITION):
    seq, part, kvh = w.workgroup_id
    ctx = w.scalar_load(context_lens, seq * 4, "i32")
    if w.end_program(part * partition_size >= ctx):              # s_endpgm: nothing to attend to
        return
    gqa = num_heads // num_kv_heads
    mma = int8_mma(w.arch)
    dlay = DLayout(w, w.insn(mma), formula)
    q_lds = w.shared("q_lds", (ROWS, q_lds_stride(head_dim)), np.int8)
    sq_lds = w.shared("sq_lds", (ROWS,), np.float32)
    red_lds = w.shared("red_lds", (2, w.num_waves, ROWS), np.float32)
    w_lds = w.shared("w_lds", (w.num_waves, ROWS, W_STRIDE), np.int8)
    o_lds = w.shared("o_lds", o_lds_shape(w, dlay, head_dim), np.float32)
    if w.wave_id == 0:
        head0 = kvh * gqa
        quantize_q_rows(w, q, lambda r: ((seq * num_heads + head0 + r) * head_dim) * 4, q_lds, sq_lds,
                        head_dim=head_dim, rows_valid=gqa)
    w.barrier()

    # QK for the wave's 64-token chunks (one per 256 tokens of the partition), S in the D layout
    # THE MISTAKE: partitions addressed with the 256-token constant, not the launch's partition size
    chunks = [part * PARTITION + 256 * it + 64 * w.wave_id for it in range(partition_size // 256)]
    geo = dict(block_size=block_size, num_kv_heads=num_kv_heads, max_blocks=max_blocks)
    sq = load_row_scales(w, sq_lds, dlay)
    S, tokens = [], []                   # per chunk: 4 tiles of scores and token offsets
    for chunk_start in chunks:
        tiles = [qk_tile(w, mma, q_lds, k_cache, k_scale, block_tables, seq, kvh, chunk_start + 16 * td, ctx,
                         head_dim=head_dim, dlay=dlay, sq=sq, **geo) for td in range(4)]
        S.append([s for s, _ in tiles])
        tokens.append([token - chunk_start for _, token in tiles])     # offsets within the chunk
    # partition max and sum over the 4 waves (per row: registers, then lanes, then waves via LDS)
    m = None
    for s in (x for c in S for x in c):
        m = s if m is None else w.max(m, s)
    m_part = across_waves(w, dlay.reduce_rows(m, "max"), red_lds, 0, dlay, "max")
    E = [[w.exp(s - m_part) for s in c] for c in S]
    l = None
    for c in E:
        part_sum = (c[0] + c[1]) + (c[2] + c[3])
        l = part_sum if l is None else l + part_sum
    l_part = across_waves(w, dlay.reduce_rows(l, "sum"), red_lds, 1, dlay, "sum")

    # W = P * sV, then INT8 PV per chunk, accumulated in fp32
    o = None
    for chunk_start, e, tok in zip(chunks, E, tokens):
        W = [fold_v_scale(w, e[td] / l_part, v_scale, block_tables, seq, kvh, chunk_start + 16 * td, ctx, dlay,
                          **geo) for td in range(4)]
        oc = pv_chunk(w, mma, W, tok, chunk_start, ctx, w_lds, v_cache, block_tables, seq, kvh, head_dim=head_dim,
                      dlay=dlay, grouping=grouping, **geo)
        if o is None:
            o = oc
        else:
            for dt in range(len(o)):
                o[dt] += oc[dt]

    # partition outputs: tmp_out[seq][head][part][d], max_logits, exp_sums
    sum_waves_to(w, o, o_lds, tmp_out, dlay, head_dim=head_dim, rows=gqa,
                 out_addr=lambda r, d: (((seq * num_heads + kvh * gqa + r) * max_partitions + part) * head_dim + d) * 4)
    qrow = dlay.rows()
    with w.if_(dlay.row_leader()):
        for i in range(dlay.n_regs):
            with w.if_(qrow[i] < gqa):
                idx = ((seq * num_heads + kvh * gqa + qrow[i]) * max_partitions + part) * 4
                if w.wave_id == 0:
                    w.global_store(max_logits, idx, m_part[i])
                    w.global_store(exp_sums, idx, l_part[i])


def across_waves(w, vals, red_lds, slot, dlay, op):
    """Combine one per-row value over the workgroup's waves: the row's leader lanes write it to
    red_lds[slot][wave][row], a barrier, then every lane reads all waves' values in wave order."""
    qrow = dlay.rows()
    addr = ((slot * w.num_waves + w.wave_id) * ROWS + qrow) * 4
    with w.if_(dlay.row_leader()):
        for i in range(dlay.n_regs):
            w.lds_store(red_lds, addr[i], vals[i])
    w.barrier()
    fn = {"max": w.max, "sum": lambda a, b: a + b}[op]
    total = None
    for k in range(w.num_waves):
        a = ((slot * w.num_waves + k) * ROWS + qrow) * 4
        v = w.cat(*[w.lds_load(red_lds, a[i], 4, "f32") for i in range(dlay.n_regs)])
        total = v if total is None else fn(total, v)
    return total


def paged_attention_reduce(w, tmp_out, exp_sums, max_logits, context_lens, out, *, num_heads, head_dim,
                           max_partitions, partition_size=PARTITION):
    """Merge partitions: M = max m_p, w_p = l_p·exp(m_p - M), out = sum tmp_p·w_p / sum w_p.
    Grid (num_heads, num_seqs); wave k handles head elements 64k .. 64k+63."""
    head, seq = w.workgroup_id[0], w.workgroup_id[1]
    ctx = w.scalar_load(context_lens, seq * 4, "i32")
    n_part = (ctx + (partition_size - 1)) // partition_size
    d = w.lane_id + w.wave_id * w.lanes
    row = (seq * num_heads + head) * max_partitions
    mx = []
    for p in range(max_partitions):          # partitions past this sequence's context are skipped
        m_p = w.const(-np.inf, "f32")
        with w.if_(n_part > p):
            m_p[:] = w.global_load(max_logits, w.zeros("i32") + (row + p) * 4, 4, "f32")
        mx.append(m_p)
    M = mx[0]
    for p in range(1, max_partitions):
        M = w.max(M, mx[p])
    acc, total = w.zeros("f32"), w.zeros("f32")
    with w.if_(d < head_dim):
        for p in range(max_partitions):
            with w.if_(n_part > p):
                wp = w.global_load(exp_sums, w.zeros("i32") + (row + p) * 4, 4, "f32") * w.exp(mx[p] - M)
                acc += w.global_load(tmp_out, ((row + p) * head_dim + d) * 4, 4, "f32") * wp
                total += wp
        w.global_store(out, ((seq * num_heads + head) * head_dim + d) * 4, acc / total)
