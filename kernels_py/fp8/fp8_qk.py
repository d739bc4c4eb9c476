"""FP8 QKᵀ on gfx942 (``v_mfma_f32_16x16x32_fp8_fp8``) with per-token q and k scales.

S[m][n] = (Q8·K8ᵀ)[m][n] · q_scale[m] · k_scale[n] · 1/√d: the q scale on the rows, the k scale
transposed onto the columns, both on the fp32 result, then 1/√d. One wave, 16 query rows, K in
16-token tiles. Each lane quantizes what it feeds to the instruction (A: a Q row, B: a K token, 8
head elements per k step) with the per-token amax reduced over the lanes that hold the rest of
that row / token (read off the record's A and B layouts); FP8 here is gfx942's e4m3fnuz (max 240).

``k_scale_on`` makes the defective twins the debugger must catch:
  "N"  the fixed kernel: k_scale[n] on column n (k_scaleᵀ);
  "M"  k_scale not transposed: k_scale[m] on row m (a square tile hides it from shapes);
  "K"  the k scale's amax is not reduced across the lanes of the token, so each lane's scale
       covers its own 8 head elements per k step: a per-token scale split along the reduction
       axis, which cannot be factored out of the sum.
``record``: a dict the kernel fills with the identities of both scales where they were applied
(visualize.scale_axes draws it).
"""
from __future__ import annotations

import numpy as np

from .sage_layout import frag, sharers
from gfxsim.errors import ArgumentError

MMA = "v_mfma_f32_16x16x32_fp8_fp8"
FP8 = "fp8"
EPS = np.float32(1e-12)


def fp8_max():
    import ml_dtypes
    from gfxsim.arch.dtypes import ELEM_TYPES
    return float(ml_dtypes.finfo(np.dtype(ELEM_TYPES[FP8].numpy)).max)


def _v(w, x):
    return w.from_lanes(np.asarray(x), "i32")


def _amax(w, x):
    a = abs(x[0])
    for e in range(1, x.n):
        a = w.max(a, abs(x[e]))
    return a


def _load(w, buf, rows, cols, row0, ld, per):
    """Register r: ``per`` consecutive f32 columns from (row0 + rows[:, r*per], cols[:, r*per])."""
    parts = []
    for r in range(rows.shape[1] // per):
        addr = ((row0 + rows[:, r * per]) * ld + cols[:, r * per]) * 4
        parts += [w.global_load(buf, _v(w, addr + 4 * h), 16, "f32") for h in range(0, per, 4)]
    return w.cat(*parts)


def _quant(w, vals, lanes_of, reduce_lanes=True):
    a = _amax(w, vals)
    if reduce_lanes:
        for k in range(lanes_of.shape[1]):
            a = w.max(a, w.bpermute(a, _v(w, lanes_of[:, k])))
    s = w.group_scale(a * np.float32(1 / fp8_max()) + EPS)
    return s, (vals * w.rcp(s)).to(FP8)


def fp8_qk(w, q, k, s_out, *, context, head_dim, k_scale_on="N", record=None):
    """S [16, context] f32 of q [16, head_dim] and k [context, head_dim] (f32, quantized here)."""
    if k_scale_on not in ("N", "M", "K"):
        raise ArgumentError(f"k_scale_on must be 'N' (fixed), 'M' or 'K' (defective), got {k_scale_on!r}")
    insn = w.insn(MMA)
    if context % insn.N or head_dim % insn.K:
        raise ArgumentError(f"context {context} must be a multiple of {insn.N} and head_dim {head_dim} of {insn.K}")
    ar, ac = frag(insn, "A")
    br, bc = frag(insn, "B")
    dr, dc = frag(insn, "D")
    per = 8                                   # 8 fp8 head elements per lane and k step (2 registers)
    n_ks = head_dim // insn.K
    lanes = np.arange(w.lanes)

    def k_cols(cols, ks):                     # this k step's head elements
        return cols + ks * insn.K
    q_sh, k_sh = sharers(ar[:, 0]), sharers(bc[:, 0])
    qv = w.cat(*[_load(w, q, ar, k_cols(ac, ks), 0, head_dim, per) for ks in range(n_ks)])
    qs, q8 = _quant(w, qv, q_sh)
    # the q scale of each D register's row, the k scale of its column, from the lanes that hold them
    q_src = [np.array([np.nonzero(ar[:, 0] == dr[l, i])[0][0] for l in lanes]) for i in range(dr.shape[1])]
    qs_d = w.cat(*[w.bpermute(qs, _v(w, s)) for s in q_src])
    scale = np.float32(1 / np.sqrt(head_dim))
    for t0 in range(0, context, insn.N):
        kv = w.cat(*[_load(w, k, bc, k_cols(br, ks), t0, head_dim, per) for ks in range(n_ks)])
        ks_b, k8 = _quant(w, kv, k_sh, reduce_lanes=k_scale_on != "K")
        axis = dr if k_scale_on == "M" else dc
        k_src = [np.array([np.nonzero(bc[:, 0] == axis[l, i])[0][0] for l in lanes]) for i in range(dr.shape[1])]
        ks_d = w.cat(*[w.bpermute(ks_b, _v(w, s)) for s in k_src])
        acc = None
        for ks in range(n_ks):
            acc = w.mma(MMA, q8[ks * per:(ks + 1) * per], k8[ks * per:(ks + 1) * per], acc,
                        label=f"tile {t0 // insn.N} k{ks}")
        s = w.dequant(acc, qs_d) * ks_d * scale
        if record is not None and t0 == 0:
            record.update(insn=insn, rows=dr, cols=dc,
                          scales={"q_scale": _ids(qs_d), "k_scale": _ids(ks_d)})
        for i in range(dr.shape[1]):
            w.global_store(s_out, _v(w, (dr[:, i] * context + t0 + dc[:, i]) * 4), s[i])


def _ids(v):
    """What a scale register is, per element: its row, token and the head elements it was reduced over."""
    n, lanes = v.val.shape
    return {"row": v.tags("row"), "token": v.tags("token"),
            "dims": [[frozenset(v.footprint("dim", i, l)) for l in range(lanes)] for i in range(n)]}


def reference(q, k, k_scale_on="N"):
    """The same math in numpy ([16, d], [T, d] -> S [16, T]); the fixed kernel's."""
    from gfxsim.arch import get_instruction
    from gfxsim.arch.dtypes import ELEM_TYPES
    from gfxsim.machine.accum import mma_f32
    f8 = np.dtype(ELEM_TYPES[FP8].numpy)
    mx = np.float32(1 / fp8_max())

    def quant(x):
        s = (np.abs(x).max(axis=1) * mx + EPS).astype(np.float32)
        return s, (x * (np.float32(1) / s)[:, None]).astype(f8).astype(np.float32)
    qs, q8 = quant(np.asarray(q, np.float32))
    ks, k8 = quant(np.asarray(k, np.float32))
    insn = get_instruction("gfx942", MMA)
    acc = mma_f32(insn.accumulator, q8[None], k8.T[None], np.zeros((1, q8.shape[0], k8.shape[0]), np.float32))[0]
    return ((acc * qs[:, None]) * ks[None, :] * np.float32(1 / np.sqrt(q.shape[1]))).astype(np.float32)


def run_fp8_qk(q, k, *, k_scale_on="N", record=None):
    """(S [16, T], Run) on gfx942 of tagged q [16, d] (rows 0..15) and k [T, d] (tokens 0..T-1)."""
    from gfxsim import Buffer, launch
    T, d = k.shape
    qb = Buffer("q", np.asarray(q, np.float32), tags={"row": np.broadcast_to(np.arange(16)[:, None], (16, d)),
                                                     "dim": np.broadcast_to(np.arange(d), (16, d))})
    kb = Buffer("k", np.asarray(k, np.float32), tags={"token": np.broadcast_to(np.arange(T)[:, None], (T, d)),
                                                     "dim": np.broadcast_to(np.arange(d), (T, d))})
    out = Buffer.empty("s", (16, T), np.float32)
    run = launch(fp8_qk, arch="gfx942", args=(qb, kb, out),
                 kwargs=dict(context=T, head_dim=d, k_scale_on=k_scale_on, record=record))
    return out.array.copy(), run
