"""INT8 QK on the 16x16x32 int8 instruction (ALGORITHMS.md "qk_int8").

S[q][t] = (Qq·Kq)[q][t] · sQ[q] · sK[t] · (1/sqrt(head_dim)): dequantize, then the softmax scale.
A = Qq (16 rows x 32 head elements per k step, from LDS), B = Kqᵀ (32 head elements x 16 tokens,
one 8-byte load per lane from the paged cache). Where a lane's output sits (qrow, token_offset)
comes from the instruction record (kernels_py/fragments.py).
"""
from __future__ import annotations

import numpy as np

from .fragments import DLayout, int8_mma
from .quant import quant_params, quantize

ROWS = 16          # M rows of every tile: the GQA query heads (decode) or query tokens (prefill)
LDS_PAD = 8        # bytes added to every LDS row so 16 lanes reading 8 bytes of 16 rows hit 32 banks


def q_lds_stride(head_dim):
    return head_dim + LDS_PAD


def quantize_q_rows(w, q, q_row_addr, q_lds, sq_lds, *, head_dim, rows_valid):
    """Per-row symmetric INT8 of 16 query rows into LDS (Qq [16][head_dim+pad] i8, sQ [16] f32).

    Lane (rowid, lane16id) owns row lane16id, head elements 32*ks + 8*rowid .. +7 for every k step;
    the row amax is reduced across the 4 lanes of the row (shuffle-xor 16, 32)."""
    rowid, lane16id = w.lane_id // 16, w.lane_id % 16
    qv = w.zeros("f32", 8 * (head_dim // 32))
    with w.if_(lane16id < rows_valid):
        addr = q_row_addr(lane16id) + 32 * rowid
        qv[:] = w.cat(*[w.global_load(q, addr + 128 * ks + 16 * h, 16, "f32")
                        for ks in range(head_dim // 32) for h in range(2)])
    a = abs(qv)
    amax = a[0]
    for e in range(1, a.n):
        amax = w.max(amax, a[e])
    amax = w.max(amax, w.shfl_xor(amax, 16))
    amax = w.max(amax, w.shfl_xor(amax, 32))
    inv, sq = quant_params(w, amax)
    qq = quantize(w, qv, inv)
    base = lane16id * q_lds_stride(head_dim) + 8 * rowid
    for ks in range(head_dim // 32):
        w.lds_store(q_lds, base + 32 * ks, qq.bytes(8 * ks, 8))
    with w.if_(w.lane_id < 16):
        w.lds_store(sq_lds, lane16id * 4, sq)


def load_row_scales(w, sq_lds, dlay):
    """sQ of each output register's row, marked as the group scale it is (computed over the row)."""
    qrow = dlay.rows()
    return w.group_scale(w.cat(*[w.lds_load(sq_lds, qrow[i] * 4, 4, "f32") for i in range(dlay.n_regs)]))


def token_slot(w, block_tables, seq, t, *, max_blocks, block_size):
    """Physical (block, offset) of logical token t of a sequence (a gather from the block table)."""
    blk = w.global_load(block_tables, (seq * max_blocks + t // block_size) * 4, 4, "i32")
    return blk, t % block_size


def gather_token_scale(w, scales, block_tables, seq, kvh, t, valid, *, max_blocks, block_size, num_kv_heads):
    """Per lane: the per-token scale of token t (0 where not valid)."""
    s = w.zeros("f32")
    with w.if_(valid):
        blk, off = token_slot(w, block_tables, seq, t, max_blocks=max_blocks, block_size=block_size)
        s[:] = w.global_load(scales, ((blk * num_kv_heads + kvh) * block_size + off) * 4, 4, "f32")
    return s


def to_d_layout(w, per_col, dlay):
    """Move a value held by the lane of B column n (lane16id = n) to every output register whose
    D column is n: a ds_bpermute per register."""
    col = dlay.cols()
    return w.cat(*[w.bpermute(per_col, col[i]) for i in range(dlay.n_regs)])


def mma_label(tile_start, label=None):
    """What a tile's matrix instructions are called: ``label``, else "chunk c tile t" of a token
    offset known on the host (a per-lane offset, as in a batched launch, names nothing)."""
    if label is None and isinstance(tile_start, (int, np.integer)):
        label = f"chunk {tile_start // 64} tile {(tile_start // 16) % 4}"
    return f"{label} " if label else ""


def qk_tile(w, mma, q_lds, k_cache, k_scale, block_tables, seq, kvh, tile_start, ctx, *, head_dim,
            block_size, num_kv_heads, max_blocks, dlay, sq, label=None):
    """Scores of 16 query rows x 16 tokens [tile_start, tile_start+16) in the D layout, -inf past
    the context. Returns (s, token) with one f32 and one token index per output register.
    ``label``: the tile's name in the instructions' labels ("chunk c tile t", then " j ks")."""
    rowid, lane16id = w.lane_id // 16, w.lane_id % 16
    t = lane16id + tile_start                                   # B column n = lane16id
    valid = t < ctx
    geo = dict(max_blocks=max_blocks, block_size=block_size)
    k_addr = w.zeros("i32")
    with w.if_(valid):
        blk, off = token_slot(w, block_tables, seq, t, **geo)
        # k_cache[blk][kvh][d/16][off][d%16] with d = 8*rowid (+32 per k step)
        k_addr[:] = (((blk * num_kv_heads + kvh) * (head_dim // 16) + rowid // 2) * block_size + off) * 16 \
            + (rowid % 2) * 8
    a_addr = lane16id * q_lds_stride(head_dim) + 8 * rowid
    acc = None
    name = mma_label(tile_start, label)
    for ks in range(head_dim // 32):
        kq = w.zeros("i8", 8)
        with w.if_(valid):
            kq[:] = w.global_load(k_cache, k_addr + ks * 2 * block_size * 16, 8, "i8")
        qq = w.lds_load(q_lds, a_addr + 32 * ks, 8, "i8")
        acc = w.mma(mma, qq, kq, acc, label=f"{name}j {ks}")
    sk = gather_token_scale(w, k_scale, block_tables, seq, kvh, t, valid, num_kv_heads=num_kv_heads, **geo)
    token = dlay.cols() + tile_start
    s = w.dequant(acc, sq) * to_d_layout(w, sk, dlay) * np.float32(1 / np.sqrt(head_dim))
    s = w.select(token < ctx, s, -np.inf)
    return s, token


def qk_int8(w, q, k_cache, k_scale, block_table, s_out, *, context_len, head_dim, block_size,
            num_kv_heads=1, kvh=0, max_blocks=None, formula="derived"):
    """Standalone: S[16][context_len] for one sequence; one workgroup of 4 waves, wave w takes the
    64-token chunks w, w+4, ..."""
    mma = int8_mma(w.arch)
    dlay = DLayout(w, w.insn(mma), formula)
    q_lds = w.shared("q_lds", (ROWS, q_lds_stride(head_dim)), np.int8)
    sq_lds = w.shared("sq_lds", (ROWS,), np.float32)
    if w.wave_id == 0:
        quantize_q_rows(w, q, lambda r: r * head_dim * 4, q_lds, sq_lds, head_dim=head_dim, rows_valid=ROWS)
    w.barrier()
    max_blocks = max_blocks or block_table.array.shape[-1]
    sq = load_row_scales(w, sq_lds, dlay)
    qrow = dlay.rows()
    for chunk in range(w.wave_id, -(-context_len // 64), w.num_waves):
        for td in range(4):
            s, token = qk_tile(w, mma, q_lds, k_cache, k_scale, block_table, 0, kvh, 64 * chunk + 16 * td,
                               context_len, head_dim=head_dim, block_size=block_size, num_kv_heads=num_kv_heads,
                               max_blocks=max_blocks, dlay=dlay, sq=sq)
            addr = (qrow * context_len + token) * 4
            for i in range(dlay.n_regs):
                with w.if_(token[i] < context_len):
                    w.global_store(s_out, addr[i], s[i])
