"""pv_bf16: the BF16 twin of pv_int8, side by side: W = P * sV rounded to bf16 (A), Vq converted to
bf16 exactly (B), on the 16x16x16 bf16 matrix instruction with fp32 accumulation and no W scale.
Twin of kernels_hip/pv_bf16.hip; the algorithm is ALGORITHMS.md "pv_bf16".

pv_bf16(p, v_cache, v_scale, block_table, out, *, context_len, head_dim, block_size): as pv_int8.
Per 64-token chunk a lane's 16-byte V load feeds four instructions m = 0..3; instruction m takes the
lane's tokens 16*rowid + 4m .. +3 (A[row][k] and B[k][col] at lane .. + 16*(k/4), element k%4), so
it consumes the tokens {16r + 4m + c : r < 4, c < 4}.
"""
from __future__ import annotations

from .int8_attention import (LDS_PAD, NWARPS, REGS, TLOOP, TOKENS_PER_CHUNK, Config, _chunk_name, cache_head,
                             d_col, d_row, load_v_partial, load_w, sum_waves)
from .qk_int8 import ROWS
from gfxsim.errors import NotFoundError

# bf16 per row of a wave's W slab: rows 34 dwords apart put the 16 rows of a ds_write_b16 (gfx936: one
# row per lane16id; CDNA3: rows i and 4+i) and the 16 lanes of a ds_read_b64 in distinct banks.
# (ds_read_b128 of 8 tokens would need rows 4 banks apart, which the gfx936 stores cannot have: so A
# is read as four 8-byte reads, one per instruction.)
W16_STRIDE = TOKENS_PER_CHUNK + LDS_PAD // 2
N_MMA = 4                        # instructions per 64-token chunk
W_STRIDE = 2 * W16_STRIDE        # the same row stride in bytes


def bf16_rne(w, x):
    """Round to nearest even (W is finite)."""
    return x.to("bf16")


def bf16_from_i8(w, v):
    """Exact: |v| <= 128 needs at most 8 significant bits, bf16 has 8."""
    return v.to("bf16")


def v_operand(w, vq, m):
    """Bytes 4m .. 4m+3 of the lane's 16 V tokens as the B operand of instruction m."""
    return bf16_from_i8(w, vq[4 * m:4 * m + 4])


def pv_bf16_chunk(w, o, p, v_cache, v_scale, block_table, context_len, chunk_start, w_lds, rowid, lane16id, *, tail,
                  cfg):
    W = [None] * TLOOP
    load_w(w, W, p, v_scale, block_table, context_len, chunk_start, rowid, lane16id, tail=tail, cfg=cfg)
    qrow = d_row(w, rowid, lane16id, slice(None), cfg=cfg)
    col = d_col(w, rowid, lane16id, slice(None), cfg=cfg)
    wb = w.cat(*W).to("bf16")             # bf16_rne, all 4 tiles at once; (HIP: between __syncwave()s)
    for td in range(TLOOP):
        for i in range(4):
            (w_lds + qrow[i] * W16_STRIDE + 16 * td + col[i]).store(wb[4 * td + i])
    # A lane: row lane16id, tokens 16*rowid + 4m .. +3 for instruction m (an 8-byte LDS read each).
    wa = [(w_lds + lane16id * W16_STRIDE + 16 * rowid + 4 * m).load(8) for m in range(N_MMA)]

    t0 = chunk_start + 16 * rowid
    n_valid = context_len - t0 if tail else 16
    v_tok = w.zeros("i32")
    with w.if_(n_valid > 0):
        v_tok[:] = cache_head(w, block_table, cfg.NUM_KV_HEADS, cfg.KVH, t0, cfg=cfg) * cfg.HEAD_DIM * cfg.BLOCK_SIZE \
            + t0 % cfg.BLOCK_SIZE
    name = _chunk_name(chunk_start, None)
    for dt in range(cfg.DTILES):
        with w.coverage(("O", w.wave_id, dt), expect=(chunk_start, w.min(chunk_start + TOKENS_PER_CHUNK, context_len))):
            v_col = v_cache + v_tok + (16 * dt + lane16id) * cfg.BLOCK_SIZE
            vq = w.zeros("i8", 16)
            with w.if_(n_valid >= 16):
                vq[:] = v_col.load(16)                                       # global_load_dwordx4
            if tail and w.any((n_valid > 0) & (n_valid < 16)):
                with w.if_((n_valid > 0) & (n_valid < 16)):
                    vq[:] = load_v_partial(w, v_col, n_valid)
            for m in range(N_MMA):
                o[dt] = w.mma(cfg.BF16_MMA, wa[m], v_operand(w, vq, m), o[dt], label=f"{name} tile {dt} j {m}")


def pv_bf16(w, p, v_cache, v_scale, block_table, out, *, context_len, head_dim, block_size, num_kv_heads=1, kvh=0,
            max_blocks=None, formula="derived"):
    cfg = Config(w, head_dim, block_size, formula, num_kv_heads=num_kv_heads, kvh=kvh)
    if cfg.BF16_MMA is None:
        raise NotFoundError(f"{w.arch.name} has no 16x16x16 bf16 matrix instruction")
    p, v_cache, v_scale, out = (w.view(x) for x in (p, v_cache, v_scale, out))
    block_table = w.view(block_table, (block_table.array.size,))
    w_lds = w.view(w.shared("w_lds", (NWARPS, ROWS, W16_STRIDE), "bf16"))   # bf16 W slab of each wave: [row][token]
    o_lds = w.view(w.shared("o_lds", (NWARPS - 1, ROWS, cfg.O_STRIDE), "f32"))  # partial O of waves 1..3

    warpid = w.wave_id
    lane = w.lane_id
    rowid = lane // 16
    lane16id = lane % 16

    o = [w.zeros("f32", 4) for _ in range(cfg.DTILES)]
    chunk = warpid
    while (chunk + 1) * TOKENS_PER_CHUNK <= context_len:
        pv_bf16_chunk(w, o, p, v_cache, v_scale, block_table, context_len, chunk * TOKENS_PER_CHUNK, w_lds[warpid],
                      rowid, lane16id, tail=False, cfg=cfg)
        chunk += NWARPS
    if chunk * TOKENS_PER_CHUNK < context_len:      # this wave owns the partial last chunk
        pv_bf16_chunk(w, o, p, v_cache, v_scale, block_table, context_len, chunk * TOKENS_PER_CHUNK, w_lds[warpid],
                      rowid, lane16id, tail=True, cfg=cfg)

    sum_waves(w, o, o_lds, warpid, rowid, lane16id, cfg=cfg)
    if warpid == 0:
        qrow, col = d_row(w, rowid, lane16id, REGS, cfg=cfg), d_col(w, rowid, lane16id, REGS, cfg=cfg)
        for dt in range(cfg.DTILES):
            for i in range(4):
                (out + qrow[i] * head_dim + 16 * dt + col[i]).store(o[dt][i])
