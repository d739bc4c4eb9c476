"""Seeded, realistic attention inputs for the INT8 kernels and their references.

What real LLM attention inputs look like, and how each trait is made here:
- Peaked softmax rows. Every query row matches a few keys strongly: q = z + Σ_p a_p·k̃_p, with k̃ the
  keys centred over the context and a solved so that each planted key's logit q·k̃_p/sqrt(d) is
  exactly its Δ_p. Token 0 is an attention sink for every row (Δ ∈ [0.8, 1]·`sink_logit`) whose V
  is `sink_v_scale` times smaller, as sinks carry little value; `peaks` further keys per row,
  drawn from the tokens the row can see, get Δ ∈ [0.7, 1]·`peak_logit`. z ~ N(0, σ_h²) gives bulk
  logits of std `logit_std·τ_h` (τ_h ∈ `temperature_range`, a per-query-head temperature); the
  planted part adds ΣΔ²/d of bulk variance (a query that singles out a few keys in d = 128 dims
  cannot be orthogonal to the rest), so with the defaults the bulk logit std is 1.4-1.7 and its
  largest values reach the planted ones. At 4K context the sink holds about 35-60% of a row's mass,
  at 16K 10-30%; the next largest probability is typically 0.3-1.5%, at times several %.
- Outlier channels in K. `k_outliers` channels per kv head carry a large offset (|mean| about
  `k_outlier_offset`, random sign) and a wider spread (`k_outlier_std`); every channel also has a
  small mean and a log-normal std. The offsets shift all logits of a query by the same amount
  (softmax does not see them) but they set K's per-token absmax, hence its int8 step: this is
  what smooth-K (subtracting the per-channel mean before quantizing) repairs.
- Per-token V magnitude spread. V = v_std·s_t·c_d·N(0, 1), s_t log-normal (`v_token_sigma`) per
  token, c_d a mild per-channel spread; no outlier channels (as in real V caches).
Model-level traits (channel stds and means, outlier channels, temperatures) are drawn once per
call and shared by all sequences; tokens and queries are drawn per sequence. Padding past a
sequence's context is NaN, so a consumer that reads it shows it.

The int8 errors scale with the outputs: the fragment-grouped INT8 math stays at a relative L1 of
about 2% of the BF16 reference whatever the magnitudes, so max_abs grows linearly with `v_std`.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from kernels_py.reference.int8_cache import HEAD_DIMS
from gfxsim.errors import ArgumentError


@dataclass(frozen=True)
class AttentionDataSpec:
    logit_std: float = 1.0                  # std of z's logits q·k/sqrt(d) at temperature 1
    temperature_range: tuple[float, float] = (0.75, 1.25)
    peaks: int = 4                          # planted matching keys per query row (besides the sink)
    peak_logit: float = 5.0                 # planted logit above the bulk mean, times U(0.7, 1)
    sink_logit: float = 10.0                # token 0's logit, times U(0.8, 1); 0: no sink
    sink_v_scale: float = 0.1               # token 0's V is this much smaller
    k_channel_mean: float = 0.5             # std of the small per-channel means of K
    k_channel_sigma: float = 0.25           # log-normal sigma of K's per-channel std
    k_outliers: int = 4                     # outlier channels per kv head
    k_outlier_offset: float = 12.0          # |mean| of an outlier channel, times U(0.75, 1.25)
    k_outlier_std: float = 1.5
    v_std: float = 0.5                      # median per-token scale of V (elements ~N(0, v_std²))
    v_token_sigma: float = 0.5              # log-normal sigma of the per-token V scale
    v_channel_sigma: float = 0.2

    def __post_init__(self):
        lo, hi = self.temperature_range
        if not 0 < lo <= hi:
            raise ArgumentError(f"temperature_range {self.temperature_range} must satisfy 0 < lo <= hi")
        if self.peaks < 0 or self.k_outliers < 0:
            raise ArgumentError("peaks and k_outliers must be >= 0")


def make_attention_inputs(seed: int = 0, *, num_seqs: int = 1, num_heads: int = 8,
                          num_kv_heads: int = 1, head_dim: int = 128, context_lens=4096,
                          num_queries: int | None = None,
                          spec: AttentionDataSpec = AttentionDataSpec(), queries: bool = True,
                          query_heads: int | None = None) -> dict[str, np.ndarray]:
    """Seeded attention inputs.

    num_queries None: decode, q [num_seqs, num_heads, head_dim]. An int N: prefix prefill,
    q [num_seqs, N, num_heads, head_dim], the queries being the last N positions of each context.
    context_lens: an int (all sequences) or one per sequence.
    Returns dict(q f32, k f32 [num_seqs, max_context, num_kv_heads, head_dim], v f32 (same),
    context_lens i32 [num_seqs]) -- the shape `kernels_py.workloads.inputs.load_inputs` returns.
    ``queries=False``: no q (a consumer of the cache only, int8_kv_cache): the same k, v and
    context_lens bit for bit, without solving the planted queries (K's channel statistics, a
    solve per head); the query draws are still made where a later sequence's draws follow them.
    ``query_heads=H``: q of the first H query heads only ([..., H, head_dim]), each the same bits as
    in all heads' q (a run that reads only those: the later heads' draws of the last sequence,
    their solves and their KV heads' variances are not made; nothing after them reads the draws).
    """
    if head_dim not in HEAD_DIMS:
        raise ArgumentError(f"head_dim {head_dim} not in {HEAD_DIMS}")
    if num_kv_heads < 1 or num_heads % num_kv_heads:
        raise ArgumentError(f"num_heads {num_heads} is not a multiple of num_kv_heads {num_kv_heads}")
    lens = np.broadcast_to(np.asarray(context_lens, np.int64), (num_seqs,)).copy()
    nq = 1 if num_queries is None else int(num_queries)
    if np.any(lens < max(nq, 1)):
        raise ArgumentError(f"context_lens {lens.tolist()} must be >= num_queries {nq} and >= 1")
    rng = np.random.default_rng(seed)
    kvh, d, ratio = num_kv_heads, head_dim, num_heads // num_kv_heads
    nqh = num_heads if query_heads is None else int(query_heads)
    if not 1 <= nqh <= num_heads:
        raise ArgumentError(f"query_heads {query_heads} must be in [1, num_heads {num_heads}]")
    g_used = (nqh - 1) // ratio + 1                                 # the KV heads whose statistics q reads

    k_std, k_off, v_ch, tau = _model_traits(rng, num_heads, kvh, d, spec)

    T = int(lens.max())
    # one block: int8_kv_cache's [K, V] in place; its normals already drawn where start_normals began them
    early = _take_early((seed, num_heads, kvh, d, T, spec) if num_seqs == 1 else None)
    k, v = early if early is not None else np.empty((2, num_seqs, T, kvh, d), np.float32)
    q = np.zeros((num_seqs, nq, nqh, d), np.float32) if queries else None
    for s, ctx in enumerate(lens):
        ctx = int(ctx)
        k[s, ctx:] = v[s, ctx:] = np.nan
        # K's and V's normals come from two streams seeded by rng (so they are drawn side by side,
        # straight into k and v as float32); then V's token scale and the planted queries from rng.
        k_rng, v_rng = _streams(rng)
        vt = spec.v_std * np.exp(spec.v_token_sigma * rng.standard_normal((ctx, kvh, 1)))
        pos = ctx - nq + np.arange(nq)
        # without queries the draws only keep rng where the next sequence reads it
        n_draws = num_heads if s < num_seqs - 1 else nqh if queries else 0
        draws = [_draw_queries(rng, pos, d, spec) for _ in range(n_draws)][:nqh]
        ks, vs = k[s, :ctx], v[s, :ctx]                              # contiguous [ctx, kvh, d] views

        def make_v(vs=vs, vt=vt):
            # V = (v_std * exp(v_token_sigma * vt)) * v_ch * z, token chunk by token chunk (in cache)
            if early is None:
                v_rng.standard_normal(dtype=np.float32, out=vs)
            ch = v_ch.astype(np.float32)
            for c in range(0, ctx, _ROWS):
                vs[c:c + _ROWS] *= (vt[c:c + _ROWS] * ch).astype(np.float32)
            if spec.sink_logit:
                vs[0] *= np.float32(spec.sink_v_scale)

        with ThreadPoolExecutor(1) as pool:                         # V beside K (numpy frees the GIL)
            v_done = pool.submit(make_v) if ks.size >= _PARALLEL else None
            # K = k_off + k_std * z; the channel means of K over the context (float64 sums), then
            # the variance of the centred keys per channel (the channel offsets move no logit)
            if early is None:
                k_rng.standard_normal(dtype=np.float32, out=ks)
            std, off = k_std.astype(np.float32), k_off.astype(np.float32)
            helper = pool if v_done is not None else None      # chunks shared with V's thread once V is made

            def scale_k(c, _):
                x = ks[c:c + _ROWS]
                x *= std
                x += off
                return np.add.reduce(x[:, :g_used], axis=0, dtype=np.float64) if queries else None

            sums = _each_chunk(scale_k, ctx, helper)
            total = np.zeros((g_used, d))                          # the KV heads q reads
            if queries:
                for part in sums:                                # in token order, as one loop adds them
                    total += part
            if not queries:
                if v_done is None:
                    make_v()
                else:
                    v_done.result()
                continue
            mean = total / ctx

            def centred_squares(c, buf):
                x = np.subtract(ks[c:c + _ROWS, :g_used], mean, out=buf[:min(_ROWS, ctx - c)])
                return np.add.reduce(np.multiply(x, x, out=x), axis=0)

            sq = np.zeros((g_used, d))
            for part in _each_chunk(centred_squares, ctx, helper,
                                    scratch=lambda: np.empty((min(ctx, _ROWS), g_used, d))):   # a float64 chunk
                sq += part
            var = sq / ctx                                              # [g_used, d]
            kp_all = [ks[idx, h // ratio] - mean[h // ratio] for h, (_, idx, _) in enumerate(draws)]
            if v_done is None:
                make_v()
            else:
                v_done.result()
        for h, (z, idx, delta) in enumerate(draws):
            bulk = var[h // ratio].mean()          # 0 for a one-token context (its centred key is 0)
            z = z * (spec.logit_std * tau[h] / np.sqrt(bulk)) if bulk > 0 else z * (spec.logit_std * tau[h])
            q[s, :, h] = _solve_queries(z, kp_all[h], delta, d)
    out = dict(q=q[:, 0] if num_queries is None else q) if queries else {}
    return dict(out, k=k, v=v, context_lens=lens.astype(np.int32))


def _model_traits(rng, num_heads: int, kvh: int, d: int, spec: AttentionDataSpec):
    """The model-level traits, shared by every sequence, drawn first from ``rng``: K's channel
    stds and offsets (outlier channels included), V's channel spread, the heads' temperatures."""
    k_std = np.exp(spec.k_channel_sigma * rng.standard_normal((kvh, d)))
    k_off = spec.k_channel_mean * rng.standard_normal((kvh, d))
    for g in range(kvh):
        ch = rng.choice(d, spec.k_outliers, replace=False)
        k_off[g, ch] = rng.choice([-1.0, 1.0], ch.size) * spec.k_outlier_offset * rng.uniform(0.75, 1.25, ch.size)
        k_std[g, ch] = spec.k_outlier_std
    v_ch = np.exp(spec.v_channel_sigma * rng.standard_normal((kvh, d)))
    tau = rng.uniform(*spec.temperature_range, num_heads)
    return k_std, k_off, v_ch, tau


def _streams(rng):
    """A sequence's K and V normal streams, seeded by ``rng``'s next two draws."""
    return (np.random.Generator(np.random.PCG64(int(x))) for x in rng.integers(0, 2 ** 63, 2))


# the one early fill begun (start_normals): [(key, Future of its [2, 1, T, kvh, d] block)], taken
# or dropped by the next make_attention_inputs, so at most one block waits here
_EARLY: list = []


def start_normals(seed: int = 0, *, num_heads: int, num_kv_heads: int, head_dim: int, context: int,
                  spec: AttentionDataSpec = AttentionDataSpec()) -> None:
    """Begin, on a thread, the K and V standard normals of make_attention_inputs(seed, num_seqs=1,
    ...) of one sequence of ``context`` tokens: its K/V block with the same streams' draws (the same
    model-level draws of ``seed`` come first), which the next make_attention_inputs of that key takes
    instead of drawing them (any other call drops it). `gfxsim run` begins it as soon as its
    arguments are known, so the fills (numpy frees the GIL in them) run while the runners' modules
    import. The normals do not depend on the queries asked for (queries, query_heads, num_queries)."""
    from concurrent.futures import Future
    key = (int(seed), int(num_heads), int(num_kv_heads), int(head_dim), int(context), spec)
    done = Future()

    def fill():
        try:
            rng = np.random.default_rng(seed)
            _model_traits(rng, num_heads, num_kv_heads, head_dim, spec)
            k_rng, v_rng = _streams(rng)
            block = np.empty((2, 1, context, num_kv_heads, head_dim), np.float32)
            with ThreadPoolExecutor(1) as pool:                 # V beside K, as make_attention_inputs
                v_done = pool.submit(v_rng.standard_normal, dtype=np.float32, out=block[1, 0]) \
                    if block[0].size >= _PARALLEL else None
                k_rng.standard_normal(dtype=np.float32, out=block[0, 0])
                if v_done is None:
                    v_rng.standard_normal(dtype=np.float32, out=block[1, 0])
                else:
                    v_done.result()
            done.set_result(block)
        except BaseException as e:             # noqa: BLE001 - raised where the block is taken
            done.set_exception(e)

    _EARLY[:] = [(key, done)]
    threading.Thread(target=fill, name="early normals", daemon=True).start()


def _take_early(key):
    """The early block of ``key`` (its normals drawn), or None; either way none waits any more."""
    try:
        got, done = _EARLY.pop()
    except IndexError:
        return None
    return done.result() if got == key else None


_PARALLEL = 1 << 20               # from this many K elements on, V is made on a second thread
_ROWS = 256                       # tokens per chunk of the in-place arithmetic (stays in cache)


def _each_chunk(fn, ctx: int, pool=None, scratch=None) -> list:
    """[fn(c, buf) for each chunk start c = 0, _ROWS, ... < ctx], in that order; with ``pool`` (a
    one-thread executor) its thread takes chunks too once free (K's passes share the second core
    with V's once V is made; this thread never waits for it to start, only for the chunks it
    took). Every chunk's result is its own, so who computes it changes no bit; the caller folds
    them in order. ``scratch()``: each thread's ``buf``."""
    starts = range(0, ctx, _ROWS)
    out = [None] * len(starts)
    nxt = iter(range(len(starts)))            # next() on a range iterator: one chunk to one thread
    left, errors, cond = [len(starts)], [], threading.Condition()

    def work():
        try:
            buf = scratch() if scratch is not None else None
            for i in nxt:
                out[i] = fn(starts[i], buf)
                with cond:
                    left[0] -= 1
                    cond.notify_all()
        except BaseException as e:            # noqa: BLE001 - raised on the caller's thread
            with cond:
                errors.append(e)
                cond.notify_all()

    if pool is not None:
        pool.submit(work)
    work()
    with cond:
        cond.wait_for(lambda: left[0] == 0 or errors)
    if errors:
        raise errors[0]
    return out


def _draw_queries(rng, pos: np.ndarray, d: int, spec: AttentionDataSpec):
    """One query head's draws, in order: z [len(pos), d] (unscaled), the planted tokens idx
    [len(pos), n] (token 0, the sink, first) and their logits delta [len(pos), n]."""
    z = rng.standard_normal((pos.size, d))
    sink = 1 if spec.sink_logit else 0
    n = min(spec.peaks, int(pos.min()) + 1 - sink)      # peaks drawn from the visible tokens 1..pos
    # sink + a choice among p + 1 - sink: the same draws and values as a choice from arange(sink, p + 1)
    idx = np.stack([sink + rng.choice(p + 1 - sink, n, replace=False) for p in pos]).reshape(pos.size, n)
    delta = spec.peak_logit * rng.uniform(0.7, 1.0, (pos.size, n))
    if sink:
        idx = np.concatenate([np.zeros((pos.size, 1), int), idx], axis=1)
        delta = np.concatenate([spec.sink_logit * rng.uniform(0.8, 1.0, (pos.size, 1)), delta], axis=1)
    return z, idx, delta


def _solve_queries(z: np.ndarray, kp: np.ndarray, delta: np.ndarray, d: int) -> np.ndarray:
    """Queries [rows, d]: q = z + Σ_p a_p·k̃_p with z giving logits of std bulk_std (z scaled by
    bulk_std / sqrt(mean channel variance of k̃)) and a solved so that each planted key's logit
    q·k̃_p/sqrt(d) is exactly its Δ_p. kp [rows, n, d]: the planted centred keys k̃_p."""
    if kp.shape[1] == 0:
        return z.astype(np.float32)
    rhs = np.sqrt(d) * delta - np.einsum("rnd,rd->rn", kp, z)
    gram = kp @ kp.transpose(0, 2, 1)
    try:
        a = np.linalg.solve(gram, rhs[..., None])[..., 0]
    except np.linalg.LinAlgError:
        # degenerate planted keys (a context of 1-2 tokens: the centred keys are 0 or opposite):
        # the least-squares a, so q is finite and matches what can be matched
        a = np.stack([np.linalg.lstsq(g, r, rcond=None)[0] for g, r in zip(gram, rhs)])
    return (z + np.einsum("rn,rnd->rd", a, kp)).astype(np.float32)
