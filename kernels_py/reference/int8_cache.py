"""numpy reference of the INT8 KV-cache producer (`int8_kv_cache`) and of the paged cache it fills.

Layouts, rounding and the smooth-K convention are those of kernels_py/ALGORITHMS.md:
  k_cache [num_blocks, kv_heads, head_dim/16, block_size, 16] i8
  v_cache [num_blocks, kv_heads, head_dim, block_size]        i8   (token innermost)
  k_scale, v_scale [num_blocks, kv_heads, block_size]          f32  (per token, absmax/127)
Slots nobody wrote are poisoned so that a kernel reading them shows it: int8 -128 (symmetric
quantization never produces it) and scale NaN. Unused block-table entries are -1.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import numpy as np
from gfxsim.errors import ArgumentError, OutOfRangeError

QMAX = np.float32(127.0)
POISON_I8 = -128            # never written by the producer: values are clamped to [-127, 127]
HEAD_DIMS = (64, 128)
BLOCK_SIZES = (16, 32)


def quantize_with_amax(x: np.ndarray, amax: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Quantize `x` with a given absmax (broadcast against x), the kernels' exact fp32 recipe.

    scale = amax/127, inv = 127/amax (both fp32), q = clamp(rint(x*inv), ±127). amax == 0 gives
    scale 0 and q 0; so does an amax so small (< 127/FLT_MAX, e.g. exp underflow in W) that inv
    would overflow to inf and 0*inf make NaN. Returns (q int8 like x, scale f32 like amax).
    """
    x = np.asarray(x, np.float32)
    amax = np.asarray(amax, np.float32)
    live = amax >= QMAX / np.finfo(np.float32).max
    inv = np.where(live, QMAX / np.where(live, amax, 1), 0).astype(np.float32)
    y = np.asarray(x * inv)
    np.rint(y, out=y)                                             # rint: half to even (v_rndne_f32)
    np.clip(y, -127, 127, out=y)
    return y.astype(np.int8)[()], np.where(live, amax / QMAX, 0).astype(np.float32)


def quantize_int8(x: np.ndarray, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-vector int8: absmax over `axis`. Returns (q int8 like x, scale f32 without axis)."""
    x = np.asarray(x, np.float32)
    amax = np.max(np.abs(x), axis=axis, keepdims=True)
    q, scale = quantize_with_amax(x, amax)
    return q, np.squeeze(scale, axis)


@dataclass(frozen=True)
class PagedKVCache:
    """A filled INT8 paged KV cache plus the bookkeeping a kernel launch needs."""
    k_cache: np.ndarray       # [num_blocks, kv_heads, head_dim/16, block_size, 16] i8
    v_cache: np.ndarray       # [num_blocks, kv_heads, head_dim, block_size] i8
    k_scale: np.ndarray       # [num_blocks, kv_heads, block_size] f32
    v_scale: np.ndarray       # [num_blocks, kv_heads, block_size] f32
    block_tables: np.ndarray  # [num_seqs, max_blocks_per_seq] i32, -1 where unused
    context_lens: np.ndarray  # [num_seqs] i32
    slot_mapping: np.ndarray  # [sum(context_lens)] i32, sequences concatenated in order
    k_mean: np.ndarray | None  # [num_seqs, kv_heads, head_dim] f32 subtracted before quantizing K

    @property
    def block_size(self) -> int:
        return self.k_cache.shape[3]

    @property
    def num_kv_heads(self) -> int:
        return self.k_cache.shape[1]

    @property
    def head_dim(self) -> int:
        return self.v_cache.shape[2]

    def token_slots(self, seq: int) -> tuple[np.ndarray, np.ndarray]:
        """(physical block, offset) of each logical token 0..context_len-1 of `seq`."""
        t = np.arange(int(self.context_lens[seq]))
        return np.repeat(self.seq_blocks(seq), self.block_size)[:t.size], t % self.block_size

    def seq_blocks(self, seq: int) -> np.ndarray:
        """The physical blocks of `seq`'s logical blocks 0..ceil(context_len/block_size)-1."""
        n = int(self.context_lens[seq])
        blk = self.block_tables[seq, :-(-n // self.block_size)]
        if blk.size * self.block_size < n or np.any(blk < 0) or np.any(blk >= self.k_cache.shape[0]):
            raise OutOfRangeError(f"block_tables[{seq}] has no valid block for some of its "
                             f"{n} tokens (block_size {self.block_size})")
        return blk


def all_distinct(a: np.ndarray) -> bool:
    """Whether no value of ``a`` occurs twice: sorted, no neighbours equal. np.unique says the same
    but imports numpy.ma on its first call (numpy 2): ~10 ms of CPU, once a process."""
    s = np.sort(np.ravel(a))
    return bool((s[1:] != s[:-1]).all())


def make_block_tables(context_lens, block_size: int, *, seed: int = 0,
                      num_blocks: int | None = None) -> tuple[np.ndarray, int]:
    """Block tables over a seeded permutation of the physical blocks (so paging bugs show).

    `num_blocks` defaults to the blocks needed plus a few spare ones, so that a wrong block index
    usually lands on a poisoned block rather than out of bounds. Returns (block_tables, num_blocks).
    """
    lens = np.asarray(context_lens, np.int64)
    need = -(-lens // block_size)
    total = int(need.sum())
    num_blocks = total + max(2, total // 8) if num_blocks is None else int(num_blocks)
    if num_blocks < total:
        raise ArgumentError(f"num_blocks={num_blocks} < {total} blocks needed for context_lens {lens.tolist()}")
    perm = np.random.default_rng(seed).permutation(num_blocks)[:total]
    tables = np.full((lens.size, max(int(need.max(initial=0)), 1)), -1, np.int32)
    start = np.concatenate([[0], np.cumsum(need)])
    for s, n in enumerate(need):
        tables[s, :n] = perm[start[s]:start[s + 1]]
    return tables, num_blocks


def slot_mapping_for(block_tables: np.ndarray, context_lens, block_size: int) -> np.ndarray:
    """Physical slot `block*block_size + off` of every token, sequences concatenated."""
    slots = []
    for s, n in enumerate(np.asarray(context_lens)):
        t = np.arange(int(n))
        slots.append(block_tables[s, t // block_size].astype(np.int64) * block_size + t % block_size)
    return np.concatenate(slots).astype(np.int32) if slots else np.zeros(0, np.int32)


def int8_kv_cache(key, value, slot_mapping, k_cache, v_cache, k_scale, v_scale) -> None:
    """Reference of the producer kernel (same argument order): quantize each token per kv head over
    head_dim and scatter it into the cache in place. key/value [num_tokens, kv_heads, head_dim] f32;
    slot -1 skips the token."""
    _fill_cache(np.asarray(key, np.float32), np.asarray(value, np.float32), slot_mapping,
                k_cache, v_cache, k_scale, v_scale)


_CHUNK_ELEMS = 1 << 17       # quantize this many elements at a time (they stay in L2)


def _fill_cache(key, value, slot_mapping, k_cache, v_cache, k_scale, v_scale, key_offset=None) -> None:
    """int8_kv_cache on (key - key_offset) [num_tokens, kv_heads, head_dim] f32 (key_offset
    [kv_heads, head_dim] f32 or None; value None: K alone), a chunk of tokens at a time, K and V side by side on two
    threads when large (numpy frees the GIL). Whole blocks written in slot order (a context filling
    its blocks: nearly every token) are block copies, the other tokens go slot by slot; the bytes
    are those of a slot-by-slot scatter (a slot given twice: all slot by slot)."""
    slot_mapping = np.asarray(slot_mapping, np.int64)
    n, kvh, hd = key.shape
    bs = k_cache.shape[3]
    token = np.flatnonzero(slot_mapping >= 0)                # the key row of each written slot
    slots = slot_mapping[token]
    rest, chunks = np.arange(slots.size), []
    if slots.size >= bs and all_distinct(slots):
        steps = np.concatenate([[0], np.cumsum(np.diff(slots) == 1)])
        i = np.arange(slots.size - bs + 1)
        starts = i[(slots[i] % bs == 0) & (steps[i + bs - 1] - steps[i] == bs - 1)]
        per = max(1, _CHUNK_ELEMS // (bs * kvh * hd))            # blocks per chunk
        for c in range(0, starts.size, per):
            st = starts[c:c + per]
            t = token[(st[:, None] + np.arange(bs)).ravel()]
            rows = slice(int(t[0]), int(t[-1]) + 1) if t[-1] - t[0] == t.size - 1 else t
            chunks.append((slots[st] // bs, rows))
        left = np.ones(slots.size, bool)
        left[(starts[:, None] + np.arange(bs)).ravel()] = False
        rest = rest[left]
    blk, off = slots[rest] // bs, slots[rest] % bs

    def fill(x, offset, cache, scale, is_k):
        for blocks, rows in chunks:
            xq, xs = quantize_int8(x[rows] if offset is None else x[rows] - offset)
            if is_k:
                cache[blocks] = xq.reshape(-1, bs, kvh, hd // 16, 16).transpose(0, 2, 3, 1, 4)
            else:
                cache[blocks] = xq.reshape(-1, bs, kvh, hd).transpose(0, 2, 3, 1)
            scale[blocks] = xs.reshape(-1, bs, kvh).transpose(0, 2, 1)
        if rest.size:
            xq, xs = quantize_int8(x[token[rest]] if offset is None else x[token[rest]] - offset)
            # Advanced indices (blk, off) separated by slices: the indexed view is [n, kv_heads, ...].
            if is_k:
                cache[blk, :, :, off, :] = xq.reshape(-1, kvh, hd // 16, 16)
            else:
                cache[blk, :, :, off] = xq
            scale[blk, :, off] = xs

    if value is None:                                        # K alone (without_smooth_k)
        fill(key, key_offset, k_cache, k_scale, True)
        return
    if key.size < _CHUNK_ELEMS * 8:
        fill(key, key_offset, k_cache, k_scale, True)
        fill(value, None, v_cache, v_scale, False)
        return
    with ThreadPoolExecutor(1) as pool:
        v_done = pool.submit(fill, value, None, v_cache, v_scale, False)
        fill(key, key_offset, k_cache, k_scale, True)
        v_done.result()


def context_mean(k: np.ndarray, context_lens) -> np.ndarray:
    """Per-channel mean of K over each sequence's context, per kv head: [num_seqs, kv_heads, head_dim] f32."""
    # float64 sums token by token (numpy reduces a leading axis in order), without a float64 copy
    return np.stack([np.add.reduce(k[s, :int(n)], axis=0, dtype=np.float64) / int(n)
                     for s, n in enumerate(context_lens)]).astype(np.float32)


def check_cache_size(block_tables, need, num_blocks: int, kvh: int, hd: int, block_size: int,
                     available: int | None = None) -> None:
    """The cache a block table implies (its largest block id + 1 blocks) must fit in memory: a
    ValueError naming the entry, instead of numpy asking for terabytes."""
    from gfxsim.procmem import mem_available
    available = mem_available() if available is None else available
    nbytes = num_blocks * kvh * block_size * (2 * hd + 8)     # K and V int8, their f32 scales
    if available is None or nbytes <= available:
        return
    s, j = max(((s, j) for s, n in enumerate(need) for j in range(int(n))), key=lambda sj: block_tables[sj])
    gib = 1 << 30
    raise ArgumentError(f"block_tables: sequence {s} entry {j} is block {int(block_tables[s, j])}, so the cache "
                     f"would hold {num_blocks} blocks ({nbytes / gib:.1f} GiB), more than the "
                     f"{available / gib:.1f} GiB of memory available; the contexts use {int(sum(need))} blocks: "
                     f"number them from 0")


def build_paged_cache(k, v, context_lens, *, block_size: int = 16, smooth_k: bool = False,
                      block_tables: np.ndarray | None = None, num_blocks: int | None = None,
                      seed: int = 0, available: int | None = None, fill: bool = True) -> PagedKVCache:
    """Quantize padded K/V [num_seqs, max_context, kv_heads, head_dim] f32 into a paged INT8 cache.

    smooth_k subtracts each sequence's per-channel K mean (per kv head) before quantizing; softmax
    is invariant to it (each query's logits shift by a constant q·k_mean/sqrt(d)). Without
    `block_tables`, a seeded shuffled one is made; a given one sizes the cache by its largest block
    id, refused where that cache would not fit ``available`` bytes (default: the machine's MemAvailable).
    ``fill=False``: the tables, slots and K mean, the caches still poisoned; fill_paged_cache fills
    them (a caller that has other work meanwhile: int8_kv_cache's runner, beside the simulation).
    """
    k = np.asarray(k, np.float32)
    v = np.asarray(v, np.float32)
    lens = np.asarray(context_lens, np.int32)
    num_seqs, _, kvh, hd = k.shape
    if hd not in HEAD_DIMS:
        raise ArgumentError(f"head_dim {hd} not in {HEAD_DIMS}")
    if block_size not in BLOCK_SIZES:
        raise ArgumentError(f"block_size {block_size} not in {BLOCK_SIZES}")
    if block_tables is None:
        block_tables, num_blocks = make_block_tables(lens, block_size, seed=seed, num_blocks=num_blocks)
    else:
        block_tables = np.asarray(block_tables, np.int32)
        need = -(-lens.astype(np.int64) // block_size)
        if block_tables.shape[0] != num_seqs or block_tables.shape[1] < need.max(initial=0):
            raise ArgumentError(f"block_tables shape {block_tables.shape} cannot hold context_lens "
                             f"{lens.tolist()} with block_size {block_size}")
        used = np.concatenate([block_tables[s, :n] for s, n in enumerate(need)])
        if np.any(used < 0) or not all_distinct(used):
            raise ArgumentError("block_tables: a block used by a context is negative or used twice")
        num_blocks = max(int(used.max(initial=-1)) + 1, num_blocks or 0)
        check_cache_size(block_tables, need, num_blocks, kvh, hd, block_size, available)
    slots = slot_mapping_for(block_tables, lens, block_size)
    k_mean = context_mean(k, lens) if smooth_k else None
    k_cache = np.full((num_blocks, kvh, hd // 16, block_size, 16), POISON_I8, np.int8)
    v_cache = np.full((num_blocks, kvh, hd, block_size), POISON_I8, np.int8)
    k_scale = np.full((num_blocks, kvh, block_size), np.nan, np.float32)
    v_scale = np.full((num_blocks, kvh, block_size), np.nan, np.float32)
    cache = PagedKVCache(k_cache, v_cache, k_scale, v_scale, block_tables, lens, slots, k_mean)
    if fill:
        fill_paged_cache(cache, [k[s, :n] for s, n in enumerate(lens)], [v[s, :n] for s, n in enumerate(lens)],
                         key_offset=k_mean)
    return cache


def fill_paged_cache(cache: PagedKVCache, k_rows, v_rows, *, key_offset=None) -> None:
    """The producer on each sequence's tokens into ``cache`` (build_paged_cache(fill=False)'s):
    ``k_rows[s]``, ``v_rows[s]`` sequence s's [context, kv_heads, head_dim] f32, K quantized less
    ``key_offset[s]`` (the K mean, subtracted in f32) where given, else as given."""
    start = 0
    for s, n in enumerate(cache.context_lens):
        _fill_cache(k_rows[s], v_rows[s], cache.slot_mapping[start:start + n], cache.k_cache, cache.v_cache,
                    cache.k_scale, cache.v_scale, key_offset=None if key_offset is None else key_offset[s])
        start += n


def without_smooth_k(cache: PagedKVCache, k) -> PagedKVCache:
    """``cache`` with K quantized from ``k`` (padded [num_seqs, max_context, kv_heads, head_dim] f32)
    without smooth-K: what build_paged_cache(smooth_k=False) makes with the same block tables, V
    (the same bytes either way) shared instead of quantized again."""
    k = np.asarray(k, np.float32)
    k_cache = np.full_like(cache.k_cache, POISON_I8)
    k_scale = np.full_like(cache.k_scale, np.nan)
    start = 0
    for s, n in enumerate(cache.context_lens):
        _fill_cache(k[s, :n], None, cache.slot_mapping[start:start + n], k_cache, None, k_scale, None)
        start += n
    return replace(cache, k_cache=k_cache, k_scale=k_scale, k_mean=None)


def gather_int8(cache: PagedKVCache, seq: int):
    """A sequence's raw cache contents in logical token order:
    (kq [ctx, kv_heads, head_dim] i8, k_scale [ctx, kv_heads], vq [ctx, kv_heads, head_dim] i8, v_scale)."""
    blk = cache.seq_blocks(seq)                  # block by block, then tokens in logical order
    n, kvh, hd = int(cache.context_lens[seq]), cache.num_kv_heads, cache.head_dim
    kq = cache.k_cache[blk].transpose(0, 3, 1, 2, 4).reshape(-1, kvh, hd)[:n]
    vq = cache.v_cache[blk].transpose(0, 3, 1, 2).reshape(-1, kvh, hd)[:n]
    ks = cache.k_scale[blk].transpose(0, 2, 1).reshape(-1, kvh)[:n]
    vs = cache.v_scale[blk].transpose(0, 2, 1).reshape(-1, kvh)[:n]
    return kq, ks, vq, vs


def gather_kv(cache: PagedKVCache, seq: int, *, add_mean: bool = True,
              out: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Dequantized (k, v) of one sequence, [ctx, kv_heads, head_dim] f32 (k_mean added back unless
    told not), into ``out`` (two f32 arrays of that shape) where given."""
    kq, ks, vq, vs = gather_int8(cache, seq)
    k_out, v_out = out if out is not None else (None, None)
    k = np.multiply(kq, ks[..., None], out=k_out, dtype=np.float32)
    if add_mean and cache.k_mean is not None:
        k = np.add(k, cache.k_mean[seq], out=k)
    return k, np.multiply(vq, vs[..., None], out=v_out, dtype=np.float32)
