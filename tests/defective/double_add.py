"""A user's copy of kernels_py/pv_int8.py with one mistake: ``sum_waves_to`` starts the sum of the
waves' partial outputs with wave 0's and then adds waves 0..3, so wave 0's partial — the tokens of
its chunks 0, 4, 8, ... — is added twice. The add is a ``double-count`` finding and the output's
declaration (every token once) a ``token-coverage`` one. (tests/test_consumed.py)
"""
from __future__ import annotations

import numpy as np

from kernels_py.fragments import DLayout, conflict_free_stride, int8_mma
from kernels_py.qk_int8 import LDS_PAD, ROWS, gather_token_scale, to_d_layout, token_slot
from kernels_py.quant import quant_params, quantize

GROUPINGS = ("fragment", "contiguous")
W_STRIDE = 64 + LDS_PAD          # bytes per row of a wave's Wq slab


def scale_group(tokens, grouping):
    """Which instruction's scale group a token (offset within the 64-token chunk) belongs to."""
    if grouping == "fragment":
        return (tokens % 16) // 8              # pv_tile = token_offset / 8: the MMAC that consumes it
    if grouping == "contiguous":
        return tokens // 32                    # the seed's bug: tokens 0-31 | 32-63
    raise ValueError(f"grouping must be one of {GROUPINGS}, got {grouping!r}")


def group_scales(w, W, tokens, dlay, grouping):
    """Per instruction j: (inv_j, sW_j), 4-element values aligned with the D rows.
    ``W[td]`` holds tile td's values in the D layout, ``tokens[td]`` their offsets in the chunk."""
    groups = [scale_group(tokens[td], grouping) for td in range(4)]
    inv, sw = [], []
    for j in range(2):
        amax = w.zeros("f32", dlay.n_regs)
        for td in range(4):
            amax = w.max(amax, w.select(groups[td].eq(j), abs(W[td]), 0.0))
        amax = dlay.reduce_rows(amax, "max")
        inv_j, s_j = quant_params(w, amax)
        inv.append(inv_j)
        sw.append(w.group_scale(s_j))
    return inv, sw, groups


def quantize_w_to_lds(w, W, tokens, groups, inv, w_lds, dlay):
    """Wq = rint(W * inv[group]) into the wave's slab w_lds[warpid][16 rows][64 tokens (+pad)]."""
    qrow = dlay.rows()
    row_addr = w.wave_id * ROWS * W_STRIDE + qrow * W_STRIDE
    for td in range(4):
        wq = quantize(w, W[td], w.select(groups[td].eq(0), inv[0], inv[1]))
        addr = row_addr + tokens[td]
        for i in range(dlay.n_regs):
            w.lds_store(w_lds, addr[i], wq[i])


def v_chunk_base(w, block_tables, seq, kvh, chunk_start, ctx, *, head_dim, block_size, num_kv_heads, max_blocks):
    """Where the lane's 16 tokens 16*rowid .. +15 of a chunk start in the V cache (one cache block,
    as block_size is 16 or 32) for head element lane16id: (t0, full, partial, v_base). ``full``
    lanes use one 16-byte load; ``partial`` (None when no lane has one) marks a group that runs
    past the context."""
    rowid, lane16id = w.lane_id // 16, w.lane_id % 16
    t0 = chunk_start + 16 * rowid
    full = (t0 + 16) <= ctx
    partial = ~full & (t0 < ctx) if w.any(~full & (t0 < ctx)) else None
    v_base = w.zeros("i32")
    with w.if_(full):
        blk, off = token_slot(w, block_tables, seq, t0, max_blocks=max_blocks, block_size=block_size)
        v_base[:] = ((blk * num_kv_heads + kvh) * head_dim + lane16id) * block_size + off
    return t0, full, partial, v_base


def v_load(w, v_cache, v_base, ks, full, partial, t0, ctx, block_tables, seq, kvh, d, *, head_dim, block_size,
           num_kv_heads, max_blocks):
    """16 consecutive tokens of head element d: one 16-byte load from v_base (+ one head-element row
    per column tile), or byte loads for a group that runs past the context (no missing token read)."""
    vq = w.zeros("i8", 16)
    with w.if_(full):
        vq[:] = w.global_load(v_cache, v_base + ks, 16, "i8")
    if partial is not None:
        for b in range(16):
            with w.if_(partial & ((t0 + b) < ctx)):
                blk, off = token_slot(w, block_tables, seq, t0 + b, max_blocks=max_blocks, block_size=block_size)
                vq[b] = w.global_load(v_cache, ((blk * num_kv_heads + kvh) * head_dim + d) * block_size + off, 1,
                                      "i8")
    return vq


def pv_chunk(w, mma, W, tokens, chunk_start, ctx, w_lds, v_cache, block_tables, seq, kvh, *, head_dim,
             block_size, num_kv_heads, max_blocks, dlay, grouping):
    """One wave's 64-token chunk: returns o[dt] (4 f32 in the D layout) for every 16-column tile."""
    rowid, lane16id = w.lane_id // 16, w.lane_id % 16
    inv, sw, groups = group_scales(w, W, tokens, dlay, grouping)
    quantize_w_to_lds(w, W, tokens, groups, inv, w_lds, dlay)
    slab = w.wave_id * ROWS * W_STRIDE
    a_addr = slab + lane16id * W_STRIDE + 16 * rowid
    wq = [w.lds_load(w_lds, a_addr + 8 * j, 8, "i8") for j in range(2)]
    t0, full, partial, v_base = v_chunk_base(w, block_tables, seq, kvh, chunk_start, ctx, head_dim=head_dim,
                                             block_size=block_size, num_kv_heads=num_kv_heads, max_blocks=max_blocks)
    out = []
    for dt in range(head_dim // 16):
        with w.coverage(("O", w.wave_id, dt), expect=(chunk_start, w.min(chunk_start + 64, ctx))):
            vq = v_load(w, v_cache, v_base, 16 * dt * block_size, full, partial, t0, ctx, block_tables, seq, kvh,
                        16 * dt + lane16id, head_dim=head_dim, block_size=block_size, num_kv_heads=num_kv_heads,
                        max_blocks=max_blocks)
            o = w.zeros("f32", dlay.n_regs)
            for j in range(2):
                acc = w.mma(mma, wq[j], vq.bytes(8 * j, 8))
                o += w.dequant(acc, sw[j])
        out.append(o)
    return out


def fold_v_scale(w, p, v_scale, block_tables, seq, kvh, tile_start, ctx, dlay, *, block_size, num_kv_heads,
                 max_blocks):
    """W = P·sV for one 16-token tile in the D layout (0 past the context): sV is gathered by the
    lane of each B column and moved to the output registers with a bpermute."""
    lane16id = w.lane_id % 16
    t = lane16id + tile_start
    sv = gather_token_scale(w, v_scale, block_tables, seq, kvh, t, t < ctx, max_blocks=max_blocks,
                            block_size=block_size, num_kv_heads=num_kv_heads)
    token = dlay.cols() + tile_start
    return w.select(token < ctx, p * to_d_layout(w, sv, dlay), 0.0)


def load_w_chunk(w, p, v_scale, block_table, kvh, start, context_len, dlay, **geo):
    """The standalone PV kernels' input: W = P·sV of one 64-token chunk, P read from p[16][context_len]
    into the layout QK would leave it (D[row][token]). Returns (W[td], token offsets[td])."""
    qrow, col = dlay.rows(), dlay.cols()
    W, tokens = [], []
    for td in range(4):
        tok = col + 16 * td
        t = tok + start
        pv_ = w.zeros("f32", dlay.n_regs)
        addr = (qrow * context_len + t) * 4
        for i in range(dlay.n_regs):
            with w.if_(t[i] < context_len):
                pv_[i] = w.global_load(p, addr[i], 4, "f32")
        W.append(fold_v_scale(w, pv_, v_scale, block_table, 0, kvh, start + 16 * td, context_len, dlay, **geo))
        tokens.append(tok)
    return W, tokens


def sum_waves_to(w, acc, o_lds, out, dlay, *, head_dim, rows, out_addr):
    """Sum the waves' partial outputs through LDS in wave order 0..n-1; wave k stores rows k, k+n, ..."""
    qrow, col = dlay.rows(), dlay.cols()
    stride = o_lds.shape[-1]
    base = ((w.wave_id * ROWS + qrow) * stride + col) * 4
    for dt, o in enumerate(acc):
        a = base + 64 * dt
        for i in range(dlay.n_regs):
            w.lds_store(o_lds, a[i], o[i])
    w.barrier()
    for r in range(w.wave_id, rows, w.num_waves):
        for d0 in range(0, head_dim, w.lanes):
            d = w.lane_id + d0
            with w.if_(d < head_dim):
                total = w.lds_load(o_lds, (r * stride + d) * 4, 4, "f32")
                for k in range(w.num_waves):          # THE MISTAKE: wave 0's partial is already in total
                    total = total + w.lds_load(o_lds, ((k * ROWS + r) * stride + d) * 4, 4, "f32")
                w.global_store(out, out_addr(r, d), total)


def o_lds_shape(w, dlay, head_dim):
    """[waves][16 rows][row stride] f32 for the partial outputs, padded for conflict-free stores."""
    return (w.num_waves, ROWS, conflict_free_stride(dlay, head_dim))


def pv_int8(w, p, v_cache, v_scale, block_table, out, *, context_len, head_dim, block_size, grouping="fragment",
            num_kv_heads=1, kvh=0, max_blocks=None, formula="derived"):
    """Standalone: O[16][head_dim] = sum_t P[q][t]·sV[t]·Vq[t][:] for one sequence, with P given
    [16][context_len] f32. One workgroup of 4 waves; wave w takes chunks w, w+4, ...; the waves'
    partial outputs are summed through LDS in wave order."""
    mma = int8_mma(w.arch)
    dlay = DLayout(w, w.insn(mma), formula)
    w_lds = w.shared("w_lds", (w.num_waves, ROWS, W_STRIDE), np.int8)
    o_lds = w.shared("o_lds", o_lds_shape(w, dlay, head_dim), np.float32)
    max_blocks = max_blocks or block_table.array.shape[-1]
    geo = dict(block_size=block_size, num_kv_heads=num_kv_heads, max_blocks=max_blocks)
    acc = [w.zeros("f32", dlay.n_regs) for _ in range(head_dim // 16)]
    for chunk in range(w.wave_id, -(-context_len // 64), w.num_waves):
        start = 64 * chunk
        W, tokens = load_w_chunk(w, p, v_scale, block_table, kvh, start, context_len, dlay, **geo)
        part = pv_chunk(w, mma, W, tokens, start, context_len, w_lds, v_cache, block_table, 0, kvh,
                        head_dim=head_dim, dlay=dlay, grouping=grouping, **geo)
        for dt in range(head_dim // 16):
            acc[dt] += part[dt]
    sum_waves_to(w, acc, o_lds, out, dlay, head_dim=head_dim, rows=ROWS, out_addr=lambda r, d: (r * head_dim + d) * 4)
