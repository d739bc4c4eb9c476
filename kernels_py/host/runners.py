"""The runners of `gfxsim run`, one per kernel, and KERNELS, the registry built here and only here.

A runner is fn(cfg: RunConfig, inputs, swap: Swap) -> Ran: it prepares the inputs (generated from
``cfg`` or the user's), builds the INT8 cache, runs the harness of host.buffers / host.twins
(``swap.kernel_fn``, the user's kernel or the compiled twin, in place of ours where given;
``cfg.trace``: the full trace) and computes the numpy references.

The harnesses (and through them the machine) are imported by the runner that uses them, so
`gfxsim run` parses its arguments and begins its inputs' fills (kernels_py.cli.run) before they
load: the imports run beside the fills.
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable

import numpy as np

from kernels_py.host.config import RunConfig
from kernels_py.reference import attention as R
from kernels_py.reference.int8_cache import (PagedKVCache, build_paged_cache, fill_paged_cache, gather_int8, gather_kv,
                                             quantize_int8, without_smooth_k)
from kernels_py.workloads.inputs import prepare_inputs
from gfxsim.errors import ArgumentError

CHUNK = 64                # tokens per wave and iteration
PREFILL_QUERIES = 64      # generated prefill queries: one workgroup's 4 x 16 rows


@dataclass(frozen=True)
class Swap:
    """The functions a runner launches in place of the project's (None: the project's) — yours,
    loaded, or the compiled twins — and the progress display told of every launch."""
    kernel_fn: Callable | None = None
    reduce_fn: Callable | None = None
    progress: Any = None


@dataclass(frozen=True)
class Ran:
    """What a runner produced: the kernel's output, the references of the same shape, the launches."""
    out: np.ndarray                  # what the kernel wrote
    refs: dict                       # name -> reference output
    runs: list                       # gfxsim Runs (the kernel, then e.g. the reduce kernel)
    context: int                     # the longest history the kernel ran over
    extra_metrics: dict = field(default_factory=dict)
    metrics_ahead: Any = None        # R.MetricsAhead begun while the kernel ran, or None


def _padded_w_v(p, cache: PagedKVCache):
    """W = P·sV and Vq of kv head 0, zero-padded to whole 64-token chunks (the references' input)."""
    from kernels_py.host.twins import ROWS
    _, _, vq, sv = gather_int8(cache, 0)
    ctx = vq.shape[0]
    T = -(-ctx // CHUNK) * CHUNK
    W = np.zeros((ROWS, T), np.float32)
    W[:, :ctx] = p * sv[:, 0]
    V = np.zeros((T, cache.head_dim), np.int8)
    V[:ctx] = vq[:, 0]
    return W, V


def _decode(cfg, inputs, swap):
    from kernels_py.host.buffers import run_decode
    d = prepare_inputs(inputs=inputs, **cfg.shape())
    if d["q"].ndim != 3:
        raise ArgumentError(f"paged_attention_decode needs q [num_seqs, num_heads, head_dim], got {d['q'].shape}")
    kw = {"kernel": swap.kernel_fn} if swap.kernel_fn else {}
    if swap.reduce_fn:
        kw["reduce_kernel"] = swap.reduce_fn
    # K and V in float32 (128 MiB at 16K) are the references' alone from here: they get their own
    # dict, which the thread empties when done, so the simulation's later allocations reuse those
    # pages instead of new ones (the caller's dict, if the inputs were theirs, is left as it is)
    ref_inputs, q, lens = dict(d), d["q"], d["context_lens"]
    cache_made = Future()
    with ThreadPoolExecutor(1) as pool:          # the references beside the simulation (numpy frees the GIL)
        # the fp32 and BF16 references need no cache: they start while it is built
        refs_done = pool.submit(_decode_references_once, ref_inputs, cache_made, cfg)
        try:
            cache = build_paged_cache(d["k"], d["v"], lens, block_size=cfg.block_size, smooth_k=cfg.smooth_k,
                                      block_tables=d.get("block_tables"), seed=cfg.seed)
        except BaseException as e:
            cache_made.set_exception(e)
            raise
        cache_made.set_result(cache)
        del d
        res = run_decode(q, cache, arch=cfg.arch, grouping=cfg.grouping, formula=cfg.formula, trace=cfg.trace,
                         provenance=cfg.provenance, partition_size=cfg.partition_size, progress=swap.progress,
                         **kw)
        refs, plain = refs_done.result()
    extra = {}
    if plain is not None:       # metrics here: np.errstate (the caller's) does not reach another thread
        extra["reference_int8_without_smooth_k_vs_bf16"] = R.metrics(plain, refs["bf16"])
    return Ran(res.out, refs, res.runs, int(lens.max()), extra)


def _decode_references_once(d, cache_made, cfg):
    """_decode_references, then ``d`` emptied: its arrays are freed as soon as they are used."""
    try:
        return _decode_references(d, cache_made, cfg)
    finally:
        d.clear()


def _decode_references(d, cache_made: Future, cfg):
    """fp32, BF16 and reference-INT8 outputs of the decode, and the INT8 math without smooth-K
    (None when smooth-K is off); ``cache_made`` is the cache the simulation runs on, being built."""
    q = d["q"]
    refs = {"fp32": R.attention_fp32(q, d["k"], d["v"], d["context_lens"]),
            "bf16": R.attention_bf16(q, d["k"], d["v"], d["context_lens"])}
    cache = cache_made.result()
    # the same quantized math without smooth-K, so the report shows what smooth-K buys; then the
    # float K and V are dropped (128 MiB at 16K), before the INT8 references, for the simulation
    plain = without_smooth_k(cache, d["k"]) if cfg.smooth_k else None
    d.clear()
    if plain is not None and cfg.partition_size == R.PARTITION:     # both at one partition size: V's
        refs["reference_int8"], plain_out = R.attention_int8_of(q, (cache, plain), grouping=cfg.grouping,
                                                                partition_size=cfg.partition_size)   # operands once
        return refs, plain_out
    refs["reference_int8"] = R.attention_int8(q, cache, grouping=cfg.grouping, partition_size=cfg.partition_size)
    return refs, None if plain is None else R.attention_int8(q, plain, grouping=cfg.grouping)


def _inputs_and_cache(cfg, inputs, num_queries=None, queries=True, fill=True):
    d = prepare_inputs(inputs=inputs, num_queries=num_queries, queries=queries,
                       **cfg.shape())
    cache = build_paged_cache(d["k"], d["v"], d["context_lens"], block_size=cfg.block_size, smooth_k=cfg.smooth_k,
                              block_tables=d.get("block_tables"), seed=cfg.seed, fill=fill)
    return d, cache


def _standalone_inputs(cfg, inputs):
    """Generated: just enough query positions for 16 rows of kv head 0 (GQA ratio rows each)."""
    from kernels_py.host.twins import ROWS, query_rows
    ratio = cfg.heads // cfg.kv_heads
    d, cache = _inputs_and_cache(cfg, inputs, num_queries=min(-(-ROWS // ratio), cfg.context))
    return d, cache, query_rows(d["q"], cache.num_kv_heads)


def _opts(cfg, swap):
    return dict(arch=cfg.arch, formula=cfg.formula, provenance=cfg.provenance,
                progress=swap.progress)


def _qk(cfg, inputs, swap):
    from kernels_py.host.twins import run_qk_int8
    from kernels_py.qk_int8 import qk_int8
    d, cache, rows = _standalone_inputs(cfg, inputs)
    s, run = run_qk_int8(rows, cache, trace=cfg.trace, kernel=swap.kernel_fn or qk_int8, **_opts(cfg, swap))
    ctx = int(cache.context_lens[0])
    kq, sk, _, _ = gather_int8(cache, 0)
    qq, sq = quantize_int8(rows)
    # the kernel scores K with the per-channel mean removed when smooth-K is on: so do the references
    k = d["k"][0, :ctx, 0] - (cache.k_mean[0, 0] if cache.k_mean is not None else 0)
    scale = 1 / np.sqrt(cache.head_dim)
    refs = {"fp32": (rows.astype(np.float64) @ k.T.astype(np.float64) * scale).astype(np.float32),
            "bf16": (R.round_bf16(rows) @ R.round_bf16(k).T) * np.float32(scale),
            "reference_int8": R.qk_int8_scores(qq, sq, kq[:, 0], sk[:, 0])}
    return Ran(s, refs, [run], ctx)


def _pv(kernel):
    def runner(cfg, inputs, swap):
        from kernels_py.host.twins import run_pv, softmax_rows, sum_in_wave_order
        d, cache, rows = _standalone_inputs(cfg, inputs)
        P = softmax_rows(rows, cache)
        out, run = run_pv(swap.kernel_fn or kernel, P, cache, grouping=cfg.grouping, trace=cfg.trace,
                          **_opts(cfg, swap))
        ctx = int(cache.context_lens[0])
        v = d["v"][0, :ctx, 0]
        W, V = _padded_w_v(P, cache)
        refs = {"fp32": (P.astype(np.float64) @ v.astype(np.float64)).astype(np.float32),
                "bf16": R.round_bf16(P) @ R.round_bf16(v)}
        if kernel == "pv_int8":
            refs["reference_int8"] = sum_in_wave_order(R.pv_int8_chunks(W, V, cfg.grouping))
        else:
            refs["reference_bf16_pv"] = sum_in_wave_order(R.pv_bf16_chunks(W, V))
        return Ran(out, refs, [run], ctx)
    runner.__name__ = f"_{kernel}"
    return runner


def _prefill(cfg, inputs, swap):
    from kernels_py.host.twins import run_prefill
    from kernels_py.prefix_prefill import prefix_prefill
    nq = min(PREFILL_QUERIES, cfg.context)
    d, cache = _inputs_and_cache(cfg, inputs, num_queries=nq)
    if d["q"].ndim != 4:
        raise ArgumentError(f"prefix_prefill needs q [num_seqs, num_queries, num_heads, head_dim], got {d['q'].shape}")
    # the references read their own copy of what a kernel can store into (q and the cache), so they
    # see the inputs as given whatever the launch writes meanwhile
    q = d["q"].copy()
    mine = PagedKVCache(*(a.copy() for a in (cache.k_cache, cache.v_cache, cache.k_scale, cache.v_scale,
                                             cache.block_tables)), cache.context_lens.copy(), cache.slot_mapping,
                        cache.k_mean)
    err = np.geterr()                 # np.errstate is per thread: the references run under the caller's

    def references():
        with np.errstate(**err):
            return {"fp32": R.attention_fp32(q, d["k"], d["v"], d["context_lens"]),
                    "bf16": R.attention_bf16(q, d["k"], d["v"], d["context_lens"]),
                    "reference_int8": R.attention_int8(q, mine, grouping=cfg.grouping)}
    with ThreadPoolExecutor(1) as pool:          # the references beside the simulation (numpy frees the GIL)
        refs_done = pool.submit(references)
        out, runs = run_prefill(d["q"], cache, grouping=cfg.grouping, trace=cfg.trace,
                                kernel=swap.kernel_fn or prefix_prefill, **_opts(cfg, swap))
        refs = refs_done.result()
    return Ran(out, refs, runs, int(d["context_lens"].max()))


# int8_kv_cache's runner fills the numpy producer's cache on a thread while the kernel is simulated,
# not before (off: before, as build_paged_cache does; the same bytes, tests/kernels_py/test_kv_producer_beside.py)
PRODUCER_BESIDE = True
# and begins the metrics' float64 work that needs no output (R.MetricsAhead) while the kernel is
# simulated (off: all of it after; the same metrics, tests/kernels_py/test_kv_producer_beside.py)
METRICS_AHEAD = True


def _kv_cache(cfg, inputs, swap):
    """The producer fed what build_paged_cache feeds the numpy producer (smooth-K applied by the
    caller); out and references are the dequantized K and V in logical token order, [2, tokens, ...]."""
    from kernels_py.host.twins import run_int8_kv_cache
    from kernels_py.int8_kv_cache import int8_kv_cache
    # the numpy producer's tables, slots and K mean now; its cache is filled beside the simulation
    d, ref = _inputs_and_cache(cfg, inputs, queries=False, fill=not PRODUCER_BESIDE)   # the producer reads no q
    lens = d["context_lens"]
    mean = ref.k_mean if ref.k_mean is not None else np.zeros((len(lens),) + d["k"].shape[2:], np.float32)
    starts = np.concatenate([[0], np.cumsum(lens)]).astype(int)
    # [2, tokens, kv heads, head_dim]: K and V written in place (no concatenate, astype or stack copies);
    # generated inputs of one full sequence are that block already (make_attention_inputs): K's mean
    # is taken off there, and the numpy producer reads K less its mean from it (the f32 differences
    # it would take itself: generated K has no NaN, the one value K - 0 could change)
    fp32 = _kv_block(d["k"], d["v"], int(starts[-1])) if inputs is None else None
    rows = None
    if fp32 is not None:
        np.subtract(fp32[0], mean[0], out=fp32[0])
        rows = ([fp32[0]], [fp32[1]], None)
    else:
        fp32 = np.empty((2, int(starts[-1])) + d["k"].shape[2:], np.float32)
        for s, n in enumerate(lens):
            np.subtract(d["k"][s, :n], mean[s], out=fp32[0, starts[s]:starts[s + 1]])
            fp32[1, starts[s]:starts[s + 1]] = d["v"][s, :n]
        rows = ([d["k"][s, :n] for s, n in enumerate(lens)], [d["v"][s, :n] for s, n in enumerate(lens)], ref.k_mean)
    key, value = fp32
    # the metrics' float64 copy of the fp32 reference (fp32 itself, final now) and out's buffer, beside
    ahead = R.MetricsAhead(fp32, fp32.size) if METRICS_AHEAD else None
    with ThreadPoolExecutor(1) as pool:     # the producer beside the simulation (numpy frees the GIL)
        filled = pool.submit(fill_paged_cache, ref, *rows[:2], key_offset=rows[2]) if PRODUCER_BESIDE else None
        arrays, run = run_int8_kv_cache(key, value, ref.slot_mapping, num_blocks=ref.k_cache.shape[0],
                                        block_size=ref.block_size, arch=cfg.arch, trace=cfg.trace,
                                        provenance=cfg.provenance, progress=swap.progress,
                                        kernel=swap.kernel_fn or int8_kv_cache)
        # out's pages touched beside the simulation too (a fresh 32 MiB array at the users' shape)
        out = pool.submit(_touched, fp32.shape) if METRICS_AHEAD else None
        if filled is not None:
            filled.result()
        out = out.result() if out is not None else None
    mine = PagedKVCache(*arrays, ref.block_tables, ref.context_lens, ref.slot_mapping, ref.k_mean)
    out = dequantized_kv(mine, starts, out)
    if all(a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))
           for a, b in zip(arrays, (ref.k_cache, ref.v_cache, ref.k_scale, ref.v_scale))):
        # the numpy producer's bytes, dequantized through the same tables: out's floats (a view,
        # read-only, instead of 2 x tokens x kv heads x head_dim floats made again)
        reference = out.view()
        reference.flags.writeable = False
    else:
        reference = dequantized_kv(ref, starts)
    refs = {"fp32": fp32, "reference_int8": reference}
    return Ran(out, refs, [run], int(lens.max()), metrics_ahead=ahead)


def _kv_block(k: np.ndarray, v: np.ndarray, tokens: int) -> np.ndarray | None:
    """[2, tokens, kv heads, head_dim]: k and v of one sequence of ``tokens`` as one C-contiguous
    block, where they are its two halves (v's bytes right after k's); else None."""
    if not (k.dtype == v.dtype == np.float32 and k.shape == v.shape and k.ndim == 4 and k.shape[:2] == (1, tokens)
            and k.flags.c_contiguous and v.flags.c_contiguous):
        return None
    start = k.__array_interface__["data"][0]
    if v.__array_interface__["data"][0] != start + k.nbytes or not isinstance(k.base, np.ndarray):
        return None
    block = k.base
    if not (block.flags.c_contiguous and block.__array_interface__["data"][0] == start
            and block.nbytes == 2 * k.nbytes):
        return None
    return block.reshape((2,) + k.shape[1:])


def _touched(shape) -> np.ndarray:
    """An f32 array of ``shape`` with its pages in (zeros)."""
    a = np.empty(shape, np.float32)
    a.fill(0.0)
    return a


def dequantized_kv(cache: PagedKVCache, starts: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Every sequence's dequantized K (k_mean not added) and V in logical token order, one after
    another, [2, tokens, kv heads, head_dim] f32, gathered in place (into ``out``, of that shape
    and dtype, where given)."""
    shape = (2, int(starts[-1]), cache.num_kv_heads, cache.head_dim)
    if out is None or out.shape != shape or out.dtype != np.float32:
        out = np.empty(shape, np.float32)
    for s in range(len(starts) - 1):
        span = slice(starts[s], starts[s + 1])
        gather_kv(cache, s, add_mean=False, out=(out[0, span], out[1, span]))
    return out



ARCHS = ("sm_89", "sm_90")


def _sage(cfg, inputs, swap):
    # imported here: the FP8 twin's modules (and their accumulator model) cost every other run ~0.1 s
    from gfxsim.arch import get_arch
    from kernels_py.fp8.sage_attention import run_sage_attention
    from kernels_py.fp8.sage_layout import BLKK, WARPQ
    from kernels_py.fp8.sage_reference import SageConfig, sage_head
    arch = get_arch(cfg.arch).name
    if arch not in ARCHS:
        raise ArgumentError(f"sage_attention runs on the NVIDIA warp32 profiles {', '.join(ARCHS)}, not {arch}")
    d = prepare_inputs(inputs=inputs, num_queries=WARPQ, query_heads=1,      # it reads query head 0 alone
                       **cfg.shape())
    if d["q"].ndim != 4 or d["q"].shape[1] < WARPQ:
        raise ArgumentError(f"sage_attention needs prefill q [num_seqs, num_queries >= {WARPQ}, heads, head_dim], "
                         f"got {d['q'].shape}")
    ctx = int(d["context_lens"][0])
    if ctx % BLKK:
        raise ArgumentError(f"sage_attention needs a context that is a multiple of {BLKK}, got {ctx}")
    q = np.ascontiguousarray(d["q"][0, -WARPQ:, 0], np.float32)
    k = np.ascontiguousarray(d["k"][0, :ctx, 0], np.float32)
    v = np.ascontiguousarray(d["v"][0, :ctx, 0], np.float32)
    sage = SageConfig(arch=arch, q_block=WARPQ, smooth_q=cfg.smooth_k, smooth_k=cfg.smooth_k)
    pos = ctx - WARPQ
    err = np.geterr()                 # np.errstate is per thread: the references run under the caller's

    def references():
        with np.errstate(**err):
            return {"fp32": R.attention_fp32(q[None, :, None], k[None, :, None], v[None, :, None], [ctx])[0, :, 0],
                    "sage_reference": sage_head(q, k, v, sage, q_pos=pos + np.arange(WARPQ))}
    with ThreadPoolExecutor(1) as pool:          # the references beside the simulation (numpy frees the GIL)
        refs_done = pool.submit(references)
        out, run = run_sage_attention(q, k, v, sage, q_pos0=pos, provenance=cfg.provenance, kernel=swap.kernel_fn,
                                      trace=cfg.trace)
        refs = refs_done.result()
    return Ran(out, refs, [run], ctx)


KERNELS: dict[str, Callable[[RunConfig, object, Swap], Ran]] = {
    "paged_attention_decode": _decode,
    "qk_int8": _qk,
    "pv_int8": _pv("pv_int8"),
    "pv_bf16": _pv("pv_bf16"),
    "prefix_prefill": _prefill,
    "int8_kv_cache": _kv_cache,
    "sage_attention": _sage,        # sm_89 / sm_90
}

# the runners whose provenance needs no numba: their compiled work (the merges on a folded batch's
# representative columns, the loads' fold checks) costs less on the numpy twins than numba's start
# (~0.4 s of CPU beside the run holding the GIL, ~100 MiB): jit.twins_first instead of jit.prewarm
NUMPY_TWINS = frozenset({"int8_kv_cache"})

# the runners whose harness has a second kernel the user may swap (--reduce-fn)
REDUCE_KERNELS = {"paged_attention_decode": "paged_attention_reduce"}
