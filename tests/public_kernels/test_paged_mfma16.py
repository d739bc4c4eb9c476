"""A paged decode attention written in the style of production ROCm kernels (block tables, vLLM's
cache layouts, query heads as the MFMA's 16 columns, per-partition softmax state and a reduce),
compiled by clang and run on the asm front end: outputs against float64 numpy, and the tokens each
v_mfma_f32_16x16x16_bf16 consumed, from tags on the caches."""
from __future__ import annotations

import subprocess
from collections import Counter

import numpy as np
import pytest

from gfxsim.asm import parse_file
from gfxsim.asm.run import run_asm
from gfxsim.hip.build import compile_flags
from gfxsim.hip.toolchain import get_target
from gfxsim.machine.memory import Buffer
from support import ROOT, need_toolchain

HERE = ROOT / "tests" / "public_kernels"
HEAD, BLOCK, PART = 32, 16, 64        # the kernel's constants
BATCH = 4
QK = PV = "v_mfma_f32_16x16x16_bf16"


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    tc = need_toolchain("gfx942")
    out = tmp_path_factory.mktemp("paged") / "paged_mfma16.s"
    cmd = [str(tc.clang), *compile_flags(get_target("gfx942")), f"-I{ROOT / 'kernels_hip'}", "-S",
           str(HERE / "paged_mfma16.hip"), "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True)
    f = parse_file(out)
    return f.kernel("paged_mfma16_qkv"), f.kernel("paged_mfma16_reduce")


def bf16(x):
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def value(b):
    return (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def case(contexts, kv_heads, gqa, seed=0):
    rng = np.random.default_rng(seed)
    seqs, heads = len(contexts), kv_heads * gqa
    max_blocks = -(-max(contexts) // BLOCK)
    n_blocks = seqs * max_blocks + 2
    tables = rng.permutation(n_blocks)[:seqs * max_blocks].reshape(seqs, max_blocks).astype(np.int32)
    slot = np.full((n_blocks, BLOCK), -1, np.int64)          # the token a cache slot holds: seq*1000 + t
    for s, n in enumerate(contexts):
        for t in range(n):
            slot[tables[s, t // BLOCK], t % BLOCK] = s * 1000 + t
    q = bf16(rng.standard_normal((seqs, heads, HEAD)))
    k = bf16(rng.standard_normal((n_blocks, kv_heads, HEAD // 8, BLOCK, 8)))
    v = bf16(rng.standard_normal((n_blocks, kv_heads, HEAD, BLOCK)))
    return dict(q=q, k=k, v=v, tables=tables, ctx=np.array(contexts, np.int32), kv_heads=kv_heads, gqa=gqa,
                k_tok=np.broadcast_to(slot[:, None, None, :, None], k.shape),
                v_tok=np.broadcast_to(slot[:, None, None, :], v.shape))


def reference(c, scale):
    """float64 softmax(q K^T * scale) V per (seq, head), with the kernel's per-partition state."""
    q, seqs = value(c["q"]), len(c["ctx"])
    heads, parts = q.shape[1], -(-int(c["ctx"].max()) // PART)
    ml, es = np.full((seqs, heads, parts), np.nan), np.full((seqs, heads, parts), np.nan)
    out = np.zeros((seqs, heads, HEAD))
    for s, n in enumerate(c["ctx"]):
        blk, off = c["tables"][s, np.arange(n) // BLOCK], np.arange(n) % BLOCK
        for h in range(heads):
            g = h // c["gqa"]
            kk = value(c["k"][blk, g, :, off, :].reshape(n, HEAD))
            vv = value(c["v"][blk, g, :, off])
            lg = kk @ q[s, h] * scale
            for p in range(-(-n // PART)):
                part = lg[p * PART:(p + 1) * PART]
                ml[s, h, p], es[s, h, p] = part.max(), np.exp(part - part.max()).sum()
            e = np.exp(lg - lg.max())
            out[s, h] = e @ vv / e.sum()
    return ml, es, out


def run_pair(kernels, c, scale=0.3):
    qkv, red = kernels
    seqs, heads = len(c["ctx"]), c["q"].shape[1]
    parts, max_blocks = -(-int(c["ctx"].max()) // PART), c["tables"].shape[1]
    ml = Buffer("max_logits", np.full((seqs, heads, parts), np.nan, np.float32))
    es = Buffer("exp_sums", np.full((seqs, heads, parts), np.nan, np.float32))
    partial = Buffer("partial", np.zeros((seqs, heads, parts, HEAD), np.float32))
    ctx = Buffer("context_lens", c["ctx"])
    run = run_asm(qkv, grid=(seqs, parts, c["kv_heads"]), block=64, batch=BATCH, args=dict(
        q=Buffer("q", c["q"]), k_cache=Buffer("k_cache", c["k"], tags={"token": c["k_tok"]}),
        v_cache=Buffer("v_cache", c["v"], tags={"vtoken": c["v_tok"]}),
        block_tables=Buffer("block_tables", c["tables"]), context_lens=ctx, max_logits=ml, exp_sums=es,
        partial=partial, kv_heads=c["kv_heads"], gqa=c["gqa"], max_blocks=max_blocks, partitions=parts,
        scale=np.float32(scale)))
    out = Buffer("out", np.zeros((seqs, heads, HEAD), np.float32))
    # the reduce reads the first launch's Buffers, with the token footprints it stored (sets over
    # more than one 64-token window at these contexts)
    run_asm(red, grid=(heads, seqs), block=64, args=dict(max_logits=ml, exp_sums=es, partial=partial,
                                                         context_lens=ctx, out=out, heads=heads, partitions=parts))
    return run, ml.array, es.array, out.array


@pytest.mark.parametrize("contexts,kv_heads,gqa", [((150, 37), 1, 8), ((64, 90), 2, 5)])
def test_paged_mfma16_matches_numpy_and_consumes_each_token_once_per_dim_slice(kernels, contexts, kv_heads, gqa):
    c = case(contexts, kv_heads, gqa)
    run, ml, es, out = run_pair(kernels, c)
    want_ml, want_es, want_out = reference(c, 0.3)
    live = ~np.isnan(want_ml)
    # the scores are exact fp32 sums of bf16 products; P is rounded to bf16 before PV
    np.testing.assert_allclose(ml[live], want_ml[live], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(es[live], want_es[live], rtol=1e-5)
    np.testing.assert_allclose(out, want_out, rtol=0, atol=2e-2 * np.abs(want_out).max())
    assert not run.errors, [f.message for f in run.errors]

    # K: every live token in exactly HEAD/16 QK^T instructions (one per 16-dim slice), each
    # instruction's A holding one 16-token tile of one sequence; V likewise in PV's A
    live_tokens = {s * 1000 + t for s, n in enumerate(contexts) for t in range(n)}
    for field in ("token", "vtoken"):
        sets = [m.token_set("A", field) for m in run.mmacs() if m.token_set("A", field)]
        # a slot's token is tagged on every KV head's row: each KV head's workgroups consume it
        assert Counter(t for s in sets for t in s) == {t: HEAD // 16 * kv_heads for t in live_tokens}
        for s in sets:
            tile = {(t // 1000, (t % 1000) // 16) for t in s}
            assert len(tile) == 1 and len(s) <= 16, sorted(s)
    assert {m.insn.mnemonic for m in run.mmacs()} == {QK}
