"""A user's BF16 PV with its operands swapped: MMAC(V, W) instead of MMAC(W, V) (seed 000's
"operand order whose output lanes don't match the output dimension").

A and B of the 16x16x16 bf16 instruction share one layout, so the swap runs: it computes D = Oᵀ,
D[m][n] = O[query n][dim m]. ``swapped_pv`` then stores D as if it were O, so the result for query
q, dim d of each 16-dim tile lands in out[d][q]: a store-mismatch on every element off the tile
diagonals. ``swapped_pv_fixed`` keeps the swap and writes each element to its own place.

    gfxsim run pv_bf16 --kernel-fn tests/defective/swapped_pv.py:swapped_pv
"""
import numpy as np

from kernels_py.fragments import DLayout, bf16_mma, int8_mma
from kernels_py.pv_bf16 import N_MMA, W_STRIDE
from kernels_py.pv_int8 import load_w_chunk, o_lds_shape, sum_waves_to, v_chunk_base, v_load
from kernels_py.qk_int8 import ROWS


def chunk_swapped(w, mma, W, tokens, chunk_start, ctx, w_lds, v_cache, block_tables, kvh, o, *, head_dim,
                  block_size, num_kv_heads, max_blocks, dlay):
    """pv_bf16_chunk with V as A and W as B."""
    rowid, lane16id = w.lane_id // 16, w.lane_id % 16
    slab = w.wave_id * ROWS * W_STRIDE
    row_addr = slab + dlay.rows() * W_STRIDE
    wb = w.cat(*W).to("bf16")
    for td in range(4):
        addr = row_addr + 2 * tokens[td]
        for i in range(dlay.n_regs):
            w.lds_store(w_lds, addr[i], wb[dlay.n_regs * td + i])
    a_addr = slab + lane16id * W_STRIDE + 2 * 16 * rowid
    wa = [w.lds_load(w_lds, a_addr + 8 * m, 8, "bf16") for m in range(N_MMA)]
    t0, full, partial, v_base = v_chunk_base(w, block_tables, 0, kvh, chunk_start, ctx, head_dim=head_dim,
                                             block_size=block_size, num_kv_heads=num_kv_heads, max_blocks=max_blocks)
    for dt in range(head_dim // 16):
        vq = v_load(w, v_cache, v_base, 16 * dt * block_size, full, partial, t0, ctx, block_tables, 0, kvh,
                    16 * dt + lane16id, head_dim=head_dim, block_size=block_size, num_kv_heads=num_kv_heads,
                    max_blocks=max_blocks)
        vb = vq.to("bf16")
        for m in range(N_MMA):
            o[dt] = w.mma(mma, vb[4 * m:4 * m + 4], wa[m], o[dt], label=f"chunk {chunk_start // 64} tile {dt} j {m}")
    return o


def _pv_swapped(w, p, v_cache, v_scale, block_table, out, *, context_len, head_dim, block_size, num_kv_heads, kvh,
                max_blocks, formula, out_addr):
    mma = bf16_mma(w.arch)
    qk_lay = DLayout(w, w.insn(int8_mma(w.arch)), formula)
    dlay = DLayout(w, w.insn(mma), formula)
    w_lds = w.shared("w_lds", (w.num_waves, ROWS, W_STRIDE // 2), "bf16")
    o_lds = w.shared("o_lds", o_lds_shape(w, dlay, head_dim), np.float32)
    max_blocks = max_blocks or block_table.array.shape[-1]
    geo = dict(block_size=block_size, num_kv_heads=num_kv_heads, max_blocks=max_blocks)
    o = [w.zeros("f32", dlay.n_regs) for _ in range(head_dim // 16)]
    for chunk in range(w.wave_id, -(-context_len // 64), w.num_waves):
        start = 64 * chunk
        W, tokens = load_w_chunk(w, p, v_scale, block_table, kvh, start, context_len, qk_lay, **geo)
        o = chunk_swapped(w, mma, W, tokens, start, context_len, w_lds, v_cache, block_table, kvh, o,
                          head_dim=head_dim, dlay=qk_lay, **geo)
    # o_lds[wave][m][16*dt + n] holds D[m][n] of tile dt: query n, dim 16*dt + m
    sum_waves_to(w, o, o_lds, out, dlay, head_dim=head_dim, rows=ROWS, out_addr=out_addr)


def swapped_pv(w, p, v_cache, v_scale, block_table, out, *, context_len, head_dim, block_size, num_kv_heads=1,
               kvh=0, max_blocks=None, formula="derived"):
    """The defect: o_lds[r][d] is stored to out[r][d] as pv_bf16 does, but it holds query d % 16,
    dim 16*(d // 16) + r."""
    _pv_swapped(w, p, v_cache, v_scale, block_table, out, context_len=context_len, head_dim=head_dim,
                block_size=block_size, num_kv_heads=num_kv_heads, kvh=kvh, max_blocks=max_blocks, formula=formula,
                out_addr=lambda r, d: (r * head_dim + d) * 4)


def swapped_pv_fixed(w, p, v_cache, v_scale, block_table, out, *, context_len, head_dim, block_size, num_kv_heads=1,
                     kvh=0, max_blocks=None, formula="derived"):
    """The fix: o_lds[r][d] goes to out[query d % 16][dim 16*(d // 16) + r]."""
    _pv_swapped(w, p, v_cache, v_scale, block_table, out, context_len=context_len, head_dim=head_dim,
                block_size=block_size, num_kv_heads=num_kv_heads, kvh=kvh, max_blocks=max_blocks, formula=formula,
                out_addr=lambda r, d: ((d % 16) * head_dim + 16 * (d // 16) + r) * 4)
