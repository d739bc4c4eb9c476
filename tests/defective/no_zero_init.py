"""A user's INT8 PV whose fp32 accumulators are declared but never zeroed (``float acc[4];``
without ``= {}``): ``w.undef`` gives the registers the poison pattern, so the first ``acc += part``
is an uninitialized-read naming the register, and the poison (a quiet NaN) reaches every output.
``pv_zero_init`` is the fix: the accumulators start at 0 (pv_int8 itself).

    gfxsim run pv_int8 --kernel-fn tests/defective/no_zero_init.py:pv_no_zero_init
"""
import numpy as np

from kernels_py.fragments import DLayout, int8_mma
from kernels_py.pv_int8 import W_STRIDE, load_w_chunk, o_lds_shape, pv_chunk, sum_waves_to
from kernels_py.qk_int8 import ROWS


def _pv(w, p, v_cache, v_scale, block_table, out, *, context_len, head_dim, block_size, grouping, num_kv_heads, kvh,
        max_blocks, formula, zero_init):
    mma = int8_mma(w.arch)
    dlay = DLayout(w, w.insn(mma), formula)
    w_lds = w.shared("w_lds", (w.num_waves, ROWS, W_STRIDE), np.int8)
    o_lds = w.shared("o_lds", o_lds_shape(w, dlay, head_dim), np.float32)
    max_blocks = max_blocks or block_table.array.shape[-1]
    geo = dict(block_size=block_size, num_kv_heads=num_kv_heads, max_blocks=max_blocks)
    declare = w.zeros if zero_init else w.undef          # the defect: no initialiser
    acc = [declare("f32", dlay.n_regs) for _ in range(head_dim // 16)]
    for chunk in range(w.wave_id, -(-context_len // 64), w.num_waves):
        start = 64 * chunk
        W, tokens = load_w_chunk(w, p, v_scale, block_table, kvh, start, context_len, dlay, **geo)
        part = pv_chunk(w, mma, W, tokens, start, context_len, w_lds, v_cache, block_table, 0, kvh,
                        head_dim=head_dim, dlay=dlay, grouping=grouping, **geo)
        for dt in range(head_dim // 16):
            acc[dt] += part[dt]
    sum_waves_to(w, acc, o_lds, out, dlay, head_dim=head_dim, rows=ROWS, out_addr=lambda r, d: (r * head_dim + d) * 4)


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
