"""Inputs of the standalone twins: 16 query rows of one head and one sequence's cache."""
from kernels_py.host.buffers import make_cache
from kernels_py.host.twins import query_rows
from kernels_py.workloads.data import make_attention_inputs


def standalone(ctx, head_dim=64, block_size=16, seed=0):
    """16 query rows (the last 16 positions, one head) and the cache of one sequence."""
    d = make_attention_inputs(seed=seed, num_heads=1, head_dim=head_dim, context_lens=[ctx], num_queries=16)
    cache = make_cache(d["k"], d["v"], d["context_lens"], block_size=block_size, smooth_k=True, seed=seed)
    return d, cache, query_rows(d["q"], 1)
