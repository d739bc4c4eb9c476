"""A user's copy of kernels_py/paged_attention_decode.py's reduce with one mistake: the per-partition
softmax statistics (max_logits, exp_sums: [seq][head][partition]) are indexed without their
partition stride, ``seq_head + p`` instead of ``seq_head * max_partitions + p``. Head 0 still reads
its own; every other head weights its partial outputs with the statistics of the heads before it.
Each product of a partial output and another head's weight is an ``identity-mismatch`` on head.
"""
from __future__ import annotations

import numpy as np

from kernels_py.paged_attention_decode import PARTITION_SIZE


def _reduce(w, tmp_out, exp_sums, max_logits, context_lens, out, *, num_heads, head_dim, max_partitions,
            partition_size, stats_stride):
    head, seq = w.workgroup_id[0], w.workgroup_id[1]
    tmp_out, exp_sums, max_logits, out = (w.view(x) for x in (tmp_out, exp_sums, max_logits, out))
    d = w.lane_id + w.wave_id * w.lanes
    num_partitions = (w.scalar_load(context_lens, seq * 4, "i32") + partition_size - 1) // partition_size
    seq_head = seq * num_heads + head
    m_p = max_logits + seq_head * stats_stride
    l_p = exp_sums + seq_head * stats_stride
    o_p = tmp_out + seq_head * max_partitions * head_dim + d

    mx = []
    for p in range(max_partitions):
        m = w.const(-np.inf, "f32")
        with w.if_(num_partitions > p):
            m[:] = (m_p + w.zeros("i32") + p).load()
        mx.append(m)
    M = mx[0]
    for p in range(1, max_partitions):
        M = w.max(M, mx[p])
    acc, w_sum = w.zeros("f32"), w.zeros("f32")
    with w.if_(d < head_dim):
        for p in range(max_partitions):
            with w.if_(num_partitions > p):
                w_p = (l_p + w.zeros("i32") + p).load() * w.exp(mx[p] - M)
                acc += (o_p + p * head_dim).load() * w_p
                w_sum += w_p
        (out + seq_head * head_dim + d).store(acc / w_sum)


def reduce_stats_stride(w, tmp_out, exp_sums, max_logits, context_lens, out, *, num_heads, head_dim,
                         max_partitions, partition_size=PARTITION_SIZE):
    _reduce(w, tmp_out, exp_sums, max_logits, context_lens, out, num_heads=num_heads, head_dim=head_dim,
            max_partitions=max_partitions, partition_size=partition_size,
            stats_stride=1)                  # THE MISTAKE: the statistics' stride is max_partitions


def reduce_stats_stride_fixed(w, tmp_out, exp_sums, max_logits, context_lens, out, *, num_heads, head_dim,
                               max_partitions, partition_size=PARTITION_SIZE):
    _reduce(w, tmp_out, exp_sums, max_logits, context_lens, out, num_heads=num_heads, head_dim=head_dim,
            max_partitions=max_partitions, partition_size=partition_size, stats_stride=max_partitions)
