"""SageAttention2 in numpy: the math of kernels_py.fp8.sage_attention, for every granularity.

``sage_head(q, k, v, ...)`` is one head: q [N, d], k/v [T, d] float32. Quantization groups:
  block   one scale per 128 Q rows (BLKQ) and per 64 K tokens (SageAttention's per-block)
  thread  SageAttention2's per-thread groups, derived from the QK record's D layout
          (gfxsim.arch.groups.tiled_groups over a 32-row x 64-token warp tile)
  token   one scale per Q row and per K token
then S = int(QqKqᵀ)·sQ·sK + mean(Q)·Kᵀ, base-2 online softmax over 64-token blocks with the
static 448 FP8 scale, P and per-channel V in e4m3, PV through the arch's e4m3 mma.sync
accumulator record (``gfxsim.machine.accum``: FP22 on sm_89, two f16 HMMA + FADD on sm_90) with
V in the permuted token order, two-level or one-level, O·sV/l (+ mean(V) with smooth-V).
Every float32 step is the kernel's, in its order, so the kernel matches it closely.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gfxsim.arch import get_instruction
from gfxsim.arch.groups import tiled_groups
from gfxsim.machine.accum import mma_f32

from .sage_layout import BLKK, FP8_MAX, PV_MMA, QK_MMA, QMAX, S_FP8_OFFSET, WARPQ, pv_a_from_qk
from gfxsim.errors import ArgumentError

BLKQ = 128
LOG2E = np.float32(1.4426950408889634)
EPS = np.float32(1e-7)
F32 = np.float32
GRANULARITIES = ("block", "thread", "token")


@dataclass(frozen=True)
class SageConfig:
    arch: str = "sm_89"
    qk: str = "int8"                 # int8 | int4
    granularity: str = "thread"      # block | thread | token
    smooth_q: bool = True
    smooth_k: bool = True
    smooth_v: bool = False
    two_level: bool = True
    q_block: int = BLKQ              # rows that share mean(Q) (and one per-block scale)
    pv_accumulator: str | None = None   # a gfxsim.arch.nvidia.ACCUMULATORS name in place of the record's

    def __post_init__(self):
        if self.qk not in QK_MMA:
            raise ArgumentError(f"qk must be one of {sorted(QK_MMA)}, got {self.qk!r}")
        if self.granularity not in GRANULARITIES:
            raise ArgumentError(f"granularity must be one of {GRANULARITIES}, got {self.granularity!r}")
        from gfxsim.arch.nvidia import ACCUMULATORS
        if self.pv_accumulator is not None and self.pv_accumulator not in ACCUMULATORS:
            raise ArgumentError(f"pv_accumulator must be one of {sorted(ACCUMULATORS)}, got {self.pv_accumulator!r}")


def e4m3(x):
    import ml_dtypes
    return np.asarray(x, F32).astype(ml_dtypes.float8_e4m3fn).astype(F32)


def _exp2(x):
    with np.errstate(over="ignore"):
        return np.exp2(np.asarray(x, np.float64)).astype(F32)


def group_ids(cfg: SageConfig, n_rows: int, n_tok: int):
    """(row group [n_rows], token group [n_tok]) as global ids."""
    r, t = np.arange(n_rows), np.arange(n_tok)
    if cfg.granularity == "token":
        return r, t
    if cfg.granularity == "block":
        return r // BLKQ, t // BLKK
    rg, cg = tiled_groups(get_instruction(cfg.arch, QK_MMA[cfg.qk]), WARPQ, BLKK)
    return (r // WARPQ) * (rg.max() + 1) + rg[r % WARPQ], (t // BLKK) * (cg.max() + 1) + cg[t % BLKK]


def quantize(x, groups, qmax):
    """(codes, scale per element's group [len]) of x [n, d] with one scale per group of rows."""
    amax = np.zeros(groups.max() + 1, F32)
    np.maximum.at(amax, groups, np.abs(x).max(axis=1))
    scale = (amax * F32(1 / qmax) + EPS).astype(F32)
    inv = (F32(1) / scale)[groups]
    q = np.clip(np.rint(x * inv[:, None]), -qmax, qmax)
    return q, scale[groups]


def smooth(q, k, v, cfg: SageConfig, valid_k: int):
    """(q - mean(Q) per q_block, k - mean(K), v [- mean(V)], ds [blocks, T] = mean(Q)·(k - mean K)ᵀ, vm)."""
    k = k.astype(F32)
    km = k[:valid_k].mean(axis=0, dtype=np.float64).astype(F32) if cfg.smooth_k else np.zeros(k.shape[1], F32)
    ks = (k - km).astype(F32)
    nb = -(-q.shape[0] // cfg.q_block)
    qs = q.astype(F32).copy()
    ds = np.zeros((nb, k.shape[0]), F32)
    for b in range(nb):
        rows = slice(b * cfg.q_block, (b + 1) * cfg.q_block)
        if cfg.smooth_q:
            qm = q[rows].mean(axis=0, dtype=np.float64).astype(F32)
            qs[rows] = q[rows] - qm
            ds[b] = ks @ qm
    vm = v[:valid_k].mean(axis=0, dtype=np.float64).astype(F32) if cfg.smooth_v else np.zeros(v.shape[1], F32)
    return qs, ks, (v - vm).astype(F32), ds, vm


def sage_core(qs, ks, vs, ds_rows, vm, cfg: SageConfig, q_pos=None):
    """O [N, d] from smoothed inputs: qs [N, d], ks/vs [T, d] (T a multiple of 64, padding rows
    0), ds_rows [N, T] (each row's mean(Q)·Kᵀ), q_pos [N] (causal: row r sees tokens <= q_pos[r])."""
    N, d = qs.shape
    T = ks.shape[0]
    qmax = QMAX[cfg.qk]
    qk_insn, pv_insn = get_instruction(cfg.arch, QK_MMA[cfg.qk]), get_instruction(cfg.arch, PV_MMA)
    rg, tg = group_ids(cfg, N, T)
    qq, sq = quantize(qs, rg, qmax)
    kq, sk = quantize(ks, tg, qmax)
    s_int = (qq.astype(np.int64) @ kq.astype(np.int64).T).astype(F32)
    x = ((s_int * sq[:, None]) * sk[None, :] + ds_rows).astype(F32) * (F32(1 / np.sqrt(d)) * LOG2E)
    if q_pos is not None:
        x = np.where(np.arange(T)[None, :] <= np.asarray(q_pos)[:, None], x, -np.inf).astype(F32)
    amax_v = np.abs(vs).max(axis=0)
    sv = (amax_v * F32(1 / FP8_MAX) + EPS).astype(F32)
    vq = e4m3(vs * (F32(1) / sv))
    _, perm = pv_a_from_qk(qk_insn, pv_insn)
    K = pv_insn.K
    if cfg.pv_accumulator is None:
        acc = pv_insn.accumulator
    else:
        from gfxsim.arch.nvidia import ACCUMULATORS
        acc = ACCUMULATORS[cfg.pv_accumulator]
    m = np.full(N, -np.inf, F32)
    l = np.zeros(N, F32)
    o = None
    for b in range(T // BLKK):
        xb = x[:, b * BLKK:(b + 1) * BLKK]
        m_new = np.maximum(m, xb.max(axis=1))
        with np.errstate(invalid="ignore"):
            alpha = _exp2(m - m_new)
        m = m_new
        p = _exp2(xb - (m - S_FP8_OFFSET)[:, None])
        l = (l * alpha + p.sum(axis=1, dtype=F32)).astype(F32)
        p8 = e4m3(p)
        buf = None if cfg.two_level or o is None else (o * alpha[:, None]).astype(F32)
        for c in range(BLKK // K):
            t0 = b * BLKK + c * K
            a = p8[:, c * K + perm][None]
            bm = vq[t0 + perm][None]
            cc = np.zeros((1, N, d), F32) if buf is None else buf[None]
            buf = mma_f32(acc, a, bm, cc)[0]
        o = buf if (not cfg.two_level or o is None) else (o * alpha[:, None] + buf).astype(F32)
    res = ((o * sv[None, :]) * (F32(1) / l)[:, None]).astype(F32)
    return (res + vm).astype(F32) if cfg.smooth_v else res


def sage_head(q, k, v, cfg: SageConfig, q_pos=None):
    """One head: q [N, d], k/v [T, d] float32 (T valid tokens); causal when ``q_pos`` is given."""
    N, T = q.shape[0], k.shape[0]
    Tp = -(-T // BLKK) * BLKK
    Np = -(-N // WARPQ) * WARPQ
    qs, ks, vs, ds, vm = smooth(q, k, v, cfg, T)
    pad = ((0, Tp - T), (0, 0))
    ks, vs = np.pad(ks, pad), np.pad(vs, pad)
    ds = np.pad(ds, ((0, 0), (0, Tp - T)))
    ds_rows = np.repeat(ds, cfg.q_block, axis=0)[:N]
    qs, ds_rows = np.pad(qs, ((0, Np - N), (0, 0))), np.pad(ds_rows, ((0, Np - N), (0, 0)))
    if q_pos is None and Tp != T:
        q_pos = np.full(N, T - 1)
    if q_pos is not None:
        q_pos = np.pad(np.asarray(q_pos), (0, Np - N), constant_values=T - 1)
    return sage_core(qs, ks, vs, ds_rows, vm, cfg, q_pos)[:N]


def sage_prefill(q, k, v, context_lens, cfg: SageConfig):
    """Every sequence and head of make_attention_inputs-shaped prefill data (q [S, N, H, d], the
    last N positions of each context; k/v [S, T, Hkv, d]): O [S, N, H, d]."""
    S, N, H, d = q.shape
    out = np.zeros(q.shape, F32)
    ratio = H // k.shape[2]
    for s in range(S):
        ctx = int(context_lens[s])
        pos = ctx - N + np.arange(N)
        for h in range(H):
            out[s, :, h] = sage_head(q[s, :, h], k[s, :ctx, h // ratio], v[s, :ctx, h // ratio], cfg, q_pos=pos)
    return out
