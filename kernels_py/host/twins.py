"""Host side of the standalone twins (qk_int8, pv_int8, pv_bf16), prefix_prefill and the cache
producer int8_kv_cache: tagged buffers and launches (their `gfxsim run` runners are in
kernels_py.host.runners).

The standalone kernels take 16 query rows of kv head 0 of sequence 0 (``query_rows``); the PV
kernels are given P, the exact softmax of those rows' int8 QK scores over the whole context.
"""
from __future__ import annotations

import numpy as np

from gfxsim import Buffer

from kernels_py.host.config import KVCacheGeometry, PrefillGeometry, StandaloneGeometry
from kernels_py.host.buffers import HostSetup, accepts, cache_buffers, check_kernel, kernel_options, seq_tag
from kernels_py.int8_kv_cache import int8_kv_cache
from kernels_py.prefix_prefill import prefix_prefill
from kernels_py.pv_bf16 import pv_bf16
from kernels_py.pv_int8 import pv_int8, scale_group
from kernels_py.qk_int8 import ROWS, qk_int8
from kernels_py.reference import attention as R
from kernels_py.reference.int8_cache import POISON_I8, PagedKVCache, all_distinct, gather_int8, quantize_int8
from gfxsim.errors import ArgumentError

WAVES = 4                 # waves per workgroup of every attention twin
PV_KERNELS = {"pv_int8": pv_int8, "pv_bf16": pv_bf16}
# the producer's one-wave workgroups side by side: they fold into one class (a token and kv head
# are shifts), so this bounds the numbers' columns (64 lanes each), not provenance; 2048 keeps a
# value (131,072 columns, 512 KiB) near the core's caches, where 8192 made each pass stream memory
KV_CACHE_BATCH = 2048
# the prefill batches the heads of PREFILL_BLOCKS query blocks: over a long prefix their chunk
# counts differ by a few, and each statement's Python cost is shared by 4x the lanes. With
# provenance the heads of one block fold into one class (a head is a shift) and each block is a
# class of its own from the start (fold_apart: the blocks' causal tails fall in different chunks),
# so each statement's provenance is computed once on 4 x 64 columns
PREFILL_BLOCKS = 4


# ---- inputs of the standalone kernels ------------------------------------------------------

def query_rows(q, num_kv_heads: int) -> np.ndarray:
    """The 16 M rows: the query heads of kv head 0 of sequence 0 at the last query positions, row
    = query*ratio + head (the references' order); zero rows where q has fewer than 16."""
    q = np.asarray(q, np.float32)
    q4 = q[:, None] if q.ndim == 3 else q
    if q4.ndim != 4:
        raise ArgumentError(f"q must be [num_seqs, num_heads, head_dim] or [num_seqs, num_queries, num_heads, "
                         f"head_dim], got shape {q.shape}")
    ratio = q4.shape[2] // num_kv_heads
    rows = q4[0, :, :ratio].reshape(-1, q4.shape[-1])[-ROWS:]
    return np.concatenate([rows, np.zeros((ROWS - len(rows), rows.shape[1]), np.float32)])


def softmax_rows(rows, cache: PagedKVCache) -> np.ndarray:
    """P [16][context_len] f32: the exact (float64) softmax of the rows' int8 QK scores against kv
    head 0 over the whole context of sequence 0."""
    kq, sk, _, _ = gather_int8(cache, 0)
    qq, sq = quantize_int8(rows)
    s = R.qk_int8_scores(qq, sq, kq[:, 0], sk[:, 0]).astype(np.float64)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def sum_in_wave_order(chunks: np.ndarray) -> np.ndarray:
    """Per-chunk partial outputs [rows, C, D] summed as the standalone kernels do: wave w adds its
    chunks w, w+4, ... in order, then the waves' partials are added in wave order."""
    waves = []
    for wv in range(WAVES):
        acc = np.zeros((chunks.shape[0], chunks.shape[2]), np.float32)
        for c in range(wv, chunks.shape[1], WAVES):
            acc = acc + chunks[:, c]
        waves.append(acc)
    total = waves[0]
    for acc in waves[1:]:
        total = total + acc
    return total


def _standalone_geometry(what, cache: PagedKVCache) -> StandaloneGeometry:
    """The kernel keywords of qk_int8 / pv_int8 / pv_bf16 against kv head 0 of sequence 0 (validated)."""
    return StandaloneGeometry(context_len=int(cache.context_lens[0]), head_dim=cache.head_dim,
                              block_size=cache.block_size, num_kv_heads=cache.num_kv_heads, harness=what)


# ---- launches -------------------------------------------------------------------------------

def qk_buffers(rows, cache: PagedKVCache) -> HostSetup:
    """Buffers and geometry of qk_int8: q = 16 query rows [16][head_dim] (tagged row, dim) against
    kv head 0 of sequence 0 of ``cache``; output ``s_out`` [16][context_len] f32 (tagged row, token).
    One workgroup of 4 waves."""
    geo = _standalone_geometry("qk_int8", cache)
    rows = np.asarray(rows, np.float32)
    hd, ctx = cache.head_dim, int(cache.context_lens[0])
    if rows.shape != (ROWS, hd):
        raise ArgumentError(f"qk_int8: q must be [{ROWS}, head_dim {hd}], got shape {rows.shape}")
    bufs = cache_buffers(cache)
    bufs["q"] = Buffer("q", rows, {"row": np.arange(ROWS)[:, None], "dim": np.arange(hd)[None, :]})
    bufs["s_out"] = Buffer.empty("s_out", (ROWS, ctx), np.float32,
                                 tags={"row": np.arange(ROWS)[:, None], "token": np.arange(ctx)[None, :]})
    # every score consumed each head element (the K of QK) once
    bufs["s_out"].expect("dim", 0, hd)
    return HostSetup("qk_int8", bufs, tuple(bufs[n] for n in ("q", "k_cache", "k_scale", "block_tables", "s_out")),
                     geo,
                     grid=(1,), waves_per_group=WAVES, outputs=("s_out",))


def run_qk_int8(rows, cache: PagedKVCache, *, arch="gfx936", formula="derived", trace=True, provenance=True,
                progress=None, kernel=qk_int8):
    """qk_int8 of 16 query rows against kv head 0 of sequence 0: (S [16][context_len], Run).
    ``kernel``: your function with qk_int8's signature, run in its place (buffers from qk_buffers)."""
    check_kernel(kernel)
    setup = qk_buffers(rows, cache)
    run = setup.launch(kernel, arch=arch, trace=trace, provenance=provenance, progress=progress,
                       **kernel_options(kernel, "kernel", formula=(formula, "derived")))
    return setup.output(), run


def pv_buffers(p, cache: PagedKVCache, what: str = "pv") -> HostSetup:
    """Buffers and geometry of the PV kernels (pv_int8, pv_bf16): P [16][context_len] f32 (tagged
    row, token) against kv head 0 of sequence 0 of ``cache``; output ``out`` [16][head_dim] f32
    (tagged row, dim). One workgroup of 4 waves."""
    geo = _standalone_geometry(what, cache)
    p = np.asarray(p, np.float32)
    hd, ctx = cache.head_dim, int(cache.context_lens[0])
    if p.shape != (ROWS, ctx):
        raise ArgumentError(f"{what}: P must be [{ROWS}, context_len {ctx}], got shape {p.shape}")
    bufs = cache_buffers(cache)
    bufs["p"] = Buffer("p", p, {"row": np.arange(ROWS)[:, None], "token": np.arange(ctx)[None, :]})
    bufs["out"] = Buffer.empty("out", (ROWS, hd), np.float32,
                               tags={"row": np.arange(ROWS)[:, None], "dim": np.arange(hd)[None, :]})
    bufs["out"].expect("token", 0, ctx)                                               # every token once
    return HostSetup(what, bufs, tuple(bufs[n] for n in ("p", "v_cache", "v_scale", "block_tables", "out")),
                     geo,
                     grid=(1,), waves_per_group=WAVES, outputs=("out",))


def run_pv(kernel, p, cache: PagedKVCache, *, arch="gfx936", grouping="fragment", formula="derived",
           trace=True, provenance=True, progress=None):
    """pv_int8 or pv_bf16 of P [16][context_len] against kv head 0 of sequence 0: (O [16][head_dim], Run).
    ``kernel``: "pv_int8", "pv_bf16", or your function with their signature (buffers from
    pv_buffers); ``grouping`` is passed to it where it takes a ``grouping`` keyword (as pv_int8)."""
    if isinstance(kernel, str):
        if kernel not in PV_KERNELS:
            raise ArgumentError(f"kernel must be one of {sorted(PV_KERNELS)} or a kernel function, got {kernel!r}")
        name, fn = kernel, PV_KERNELS[kernel]
    else:
        name, fn = getattr(check_kernel(kernel), "__name__", "pv"), kernel
    if fn is pv_bf16 and grouping != "fragment":
        raise ArgumentError(f"pv_bf16 has no W scale: grouping {grouping!r} does not apply")
    if accepts(fn, "grouping"):
        scale_group(0, grouping)              # an unknown grouping fails before the launch
    setup = pv_buffers(p, cache, name)
    opts = kernel_options(fn, "kernel", formula=(formula, "derived"), grouping=(grouping, "fragment"))
    run = setup.launch(fn, arch=arch, trace=trace, provenance=provenance, progress=progress, **opts)
    return setup.output(), run


def prefill_buffers(q, cache: PagedKVCache, seq: int) -> HostSetup:
    """Buffers and geometry of prefix_prefill for sequence ``seq``: q[seq] [num_queries, num_heads,
    head_dim] (tagged seq, query, head, dim; the queries are the last num_queries positions of the
    context), the cache, that sequence's ``block_table`` and the output ``out`` like q[seq] (and
    tagged like it). Grid
    (ceil(num_queries / 64), num_heads) x 4 waves."""
    q = np.asarray(q, np.float32)
    if q.ndim != 4:
        raise ArgumentError(f"prefix_prefill needs q [num_seqs, num_queries, num_heads, head_dim], got shape {q.shape}")
    num_seqs, nq, num_heads, hd = q.shape
    kvh = cache.num_kv_heads
    if hd != cache.head_dim:
        raise ArgumentError(f"q head_dim {hd} != cache head_dim {cache.head_dim}")
    if num_seqs != len(cache.context_lens):
        raise ArgumentError(f"q has {num_seqs} sequences, the cache {len(cache.context_lens)}")
    if nq < 1 or nq > int(cache.context_lens.min()):
        raise ArgumentError(f"num_queries {nq} must be 1..context_len (context_lens {cache.context_lens.tolist()})")
    s = seq
    geo = PrefillGeometry(context_len=int(cache.context_lens[s]), query_len=nq, num_heads=num_heads, num_kv_heads=kvh,
                          head_dim=hd, block_size=cache.block_size)
    bufs = cache_buffers(cache)
    qtags = {**seq_tag(num_seqs, np.asarray(s)), "query": np.arange(nq)[:, None, None],
             "head": np.arange(num_heads)[None, :, None], "dim": np.arange(hd)[None, None, :]}
    bufs["q"] = Buffer("q", q[s], qtags)
    bufs["block_table"] = Buffer("block_table", np.ascontiguousarray(cache.block_tables[s], np.int32))
    bufs["out"] = Buffer.empty("out", (nq, num_heads, hd), np.float32, tags=qtags)
    # query qi (position ctx - nq + qi) consumes the tokens up to its own once; a wave may feed the
    # later tokens its other rows see with weight 0 (the causal mask), so the range is not exact
    ctx = int(cache.context_lens[s])
    bufs["out"].expect("token", 0, (ctx - nq + 1 + np.arange(nq))[:, None, None], exact=False)
    return HostSetup("prefix_prefill", bufs,
                     tuple(bufs[n] for n in ("q", "k_cache", "v_cache", "k_scale", "v_scale", "block_table", "out")),
                     geo,
                     grid=(-(-nq // (WAVES * ROWS)), num_heads), waves_per_group=WAVES,
                     batch=num_heads * PREFILL_BLOCKS, batch_order=(1, 0, 2), fold_apart=(0,),
                     unfolded_batch=num_heads,       # a batch whose members part: one block's heads at a time
                     outputs=("out",))


def run_prefill(q, cache: PagedKVCache, *, arch="gfx936", grouping="fragment", formula="derived", trace=True,
                provenance=True, progress=None, kernel=prefix_prefill):
    """prefix_prefill per sequence: q [num_seqs, num_queries, num_heads, head_dim], the queries being
    the last num_queries positions of each context. Returns (out like q, [Run per sequence]).
    ``kernel``: your function with prefix_prefill's signature (buffers from prefill_buffers)."""
    check_kernel(kernel)
    q = np.asarray(q, np.float32)
    first = prefill_buffers(q, cache, 0)         # checks the shapes before anything runs
    opts = kernel_options(kernel, "kernel", grouping=(grouping, "fragment"), formula=(formula, "derived"))
    outs, runs = [], []
    for s in range(q.shape[0]):
        setup = first if s == 0 else prefill_buffers(q, cache, s)
        runs.append(setup.launch(kernel, arch=arch, trace=trace, provenance=provenance, progress=progress,
                                 launches=q.shape[0], **opts))
        outs.append(setup.output())
    # one sequence: its output buffer's array itself (the Run keeps that buffer; a copy was 128 MiB
    # more at a 4K prompt)
    return (outs[0][None] if len(outs) == 1 else np.stack(outs)), runs


def empty_cache(num_blocks: int, num_kv_heads: int, head_dim: int, block_size: int):
    """(k_cache, v_cache, k_scale, v_scale) poisoned as reference.int8_cache does: -128 and NaN."""
    return (np.full((num_blocks, num_kv_heads, head_dim // 16, block_size, 16), POISON_I8, np.int8),
            np.full((num_blocks, num_kv_heads, head_dim, block_size), POISON_I8, np.int8),
            np.full((num_blocks, num_kv_heads, block_size), np.nan, np.float32),
            np.full((num_blocks, num_kv_heads, block_size), np.nan, np.float32))


def kv_cache_buffers(key, value, slot_mapping, *, num_blocks: int, block_size: int) -> HostSetup:
    """Buffers and geometry of the producer int8_kv_cache: key, value [num_tokens, num_kv_heads,
    head_dim] f32 and slot_mapping [num_tokens] (-1: skip) into fresh poisoned outputs k_cache,
    v_cache, k_scale, v_scale (see empty_cache), tagged token, kv_head, dim where the inputs are. Grid
    (num_tokens, num_kv_heads) x 1 wave."""
    key, value = np.asarray(key, np.float32), np.asarray(value, np.float32)
    slots = np.asarray(slot_mapping, np.int32)
    if key.ndim != 3 or key.shape != value.shape:
        raise ArgumentError(f"key and value must both be [num_tokens, num_kv_heads, head_dim], got {key.shape} and "
                         f"{value.shape}")
    n, kvh, hd = key.shape
    if n < 1:
        raise ArgumentError("int8_kv_cache: no tokens")
    geo = KVCacheGeometry(num_kv_heads=kvh, head_dim=hd, block_size=block_size)
    if slots.shape != (n,):
        raise ArgumentError(f"slot_mapping must be [num_tokens {n}], got shape {slots.shape}")
    bad = (slots < -1) | (slots >= num_blocks * block_size)
    if bad.any():
        raise ArgumentError(f"slot_mapping[{int(np.argmax(bad))}] = {int(slots[bad][0])} is outside "
                         f"[0, {num_blocks * block_size}) and not -1")
    kept = slots[slots >= 0]
    if not all_distinct(kept):
        raise ArgumentError("slot_mapping writes one slot twice")
    names = ("k_cache", "v_cache", "k_scale", "v_scale")
    # inputs tagged (token = input row, kv_head, dim); every cache element with the same fields of
    # the token its slot holds (-1: a slot no token maps to), so a store into another slot, head or
    # head element is a store-mismatch
    t, h, dim = np.arange(n), np.arange(kvh), np.arange(hd)
    in_tags = {"token": t[:, None, None], "kv_head": h[None, :, None], "dim": dim[None, None, :]}
    tok_of_slot = np.full(num_blocks * block_size, -1, np.int64)
    tok_of_slot[slots[slots >= 0]] = np.nonzero(slots >= 0)[0]
    tok = tok_of_slot.reshape(num_blocks, block_size)
    cache_tags = {   # k_cache [blk][kvh][d/16][off][d%16], v_cache [blk][kvh][d][off], scales [blk][kvh][off]
        "k_cache": {"token": tok[:, None, None, :, None], "kv_head": h[None, :, None, None, None],
                    "dim": dim.reshape(hd // 16, 1, 16)[None, None]},
        "v_cache": {"token": tok[:, None, None, :], "kv_head": h[None, :, None, None], "dim": dim[None, None, :, None]},
        "k_scale": {"token": tok[:, None, :], "kv_head": h[None, :, None]},
        "v_scale": {"token": tok[:, None, :], "kv_head": h[None, :, None]}}
    bufs = {"key": Buffer("key", key, in_tags), "value": Buffer("value", value, in_tags),
            "slot_mapping": Buffer("slot_mapping", slots)}
    bufs.update({name: Buffer(name, arr, cache_tags[name])
                 for name, arr in zip(names, empty_cache(num_blocks, kvh, hd, block_size))})
    # lds_bytes: the producer declares no LDS (as its HIP twin); each of its num_tokens x kv_heads
    # one-wave workgroups would otherwise set up a poisoned 64 KiB LDS
    return HostSetup("int8_kv_cache", bufs, tuple(bufs[k] for k in ("key", "value", "slot_mapping") + names),
                     geo, grid=(n, kvh), waves_per_group=1, batch=min(n * kvh, KV_CACHE_BATCH),
                     lds_bytes=4, outputs=names)


def run_int8_kv_cache(key, value, slot_mapping, *, num_blocks: int, block_size: int, arch="gfx936", trace=True,
                      provenance=True, progress=None, kernel=int8_kv_cache):
    """The producer over every (token, kv head) into fresh poisoned caches:
    ((k_cache, v_cache, k_scale, v_scale), Run). ``kernel``: your function with int8_kv_cache's
    signature (buffers from kv_cache_buffers)."""
    check_kernel(kernel)
    setup = kv_cache_buffers(key, value, slot_mapping, num_blocks=num_blocks, block_size=block_size)
    run = setup.launch(kernel, arch=arch, trace=trace, provenance=provenance, progress=progress)
    return tuple(setup.output(n) for n in setup.outputs), run
