"""Host side of the kernels: device buffers with provenance tags, launches, outputs.

What a HIP host program does (allocate, copy, launch, read back), done for the simulator; the tags
say which logical token, head and head element every cache byte holds, so the debugger can name
them in every matrix instruction's K slots.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gfxsim import Buffer, launch
from gfxsim.arch import get_arch

from .int8_cache_ref import PagedKVCache, build_paged_cache
from .paged_attention_decode import PARTITION, paged_attention_decode, paged_attention_reduce


def cache_token_map(cache: PagedKVCache):
    """(seq, first token) of every physical block, -1 for unused blocks."""
    nb = cache.k_cache.shape[0]
    seq_of = np.full(nb, -1, np.int64)
    first = np.full(nb, -1, np.int64)
    bs = cache.block_size
    for s, ctx in enumerate(cache.context_lens):
        n = -(-int(ctx) // bs)
        blks = cache.block_tables[s, :n]
        seq_of[blks] = s
        first[blks] = np.arange(n) * bs
    return seq_of, first


def cache_buffers(cache: PagedKVCache) -> dict:
    """k_cache, v_cache, k_scale, v_scale, block_tables, context_lens as tagged Buffers."""
    seq_of, first = cache_token_map(cache)
    bs = cache.block_size
    off = np.arange(bs)
    tok = first[:, None] + off[None, :]                                           # [nb, bs]
    ctx = np.where(seq_of >= 0, cache.context_lens[np.maximum(seq_of, 0)], 0)
    tok = np.where((seq_of[:, None] >= 0) & (tok < ctx[:, None]), tok, -1)
    seq = np.where(tok >= 0, seq_of[:, None], -1)
    # Cache bytes carry (seq, token): what the K slots must agree on. A per-element "dim" tag would
    # cost one interned identity per cache byte (millions at 16K context) and adds nothing here.
    k_tags = {"seq": seq[:, None, None, :, None], "token": tok[:, None, None, :, None]}
    v_tags = {"seq": seq[:, None, None, :], "token": tok[:, None, None, :]}
    s_tags = {"seq": seq[:, None, :], "token": tok[:, None, :]}
    return {
        "k_cache": Buffer("k_cache", cache.k_cache, k_tags),
        "v_cache": Buffer("v_cache", cache.v_cache, v_tags),
        "k_scale": Buffer("k_scale", cache.k_scale, s_tags),
        "v_scale": Buffer("v_scale", cache.v_scale, s_tags),
        "block_tables": Buffer("block_tables", np.ascontiguousarray(cache.block_tables, np.int32)),
        "context_lens": Buffer("context_lens", np.ascontiguousarray(cache.context_lens, np.int32)),
    }


def q_buffer(q: np.ndarray) -> Buffer:
    """q [num_seqs, num_heads, head_dim] (decode) tagged seq, head, dim."""
    S, H, D = q.shape
    return Buffer("q", np.ascontiguousarray(q, np.float32),
                  {"seq": np.arange(S)[:, None, None], "head": np.arange(H)[None, :, None],
                   "dim": np.arange(D)[None, None, :]})


@dataclass
class DecodeResult:
    out: np.ndarray                   # [num_seqs, num_heads, head_dim]
    tmp_out: np.ndarray
    max_logits: np.ndarray
    exp_sums: np.ndarray
    runs: list = field(default_factory=list)     # [decode Run, reduce Run]
    cache: PagedKVCache | None = None

    @property
    def run(self):
        return self.runs[0]


def run_decode(q, cache: PagedKVCache, *, arch="gfx936", grouping="fragment", formula="derived",
               trace=True, provenance=True, partition_size=PARTITION, progress=None) -> DecodeResult:
    """paged_attention_decode + paged_attention_reduce on the simulator."""
    if partition_size % PARTITION or partition_size < PARTITION:
        raise ValueError(f"partition_size must be a multiple of {PARTITION} (4 waves x 64 tokens), got {partition_size}")
    q = np.asarray(q, np.float32)
    num_seqs, num_heads, hd = q.shape
    kvh = cache.num_kv_heads
    if num_heads % kvh or num_heads // kvh > 16:
        raise ValueError(f"num_heads {num_heads} / num_kv_heads {kvh}: the GQA ratio must be an integer 1..16")
    if hd != cache.head_dim:
        raise ValueError(f"q head_dim {hd} != cache head_dim {cache.head_dim}")
    if num_seqs != len(cache.context_lens):
        raise ValueError(f"q has {num_seqs} sequences, the cache {len(cache.context_lens)}")
    bufs = cache_buffers(cache)
    max_parts = int(-(-int(cache.context_lens.max()) // partition_size))
    tmp = Buffer.empty("tmp_out", (num_seqs, num_heads, max_parts, hd), np.float32)
    ml = Buffer.empty("max_logits", (num_seqs, num_heads, max_parts), np.float32)
    es = Buffer.empty("exp_sums", (num_seqs, num_heads, max_parts), np.float32)
    out = Buffer.empty("out", (num_seqs, num_heads, hd), np.float32)
    geo = dict(num_heads=num_heads, num_kv_heads=kvh, head_dim=hd, block_size=cache.block_size,
               max_blocks=cache.block_tables.shape[1], max_partitions=max_parts)
    # all workgroups run side by side (see gfxsim.launch's batch), traced or not
    batch = num_seqs * max_parts * kvh
    r1 = launch(paged_attention_decode, grid=(num_seqs, max_parts, kvh), waves_per_group=4, arch=arch, batch=batch,
                args=(q_buffer(q), bufs["k_cache"], bufs["v_cache"], bufs["k_scale"], bufs["v_scale"],
                      bufs["block_tables"], bufs["context_lens"], es, ml, tmp),
                kwargs=dict(grouping=grouping, formula=formula, partition_size=partition_size, **geo), trace=trace,
                provenance=provenance, **_launch_kwargs(progress, "paged_attention_decode", launches=2))
    r2 = launch(paged_attention_reduce, grid=(num_heads, num_seqs), waves_per_group=-(-hd // get_arch(arch).wave_size),
                batch=num_heads * num_seqs,
                arch=arch, args=(tmp, es, ml, bufs["context_lens"], out),
                kwargs=dict(num_heads=num_heads, head_dim=hd, max_partitions=max_parts,
                            partition_size=partition_size), trace=trace,
                provenance=provenance, **_launch_kwargs(progress, "paged_attention_reduce", launches=2))
    return DecodeResult(out.array, tmp.array, ml.array, es.array, [r1, r2], cache)


def _launch_kwargs(progress, name: str, launches: int | None = None) -> dict:
    """launch() keywords that report launch ``name`` (of ``launches``) to ``progress``, a
    gfxsim.progress.Progress; {} without one. The one place the runners pass ``progress=``."""
    if progress is None:
        return {}
    from gfxsim.progress import launch_kwargs
    return launch_kwargs(progress, launch, name, launches)


def make_cache(k, v, context_lens, *, block_size=16, smooth_k=False, seed=0) -> PagedKVCache:
    return build_paged_cache(k, v, context_lens, block_size=block_size, smooth_k=smooth_k, seed=seed)
