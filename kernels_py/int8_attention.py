"""The Python twin of kernels_hip/int8_attention.h: the pieces of ALGORITHMS.md that the INT8
attention twins share (Q quantization, the QK tile, W quantization per scale group, the PV chunk,
the cross-wave sum), helper for helper, with the header's parameter names and order.

How a HIP helper reads in Python (tests/kernels_py/test_twin_correspondence.py holds the two to it):
- ``w``, the wave, comes first; the HIP template parameters (TAIL, GROUPING, MASKS, OP) follow the
  HIP parameters, lower-cased; ``cfg`` is what HIP fixes at compile time (HEAD_DIM, BLOCK_SIZE and
  the D layout, see Config) and ``label`` names the matrix instructions in the trace.
- A HIP array ``float x[4]`` (one float per output register) is one 4-register value; an array of
  those (``float s[TLOOP][4]``, ``floatx4 o[DTILES]``) is a Python list of them. HIP's output
  parameters are filled the same way: list items assigned, 4-register values written with ``x[:] =``.
- A HIP loop ``for (int i = 0; i < 4; ++i)`` over the registers is one statement on the 4-register
  value; ``d_row(w, rowid, lane16id, REGS)`` is every register's row at once.
- Pointers are views (gfxsim/machine/views.py): ``k_cache + off`` and ``q_lds[row]`` index like the
  HIP code, and ``.load(nbytes)`` / ``.store(value)`` are its loads and stores.
- Statements only the simulator has: ``w.group_scale`` (marks a quantization scale, so the debugger
  checks its footprint), ``w.dequant`` (float(acc) * scale), ``w.coverage`` (each token feeds an
  output tile once).
"""
from __future__ import annotations

import numpy as np

from .fragments import DLayout, bf16_mma, conflict_free_stride, int8_mma
from gfxsim.errors import ArgumentError

NWARPS = 4                                  # waves per workgroup
TOKENS_PER_CHUNK = 64                       # a wave's tokens per iteration
TLOOP = TOKENS_PER_CHUNK // 16              # 16-token QK tiles per chunk
QMAX = np.float32(127.0)
MIN_AMAX = QMAX / np.finfo(np.float32).max  # below it inv = 127/amax would overflow: scale = inv = 0
LDS_PAD = 8                                 # bytes of padding per LDS row (ALGORITHMS.md "LDS layouts")
W_STRIDE = TOKENS_PER_CHUNK + LDS_PAD       # bytes per row of a wave's Wq slab
GROUPINGS = ("fragment", "contiguous")
REGS = slice(None)                          # every output register i at once (HIP: for i < 4)
HEAD_DIMS = (64, 128)
BLOCK_SIZES = (16, 32)

# Parameters only the Python twins have (tests/kernels_py/test_twin_correspondence.py allows these and no others):
PYTHON_ONLY_PARAMETERS = {
    "w": "the wave every statement acts on (HIP: implicit, the thread's own)",
    "cfg": "HEAD_DIM, BLOCK_SIZE and the D layout: compile-time in HIP (-D, #if GFXSIM_JUMP_LAYOUT)",
    "label": "what the matrix instructions are called in the trace and the findings",
}
# Launch options of the Python kernels that the HIP kernels fix otherwise:
LAUNCH_OPTIONS = {
    "head_dim": "HIP: -D GFXSIM_HEAD_DIM (64 or 128)",
    "block_size": "HIP: -D GFXSIM_BLOCK_SIZE (16 or 32)",
    "grouping": "HIP: the entry point's suffix, _fragment or _contiguous (prefix_prefill: fragment only)",
    "formula": "Python only: force one arch's hand-written D-layout formula (the wrong-arch experiment)",
    "num_kv_heads": "the standalone kernels' cache may hold several kv heads (HIP: one)",
    "kvh": "the kv head a standalone kernel reads (HIP: 0)",
    "max_blocks": "Python: defaults to the block table's length",
    "partition_size": "decode partitions of several 256-token blocks (HIP: 256)",
}


class Config:
    """What a HIP twin fixes at compile time, for one wave: HEAD_DIM and BLOCK_SIZE (-D), the
    constants derived from them, and the D layout of the arch's int8 instruction (gfxsim_hip.h's
    d_row/d_col/D_SAME_ROW_LANES/d_row_leader), derived from the instruction record — or from one
    arch's hand-written formula (``formula="gfx936"|"gfx942"``, the wrong-arch experiment).
    ``num_kv_heads``/``kvh``: the kv head a standalone kernel reads (HIP's standalone caches hold
    one, the literals 1, 0)."""

    def __init__(self, w, head_dim: int, block_size: int, formula: str = "derived", *, num_kv_heads: int = 1,
                 kvh: int = 0):
        if head_dim not in HEAD_DIMS:
            raise ArgumentError(f"head_dim must be one of {HEAD_DIMS}, got {head_dim}")
        if block_size not in BLOCK_SIZES:
            raise ArgumentError(f"block_size must be one of {BLOCK_SIZES} (a lane's 16 V tokens lie in one "
                             f"block), got {block_size}")
        self.HEAD_DIM, self.BLOCK_SIZE = int(head_dim), int(block_size)
        self.QKHELOOP = head_dim // 32           # K=32 QK steps over head_dim
        self.DTILES = head_dim // 16             # 16-column PV tiles over head_dim
        self.SM_SCALE = np.float32(1 / np.sqrt(head_dim))
        self.Q_STRIDE = head_dim + LDS_PAD       # bytes per row of q_lds
        self.MMA = int8_mma(w.arch)
        self.dlay = DLayout(w, w.insn(self.MMA), formula)
        self.BF16_MMA = bf16_mma(w.arch) if _has_bf16(w.arch) else None     # pv_bf16's; same D layout
        if self.BF16_MMA and DLayout(w, w.insn(self.BF16_MMA), formula)._rows.tolist() != self.dlay._rows.tolist():
            raise ArgumentError(f"{w.arch.name}: {self.BF16_MMA} and {self.MMA} place D differently")
        self.O_STRIDE = conflict_free_stride(self.dlay, head_dim)     # floats per row of o_lds
        self.D_SAME_ROW_LANES = tuple(self.dlay.row_xor_masks)
        self.D_REGS_SHARE_ROW = bool(self.dlay.regs_share_row)
        self.NUM_KV_HEADS, self.KVH = num_kv_heads, kvh
        self._rows, self._cols = self.dlay.rows(), self.dlay.cols()
        self._leader = self.dlay.row_leader()
        self._halves(w)

    def _halves(self, w):
        """Where a row's 8-column halves (pv_tile = col % 16 / 8) live, from the layout: the lane masks
        that keep row and half (D_SAME_ROW_HALF_LANES), the registers of the same row and half, and
        the row's other half: in another register of the lane, or in register i of lane ^ mask."""
        rows, cols = self.dlay._rows[:, :w.lanes], self.dlay._cols[:, :w.lanes]
        half, lane = cols % 16 // 8, np.arange(w.lanes)
        self.D_SAME_ROW_HALF_LANES = tuple(m for m in self.D_SAME_ROW_LANES if (half[:, lane ^ m] == half).all())
        regs = range(rows.shape[0])
        self._same_half_regs = [tuple(k for k in regs if (rows[k] == rows[i]).all() and (half[k] == half[i]).all())
                                for i in regs]
        other = [[k for k in regs if (rows[k] == rows[i]).all() and (half[k] != half[i]).all()] for i in regs]
        if all(other):
            # the register at the same place in the other half (gfx936: i ^ 2)
            self._other_half = ("reg", [o[self._same_half_regs[i].index(i) % len(o)] for i, o in enumerate(other)])
        else:
            masks = [m for m in self.D_SAME_ROW_LANES if (half[:, lane ^ m] != half).all()
                     and (rows[:, lane ^ m] == rows).all()]
            if not masks:
                raise ArgumentError(f"{self.MMA}: no register or lane holds the other half of a D row")
            self._other_half = ("lane", masks[0])


# ---- where D[m][n] lives (gfxsim_hip.h) -----------------------------------------------------
def d_row(w, rowid, lane16id, i, *, cfg):
    """The D row (qrow) that register i of the lane holds; i = REGS: every register's."""
    return cfg._rows if i is REGS else cfg._rows[i]


def d_col(w, rowid, lane16id, i, *, cfg):
    """The D column (a token for QK, a head element for PV) that register i of the lane holds."""
    return cfg._cols if i is REGS else cfg._cols[i]


def d_row_leader(w, rowid, lane16id, *, cfg):
    """One lane per (row, register): the lane whose column bits are zero."""
    return cfg._leader


def other_half(w, v, i, *, cfg):
    """Register i's value for the other 8-column half of its row: another register of the lane
    (gfx936: i^2) or register i of another lane (CDNA3: lane ^ 8); i = REGS: every register's."""
    kind, where = cfg._other_half
    if kind == "reg":
        out = w.cat(*[v[k] for k in where])
    else:
        out = w.shfl_xor(v, where)
    return out if i is REGS else out[i]


# ---- small helpers ------------------------------------------------------------------------
def max_over_lanes(w, v, *, masks):
    for m in masks:
        v = w.max(v, w.shfl_xor(v, m))
    return v


def sum_over_lanes(w, v, *, masks):
    for m in masks:
        v = v + w.shfl_xor(v, m)
    return v


def quant_scale(w, amax):
    """amax/127 dequantizes; 0 below MIN_AMAX. (amax * 0 rather than a literal 0: the zero scale of
    an all-zero group still names the elements it was computed over.)"""
    return w.select(amax >= MIN_AMAX, amax / QMAX, amax * np.float32(0))


def quant_inv(w, amax):
    """127/amax quantizes; 0 below MIN_AMAX."""
    return w.select(amax >= MIN_AMAX, QMAX / w.max(amax, MIN_AMAX), 0.0)


def quantize(w, x, inv):
    """int8 of x * inv, rounded half to even (v_rndne_f32) and clamped to +-127."""
    return w.clamp(w.rint(x * inv), -QMAX, QMAX).to("i32").to("i8")


# Cache addressing (vLLM ROCm layout, x = 16 int8 per 16 bytes):
#   k_cache[blk][kvh][HEAD_DIM/16][BLOCK_SIZE][16], v_cache[blk][kvh][HEAD_DIM][BLOCK_SIZE],
#   k_scale/v_scale[blk][kvh][BLOCK_SIZE]; logical token t sits in block_table[t / BLOCK_SIZE].
def cache_head(w, block_table, num_kv_heads, kvh, t, *, cfg):
    return block_table[t // cfg.BLOCK_SIZE].load() * num_kv_heads + kvh


def tile_slot(w, block_table, num_kv_heads, kvh, tile_start, *, cfg):
    """Slot of a 16-token tile's token 0 in the [blk][kvh][BLOCK_SIZE] scale arrays (the tile lies in
    one block: it starts at a multiple of 16 and BLOCK_SIZE is 16 or 32)."""
    return cache_head(w, block_table, num_kv_heads, kvh, tile_start, cfg=cfg) * cfg.BLOCK_SIZE \
        + tile_start % cfg.BLOCK_SIZE


# ---- Q: per-row quantization into LDS ------------------------------------------------------
def q_row(k, rowid):
    """The Q row that the 16-lane row rowid quantizes in pass k (the pass of wave k, or pass k of one
    wave): 2k + rowid/2 + 8*(rowid%2). The two rows of one 4-byte ds_write phase (rowid 0 and 1, at
    head_dim 64) lie 8 rows = 16 banks apart, so the store is conflict-free with Q_STRIDE."""
    return 2 * k + rowid // 2 + 8 * (rowid % 2)


def quantize_q_row(w, q_row, valid, lane16id, q_lds_row, sq_lds_row, *, cfg):
    """One q row per 16-lane row of the wave; lane16id holds HEAD_DIM/16 consecutive elements, stored
    as one HEAD_DIM/16-byte write. Writes Qq[HEAD_DIM] and sQ = amax/127; valid false: a zero row."""
    QE = cfg.HEAD_DIM // 16
    x = w.zeros("f32", QE)
    with w.if_(valid):
        x[:] = w.cat(*[(q_row + lane16id * QE + 4 * e).load(16) for e in range(QE // 4)])
    a = abs(x)
    amax = a[0]
    for e in range(1, QE):
        amax = w.max(amax, a[e])
    amax = max_over_lanes(w, amax, masks=(1, 2, 4, 8))
    inv = quant_inv(w, amax)
    qq = quantize(w, x, inv)
    (q_lds_row + lane16id * QE).store(qq)
    with w.if_(lane16id.eq(0)):
        sq_lds_row.store(quant_scale(w, amax))


def load_q_operand(w, qa, sq, q_lds, sq_lds, rowid, lane16id, *, cfg):
    """A operand of every QK step kstep (row lane16id, head elements 32*kstep + 8*rowid .. +7) and
    sQ of every output register's row (a scale over the row's head elements), read once."""
    for kstep in range(cfg.QKHELOOP):
        qa[kstep] = (q_lds + lane16id * cfg.Q_STRIDE + 32 * kstep + 8 * rowid).load(8)
    qrow = d_row(w, rowid, lane16id, REGS, cfg=cfg)
    sq[:] = w.group_scale(w.cat(*[sq_lds[qrow[i]].load() for i in range(4)]))


# ---- QK ------------------------------------------------------------------------------------
def qk_tile(w, qa, k_cache, tile_slot, valid, rowid, lane16id, *, cfg, label=None):
    """One 16x16 S tile as int32 D: sum over the QKHELOOP steps of Qq (A) x Kq^T (B).
    B lane: token n = lane16id (slot tile_slot + lane16id), head elements 32*kstep + 8*rowid .. +7,
    one 8-byte load per step. A lane where valid is false loads nothing and contributes zeros."""
    kb = [w.zeros("i8", 8) for _ in range(cfg.QKHELOOP)]
    with w.if_(valid):
        slot = tile_slot + lane16id
        k_tok = k_cache + (slot // cfg.BLOCK_SIZE) * cfg.HEAD_DIM * cfg.BLOCK_SIZE + (slot % cfg.BLOCK_SIZE) * 16
        for kstep in range(cfg.QKHELOOP):
            d = 32 * kstep + 8 * rowid
            kb[kstep][:] = (k_tok + (d // 16) * cfg.BLOCK_SIZE * 16 + d % 16).load(8)
    acc = None                                                   # C = 0
    for kstep in range(cfg.QKHELOOP):
        acc = w.mma(cfg.MMA, qa[kstep], kb[kstep], acc, label=f"{label}j {kstep}" if label else None)
    return acc


def qk_chunk(w, s, qa, sq, k_cache, k_scale, block_table, num_kv_heads, kvh, chunk_start, limit, rowid, lane16id,
             *, tail, cfg, label=None):
    """S of a wave's 64-token chunk in the QK output layout: s[td] register i is row d_row(i), token
    chunk_start + 16*td + d_col(i); S = float(acc) * sQ[qrow] * sK[t] * (1/sqrt(head_dim)).
    tail (the chunk reaches past limit): tokens t >= limit load nothing and get S = -inf.
    Instructions are labelled "chunk c tile td j kstep" (``label`` names the chunk)."""
    token_offset = d_col(w, rowid, lane16id, REGS, cfg=cfg)
    name = _chunk_name(chunk_start, label)
    for td in range(TLOOP):
        tile_start = chunk_start + 16 * td
        s[td] = w.const(-np.inf, "f32", 4)
        live = not tail or tile_start < limit
        if not w.any(live):
            continue
        with w.if_(live):
            slot0 = tile_slot(w, block_table, num_kv_heads, kvh, tile_start, cfg=cfg)
            acc = qk_tile(w, qa, k_cache, slot0, not tail or tile_start + lane16id < limit, rowid, lane16id, cfg=cfg,
                          label=f"{name} tile {td} " if name else None)
            sk = w.zeros("f32", 4)
            for i in range(4):
                with w.if_(not tail or tile_start + token_offset[i] < limit):
                    sk[i] = (k_scale + slot0 + token_offset[i]).load()
            S = w.dequant(acc, sq) * sk * cfg.SM_SCALE
            s[td][:] = S if not tail else w.select(tile_start + token_offset < limit, S, -np.inf)


def row_max(w, out, x, rowid, lane16id, *, cfg):
    """Max over the wave's values in the same row as register i, for every register i: over the
    TLOOP tiles, then over the registers that share the row (all on gfx936, none on CDNA3), then
    over the lanes holding the row."""
    tiles = x[0]
    for td in range(1, TLOOP):
        tiles = w.max(tiles, x[td])
    if cfg.D_REGS_SHARE_ROW:
        v = tiles[0]
        for k in range(1, 4):
            v = w.max(v, tiles[k])
        tiles = w.cat(*[v] * 4)
    out[:] = max_over_lanes(w, tiles, masks=cfg.D_SAME_ROW_LANES)


def row_sum(w, out, x, rowid, lane16id, *, cfg):
    """The sum of the same values: tiles pairwise, registers in order 0..3, then lanes."""
    tiles = (x[0] + x[1]) + (x[2] + x[3])
    if cfg.D_REGS_SHARE_ROW:
        v = tiles[0]
        for k in range(1, 4):
            v = v + tiles[k]
        tiles = w.cat(*[v] * 4)
    out[:] = sum_over_lanes(w, tiles, masks=cfg.D_SAME_ROW_LANES)


# ---- W = P * sV, quantized per scale group --------------------------------------------------
def scale_group(token, grouping):
    """The scale group of a token (offset within the 64-token chunk): the instruction j its scale
    is applied to. fragment: pv_tile = (token % 16) / 8, the instruction that consumes the token;
    contiguous: token / 32, tokens 0-31 | 32-63 (the bug)."""
    if grouping == "fragment":
        return token % 16 // 8
    if grouping == "contiguous":
        return token // 32
    raise ArgumentError(f"grouping must be one of {GROUPINGS}, got {grouping!r}")


def quantize_w(w, sw, W, w_lds, rowid, lane16id, *, grouping, cfg):
    """W[td] in the QK output layout. Writes Wq to w_lds[16 rows][W_STRIDE] (this wave's slab) and
    sw[j], the scale of instruction j for each register's row, held by every lane of the row.
    fragment: own = the amax of a register's group (its row, pv_tile) over the registers and lanes
    holding it; the row's other group comes from the register or lane holding it (other_half).
    contiguous: the amax of tiles 2g, 2g+1 over the whole row, per group g."""
    token_offset = d_col(w, rowid, lane16id, REGS, cfg=cfg)
    if grouping == "fragment":
        tiles = abs(W[0])
        for td in range(1, TLOOP):
            tiles = w.max(tiles, abs(W[td]))
        amax = []
        for i in range(4):                      # registers of the same row and pv_tile
            same = cfg._same_half_regs[i]
            v = tiles[same[0]]
            for k in same[1:]:
                v = w.max(v, tiles[k])
            amax.append(v)
        own = max_over_lanes(w, w.cat(*amax), masks=cfg.D_SAME_ROW_HALF_LANES)
        first = scale_group(token_offset, grouping).eq(0)
        other = other_half(w, own, REGS, cfg=cfg)
        sw[0] = w.group_scale(quant_scale(w, w.select(first, own, other)))
        sw[1] = w.group_scale(quant_scale(w, w.select(first, other, own)))
        inv = [quant_inv(w, own)] * TLOOP
    else:
        scale_group(0, grouping)                # an unknown grouping is named
        inv = [None] * TLOOP
        for g in range(2):
            in_group = [abs(W[td]) if td // 2 == g else w.zeros("f32", 4) for td in range(TLOOP)]
            amax = w.undef("f32", 4)
            row_max(w, amax, in_group, rowid, lane16id, cfg=cfg)
            sw[g] = w.group_scale(quant_scale(w, amax))
            inv[2 * g] = inv[2 * g + 1] = quant_inv(w, amax)
    qrow = d_row(w, rowid, lane16id, REGS, cfg=cfg)
    for td in range(TLOOP):
        wq = quantize(w, W[td], inv[td])
        for i in range(4):
            (w_lds + qrow[i] * W_STRIDE + 16 * td + token_offset[i]).store(wq[i])


# ---- PV ------------------------------------------------------------------------------------
def load_v_partial(w, v_col, n_valid):
    """The first n_valid (< 16) tokens of a V column the context ends inside, byte by byte, so that
    nothing past the end is loaded; the missing tokens are zero."""
    vq = w.zeros("i8", 16)
    for b in range(16):
        with w.if_(n_valid > b):
            vq[b] = (v_col + b).load(1)
    return vq


def pv_chunk(w, o, w_lds, sw, v_cache, block_table, num_kv_heads, kvh, chunk_start, limit, rowid, lane16id, *,
             tail, cfg, label=None):
    """o[dt] += float(acc_0) * sw[0] + float(acc_1) * sw[1] over one 64-token chunk (the chunk's two
    products added first, as the references do).
    B lane (rowid, lane16id): column d = 16*dt + lane16id, tokens 16*rowid .. +15 of the chunk in one
    16-byte load; bytes 8j..8j+7 feed instruction j, which so consumes {16r + 8j + b : r < 4, b < 8}.
    A lane: row lane16id, Wq[lane16id][16*rowid + 8j .. +7], one 8-byte LDS read per j.
    tail (the chunk reaches past limit): a lane whose 16 tokens all exist still loads them at once;
    otherwise it loads the existing ones byte by byte, or nothing.
    Instruction j of column tile dt is labelled "chunk c tile dt j j" (``label`` names the chunk)."""
    wq = [(w_lds + lane16id * W_STRIDE + 16 * rowid + 8 * j).load(8) for j in range(2)]
    t0 = chunk_start + 16 * rowid
    n_valid = limit - t0 if tail else 16
    v_tok = w.zeros("i32")
    with w.if_(n_valid > 0):
        v_tok[:] = cache_head(w, block_table, num_kv_heads, kvh, t0, cfg=cfg) * cfg.HEAD_DIM * cfg.BLOCK_SIZE \
            + t0 % cfg.BLOCK_SIZE
    name = _chunk_name(chunk_start, label)
    for dt in range(cfg.DTILES):
        with w.coverage(("O", w.wave_id, dt), expect=(chunk_start, w.min(chunk_start + TOKENS_PER_CHUNK, limit))):
            v_col = v_cache + v_tok + (16 * dt + lane16id) * cfg.BLOCK_SIZE
            vq = w.zeros("i8", 16)
            with w.if_(n_valid >= 16):
                vq[:] = v_col.load(16)
            if tail and w.any((n_valid > 0) & (n_valid < 16)):
                with w.if_((n_valid > 0) & (n_valid < 16)):
                    vq[:] = load_v_partial(w, v_col, n_valid)
            acc = [w.mma(cfg.MMA, wq[j], vq.bytes(8 * j, 8), label=f"{name} tile {dt} j {j}" if name else None)
                   for j in range(2)]                                # acc0, acc1
            o[dt] += w.dequant(acc[0], sw[0]) + w.dequant(acc[1], sw[1])       # in place: the output tile


def load_w(w, W, p, v_scale, block_table, context_len, chunk_start, rowid, lane16id, *, tail, cfg):
    """W = P * sV of a chunk in the QK output layout, from the standalone kernels' p[16][context_len]
    (one kv head). tail: tokens at or past context_len are 0 and load nothing."""
    qrow = d_row(w, rowid, lane16id, REGS, cfg=cfg)
    token_offset = d_col(w, rowid, lane16id, REGS, cfg=cfg)
    for td in range(TLOOP):
        tile_start = chunk_start + 16 * td
        W[td] = w.zeros("f32", 4)
        if tail and tile_start >= context_len:
            continue
        slot0 = tile_slot(w, block_table, cfg.NUM_KV_HEADS, cfg.KVH, tile_start, cfg=cfg)
        t = tile_start + token_offset
        for i in range(4):
            with w.if_(not tail or t[i] < context_len):
                W[td][i] = (p + qrow[i] * context_len + t[i]).load() * (v_scale + slot0 + token_offset[i]).load()


# ---- the 4 waves' partial outputs ------------------------------------------------------------
def sum_waves(w, o, o_lds, warpid, rowid, lane16id, *, cfg):
    """Waves 1..3 publish o (D layout) to o_lds[NWARPS-1][16][O_STRIDE]; wave 0 adds them in wave
    order, so its o ends as ((o0 + o1) + o2) + o3 (three waves' partials keep the decode kernel's LDS
    within half of 64 KiB: two workgroups per CU). Every wave must call this."""
    qrow = d_row(w, rowid, lane16id, REGS, cfg=cfg)
    col = d_col(w, rowid, lane16id, REGS, cfg=cfg)
    if warpid > 0:
        for dt in range(cfg.DTILES):
            for i in range(4):
                (o_lds + ((warpid - 1) * 16 + qrow[i]) * cfg.O_STRIDE + 16 * dt + col[i]).store(o[dt][i])
    w.barrier()
    if warpid == 0:
        for k in range(1, NWARPS):
            for dt in range(cfg.DTILES):
                o[dt] += w.cat(*[(o_lds + ((k - 1) * 16 + qrow[i]) * cfg.O_STRIDE + 16 * dt + col[i]).load()
                                 for i in range(4)])


def _has_bf16(arch) -> bool:
    try:
        bf16_mma(arch)
        return True
    except KeyError:
        return False


def _chunk_name(chunk_start, label):
    """What a chunk's instructions are called: ``label``, else "chunk c" of a start known on the host
    (a per-lane start, as in a batched launch, names nothing)."""
    if label is None and isinstance(chunk_start, (int, np.integer)):
        label = f"chunk {chunk_start // TOKENS_PER_CHUNK}"
    return label
