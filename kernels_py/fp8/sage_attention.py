"""SageAttention2 on a warp32 (sm_89 / sm_90): one warp, 32 query rows, K/V in 64-token blocks.

  phase 1  per-thread INT8/INT4 quantization of Q and K (the quant kernel, fused here): each lane
           reduces |x| over the elements it feeds to the QK mma.sync, then across the lanes of its
           group; the groups are the record's (gfxsim.arch.groups.lane_groups): Q row r in group
           r % 8, K token n in (n % 8) // 2. V: per-channel FP8 e4m3 (amax over tokens / 448);
           V arrives transposed and permuted (SageAttention2's TransposePadPermuteKernel: the
           token order that lets the QK accumulator be PV's A operand as it is), so a lane's B
           elements of a K step lie side by side: wide loads.
  phase 2  per K block: S = int(QKᵀ) * sQ * sK + mean(Q)·Kᵀ (smooth-Q's correction), online
           softmax in base 2 with P~ = 2^(x - m + 8.807) (the static 448 scale), P~ -> e4m3, PV
           on the e4m3 mma.sync: two-level (a buffer per block added into an fp32 O) or one-level.
  end      O * sV / l (+ mean(V) with smooth-V).

Smoothing (K - mean(K), Q - mean(Q), V - mean(V)) and the GEMV mean(Q)·(K - mean(K))ᵀ are done on
the host, as SageAttention2 does them in torch before its kernels. ``q_layout`` is the layout the
kernel takes its per-thread Q scale index from: the record's D (default), or a wrong one (the
defective twin) -- the debugger's scale-group rule names the rows that got another group's scale.
``v_type`` is the type V is quantized to: e4m3 (OCP e4m3fn, what the mma reads), or CDNA3's "fp8"
(e4m3fnuz) whose bytes a port hands the mma as they are (a format-mismatch: V read twice too large, its ±240 as NaN).
``fused_scales`` applies sQ·sK as one product (the form that saves a multiply per element);
``k_group_reduce=False`` leaves each lane's K scale the amax of its own elements, not its group's
(a defective twin: the scale covers part of the head dims the instruction sums).
"""
from __future__ import annotations

import numpy as np

from gfxsim.arch import get_instruction
from gfxsim.arch.groups import lane_groups, layout_groups
from gfxsim.arch.layout import OperandLayout

from kernels_py.fragments import _lane_masks
from .sage_layout import (BLKK, FP8_MAX, PV_MMA, QK_MMA, QMAX, S_FP8_OFFSET, WARPQ, frag, permuted_columns,
                          pv_a_from_qk, row_slots, sharers)
from gfxsim.errors import ArgumentError

LOG2E = np.float32(1.4426950408889634)
EPS = np.float32(1e-7)


def swapped_d_layout(lay):
    """The m16n8 C/D layout with groupID and threadID_in_group exchanged (row = lane % 8,
    col = 2 * (lane // 8)): what a kernel assumes when it reads the Q scale index off the wrong
    layout (the defective twin)."""
    return OperandLayout(lay.operand, lay.rows, lay.cols, 1, lay.elem_bits, lane=[(8, "row", 1), (4, "col", 2)],
                         reg=[(2, "col", 1), (2, "row", 8)], elem=[], wave_size=lay.wave_size)


def _vals(w, per_lane, dtype="i32"):
    return w.from_lanes(np.asarray(per_lane), dtype)


def _reduce_over(w, x, lanes_of, op):
    """Combine ``x`` over each lane's group (``lanes_of`` [lanes, size]) by bpermutes."""
    acc = x
    for k in range(lanes_of.shape[1]):
        acc = op(acc, w.bpermute(x, _vals(w, lanes_of[:, k])))
    return acc


def _max_of(w, a, width=1):
    """The max over a lane's elements of ``a``: halves maxed pairwise (max is exact in any order
    but for signalling NaNs), so n elements take log2(n) statements of up to n/2 registers, not
    n - 1 of one. ``width``: that many maxes side by side (element t * width + h is element t of
    max h), each halved as it would be alone."""
    while a.n > width:
        n = a.n // width
        h = n // 2 * width
        m = w.max(a[0:h], a[h:2 * h])
        a = m if a.n == 2 * h else w.cat(m, a[2 * h:])
    return a


def _amax(w, vals):
    return _max_of(w, abs(vals))


def _near_first(n: int) -> list:
    """An order of ``n`` elements in which _max_of's halving pairs neighbours first: element j
    takes element bitreverse(j) (n a power of two; else the given order). The maxes of a V
    channel's tokens then meet tokens of one K step, then of nearby steps, and their provenance
    spans the whole context only in the last few statements, on a few registers. Max is exact in
    any order (see _max_of)."""
    bits = n.bit_length() - 1
    if n < 2 or n != 1 << bits:
        return list(range(n))
    return _bit_reversed(n, bits)       # numpy bit operations, not a string per element


def _split(x, sizes):
    """``x`` cut into consecutive values of ``sizes`` elements (no instruction: register ranges)."""
    out, at = [], 0
    for n in sizes:
        out.append(x[at:at + n])
        at += n
    return out


def _quantize(w, x, inv, qmax):
    return w.clamp(w.rint(x * inv), -float(qmax), float(qmax)).to("i32")


def _narrowed(w, q, sizes, qk):
    """Quantized i32 ``q`` as the matrix operands of ``sizes`` elements each: int8 bytes, or
    int4 nibbles packed per operand."""
    if qk == "int4":
        return [_pack_s4(w, x) for x in _split(q, sizes)]
    return _split(q.to("i8"), sizes)


def _pack_s4(w, q):
    """8 signed nibbles per 32-bit register, little-endian (PTX .s4 operands)."""
    regs = []
    for r in range(q.n // 8):
        word = (q[8 * r] & 0xF)
        for e in range(1, 8):
            word = word | ((q[8 * r + e] & 0xF) << (4 * e))
        regs.append(word)
    return w.cat(*regs)


def _operands(w, buf, rows, cols, corners, ld, per, n_regs):
    """The f32 values of the operands at ``corners`` [(row0, col0)], side by side in that order:
    register r of an operand in each lane is ``per`` consecutive columns from (row0 + rows[:, r*per],
    col0 + cols[:, r*per]) of a row-major [*, ld] buffer. The addresses are one value (a register
    per load). Returns (the value, each operand's element count)."""
    # element (corner, r, h) of the address value: one numpy pass for all (_operand_addresses)
    addr = _vals(w, _operand_addresses(rows, cols, corners, ld, per, n_regs))
    return w.cat(*w.global_load_each(buf, addr, 16, "f32")), [n_regs * per] * len(corners)


def sage_attention(w, q, k, v, ds, vm, out, *, context, head_dim, qk="int8", two_level=True, smooth_v=False,
                   q_pos0=None, q_layout=None, v_type="fp8_e4m3", fused_scales=False, k_group_reduce=True):
    """O [32, head_dim] of 32 query rows over ``context`` tokens (a multiple of 64). q [32, d],
    k [context, d], v [d, context] transposed and permuted (column c * K + k holds token
    c * K + perm[k]: sage_layout.permuted_columns), both smoothed on the host, ds [context] =
    mean(Q)·Kᵀ (0 without smooth-Q), vm [d] = mean(V) (used with ``smooth_v``). ``q_pos0``:
    causal, row r sees tokens <= q_pos0 + r."""
    if context % BLKK or head_dim % 32:
        raise ArgumentError(f"context {context} must be a multiple of {BLKK}, head_dim {head_dim} of 32")
    mqk, mpv = w.insn(QK_MMA[qk]), w.insn(PV_MMA)
    qmax, kq = QMAX[qk], mqk.K
    if head_dim % kq:
        raise ArgumentError(f"head_dim {head_dim} is not a multiple of {qk} K = {kq}")
    d_lay = mqk.operand("D")
    rgrp, cgrp = lane_groups(d_lay, WARPQ, BLKK)
    rgrp_used = rgrp if q_layout is None else lane_groups(q_layout, WARPQ, BLKK)[0]
    ar, ac = frag(mqk, "A")
    br, bc = frag(mqk, "B")
    dr, dc = frag(mqk, "D")
    per_a = ar.shape[1] // mqk.operand("A").n_regs
    per_b = br.shape[1] // mqk.operand("B").n_regs
    lanes = np.arange(w.lanes)
    n_mt, n_ks, n_nt = WARPQ // mqk.M, head_dim // kq, BLKK // mqk.N
    # the lanes that hold one Q group (in D) and one K group (in B, where K is quantized)
    rg_tile, cg_tile = layout_groups(d_lay)
    a_grp = rg_tile[ar % mqk.M]
    if not (a_grp == rgrp[:, None]).all():
        raise ArgumentError(f"{mqk.mnemonic}: a lane's A rows are not all in its D row group")
    b_grp = cg_tile[bc]
    if not (b_grp == b_grp[:, :1]).all():
        raise ArgumentError(f"{mqk.mnemonic}: a lane's B columns span two token groups")
    b_grp = b_grp[:, 0]
    q_sharers, k_sharers = sharers(rgrp), sharers(b_grp)
    k_src = np.array([np.nonzero(b_grp == c)[0][0] for c in cgrp])     # a B lane of D lane's token group

    # -- phase 1: Q (per-thread groups) ---------------------------------------------------------
    # every element side by side: one statement per step
    qcat, q_sizes = _operands(w, q, ar, ac, [(mt * mqk.M, ks * kq) for mt in range(n_mt) for ks in range(n_ks)],
                              head_dim, per_a, mqk.operand("A").n_regs)
    amax = _reduce_over(w, _amax(w, qcat), q_sharers, w.max)
    sq = w.group_scale(amax * np.float32(1 / qmax) + EPS)
    inv_q = w.rcp(sq)
    qa = _narrowed(w, _quantize(w, qcat, inv_q, qmax), q_sizes, qk)
    qa = [qa[mt * n_ks:(mt + 1) * n_ks] for mt in range(n_mt)]
    if q_layout is not None:           # the defective twin: the scale of the group its wrong layout names
        sq = w.bpermute(sq, _vals(w, [q_sharers[np.nonzero(rgrp == rgrp_used[l])[0][0], 0] for l in lanes]))

    # -- V: per-channel FP8, from V transposed and permuted: element (k, n) of K step c is at
    # row dt * N + n, column c * K + k ---------------------------------------------------------
    src, _ = pv_a_from_qk(mqk, mpv)
    vr, vc = frag(mpv, "B")
    n_dt, n_vc = head_dim // mpv.N, context // mpv.K
    rel = (vc * context + vr).T * 4                         # a K step's addresses less its first
    runs = _v_runs(rel)             # the same at every start that is a multiple of 16 bytes
    vv = [[_v_elements(w, v, rel + base, runs if base % 16 == 0 else _v_runs(rel + base))
           for c in range(n_vc) for base in [(dt * mpv.N * context + c * mpv.K) * 4]] for dt in range(n_dt)]
    if not (vc == vc[:, :1]).all():
        raise ArgumentError(f"{mpv.mnemonic}: a lane's B elements span two V columns")
    v_sharers = sharers(vc[:, 0])                          # lanes holding one V column (dim)
    vs, vq = [], []
    for dt in range(n_dt):
        vcat = w.cat(*vv[dt])
        a = _reduce_over(w, _amax(w, vcat[_near_first(vcat.n)]), v_sharers, w.max)
        s = w.group_scale(a * np.float32(1 / FP8_MAX) + EPS)
        inv = w.rcp(s)
        vs.append(s)
        x8 = (vcat * inv).to(v_type)
        if v_type != "fp8_e4m3":       # the defective twin: another encoding's bytes handed to the e4m3 mma
            x8 = x8.bitcast("fp8_e4m3")
        vq.append(_split(x8, [x.n for x in vv[dt]]))

    # -- phase 2: per K block -------------------------------------------------------------------
    # The scores of a block are one value: row tile mt, n tile j, D register i at element
    # n_d * (n_nt * mt + j) + i. A row's running max, sum and rescale are "chains", chain
    # n_slot * mt + h the rows of tile mt's slot h, side by side in one statement: element by
    # element the operations (and their order) of each chain alone.
    slots = row_slots(mqk)
    n_d = dc.shape[1]                                      # D registers of a lane
    n_slot, per_slot = len(slots), len(slots[0])
    if any(len(r) != per_slot for r in slots):
        raise ArgumentError(f"{mqk.mnemonic}: its D row slots hold {[len(r) for r in slots]} registers, not one count")
    reg_slot = {i: h for h, regs in enumerate(slots) for i in regs}
    tile = n_d * n_nt                                      # elements of one row tile's scores
    chains = n_mt * n_slot
    # term t of every chain: a row's registers of every n tile, in the order the sum adds them
    terms = [[mt * tile + n_d * j + slots[h][i] for mt in range(n_mt) for h in range(n_slot)]
             for j in range(n_nt) for i in range(per_slot)]
    by_chain = [e for t in terms for e in t]
    chain_of = [n_slot * mt + reg_slot[i] for mt in range(n_mt) for _ in range(n_nt) for i in range(n_d)]
    masks = _lane_masks(d_lay, "col")                      # lanes that share a D row
    c_log2 = np.float32(1 / np.sqrt(head_dim)) * LOG2E
    m = w.cat(*[w.const(-np.inf, "f32")] * chains)
    lsum = w.cat(*[w.const(0.0, "f32")] * chains)
    o = [[None] * n_dt for _ in range(n_mt)]     # one-level: each head-dim tile's O, the C of its next
    o_all = None                                 # two-level: O of every row and head-dim tile side by side
    if q_pos0 is not None:                       # each score's row's last visible token
        last = _vals(w, np.concatenate([np.tile((q_pos0 + mt * mqk.M + dr).T, (n_nt, 1)) for mt in range(n_mt)]))
    for blk in range(context // BLKK):
        kcat, k_sizes = _operands(w, k, bc, br, [(blk * BLKK + j * mqk.N, ks * kq) for j in range(n_nt)
                                                 for ks in range(n_ks)], head_dim, per_b, mqk.operand("B").n_regs)
        ka = _amax(w, kcat)
        if k_group_reduce:
            ka = _reduce_over(w, ka, k_sharers, w.max)
        sk_b = w.group_scale(ka * np.float32(1 / qmax) + EPS)
        inv_k = w.rcp(sk_b)
        kb = _narrowed(w, _quantize(w, kcat, inv_k, qmax), k_sizes, qk)
        kb = [kb[j * n_ks:(j + 1) * n_ks] for j in range(n_nt)]
        sk = w.bpermute(sk_b, _vals(w, k_src))
        tok = blk * BLKK + np.arange(n_nt)[:, None, None] * mqk.N + dc[None]    # [j, lane, i]
        dsv = _token_values(w, ds, tok)                    # mean(Q)·Kᵀ of the block, [j][i]
        sqk = sq * sk if fused_scales else None
        # k step by k step (a step's instructions issued together), n tile by n tile, both row
        # tiles of a K operand back to back: the matrix unit's operand memo finds the K operand
        # (loaded afresh each block) for the second and the two row tiles' Q operands alternating
        accs = [[None] * n_nt for _ in range(n_mt)]
        pairs = [(j, mt) for j in range(n_nt) for mt in range(n_mt)]
        for ks in range(n_ks):
            got = w.mma_many(QK_MMA[qk], [(qa[mt][ks], kb[j][ks], accs[mt][j], f"qk block {blk} m{mt} n{j} k{ks}")
                                          for j, mt in pairs])
            for (j, mt), d in zip(pairs, got):
                accs[mt][j] = d
        ss = []
        for acc in (a for row in accs for a in row):   # each tile's scales applied to it alone: checks in tile order
            ss.append(w.dequant(acc, sqk) if fused_scales else w.dequant(acc, sq) * sk)
        x = (w.cat(*ss) + dsv[list(range(tile)) * n_mt]) * c_log2
        if q_pos0 is not None:
            x = w.select(_vals(w, np.tile(tok.transpose(0, 2, 1).reshape(-1, w.lanes), (n_mt, 1))) <= last, x, -np.inf)
        bm = _max_of(w, x[by_chain], chains)
        for msk in masks:
            bm = w.max(bm, w.shfl_xor(bm, msk))
        m_new = w.max(m, bm)
        alpha = w.exp2(m - m_new)
        m = m_new
        ps = w.exp2(x - (m - S_FP8_OFFSET)[chain_of])
        rs = ps[terms[0]]
        for t in terms[1:]:
            rs = rs + ps[t]
        lsum = lsum * alpha + rs
        p8 = ps.to("fp8_e4m3")
        tiles = mpv.K // mqk.N
        n_c = BLKK // mpv.K
        # P~'s A operand of each row tile and K step: the same for every head-dim tile, gathered once
        pas = [[w.cat(*[p8[mt * tile + n_d * (c * tiles + jj) + i] for jj, i in src]) for c in range(n_c)]
               for mt in range(n_mt)]
        tbuf = [[None if two_level or o[mt][dt] is None else o[mt][dt] * alpha[chain_of[mt * tile:mt * tile + n_d]]
                 for dt in range(n_dt)] for mt in range(n_mt)]
        for c in range(n_c):     # a K step's instructions issued together, both row tiles of a V operand back to back
            pairs = [(dt, mt) for dt in range(n_dt) for mt in range(n_mt)]
            got = w.mma_many(PV_MMA, [(pas[mt][c], vq[dt][blk * n_c + c], tbuf[mt][dt],
                                       f"pv block {blk} m{mt} d{dt} k{c}") for dt, mt in pairs])
            for (dt, mt), d in zip(pairs, got):
                tbuf[mt][dt] = d
        bufs = [d for row in tbuf for d in row]
        if not two_level:
            o = tbuf
        if two_level:                # every tile's O rescaled and added in one statement
            o_all = w.cat(*bufs) if o_all is None else \
                o_all * alpha[[chain_of[mt * tile + i] for mt in range(n_mt) for _ in range(n_dt) for i in range(n_d)]] \
                + w.cat(*bufs)

    # -- end: O * sV / l (+ mean V) --------------------------------------------------------------
    v_addr = [_vals(w, np.array([np.nonzero(vc[:, 0] == dc[l, i])[0][0] for l in lanes])) for i in range(n_d)]
    sv = [w.cat(*[w.bpermute(vs[dt], v_addr[i]) for i in range(n_d)]) for dt in range(n_dt)]   # D's column scales
    for msk in masks:
        lsum = lsum + w.shfl_xor(lsum, msk)
    inv_l = w.rcp(lsum)
    if two_level:                    # every tile's O rescaled in one statement, its scale check once
        res_all = w.dequant(o_all, w.cat(*(sv * n_mt))) * \
            inv_l[[chain_of[mt * tile + i] for mt in range(n_mt) for _ in range(n_dt) for i in range(n_d)]]
    for mt in range(n_mt):
        inv_d = inv_l[chain_of[mt * tile:mt * tile + n_d]]
        for dt in range(n_dt):
            at = n_d * (n_dt * mt + dt)
            res = res_all[at:at + n_d] if two_level else w.dequant(o[mt][dt], sv[dt]) * inv_d
            col = dt * mpv.N + dc
            if smooth_v:
                res = res + w.cat(*[w.global_load(vm, _vals(w, col[:, i] * 4), 4, "f32") for i in range(n_d)])
            row = mt * mqk.M + dr
            for i in range(n_d):
                w.global_store(out, _vals(w, (row[:, i] * head_dim + col[:, i]) * 4), res[i])


def _v_runs(addr) -> list[tuple[int, int]]:
    """(first element, count) of each load of ``_v_elements`` at byte addresses ``addr``
    [elements, lanes]: consecutive elements at consecutive addresses in every lane, the first
    aligned to their size, are one load of 16 or 8 bytes. Adding a multiple of 16 to every
    address leaves them as they are."""
    runs, e = [], 0
    while e < len(addr):
        n = next(n for n in (4, 2, 1) if e + n <= len(addr) and not (addr[e] % (4 * n)).any() and
                 (addr[e:e + n] == addr[e] + 4 * np.arange(n)[:, None]).all())
        runs.append((e, n))
        e += n
    return runs


def _v_elements(w, v, addr, runs):
    """A lane's f32 elements at byte addresses ``addr`` [elements, lanes], loaded as ``runs``
    (``_v_runs(addr)``), the address registers made in one value."""
    at = _vals(w, addr[[e for e, _ in runs]])
    if len({n for _, n in runs}) == 1:            # every run as wide: the loads at once
        return w.cat(*w.global_load_each(v, at, 4 * runs[0][1], "f32"))
    return w.cat(*[w.global_load(v, at[i], 4 * n, "f32") for i, (_, n) in enumerate(runs)])


def _token_values(w, buf, tok):
    """The f32 of ``buf`` at tokens ``tok`` [tiles, lanes, regs] as one value, element regs * t + i.
    A lane's registers that name two consecutive tokens (then the same two again: the rows of
    an m16n8 D) are one 8-byte load; otherwise a load per register."""
    n_t, _, n_r = tok.shape
    pairs = n_r == 4 and (tok[:, :, 1] == tok[:, :, 0] + 1).all() and (tok[:, :, 2:] == tok[:, :, :2]).all() and \
        (tok[:, :, 0] % 2 == 0).all()
    parts = []
    for t in range(n_t):
        if pairs:
            parts.append(w.global_load_each(buf, _vals(w, tok[t, :, 0] * 4), 8, "f32")[0][[0, 1, 0, 1]])
        else:
            parts += [w.global_load(buf, _vals(w, tok[t, :, i] * 4), 4, "f32") for i in range(n_r)]
    return w.cat(*parts)


def run_sage_attention(q, k, v, cfg=None, *, q_pos0=None, q_layout=None, provenance=True, kernel=None, trace=False):
    """Run the kernel on 32 query rows q [32, d] over k/v [T, d] (T a multiple of 64) with
    ``cfg`` (a sage_reference.SageConfig; its granularity must be "thread", q_block 32).
    ``kernel``: a function with sage_attention's signature run in its place (gfxsim run --kernel-fn).
    Returns (out [32, d], the gfxsim Run)."""
    from gfxsim import Buffer, launch
    from .sage_reference import SageConfig, smooth
    cfg = cfg or SageConfig(q_block=WARPQ)
    if cfg.granularity != "thread" or cfg.q_block != WARPQ:
        raise ArgumentError(f"the kernel quantizes per thread with mean(Q) over its {WARPQ} rows; got "
                         f"granularity {cfg.granularity!r}, q_block {cfg.q_block}")
    if q.shape[0] != WARPQ:
        raise ArgumentError(f"q must have {WARPQ} rows (one warp), got {q.shape}")
    T, d = k.shape
    qs, ks, vs, ds, vm = smooth(q, k, v, cfg, T)
    rows = np.broadcast_to(np.arange(WARPQ)[:, None], (WARPQ, d))
    toks = np.broadcast_to(np.arange(T)[:, None], (T, d))
    dims_q, dims_k = np.broadcast_to(np.arange(d), (WARPQ, d)), np.broadcast_to(np.arange(d), (T, d))
    # V transposed and permuted, as SageAttention2 hands it to its attention kernel
    _, perm = pv_a_from_qk(get_instruction(cfg.arch, QK_MMA[cfg.qk]), get_instruction(cfg.arch, PV_MMA))
    v_tok = permuted_columns(T, perm)
    vt = np.ascontiguousarray(vs[v_tok].T)
    bufs = (Buffer("q", qs, tags={"row": rows, "dim": dims_q}), Buffer("k", ks, tags={"token": toks, "dim": dims_k}),
            Buffer("v", vt, tags={"token": np.broadcast_to(v_tok, (d, T)),
                                  "dim": np.broadcast_to(np.arange(d)[:, None], (d, T))}),
            Buffer("ds", ds[0], tags={"token": np.arange(T)}), Buffer("vm", vm, tags={"dim": np.arange(d)}))
    out = Buffer.empty("out", (WARPQ, d), np.float32)
    run = launch(kernel or sage_attention, arch=cfg.arch, args=bufs + (out,), provenance=provenance, trace=trace,
                 kwargs=dict(context=T, head_dim=d, qk=cfg.qk, two_level=cfg.two_level, smooth_v=cfg.smooth_v,
                             q_pos0=q_pos0, q_layout=q_layout))
    return out.array.copy(), run


def _bit_reversed(n: int, bits: int) -> list:
    """[bitreverse(j) for j in range(n)], n == 2**bits: bit b of j moved to bit bits - 1 - b."""
    j, r = np.arange(n), np.zeros(n, np.int64)
    for b in range(bits):
        r |= ((j >> b) & 1) << (bits - 1 - b)
    return r.tolist()


def _operand_addresses(rows, cols, corners, ld, per, n_regs) -> np.ndarray:
    """_operands' byte addresses [corners * n_regs * per/4, lanes]: row (corner, r, h) is
    ((row0 + rows[:, r*per]) * ld + col0 + cols[:, r*per]) * 4 + 4 * h, in that order."""
    c = np.asarray(corners, np.int64).reshape(-1, 2)
    at = rows[:, ::per][:, :n_regs].T, cols[:, ::per][:, :n_regs].T          # [n_regs, lanes]
    base = ((c[:, 0, None, None] + at[0][None]) * ld + c[:, 1, None, None] + at[1][None]) * 4
    return (base[:, :, None, :] + 4 * np.arange(0, per, 4)[None, None, :, None]).reshape(-1, rows.shape[0])
