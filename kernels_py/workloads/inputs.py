"""User tensors from an .npz file (`gfxsim run --inputs FILE.npz`), validated, in the generator's shape.

Arrays (names as stored by `np.savez`):
  q             [num_seqs, num_heads, head_dim] (decode) or
                [num_seqs, num_queries, num_heads, head_dim] (prefill: the last num_queries
                positions of each context)                                              float
  k, v          [num_seqs, max_context, num_kv_heads, head_dim] (padded) or
                [total_tokens, num_kv_heads, head_dim] (packed, needs context_lens)     float
  context_lens  [num_seqs] integer, optional for padded k/v (default: max_context each)
  block_tables  [num_seqs, max_blocks] integer, optional (physical block of each logical block)
head_dim 64 or 128; num_heads a multiple of num_kv_heads with ratio <= 16. Returns the dict of
kernels_py.workloads.data.make_attention_inputs: q, k, v f32 (k/v padded, NaN past each context),
context_lens i32, plus block_tables i32 when given.
"""
from __future__ import annotations

from collections.abc import Mapping
from os import PathLike

import numpy as np

from gfxsim.errors import GfxSimError
from kernels_py.reference.int8_cache import BLOCK_SIZES, HEAD_DIMS

NAMES = ("q", "k", "v", "context_lens", "block_tables")
MAX_GQA_RATIO = 16


class InputError(GfxSimError, ValueError):
    """A user tensor does not fit the kernels; the message names the array, the expectation and what was found."""


def load_inputs(path: str | PathLike, *, block_size: int | None = None) -> dict[str, np.ndarray]:
    """Read and validate an .npz of attention inputs (see the module docstring)."""
    import os
    import zipfile
    shown = os.fspath(path)
    if not os.path.exists(path):
        raise InputError(f"{shown}: no such file")
    if os.path.isdir(path):
        raise InputError(f"{shown}: is a directory, not an .npz file")
    try:
        with open(path, "rb") as f:
            head = f.read(6)
    except OSError as e:
        raise InputError(f"{shown}: cannot read: {e.strerror or e}") from e
    if head == b"\x93NUMPY":
        raise InputError(f"{shown}: is a single-array .npy file; give an .npz with arrays q, k, v "
                         f"(np.savez(path, q=q, k=k, v=v))")
    if not zipfile.is_zipfile(path):
        raise InputError(f"{shown}: cannot read as .npz: not a zip file; save the arrays with np.savez(path, q=q, k=k, v=v)")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {name: z[name] for name in z.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise InputError(f"{shown}: cannot read as .npz: {msg}") from e
    return validate_inputs(arrays, source=shown, block_size=block_size)


def validate_inputs(arrays: Mapping[str, np.ndarray], *, source: str = "inputs",
                    block_size: int | None = None) -> dict[str, np.ndarray]:
    """Validate in-memory arrays named as in an .npz and return them in the generator's shape.
    ``block_size``: the cache's block size, to check the block_tables entries each sequence reads
    (None: the entries read at the largest block size, the fewest)."""
    def fail(msg):
        raise InputError(f"{source}: {msg}")

    missing = [n for n in ("q", "k", "v") if n not in arrays]
    if missing:
        fail(f"missing array(s) {', '.join(map(repr, missing))}; found {sorted(arrays)}")
    unknown = sorted(set(arrays) - set(NAMES))
    if unknown:
        fail(f"unknown array(s) {', '.join(map(repr, unknown))}; expected names {list(NAMES)}")
    q, k, v = (np.asarray(arrays[n]) for n in ("q", "k", "v"))
    for name, a in (("q", q), ("k", k), ("v", v)):
        if a.dtype.kind != "f" and a.dtype.name != "bfloat16":      # ml_dtypes' bf16, not imported here
            fail(f"array {name!r} must have a float dtype; found {a.dtype}")

    if q.ndim not in (3, 4):
        fail(f"array 'q' must be [num_seqs, num_heads, head_dim] (decode) or "
             f"[num_seqs, num_queries, num_heads, head_dim] (prefill); found ndim {q.ndim}, shape {q.shape}")
    num_seqs, num_heads, head_dim = q.shape[0], q.shape[-2], q.shape[-1]
    num_queries = q.shape[1] if q.ndim == 4 else 1
    if head_dim not in HEAD_DIMS:
        fail(f"array 'q' head_dim (last axis) must be one of {HEAD_DIMS}; found {head_dim} in shape {q.shape}")
    if k.ndim not in (3, 4):
        fail(f"array 'k' must be [num_seqs, max_context, num_kv_heads, head_dim] or "
             f"[total_tokens, num_kv_heads, head_dim]; found ndim {k.ndim}, shape {k.shape}")
    if v.shape != k.shape:
        fail(f"array 'v' must have the shape of 'k' {k.shape}; found {v.shape}")
    if k.shape[-1] != head_dim:
        fail(f"array 'k' head_dim (last axis) must equal q's {head_dim}; found shape {k.shape}")
    num_kv_heads = k.shape[-2]
    if num_kv_heads < 1 or num_heads % num_kv_heads:
        fail(f"num_heads {num_heads} (array 'q' axis -2) must be a multiple of num_kv_heads "
             f"{num_kv_heads} (array 'k' axis -2)")
    if num_heads // num_kv_heads > MAX_GQA_RATIO:
        fail(f"GQA ratio num_heads/num_kv_heads = {num_heads}/{num_kv_heads} = "
             f"{num_heads // num_kv_heads} exceeds {MAX_GQA_RATIO} (one 16-row MMAC tile per kv head)")

    packed = k.ndim == 3
    if packed and "context_lens" not in arrays:
        fail(f"packed 'k' {k.shape} ([total_tokens, num_kv_heads, head_dim]) needs array 'context_lens'")
    if not packed and k.shape[0] != num_seqs:
        fail(f"array 'k' axis 0 (num_seqs) must equal q's {num_seqs}; found shape {k.shape}")
    length = k.shape[0] if packed else k.shape[1]
    if "context_lens" in arrays:
        lens = np.asarray(arrays["context_lens"])
        if lens.dtype.kind not in "iu":
            fail(f"array 'context_lens' must have an integer dtype; found {lens.dtype}")
        if lens.shape != (num_seqs,):
            fail(f"array 'context_lens' must be [num_seqs] = ({num_seqs},); found shape {lens.shape}")
    else:
        lens = np.full(num_seqs, length)
    if np.any(lens < num_queries) or np.any(lens < 1):
        fail(f"array 'context_lens' values must be >= max(1, num_queries={num_queries}); found {lens.tolist()}")
    if packed and lens.sum() != length:
        fail(f"array 'context_lens' must sum to k's total_tokens {length}; found sum {int(lens.sum())}")
    if not packed and lens.max() > length:
        fail(f"array 'context_lens' max {int(lens.max())} is larger than k's max_context {length} (axis 1)")

    T = int(lens.max())
    kp = np.full((num_seqs, T, num_kv_heads, head_dim), np.nan, np.float32)
    vp = np.full_like(kp, np.nan)
    start = np.concatenate([[0], np.cumsum(lens)])
    for s, n in enumerate(lens):
        src = slice(start[s], start[s + 1]) if packed else (s, slice(0, n))
        kp[s, :n], vp[s, :n] = k[src], v[src]
    out = dict(q=q.astype(np.float32), k=kp, v=vp, context_lens=lens.astype(np.int32))
    for name in ("q", "k", "v"):
        a = out[name]
        if name == "q" and np.isfinite(a).all() or name != "q" and all(
                np.isfinite(a[s, :n]).all() for s, n in enumerate(lens)):        # padding may be anything
            continue
        bad = ~np.isfinite(a)
        if name != "q":
            bad &= np.arange(T)[None, :, None, None] < lens[:, None, None, None]
        if bad.any():
            where = "[seq, token, kv_head, d]" if name != "q" else "index"
            fail(f"array {name!r} has a non-finite value inside the context, first at {where} "
                 f"{tuple(int(i) for i in np.argwhere(bad)[0])} (padded coordinates)")

    if "block_tables" in arrays:
        bt = np.asarray(arrays["block_tables"])
        if bt.dtype.kind not in "iu" or bt.ndim != 2 or bt.shape[0] != num_seqs:
            fail(f"array 'block_tables' must be integer [num_seqs={num_seqs}, max_blocks]; "
                 f"found dtype {bt.dtype}, shape {bt.shape}")
        bs = block_size if block_size is not None else max(BLOCK_SIZES)
        if bt.shape[1] * bs < T:
            s = int(np.argmax(lens))
            fail(f"array 'block_tables' has too few entries, {bt.shape[1]} per sequence; sequence {s} (context {T}) "
                 f"needs {-(-T // bs)} at block_size {bs}" + ("" if block_size is not None else
                                                               f" (the largest of {BLOCK_SIZES})"))
        seen = {}
        for s_, n in enumerate(lens):
            need = -(-int(n) // bs)
            for j in range(need):
                b = int(bt[s_, j])
                if b < 0 or b > np.iinfo(np.int32).max:      # the kernels' block ids are int32
                    fail(f"array 'block_tables': sequence {s_} entry {j} is {b}; sequence {s_} (context "
                         f"{int(n)}) reads entries 0..{need - 1} at block_size {bs}, each must be a block in "
                         f"[0, 2**31)")
                if b in seen:
                    s0, j0 = seen[b]
                    fail(f"array 'block_tables': sequence {s_} entry {j} is block {b}, already used by "
                         f"sequence {s0} entry {j0}; a physical block holds one sequence's tokens")
                seen[b] = (s_, j)
        out["block_tables"] = bt.astype(np.int32)
    return out


def prepare_inputs(*, context, heads, kv_heads, head_dim, seed, inputs=None, num_queries=None, queries=True,
                   query_heads=None):
    """The attention inputs of one run: the user's arrays (already validated by load_inputs), or
    generated ones of one sequence of ``context`` tokens (make_attention_inputs; ``queries=False``:
    without q, for a run that reads only K and V; ``query_heads=H``: q of the first H heads only,
    for a run that reads no other)."""
    if inputs is not None:
        return inputs
    from kernels_py.workloads.data import make_attention_inputs
    return make_attention_inputs(seed=seed, num_seqs=1, num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
                                 context_lens=[context], num_queries=num_queries, queries=queries,
                                 query_heads=query_heads)
