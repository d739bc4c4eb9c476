"""A user's BF16 PV with its operands swapped: MMAC(V, W) instead of MMAC(W, V) (the
"operand order whose output lanes don't match the output dimension").

A and B of the 16x16x16 bf16 instruction share one layout, so the swap runs: it computes D = Oᵀ,
D[m][n] = O[query n][dim m]. ``swapped_pv`` then stores D as if it were O, so the result for query
q, dim d of each 16-dim tile lands in out[d][q]: a store-mismatch on every element off the tile
diagonals. ``swapped_pv_fixed`` keeps the swap and writes each element to its own place.

    gfxsim run pv_bf16 --kernel-fn tests/defective/swapped_pv.py:swapped_pv
"""
import numpy as np

from kernels_py.int8_attention import NWARPS, TLOOP, TOKENS_PER_CHUNK, Config, cache_head, d_col, d_row, load_w, \
    sum_waves
from kernels_py.pv_bf16 import N_MMA, W16_STRIDE, v_operand
from kernels_py.qk_int8 import ROWS


def chunk_swapped(w, o, p, v_cache, v_scale, block_table, context_len, chunk_start, w_lds, rowid, lane16id, *, cfg):
    """pv_bf16_chunk with V as A and W as B."""
    W = [None] * TLOOP
    load_w(w, W, p, v_scale, block_table, context_len, chunk_start, rowid, lane16id, tail=True, cfg=cfg)
    qrow, col = d_row(w, rowid, lane16id, slice(None), cfg=cfg), d_col(w, rowid, lane16id, slice(None), cfg=cfg)
    wb = w.cat(*W).to("bf16")
    for td in range(TLOOP):
        for i in range(4):
            (w_lds + qrow[i] * W16_STRIDE + 16 * td + col[i]).store(wb[4 * td + i])
    wa = [(w_lds + lane16id * W16_STRIDE + 16 * rowid + 4 * m).load(8) for m in range(N_MMA)]
    t0 = chunk_start + 16 * rowid
    n_valid = context_len - t0
    v_tok = w.zeros("i32")
    with w.if_(n_valid > 0):
        v_tok[:] = cache_head(w, block_table, cfg.NUM_KV_HEADS, cfg.KVH, t0, cfg=cfg) * cfg.HEAD_DIM * cfg.BLOCK_SIZE \
            + t0 % cfg.BLOCK_SIZE
    for dt in range(cfg.DTILES):
        v_col = v_cache + v_tok + (16 * dt + lane16id) * cfg.BLOCK_SIZE
        vq = w.zeros("i8", 16)
        with w.if_(n_valid >= 16):
            vq[:] = v_col.load(16)
        for b in range(16):                                  # a partial 16-token group, byte by byte
            with w.if_((n_valid < 16) & (n_valid > b)):
                vq[b] = (v_col + b).load(1)
        for m in range(N_MMA):
            o[dt] = w.mma(cfg.BF16_MMA, v_operand(w, vq, m), wa[m], o[dt],
                          label=f"chunk {chunk_start // 64} tile {dt} j {m}")


def _pv_swapped(w, p, v_cache, v_scale, block_table, out, *, context_len, head_dim, block_size, num_kv_heads, kvh,
                max_blocks, formula, fixed):
    cfg = Config(w, head_dim, block_size, formula, num_kv_heads=num_kv_heads, kvh=kvh)
    p, v_cache, v_scale, out = (w.view(x) for x in (p, v_cache, v_scale, out))
    block_table = w.view(block_table, (block_table.array.size,))
    w_lds = w.view(w.shared("w_lds", (NWARPS, ROWS, W16_STRIDE), "bf16"))
    o_lds = w.view(w.shared("o_lds", (NWARPS - 1, ROWS, cfg.O_STRIDE), np.float32))
    rowid, lane16id = w.lane_id // 16, w.lane_id % 16
    o = [w.zeros("f32", 4) for _ in range(cfg.DTILES)]
    for chunk in range(w.wave_id, -(-context_len // TOKENS_PER_CHUNK), NWARPS):
        chunk_swapped(w, o, p, v_cache, v_scale, block_table, context_len, TOKENS_PER_CHUNK * chunk, w_lds[w.wave_id],
                      rowid, lane16id, cfg=cfg)
    sum_waves(w, o, o_lds, w.wave_id, rowid, lane16id, cfg=cfg)
    if w.wave_id == 0:
        # register i of tile dt holds D[qrow][col]: query col, dim 16*dt + qrow
        qrow, col = d_row(w, rowid, lane16id, slice(None), cfg=cfg), d_col(w, rowid, lane16id, slice(None), cfg=cfg)
        for dt in range(cfg.DTILES):
            for i in range(4):
                if fixed:           # the fix: each element to its own place, out[query][dim]
                    (out + col[i] * head_dim + 16 * dt + qrow[i]).store(o[dt][i])
                else:               # the defect: stored as pv_bf16 stores O
                    (out + qrow[i] * head_dim + 16 * dt + col[i]).store(o[dt][i])


def swapped_pv(w, p, v_cache, v_scale, block_table, out, *, context_len, head_dim, block_size, num_kv_heads=1,
               kvh=0, max_blocks=None, formula="derived"):
    """The defect: o_lds[r][d] is stored to out[r][d] as pv_bf16 does, but it holds query d % 16,
    dim 16*(d // 16) + r."""
    _pv_swapped(w, p, v_cache, v_scale, block_table, out, context_len=context_len, head_dim=head_dim,
                block_size=block_size, num_kv_heads=num_kv_heads, kvh=kvh, max_blocks=max_blocks, formula=formula,
                fixed=False)


def swapped_pv_fixed(w, p, v_cache, v_scale, block_table, out, *, context_len, head_dim, block_size, num_kv_heads=1,
                     kvh=0, max_blocks=None, formula="derived"):
    """The fix: o_lds[r][d] goes to out[query d % 16][dim 16*(d // 16) + r]."""
    _pv_swapped(w, p, v_cache, v_scale, block_table, out, context_len=context_len, head_dim=head_dim,
                block_size=block_size, num_kv_heads=num_kv_heads, kvh=kvh, max_blocks=max_blocks, formula=formula,
                fixed=True)
