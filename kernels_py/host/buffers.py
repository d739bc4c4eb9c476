"""Host side of the kernels: device buffers with provenance tags, launches, outputs.

What a HIP host program does (allocate, copy, launch, read back), done for the simulator; the tags
say which logical token, head and head element every cache byte holds, so the debugger can name
them in every matrix instruction's K slots.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from collections.abc import Callable

import numpy as np

from gfxsim import Buffer, launch
from gfxsim.arch import get_arch
from gfxsim.machine.consumed import check_unwritten
from gfxsim.machine.options import BatchBounded, LaunchOptions, UnfoldedBounded

from kernels_py.host.config import DecodeGeometry, check_gqa, check_partition_size
from kernels_py.paged_attention_decode import PARTITION, paged_attention_decode, paged_attention_reduce
from kernels_py.reference.int8_cache import PagedKVCache, build_paged_cache
from gfxsim.errors import ArgumentError, ArgumentTypeError


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


def seq_tag(num_seqs: int, seq) -> dict:
    """``{"seq": seq}`` where there are several sequences, else nothing: with one sequence the tag
    would hold one value in every tagged element, which can never disagree (no K slot, store or
    coverage check can use it), while its identity planes went through every load, LDS access and
    merge of a launch (~9% of a 16K decode with provenance, and 12% of its peak memory)."""
    return {"seq": seq} if num_seqs > 1 else {}


def cache_buffers(cache: PagedKVCache) -> dict:
    """k_cache, v_cache, k_scale, v_scale, block_tables, context_lens as tagged Buffers (``seq``
    where the cache holds several sequences: seq_tag)."""
    seq_of, first = cache_token_map(cache)
    bs = cache.block_size
    off = np.arange(bs)
    tok = first[:, None] + off[None, :]                                           # [nb, bs]
    ctx = np.where(seq_of >= 0, cache.context_lens[np.maximum(seq_of, 0)], 0)
    tok = np.where((seq_of[:, None] >= 0) & (tok < ctx[:, None]), tok, -1)
    seq = np.where(tok >= 0, seq_of[:, None], -1)
    # Cache bytes carry (seq, token): what the K slots must agree on. V bytes also carry their head
    # element (dim): PV's D column n is V's dim n, so a store of it into another dim's place is a
    # store-mismatch.
    S = len(cache.context_lens)
    k_tags = {**seq_tag(S, seq[:, None, None, :, None]), "token": tok[:, None, None, :, None]}
    hd = cache.v_cache.shape[2]
    v_tags = {**seq_tag(S, seq[:, None, None, :]), "token": tok[:, None, None, :],
              "dim": np.arange(hd)[None, None, :, None]}
    s_tags = {**seq_tag(S, seq[:, None, :]), "token": tok[:, None, :]}
    return {
        "k_cache": Buffer("k_cache", cache.k_cache, k_tags),
        "v_cache": Buffer("v_cache", cache.v_cache, v_tags),
        "k_scale": Buffer("k_scale", cache.k_scale, s_tags),
        "v_scale": Buffer("v_scale", cache.v_scale, s_tags),
        "block_tables": Buffer("block_tables", np.ascontiguousarray(cache.block_tables, np.int32)),
        "context_lens": Buffer("context_lens", np.ascontiguousarray(cache.context_lens, np.int32)),
    }


def q_buffer(q: np.ndarray) -> Buffer:
    """q [num_seqs, num_heads, head_dim] (decode) tagged (seq,) head, dim."""
    S, H, D = q.shape
    return Buffer("q", np.ascontiguousarray(q, np.float32),
                  {**seq_tag(S, np.arange(S)[:, None, None]), "head": np.arange(H)[None, :, None],
                   "dim": np.arange(D)[None, None, :]})


@dataclass
class HostSetup:
    """Everything ``gfxsim.launch`` needs to run one harness's kernel, except the kernel: the
    tagged Buffers by name, the kernel's positional arguments (``args``, Buffers in its argument
    order) and geometry keywords (``kwargs``, from the frozen ``geometry`` record of
    kernels_py.host.config), ``grid``, ``waves_per_group`` and ``batch``.

    A kernel with the harness kernel's signature (yours, a copy of ours with a change) runs with
    ``setup.launch(my_kernel, arch=...)`` or, spelled out,
    ``launch(my_kernel, grid=setup.grid, waves_per_group=setup.waves_per_group, args=setup.args,
    kwargs=setup.kwargs)``; what it wrote is then in ``setup.buffers["out"].array`` (or the
    harness's output names). A setup's output Buffers are written by the launch: build a new
    setup for each run."""
    name: str                                  # the harness kernel's name (progress, error messages)
    buffers: dict                              # name -> Buffer
    args: tuple                                # positional Buffers, in the kernel's order
    geometry: object                           # the harness's geometry record (host.config)
    grid: tuple = (1,)
    waves_per_group: int = 1
    batch: int = 1
    batch_order: tuple = (0, 1, 2)          # the grid axes batches walk, fastest first (LaunchOptions)
    provenance_batch: int | None = None     # with provenance, at most this many side by side (memory)
    fold_apart: tuple = ()                  # grid axes whose workgroups start in classes of their own (LaunchOptions)
    unfolded_batch: int | None = None       # with provenance, at most this many side by side unfolded (memory)
    trace_batch: int | None = None          # with the full trace (it keeps every batch's events), at most this many
    lds_bytes: int | None = None
    outputs: tuple = ()                        # names of the Buffers the kernel writes

    @property
    def kwargs(self) -> dict:
        """The geometry keywords the kernel takes (``geometry`` as a dict)."""
        return self.geometry.kwargs()

    def launch(self, kernel: Callable, *, arch="gfx936", trace=True, provenance=True, progress=None,
               launches: int = 1, **kernel_kwargs):
        """Run ``kernel(w, *args, **kwargs, **kernel_kwargs)`` over the setup's grid: the Run."""
        kw = dict(self.kwargs)
        kw.update(kernel_kwargs)
        # with provenance, a kernel may bound how many workgroups run side by side (BatchBounded: the
        # compiled twins, whose register files hold every VGPR byte's provenance), as the setup may
        bounds = [b for b in (self.provenance_batch, kernel.provenance_batch if isinstance(kernel, BatchBounded)
                              else None, self.trace_batch if trace else None) if b]
        unfolded = [b for b in (self.unfolded_batch, kernel.unfolded_batch if isinstance(kernel, UnfoldedBounded)
                                else None) if b]
        options = LaunchOptions(trace=trace, provenance=provenance, lds_bytes=self.lds_bytes, batch=self.batch,
                                batch_order=self.batch_order, provenance_batch=min(bounds) if bounds else None,
                                fold_apart=self.fold_apart,
                                unfolded_batch=min(unfolded) if unfolded else None,
                                **_launch_kwargs(progress, self.name, launches=launches))
        run = launch(kernel, grid=self.grid, waves_per_group=self.waves_per_group, arch=arch, args=self.args,
                     kwargs=kw, options=options)
        for name in self.outputs:        # an output the kernel never stored into is a finding, not NaN metrics
            check_unwritten(run.machine, self.buffers[name])
        return run

    def output(self, name: str | None = None) -> np.ndarray:
        """The array of output Buffer ``name`` (default: the first output) after the launch."""
        return self.buffers[name or self.outputs[0]].array


def check_kernel(fn, what: str = "kernel") -> Callable:
    """``fn`` if it is callable, else a TypeError naming ``what`` and what it got."""
    if not callable(fn):
        raise ArgumentTypeError(f"{what} must be a kernel function fn(w, ...), got {type(fn).__name__} {fn!r}")
    return fn


def kernel_options(fn, what: str, **opts) -> dict:
    """Of ``opts`` (name -> (value, default)), the keywords to pass ``fn``: those it takes. One it
    does not take may only have its default value (else a ValueError naming ``what`` and it)."""
    out = {}
    for k, (v, default) in opts.items():
        if accepts(fn, k):
            out[k] = v
        elif v != default:
            raise ArgumentError(f"{what} {getattr(fn, '__name__', fn)!r} takes no {k!r} keyword: {k}={v!r} does not apply")
    return out


def accepts(fn, name: str) -> bool:
    """Whether ``fn`` takes keyword ``name`` (or **kwargs)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


@dataclass
class DecodeSetup:
    """The two launches of decode: ``decode`` (paged_attention_decode's arguments) and ``reduce``
    (paged_attention_reduce's), sharing ``buffers``: the tagged cache Buffers, q, and the
    intermediate tmp_out, max_logits, exp_sums and the output out."""
    buffers: dict
    decode: HostSetup
    reduce: HostSetup

    def result(self, runs, cache=None) -> DecodeResult:
        b = self.buffers
        return DecodeResult(b["out"].array, b["tmp_out"].array, b["max_logits"].array, b["exp_sums"].array,
                            list(runs), cache)


# Unfolded (a batch whose workgroups part, fold.py), a batched decode workgroup with provenance holds
# ~2.5 MiB of planes and footprints: a 16K context's 512 workgroups side by side took 1.5 GiB. A
# folded batch holds one workgroup's planes, so these bound what a batch that cannot fold costs.
# The full trace keeps every batch's events as well; since batches fold, 512 side by side take the
# same 2.8 GiB as 256 and 3.6-3.8 s against 4.3-5.1 s (16K, 2 alternating pairs).
DECODE_PROVENANCE_BATCH = 512
DECODE_TRACE_BATCH = 512


def decode_buffers(q, cache: PagedKVCache, *, arch="gfx936", partition_size=PARTITION) -> DecodeSetup:
    """Buffers and launch geometry of paged-attention decode: q [num_seqs, num_heads, head_dim]
    (tagged seq, head, dim; seq where there are several: seq_tag) against ``cache`` (tagged seq,
    token), partitions of ``partition_size`` tokens. ``decode`` runs on grid (num_seqs,
    max_partitions, num_kv_heads) x 4 waves, all workgroups batched; ``reduce`` on grid
    (num_heads, num_seqs) x head_dim/64 waves."""
    check_partition_size(partition_size)
    q = np.asarray(q, np.float32)
    if q.ndim != 3:
        raise ArgumentError(f"decode needs q [num_seqs, num_heads, head_dim], got shape {q.shape}")
    num_seqs, num_heads, hd = q.shape
    kvh = cache.num_kv_heads
    check_gqa(num_heads, kvh)
    if hd != cache.head_dim:
        raise ArgumentError(f"q head_dim {hd} != cache head_dim {cache.head_dim}")
    if num_seqs != len(cache.context_lens):
        raise ArgumentError(f"q has {num_seqs} sequences, the cache {len(cache.context_lens)}")
    bufs = cache_buffers(cache)
    max_parts = int(-(-int(cache.context_lens.max()) // partition_size))
    bufs["q"] = q_buffer(q)
    # outputs say which (seq, head, dim) each element belongs to: a store of another head's or dim's
    # value there is a store-mismatch finding
    s, h, dim = np.arange(num_seqs), np.arange(num_heads), np.arange(hd)
    part_tags = {**seq_tag(num_seqs, s[:, None, None, None]), "head": h[None, :, None, None],
                 "dim": dim[None, None, None, :]}
    row_tags = {**seq_tag(num_seqs, s[:, None, None]), "head": h[None, :, None]}
    out_tags = {**seq_tag(num_seqs, s[:, None, None]), "head": h[None, :, None], "dim": dim[None, None, :]}
    bufs["tmp_out"] = Buffer.empty("tmp_out", (num_seqs, num_heads, max_parts, hd), np.float32, tags=part_tags)
    bufs["max_logits"] = Buffer.empty("max_logits", (num_seqs, num_heads, max_parts), np.float32, tags=row_tags)
    bufs["exp_sums"] = Buffer.empty("exp_sums", (num_seqs, num_heads, max_parts), np.float32, tags=row_tags)
    bufs["out"] = Buffer.empty("out", (num_seqs, num_heads, hd), np.float32, tags=out_tags)
    declare_decode_coverage(bufs["tmp_out"], bufs["out"], cache.context_lens, partition_size)
    geo = DecodeGeometry(num_heads=num_heads, num_kv_heads=kvh, head_dim=hd, block_size=cache.block_size,
                         max_blocks=cache.block_tables.shape[1], max_partitions=max_parts,
                         partition_size=partition_size)
    dec = HostSetup("paged_attention_decode", bufs,
                    tuple(bufs[n] for n in ("q", "k_cache", "v_cache", "k_scale", "v_scale", "block_tables",
                                            "context_lens", "exp_sums", "max_logits", "tmp_out")),
                    geo, grid=(num_seqs, max_parts, kvh), waves_per_group=4,
                    batch=num_seqs * max_parts * kvh,          # all workgroups side by side, traced or not,
                    provenance_batch=DECODE_PROVENANCE_BATCH,  # but at most this many with provenance
                    trace_batch=DECODE_TRACE_BATCH,            # and this many with the full trace
                    outputs=("tmp_out", "max_logits", "exp_sums"))
    red = HostSetup("paged_attention_reduce", bufs,
                    tuple(bufs[n] for n in ("tmp_out", "exp_sums", "max_logits", "context_lens", "out")),
                    geo.reduce(),
                    grid=(num_heads, num_seqs), waves_per_group=-(-hd // get_arch(arch).wave_size),
                    batch=num_heads * num_seqs, outputs=("out",))
    return DecodeSetup(bufs, dec, red)


def declare_decode_coverage(tmp_out: Buffer, out: Buffer, context_lens, partition_size: int):
    """What decode's outputs must consume, each token exactly once: tmp_out[s][h][p][d] the tokens
    of partition p of sequence s, out[s][h][d] every token of the sequence's context."""
    ctx = np.asarray(context_lens, np.int64)[:, None, None, None]
    p = np.arange(tmp_out.array.shape[2])[None, None, :, None]
    tmp_out.expect("token", p * partition_size, np.minimum((p + 1) * partition_size, ctx))
    out.expect("token", 0, ctx[..., 0])


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
               trace=True, provenance=True, partition_size=PARTITION, progress=None,
               kernel: Callable = paged_attention_decode, reduce_kernel: Callable = paged_attention_reduce
               ) -> DecodeResult:
    """paged_attention_decode + paged_attention_reduce on the simulator.

    ``kernel`` / ``reduce_kernel``: your own functions with the signatures of
    paged_attention_decode / paged_attention_reduce run in their place (buffers from
    ``decode_buffers``); ``grouping`` and ``formula`` are passed to ``kernel`` where it takes them."""
    check_kernel(kernel, "kernel")
    check_kernel(reduce_kernel, "reduce_kernel")
    setup = decode_buffers(q, cache, arch=arch, partition_size=partition_size)
    opts = kernel_options(kernel, "kernel", grouping=(grouping, "fragment"), formula=(formula, "derived"))
    r1 = setup.decode.launch(kernel, arch=arch, trace=trace, provenance=provenance, progress=progress, launches=2,
                             **opts)
    r2 = setup.reduce.launch(reduce_kernel, arch=arch, trace=trace, provenance=provenance, progress=progress,
                             launches=2)
    return setup.result([r1, r2], cache)


def _launch_kwargs(progress, name: str, launches: int | None = None) -> dict:
    """launch() keywords that report launch ``name`` (of ``launches``) to ``progress``, a
    gfxsim.progress.Progress; {} without one. The one place the runners pass ``progress=``."""
    if progress is None:
        return {}
    from gfxsim.progress import launch_kwargs
    return launch_kwargs(progress, launch, name, launches)


def make_cache(k, v, context_lens, *, block_size=16, smooth_k=False, seed=0) -> PagedKVCache:
    """The INT8 paged cache of k, v (see reference.int8_cache.build_paged_cache)."""
    return build_paged_cache(k, v, context_lens, block_size=block_size, smooth_k=smooth_k, seed=seed)
