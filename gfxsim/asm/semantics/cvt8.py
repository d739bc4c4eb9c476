"""fp8/bf8 conversions of gfx942 (e4m3fnuz / e5m2fnuz: biases 8 and 16, 0x80 the only NaN, no
infinity), their numbers from the ISA table's entries (gfxsim/isa/conversion.py, half.py).

v_cvt_pk_{fp8,bf8}_f32 D, S0, S1 [op_sel:[0,0,w]] writes the two bytes {S1, S0} to word w of D,
the other word kept; v_cvt_f32_{fp8,bf8} reads byte 0 or the SDWA-selected byte;
v_cvt_pk_f32_{fp8,bf8} reads the bytes of word 0 or (SDWA WORD_1) word 1 into a register pair;
v_cvt_sr_{fp8,bf8}_f32 D, S0, S1 op_sel:[0,0,b0,b1] rounds S0 with S1's random bits into byte
b0 + 2*b1 of D, the other bytes kept.
Overflow: a finite source beyond the type's range gives NaN (0x80), or with MODE.FP16_OVFL set
(mode.py; what Triton sets for its saturating downcasts) the largest finite value of its sign
(240 for fp8, 57344 for bf8); Inf and NaN give NaN either way.
Provenance: each fp8 byte is named by its binary32 source, written in the arch's encoding
(ArchProfile.cvt8_encodings); each binary32 result by its byte, which is read in that encoding
(a byte written in another is a format-mismatch, gfxsim.machine.encoding)."""
from __future__ import annotations

import numpy as np

from . import f32, no_mods, op, put, u32
from .vop import value_of
from ... import isa
from ...machine import encoding
from ...machine.provenance import Prov
from ...machine.routing import route_prov
from ...machine.valueprov import elem_prov
from ...machine.vgpr import VGPRs

U32, U8, F32 = np.uint32, np.uint8, np.float32
ML = {"fp8": "float8_e4m3fnuz", "bf8": "float8_e5m2fnuz"}
_BYTE = {"BYTE_0": 0, "BYTE_1": 1, "BYTE_2": 2, "BYTE_3": 3, "DWORD": 0, "WORD_0": 0, "WORD_1": 2}


def _rows(order, width):
    return np.broadcast_to(np.asarray(order, np.int64)[:, None], (len(order), width))


def _write(st, dst, words, prov):
    words = np.asarray(words, U32).reshape(-1, st.w.width)
    if prov is None:
        put(st, dst, words, decided=True)
    else:
        st.vwrite_value(dst.file, dst.first, VGPRs(st.w, words.copy(), "u32", prov, regs=(dst.first, words.shape[0])))


MAX = {"fp8": 240.0, "bf8": 57344.0}


def saturated(st, x, bits, kind):
    """fp8 ``bits`` (uint8 [width]) of the f32 sources ``x``, the finite ones that overflowed set to
    ±max where MODE.FP16_OVFL is set in their member."""
    from .mode import fp16_ovfl
    on = np.repeat(fp16_ovfl(st), st.lanes)
    if not on.any():
        return bits
    import ml_dtypes
    x = np.asarray(x, F32)
    over = on & np.isfinite(x) & (bits == U8(0x80)) & (x != 0)
    if not over.any():
        return bits
    top = np.asarray([MAX[kind], -MAX[kind]], F32).astype(getattr(ml_dtypes, ML[kind])).view(U8)
    return np.where(over, np.where(x > 0, top[0], top[1]), bits).astype(U8)


def _written(st, name, kind, p):
    """An fp8 byte's provenance ``p`` (one row, or None) as the conversion wrote it: in the arch's encoding."""
    return encoding.with_encoding(p, 1, (1, st.w.pw), st.w.arch.cvt8_encodings.get(kind), name)


def _pk_to8(name, kind):
    @op(name)
    def run(st, d):
        no_mods(st, d, ("op_sel",))
        dst, a, b = d.ops.positional
        sel = d.ops.mods.get("op_sel", (0, 0, 0))
        if any(sel[:2]):
            raise st.error(f"{d.mnemonic}: op_sel on a source is not modelled")
        word = len(sel) > 2 and sel[2]
        fn = isa.entry(name).fn
        lo, hi = (saturated(st, x, np.asarray(fn(x)).view(U8), kind).astype(U32)
                  for x in (f32(st, o) for o in (a, b)))
        old = st.vwords(dst.file, dst.first, 1)[0]
        shift = U32(16 * word)
        r = (old & ~(U32(0xFFFF) << shift)) | ((lo | (hi << U32(8))) << shift)
        prov = None
        if st.w.provenance:
            pa, pb = (None if o.kind != "reg" or o.file not in "va" else elem_prov(st.w, value_of(st, o), 1)
                      for o in (a, b))
            po = st.vread(dst.file, dst.first, 1).prov
            w = st.w.pw
            parts = [_written(st, name, kind, None if p is None else route_prov(p.per_byte(), _rows([0], w), w))
                     for p in (pa, pb)]
            if parts[0] is not None or parts[1] is not None or po is not None:
                both = Prov.concat(parts + [None if po is None else po.per_byte()], [1, 1, 4], w)
                order = [2, 3, 0, 1] if word else [0, 1, 4, 5]     # old bytes are rows 2..5
                prov = route_prov(both, _rows(order, w), w)
        _write(st, dst, r, prov)
    return run


def _sr(name):            # v_cvt_sr_{fp8,bf8}_f32
    @op(name)
    def run(st, d):
        """D.byte[op_sel[2] + 2*op_sel[3]] = S0 stochastically rounded with S1's bits; the other bytes kept."""
        no_mods(st, d, ("op_sel",))
        dst, a, rnd = d.ops.positional
        sel = tuple(d.ops.mods.get("op_sel", (0, 0, 0, 0))) + (0, 0, 0, 0)
        if any(sel[:2]):
            raise st.error(f"{d.mnemonic}: op_sel on a source is not modelled")
        byte = sel[2] + 2 * sel[3]
        x = f32(st, a)
        bits, low = isa.entry(name).fn(x, u32(st, rnd))
        bits = saturated(st, x, np.asarray(bits).astype(U8), name.split("_")[3])
        low &= st.exec
        if low.any():
            raise st.error(f"{d.mnemonic}: a result in the fp8 denormal range (which random bits the rounding "
                           "uses there is not settled) is not modelled", lane=int(np.argmax(low)))
        old = st.vwords(dst.file, dst.first, 1)[0]
        shift = U32(8 * byte)
        r = (old & ~(U32(0xFF) << shift)) | (bits.astype(U32) << shift)
        prov = None
        if st.w.provenance:
            pa = elem_prov(st.w, value_of(st, a), 1) if a.kind == "reg" and a.file in "va" else None
            po = st.vread(dst.file, dst.first, 1).prov
            w = st.w.pw
            part = _written(st, name, name.split("_")[3], None if pa is None else
                            route_prov(pa.per_byte(), _rows([0], w), w))
            if part is not None or po is not None:
                both = Prov.concat([part, None if po is None else po.per_byte()], [1, 4], w)
                order = [0 if k == byte else 1 + k for k in range(4)]
                prov = route_prov(both, _rows(order, w), w)
        _write(st, dst, r, prov)
    return run


def _decode(bits, kind):
    import ml_dtypes
    return np.asarray(bits, U8).view(getattr(ml_dtypes, ML[kind])).astype(F32)


def _src_byte(st, d, o):
    if o.kind != "reg" or o.count != 1:
        raise st.error(f"{d.mnemonic}: source {o.text} must be one register")
    if o.neg or o.abs or o.sext:
        raise st.error(f"{d.mnemonic}: modifier on {o.text}")
    word = st.lanewise(st.sread(o.first)) if o.file == "s" else st.vwords(o.file, o.first, 1)[0]
    sel = d.ops.mods.get("src0_sel", "DWORD") if d.enc == "sdwa" else "DWORD"
    return word, _BYTE[sel], (st.vread(o.file, o.first, 1).prov if st.w.provenance and o.file in "va" else None)


def _to_f32(name, kind, pair):
    @op(name)
    def run(st, d):
        no_mods(st, d, ("src0_sel", "dst_sel", "dst_unused") if d.enc == "sdwa" else ())
        if d.enc == "sdwa" and (d.ops.mods.get("dst_sel", "DWORD") != "DWORD"):
            raise st.error(f"{d.mnemonic}: an SDWA destination select is not modelled")
        dst, src = d.ops.positional
        word, first, p = _src_byte(st, d, src)
        n = 2 if pair else 1
        vals = [_decode(((word >> U32(8 * (first + k))) & U32(0xFF)).astype(U8), kind).view(U32) for k in range(n)]
        prov = None
        if p is not None:
            p = p.per_byte()
            read = p.map(lambda a: a[first:first + n])
            encoding.check_values(st.w, d.mnemonic, "source",
                                  st.w.arch.cvt8_encodings.get(kind), read, st.w.pexec(f"EXEC of {d.mnemonic}"))
            prov = encoding.numeric(route_prov(p, _rows(sum(([first + k] * 4 for k in range(n)), []), st.w.pw),
                                               st.w.pw))
        _write(st, dst, np.stack(vals), prov)
    return run


for _k in ("fp8", "bf8"):
    _sr(f"v_cvt_sr_{_k}_f32")
    _pk_to8(f"v_cvt_pk_{_k}_f32", _k)
    _to_f32(f"v_cvt_f32_{_k}", _k, False)
    _to_f32(f"v_cvt_pk_f32_{_k}", _k, True)

__all__: list[str] = []
