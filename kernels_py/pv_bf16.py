"""BF16 PV, the side-by-side twin of pv_int8 (ALGORITHMS.md "pv_bf16").

W = P·sV is rounded to bf16 (A) and Vq converted to bf16 exactly (B: |v| <= 127 needs 7 significant
bits, bf16 has 8), on the 16x16x16 bf16 instruction with fp32 accumulation and no W scale. The
lane's 16-byte V load (tokens 16*rowid .. +15 of the chunk) feeds four instructions m = 0..3:
A[row][k] and B[k][col] sit at lane .. + 16*(k/4), element k%4, so instruction m takes the lane's
tokens 16*rowid + 4m .. +3 and consumes {16r + 4m + c : r < 4, c < 4}.
"""
from __future__ import annotations

import numpy as np

from .fragments import DLayout, bf16_mma, int8_mma
from .pv_int8 import chunk_label, load_w_chunk, o_lds_shape, sum_waves_to, v_chunk_base, v_load
from .qk_int8 import LDS_PAD, ROWS

# bytes per row of a wave's bf16 W slab: 64 tokens x 2 bytes + the pad. Rows 34 dwords apart put the
# 16 rows of a ds_write_b16 (gfx936: one row per lane16id; CDNA3: rows i and 4+i) and the 16 lanes
# of a ds_read_b64 pass in distinct banks. (ds_read_b128 of 8 tokens would need rows 4 banks
# apart, which the gfx936 stores cannot have: so A is read as four 8-byte reads, one per instruction.)
W_STRIDE = 2 * 64 + LDS_PAD
N_MMA = 4                        # instructions per 64-token chunk; instruction m takes 4 tokens per lane


def pv_bf16_chunk(w, mma, W, tokens, chunk_start, ctx, w_lds, v_cache, block_tables, seq, kvh, o, *, head_dim,
                  block_size, num_kv_heads, max_blocks, dlay):
    """One wave's 64-token chunk accumulated into o[dt] (4 f32 in the D layout, the instructions' C).
    ``W[td]`` holds tile td's W in the D layout, ``tokens[td]`` its token offsets in the chunk."""
    rowid, lane16id = w.lane_id // 16, w.lane_id % 16
    qrow = dlay.rows()
    slab = w.wave_id * ROWS * W_STRIDE
    row_addr = slab + qrow * W_STRIDE
    wb = w.cat(*W).to("bf16")                                  # round to nearest even, all 4 tiles at once
    for td in range(4):
        addr = row_addr + 2 * tokens[td]
        for i in range(dlay.n_regs):
            w.lds_store(w_lds, addr[i], wb[dlay.n_regs * td + i])
    # A lane: row lane16id, tokens 16*rowid + 4m .. +3 of the slab for instruction m
    a_addr = slab + lane16id * W_STRIDE + 2 * 16 * rowid
    wa = [w.lds_load(w_lds, a_addr + 8 * m, 8, "bf16") for m in range(N_MMA)]
    t0, full, partial, v_base = v_chunk_base(w, block_tables, seq, kvh, chunk_start, ctx, head_dim=head_dim,
                                             block_size=block_size, num_kv_heads=num_kv_heads, max_blocks=max_blocks)
    name = chunk_label(chunk_start)
    for dt in range(head_dim // 16):
        with w.coverage(("O", w.wave_id, dt), expect=(chunk_start, w.min(chunk_start + 64, ctx))):
            vq = v_load(w, v_cache, v_base, 16 * dt * block_size, full, partial, t0, ctx, block_tables, seq, kvh,
                        16 * dt + lane16id, head_dim=head_dim, block_size=block_size, num_kv_heads=num_kv_heads,
                        max_blocks=max_blocks)
            vb = vq.to("bf16")                                  # exact
            for m in range(N_MMA):
                o[dt] = w.mma(mma, wa[m], vb[4 * m:4 * m + 4], o[dt], label=f"{name}tile {dt} j {m}")
    return o


def pv_bf16(w, p, v_cache, v_scale, block_table, out, *, context_len, head_dim, block_size, num_kv_heads=1, kvh=0,
            max_blocks=None, formula="derived"):
    """Standalone: O[16][head_dim] = sum_t bf16(P[q][t]·sV[t])·Vq[t][:] for one sequence, P given
    [16][context_len] f32. One workgroup of 4 waves; wave w takes chunks w, w+4, ...; the waves'
    partial outputs are summed through LDS in wave order (as pv_int8)."""
    mma = bf16_mma(w.arch)
    qk_lay = DLayout(w, w.insn(int8_mma(w.arch)), formula)      # where QK would leave P (and W)
    dlay = DLayout(w, w.insn(mma), formula)                    # where the bf16 instruction leaves O
    w_lds = w.shared("w_lds", (w.num_waves, ROWS, W_STRIDE // 2), "bf16")
    o_lds = w.shared("o_lds", o_lds_shape(w, dlay, head_dim), np.float32)
    max_blocks = max_blocks or block_table.array.shape[-1]
    geo = dict(block_size=block_size, num_kv_heads=num_kv_heads, max_blocks=max_blocks)
    o = [w.zeros("f32", dlay.n_regs) for _ in range(head_dim // 16)]
    for chunk in range(w.wave_id, -(-context_len // 64), w.num_waves):
        start = 64 * chunk
        W, tokens = load_w_chunk(w, p, v_scale, block_table, kvh, start, context_len, qk_lay, **geo)
        o = pv_bf16_chunk(w, mma, W, tokens, start, context_len, w_lds, v_cache, block_table, 0, kvh, o,
                          head_dim=head_dim, dlay=qk_lay, **geo)
    sum_waves_to(w, o, o_lds, out, dlay, head_dim=head_dim, rows=ROWS, out_addr=lambda r, d: (r * head_dim + d) * 4)
