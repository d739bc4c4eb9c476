"""Inputs, tags and a float64 reference for vLLM-style paged decode attention.

Layouts are vLLM's: Q [seqs, heads, head]; K cache [blocks, kv_heads, head/x, block, x] with x the
elements of 16 bytes; V cache [blocks, kv_heads, head, block]; block tables [seqs, max_blocks] of
physical block numbers; partitions of 256 tokens, each giving a max logit, an exp-sum and a
partial output; the reduce merges them. 16-bit values are held as their bits (uint16), fp8 as
e4m3 FNUZ bytes (gfx942's fp8).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PARTITION = 256


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float -> bfloat16 bits, round to nearest even."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_value(b: np.ndarray) -> np.ndarray:
    return (np.asarray(b, np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def fp16_bits(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, np.float16).view(np.uint16)


def fp16_value(b: np.ndarray) -> np.ndarray:
    return np.asarray(b, np.uint16).view(np.float16).astype(np.float64)


def e4m3fnuz_value(b: np.ndarray) -> np.ndarray:
    """e4m3 FNUZ byte -> value (bias 8, no infinities, 0x80 is NaN)."""
    b = np.asarray(b, np.uint8).astype(np.int64)
    s = np.where(b & 0x80, -1.0, 1.0)
    e = (b >> 3) & 0xF
    m = b & 7
    v = np.where(e == 0, m / 8.0 * 2.0 ** -7, (1 + m / 8.0) * 2.0 ** (e - 8))
    return np.where(b == 0x80, np.nan, s * v)


VALUE = {"bf16": bf16_value, "fp16": fp16_value}
BITS = {"bf16": bf16_bits, "fp16": fp16_bits}


@dataclass(frozen=True)
class Shape:
    seqs: int
    heads: int
    kv_heads: int
    head: int
    block: int
    context: tuple[int, ...]      # one length per sequence

    @property
    def gqa(self) -> int:
        return self.heads // self.kv_heads

    @property
    def partitions(self) -> int:
        return -(-max(self.context) // PARTITION)

    @property
    def max_blocks(self) -> int:
        return -(-max(self.context) // self.block)

    def describe(self) -> str:
        return (f"{self.heads} heads on {self.kv_heads} KV heads, head_dim {self.head}, block {self.block}, "
                f"context {list(self.context)}")


SMALL = Shape(seqs=2, heads=8, kv_heads=1, head=128, block=16, context=(300, 37))
USERS = Shape(seqs=2, heads=64, kv_heads=8, head=128, block=16, context=(4096, 3001))
# the users' shape as `gfxsim run paged_attention_decode --context 4096` runs it: one sequence
USERS_ONE = Shape(seqs=1, heads=64, kv_heads=8, head=128, block=16, context=(4096,))


def make_case(shape: Shape, dtype: str, kv: str, seed: int = 0) -> dict:
    """Random Q and caches (K, V standard normal as the cache type holds them), shuffled block
    tables, and per cache slot the (sequence, token) it holds (-1: unused)."""
    rng = np.random.default_rng(seed)
    s = shape
    x = 16 // (1 if kv == "fp8" else 2)
    n_blocks = s.seqs * s.max_blocks + 3
    perm = rng.permutation(n_blocks)
    tables = perm[:s.seqs * s.max_blocks].reshape(s.seqs, s.max_blocks).astype(np.int32)
    slot_tok = np.full((n_blocks, s.block), -1, np.int64)
    slot_seq = np.full((n_blocks, s.block), -1, np.int64)
    for q in range(s.seqs):
        for t in range(s.context[q]):
            slot_tok[tables[q, t // s.block], t % s.block] = t
            slot_seq[tables[q, t // s.block], t % s.block] = q
    q_bits = BITS[dtype](rng.standard_normal((s.seqs, s.heads, s.head)))
    if kv == "fp8":
        codes = np.array([c for c in range(256) if c != 0x80], np.uint8)
        vals = e4m3fnuz_value(codes)
        order = np.argsort(vals)

        def cache(shape_):      # standard normal values, rounded to the nearest e4m3 FNUZ code
            want = rng.standard_normal(shape_)
            i = np.clip(np.searchsorted(vals[order], want), 1, len(order) - 1)
            lo, hi = order[i - 1], order[i]
            pick = np.where(np.abs(vals[lo] - want) <= np.abs(vals[hi] - want), lo, hi)
            return codes[pick]
        k = cache((n_blocks, s.kv_heads, s.head // x, s.block, x))
        v = cache((n_blocks, s.kv_heads, s.head, s.block))
    else:
        k = BITS[dtype](rng.standard_normal((n_blocks, s.kv_heads, s.head // x, s.block, x)))
        v = BITS[dtype](rng.standard_normal((n_blocks, s.kv_heads, s.head, s.block)))
    k_tok = np.broadcast_to(slot_tok[:, None, None, :, None], k.shape)
    v_tok = np.broadcast_to(slot_tok[:, None, None, :], v.shape)
    k_seq = np.broadcast_to(slot_seq[:, None, None, :, None], k.shape)
    v_seq = np.broadcast_to(slot_seq[:, None, None, :], v.shape)
    return dict(shape=s, dtype=dtype, kv=kv, q=q_bits, k=k, v=v, tables=tables,
                context=np.array(s.context, np.int32), k_tags={"ktoken": k_tok, "seq": k_seq},
                v_tags={"vtoken": v_tok, "seq": v_seq}, scale=float(1 / np.sqrt(s.head)),
                k_scale=0.5 if kv == "fp8" else 1.0, v_scale=0.25 if kv == "fp8" else 1.0)


def logical_kv(case: dict, q: int):
    """Sequence q's K [tokens, kv_heads, head] and V [tokens, kv_heads, head] as float64, scales applied."""
    s, kv = case["shape"], case["kv"]
    dec = e4m3fnuz_value if kv == "fp8" else VALUE[case["dtype"]]
    k, v = dec(case["k"]), dec(case["v"])
    n = s.context[q]
    blocks = case["tables"][q, np.arange(n) // s.block]
    slots = np.arange(n) % s.block
    kk = k[blocks, :, :, slots, :].reshape(n, s.kv_heads, s.head) * case["k_scale"]
    vv = v[blocks, :, :, slots] * case["v_scale"]
    return kk, vv


def reference(case: dict, logit_factor=None) -> dict:
    """float64 max logits, exp-sums and partial outputs per partition, and the merged output.
    ``logit_factor`` (per sequence and head) multiplies the logits: a model of a defect."""
    s = case["shape"]
    qv = VALUE[case["dtype"]](case["q"])
    P = s.partitions
    ml = np.full((s.seqs, s.heads, P), np.nan)
    es = np.full((s.seqs, s.heads, P), np.nan)
    po = np.full((s.seqs, s.heads, P, s.head), np.nan)
    out = np.zeros((s.seqs, s.heads, s.head))
    for q in range(s.seqs):
        kk, vv = logical_kv(case, q)
        for h in range(s.heads):
            g = h // s.gqa
            lg = kk[:, g, :] @ qv[q, h] * case["scale"]
            if logit_factor is not None:
                lg = lg * logit_factor[q, h]
            for p in range(-(-s.context[q] // PARTITION)):
                sl = slice(p * PARTITION, min((p + 1) * PARTITION, s.context[q]))
                m = lg[sl].max()
                e = np.exp(lg[sl] - m)
                ml[q, h, p], es[q, h, p] = m, e.sum()
                po[q, h, p] = e @ vv[sl, g, :] / e.sum()
            m = lg.max()
            e = np.exp(lg - m)
            out[q, h] = e @ vv[:, g, :] / e.sum()
    return dict(max_logits=ml, exp_sums=es, partial=po, out=out)


def e4m3fnuz_round(x: np.ndarray) -> np.ndarray:
    """x rounded to the nearest e4m3 FNUZ value, ties to the even code (magnitudes <= 240)."""
    codes = np.arange(0x80, dtype=np.uint8)                 # the non-negative codes, ascending
    vals = e4m3fnuz_value(codes)
    a = np.abs(np.asarray(x, np.float64))
    i = np.clip(np.searchsorted(vals, a), 1, len(vals) - 1)
    lo, hi = vals[i - 1], vals[i]
    pick_hi = (a - lo > hi - a) | ((a - lo == hi - a) & ((codes[i] & 1) == 0))
    return np.sign(x) * np.where(pick_hi, hi, lo)


def fp8_mfma_logits_model(case: dict) -> dict:
    """max logits and exp-sums of vLLM's opt-in fp8-MFMA QK^T as its source computes them (gfx942,
    64-lane waves, 256-token partitions, head_dim 128, GQA <= 16): lane j quantizes the Q values it
    holds with its own scale 224/m_j, m_j the largest |q| over lanes j..63 (a shuffle-down
    reduction), dividing by that scale; the output lane l = head + 16*row rescales the sum by
    scale * k_scale / (224/m_l). Lane j (head j%16 mod GQA, row r = j//16) holds head elements
    16r..16r+15 and 64+16r..64+16r+15. Scales, quotients and the rescale in fp32, as the kernel
    computes them (IEEE division); the MFMA's sums in float64."""
    s: Shape = case["shape"]
    assert s.head == 128 and s.gqa <= 16
    q = VALUE[case["dtype"]](case["q"])
    P = s.partitions
    ml = np.full((s.seqs, s.heads, P), np.nan)
    es = np.full((s.seqs, s.heads, P), np.nan)
    elems = [np.r_[16 * r:16 * r + 16, 64 + 16 * r:64 + 16 * r + 16] for r in range(4)]
    for sq in range(s.seqs):
        kk, _ = logical_kv(case, sq)
        kk = kk / case["k_scale"]                       # the fp8 values the MFMA multiplies
        for g in range(s.kv_heads):
            qg = q[sq, g * s.gqa:(g + 1) * s.gqa]      # [gqa, head]
            own = np.array([np.abs(qg[(j % 16) % s.gqa, elems[j // 16]]).max() for j in range(64)])
            m = np.array([own[j:].max() for j in range(64)])
            n = s.context[sq]
            qs = np.float32(224) / m.astype(np.float32)                        # each lane's q_scale
            scale2 = np.float32(np.float32(case["scale"]) * np.float32(case["k_scale"])) / qs
            for h in range(s.gqa):
                total = np.zeros(n)
                for r in range(4):                       # the four k-groups of column h
                    j = h + 16 * r
                    q8 = e4m3fnuz_round(qg[h, elems[r]].astype(np.float32) / qs[j])
                    total += kk[:, g, elems[r]] @ q8
                rows = (np.arange(n) % 16) // 4           # the output lane row of each token
                lg = (total.astype(np.float32) * scale2[h + 16 * rows]).astype(np.float64)
                for p in range(-(-n // PARTITION)):
                    sl = lg[p * PARTITION:(p + 1) * PARTITION]
                    ml[sq, g * s.gqa + h, p] = sl.max()
                    es[sq, g * s.gqa + h, p] = np.exp(sl - sl.max()).sum()
    return dict(max_logits=ml, exp_sums=es)
