"""A user's INT8 PV whose fp32 accumulators are declared but never zeroed (``float acc[4];``
without ``= {}``): ``w.undef`` gives the registers the poison pattern, so the first ``acc += part``
is an uninitialized-read naming the register, and the poison (a quiet NaN) reaches every output.
``pv_zero_init`` is the fix: the accumulators start at 0 (pv_int8 itself).

    gfxsim run pv_int8 --kernel-fn tests/defective/no_zero_init.py:pv_no_zero_init
"""
import numpy as np

from kernels_py.int8_attention import NWARPS, REGS, TOKENS_PER_CHUNK, W_STRIDE, Config, d_col, d_row, sum_waves
from kernels_py.pv_int8 import pv_int8_chunk
from kernels_py.qk_int8 import ROWS


def _pv(w, p, v_cache, v_scale, block_table, out, *, context_len, head_dim, block_size, grouping, num_kv_heads, kvh,
        max_blocks, formula, zero_init):
    cfg = Config(w, head_dim, block_size, formula, num_kv_heads=num_kv_heads, kvh=kvh)
    p, v_cache, v_scale, out = (w.view(x) for x in (p, v_cache, v_scale, out))
    block_table = w.view(block_table, (block_table.array.size,))
    w_lds = w.view(w.shared("w_lds", (NWARPS, ROWS, W_STRIDE), np.int8))
    o_lds = w.view(w.shared("o_lds", (NWARPS - 1, ROWS, cfg.O_STRIDE), np.float32))
    rowid, lane16id = w.lane_id // 16, w.lane_id % 16
    declare = w.zeros if zero_init else w.undef          # the defect: no initialiser
    acc = [declare("f32", 4) for _ in range(cfg.DTILES)]
    for chunk in range(w.wave_id, -(-context_len // TOKENS_PER_CHUNK), NWARPS):
        start = TOKENS_PER_CHUNK * chunk
        part = [w.zeros("f32", 4) for _ in range(cfg.DTILES)]        # this chunk's PV
        pv_int8_chunk(w, part, p, v_cache, v_scale, block_table, context_len, start, w_lds[w.wave_id], rowid,
                      lane16id, grouping=grouping, tail=start + TOKENS_PER_CHUNK > context_len, cfg=cfg)
        for dt in range(cfg.DTILES):
            acc[dt] += part[dt]
    sum_waves(w, acc, o_lds, w.wave_id, rowid, lane16id, cfg=cfg)
    if w.wave_id == 0:
        qrow, col = d_row(w, rowid, lane16id, REGS, cfg=cfg), d_col(w, rowid, lane16id, REGS, cfg=cfg)
        for dt in range(cfg.DTILES):
            for i in range(4):
                (out + qrow[i] * head_dim + 16 * dt + col[i]).store(acc[dt][i])


def pv_no_zero_init(w, p, v_cache, v_scale, block_table, out, *, context_len, head_dim, block_size,
                    grouping="fragment", num_kv_heads=1, kvh=0, max_blocks=None, formula="derived"):
    """pv_int8 with ``acc`` declared by w.undef: the defect."""
    _pv(w, p, v_cache, v_scale, block_table, out, context_len=context_len, head_dim=head_dim, block_size=block_size,
        grouping=grouping, num_kv_heads=num_kv_heads, kvh=kvh, max_blocks=max_blocks, formula=formula,
        zero_init=False)


def pv_zero_init(w, p, v_cache, v_scale, block_table, out, *, context_len, head_dim, block_size,
                 grouping="fragment", num_kv_heads=1, kvh=0, max_blocks=None, formula="derived"):
    """The fix: ``acc`` starts at 0."""
    _pv(w, p, v_cache, v_scale, block_table, out, context_len=context_len, head_dim=head_dim, block_size=block_size,
        grouping=grouping, num_kv_heads=num_kv_heads, kvh=kvh, max_blocks=max_blocks, formula=formula,
        zero_init=True)
