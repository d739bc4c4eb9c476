"""Runs MMA-Sim (``pip install mmasim``, needs torch) on gfxsim's floating-point matrix records and
writes ``golden_mmasim.npz``: per experiment the inputs' bits and the D bits MMA-Sim computes.

The replay (tests/gfxsim/arch/test_mmasim_golden.py) needs numpy only. Each experiment is one
block of one record: A [M, K], B [K, N], C [M, N] -> D [M, N]; a chained experiment feeds D back as
C over 16 instructions (A [16, M, K], B [16, K, N]). Inputs are drawn as bit fields of the operand's
format, so every exponent, subnormals, ties and specials can be asked for directly.

    python3 hw_probes/mmasim/make_golden.py --out hw_probes/mmasim/golden_mmasim.npz
"""
from __future__ import annotations

import argparse
import json

import numpy as np

# (gfxsim arch, mnemonic, MMA-Sim class, MMA-Sim arch, MMA-Sim name, M, N, K, blocks, A type, B type, C/D type)
CDNA3_FLOAT = [
    ("v_mfma_f32_32x32x1_2b_f32", 32, 32, 1, 2, "f32", "f32"), ("v_mfma_f32_16x16x1_4b_f32", 16, 16, 1, 4, "f32", "f32"),
    ("v_mfma_f32_4x4x1_16b_f32", 4, 4, 1, 16, "f32", "f32"), ("v_mfma_f32_32x32x2_f32", 32, 32, 2, 1, "f32", "f32"),
    ("v_mfma_f32_16x16x4_f32", 16, 16, 4, 1, "f32", "f32"),
    ("v_mfma_f32_32x32x4_xf32", 32, 32, 4, 1, "xf32", "xf32"), ("v_mfma_f32_16x16x8_xf32", 16, 16, 8, 1, "xf32", "xf32"),
    ("v_mfma_f32_32x32x4_2b_f16", 32, 32, 4, 2, "f16", "f16"), ("v_mfma_f32_16x16x4_4b_f16", 16, 16, 4, 4, "f16", "f16"),
    ("v_mfma_f32_4x4x4_16b_f16", 4, 4, 4, 16, "f16", "f16"), ("v_mfma_f32_32x32x8_f16", 32, 32, 8, 1, "f16", "f16"),
    ("v_mfma_f32_16x16x16_f16", 16, 16, 16, 1, "f16", "f16"),
    ("v_mfma_f32_32x32x4_2b_bf16", 32, 32, 4, 2, "bf16", "bf16"), ("v_mfma_f32_16x16x4_4b_bf16", 16, 16, 4, 4, "bf16", "bf16"),
    ("v_mfma_f32_4x4x4_16b_bf16", 4, 4, 4, 16, "bf16", "bf16"), ("v_mfma_f32_32x32x8_bf16", 32, 32, 8, 1, "bf16", "bf16"),
    ("v_mfma_f32_16x16x16_bf16", 16, 16, 16, 1, "bf16", "bf16"),
    ("v_mfma_f64_16x16x4_f64", 16, 16, 4, 1, "f64", "f64"), ("v_mfma_f64_4x4x4_4b_f64", 4, 4, 4, 4, "f64", "f64"),
    *((f"v_mfma_f32_{m}x{m}x{k}_{a}_{b}", m, m, k, 1, a, b) for m, k in ((16, 32), (32, 16))
      for a in ("fp8", "bf8") for b in ("fp8", "bf8")),
]
CDNA2_FLOAT = [
    ("v_mfma_f32_32x32x1f32", 32, 32, 1, 2, "f32"), ("v_mfma_f32_16x16x1f32", 16, 16, 1, 4, "f32"),
    ("v_mfma_f32_4x4x1f32", 4, 4, 1, 16, "f32"), ("v_mfma_f32_32x32x2f32", 32, 32, 2, 1, "f32"),
    ("v_mfma_f32_16x16x4f32", 16, 16, 4, 1, "f32"),
    ("v_mfma_f32_32x32x4f16", 32, 32, 4, 2, "f16"), ("v_mfma_f32_16x16x4f16", 16, 16, 4, 4, "f16"),
    ("v_mfma_f32_4x4x4f16", 4, 4, 4, 16, "f16"), ("v_mfma_f32_32x32x8f16", 32, 32, 8, 1, "f16"),
    ("v_mfma_f32_16x16x16f16", 16, 16, 16, 1, "f16"),
    ("v_mfma_f32_32x32x4bf16_1k", 32, 32, 4, 2, "bf16"), ("v_mfma_f32_16x16x4bf16_1k", 16, 16, 4, 4, "bf16"),
    ("v_mfma_f32_4x4x4bf16_1k", 4, 4, 4, 16, "bf16"), ("v_mfma_f32_32x32x8bf16_1k", 32, 32, 8, 1, "bf16"),
    ("v_mfma_f32_16x16x16bf16_1k", 16, 16, 16, 1, "bf16"),
    ("v_mfma_f32_32x32x2bf16", 32, 32, 2, 2, "bf16"), ("v_mfma_f32_16x16x2bf16", 16, 16, 2, 4, "bf16"),
    ("v_mfma_f32_4x4x2bf16", 4, 4, 2, 16, "bf16"), ("v_mfma_f32_32x32x4bf16", 32, 32, 4, 1, "bf16"),
    ("v_mfma_f32_16x16x8bf16", 16, 16, 8, 1, "bf16"),
    ("v_mfma_f64_16x16x4f64", 16, 16, 4, 1, "f64"), ("v_mfma_f64_4x4x4f64", 4, 4, 4, 4, "f64"),
]
_MMA = "mma.sync.aligned.m16n8k{k}.row.col.f32.{t}.{t}.f32"
NV = [  # gfxsim arch, gfxsim mnemonic (or accumulator name), MMA-Sim class, arch, name, M, N, K, A/B type
    ("sm_89", _MMA.format(k=16, t="f16"), "MMA", "Ada Lovelace", "m16n8k16.f32.f16.f16.f32", 16, 8, 16, "f16"),
    ("sm_89", _MMA.format(k=16, t="bf16"), "MMA", "Ada Lovelace", "m16n8k16.f32.bf16.bf16.f32", 16, 8, 16, "bf16"),
    ("sm_89", _MMA.format(k=32, t="e4m3"), "MMA", "Ada Lovelace", "m16n8k32.f32.e4m3.e4m3.f32", 16, 8, 32,
     "fp8_e4m3"),
    ("sm_90", _MMA.format(k=16, t="f16"), "MMA", "Hopper", "m16n8k16.f32.f16.f16.f32", 16, 8, 16, "f16"),
    ("sm_90", _MMA.format(k=16, t="bf16"), "MMA", "Hopper", "m16n8k16.f32.bf16.bf16.f32", 16, 8, 16, "bf16"),
    ("sm_90", "accumulator:sm90_wgmma_e4m3", "WGMMA", "Hopper", "m64n8k32.f32.e4m3.e4m3", 64, 8, 32, "fp8_e4m3"),
]

# (exponent bits, mantissa bits, bias, container bits, has inf)
FORMATS = {"f16": (5, 10, 15, 16, True), "bf16": (8, 7, 127, 16, True), "f32": (8, 23, 127, 32, True),
           "xf32": (8, 23, 127, 32, True), "f64": (11, 52, 1023, 64, True),
           "fp8": (4, 3, 8, 8, False), "bf8": (5, 2, 16, 8, False), "fp8_e4m3": (4, 3, 7, 8, False)}
UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def fields(rng, shape, t, elo, ehi, sub=0.0, special=0.0):
    """Bit patterns of type ``t``: biased exponent field uniform in [elo, ehi] (clipped to the
    finite range), random sign and mantissa; a fraction ``sub`` subnormal, ``special`` inf/NaN."""
    eb, mb, bias, width, has_inf = FORMATS[t]
    emax = (1 << eb) - 1 if not has_inf else (1 << eb) - 2
    if t == "fp8_e4m3":
        emax = 15                       # S.1111.111 is NaN, S.1111.110 finite
    lo = min(max(elo, 1), emax)
    e = rng.integers(lo, min(max(ehi, lo), emax) + 1, size=shape).astype(np.uint64)
    m = rng.integers(0, 1 << mb, size=shape, dtype=np.uint64)
    if t == "fp8_e4m3":
        m = np.where(e == 15, np.minimum(m, 6), m)
    s = rng.integers(0, 2, size=shape).astype(np.uint64)
    if sub:
        e = np.where(rng.random(shape) < sub, 0, e)
        m = np.where(e == 0, np.maximum(m, 1), m)
    bits = (s << np.uint64(eb + mb)) | (e << np.uint64(mb)) | m
    if special:
        pick = rng.random(shape) < special
        if t in ("fp8", "bf8"):
            nan = np.full(shape, 0x80, np.uint64)          # fnuz: the only NaN, no inf
        else:
            top = ((1 << eb) - 1) << mb
            inf = np.uint64(top) | (s << np.uint64(eb + mb))
            nan = np.where(rng.random(shape) < 0.5, inf, np.uint64(top | (1 << (mb - 1))))
            if t == "fp8_e4m3":
                nan = np.full(shape, 0x7F, np.uint64)
        bits = np.where(pick, nan, bits)
    return bits.astype(UINT[width])


def bias_of(t):
    return FORMATS[t][2]


def operands(rng, case, M, N, K, at, bt, ct):
    """(A, B, C) bits for one experiment of kind ``case``."""
    ba, bb, bc = bias_of(at), bias_of(bt), bias_of(ct)
    if case == "random":
        return (fields(rng, (M, K), at, ba - 3, ba + 2), fields(rng, (K, N), bt, bb - 3, bb + 2),
                fields(rng, (M, N), ct, bc - 2, bc + 3))
    if case == "attention":        # P = exp(s - max) in (0, 1], V per-channel scaled, C a running sum
        a = fields(rng, (M, K), at, ba - 6, ba)
        eb = FORMATS[bt][0]
        a &= ~np.array(1 << (FORMATS[at][0] + FORMATS[at][1]), a.dtype)      # P >= 0
        shift = rng.integers(-3, 4, size=(1, N))
        b = fields(rng, (K, N), bt, bb - 2, bb + 2)
        e = ((b.astype(np.int64) >> FORMATS[bt][1]) & ((1 << eb) - 1)) + shift
        e = np.clip(e, 1, (1 << eb) - 2 if FORMATS[bt][4] else (1 << eb) - 1)
        mask = ((1 << eb) - 1) << FORMATS[bt][1]
        b = ((b.astype(np.int64) & ~mask) | (e << FORMATS[bt][1])).astype(b.dtype)
        return a, b, fields(rng, (M, N), ct, bc, bc + 6)
    if case == "ties":             # few mantissa bits: exact sums that land on halfway points
        a = fields(rng, (M, K), at, ba - 2, ba + 2)
        b = fields(rng, (K, N), bt, bb - 2, bb + 2)
        ma, mb = FORMATS[at][1], FORMATS[bt][1]
        a &= ~np.array((1 << max(ma - 2, 0)) - 1, a.dtype)
        b &= ~np.array((1 << max(mb - 2, 0)) - 1, b.dtype)
        c = fields(rng, (M, N), ct, bc + 20, bc + 24)       # C far above: its low bits meet the products
        return a, b, c
    if case == "cancel":           # pairs of equal products of opposite sign plus a small remainder
        a = fields(rng, (M, K), at, ba - 2, ba + 2)
        b = fields(rng, (K, N), bt, bb - 2, bb + 2)
        sa = 1 << (FORMATS[at][0] + FORMATS[at][1])
        half = K // 2
        if half:
            a[:, half:2 * half] = a[:, :half] ^ np.array(sa, a.dtype)
            b[half:2 * half, :] = b[:half, :]
            b[0, :] = fields(rng, (N,), bt, bb - 12, bb - 8)
        return a, b, fields(rng, (M, N), ct, bc - 1, bc + 1)
    if case == "gap":              # exponents spread over the whole range
        return (fields(rng, (M, K), at, 1, 1 << 12), fields(rng, (K, N), bt, 1, 1 << 12),
                fields(rng, (M, N), ct, bc - 40, bc + 40))
    if case == "denormal":
        return (fields(rng, (M, K), at, 1, 4, sub=0.5), fields(rng, (K, N), bt, 1, bb + 1, sub=0.3),
                fields(rng, (M, N), ct, 1, 3, sub=0.5))
    if case == "tiny":             # products far below fp32's range, C zero of either sign or tiny
        c = fields(rng, (M, N), ct, 1, 2, sub=0.5)
        c = np.where(rng.random((M, N)) < 0.5, c & np.array(1 << (FORMATS[ct][0] + FORMATS[ct][1]), c.dtype), c)
        return fields(rng, (M, K), at, 1, 3, sub=0.3), fields(rng, (K, N), bt, 1, 3, sub=0.3), c
    if case == "zeros":            # signed zeros: products and C that are zero, results that are zero
        a = fields(rng, (M, K), at, ba - 1, ba + 1)
        b = fields(rng, (K, N), bt, bb - 1, bb + 1)
        sa, sb = 1 << (FORMATS[at][0] + FORMATS[at][1]), 1 << (FORMATS[bt][0] + FORMATS[bt][1])
        zero_a = rng.random((M, 1)) < 0.5
        a = np.where(rng.random((M, K)) < 0.5, a & np.array(sa, a.dtype), a)
        a = np.where(zero_a, np.array(sa, a.dtype), a)               # rows of -0: products -0 where B > 0
        b = np.where(rng.random((K, N)) < 0.3, b & np.array(sb, b.dtype), b)
        b = np.where(rng.random((1, N)) < 0.5, b & np.array(sb - 1, b.dtype), b)      # columns of B >= 0
        if at in ("fp8", "bf8"):            # fnuz: 0x80 is NaN, the only zero is 0x00
            a = np.where(a == 0x80, 0, a).astype(a.dtype)
        if bt in ("fp8", "bf8"):
            b = np.where(b == 0x80, 0, b).astype(b.dtype)
        c = fields(rng, (M, N), ct, bc - 1, bc + 1)
        return a, b, np.where(rng.random((M, N)) < 0.7, c & np.array(1 << (FORMATS[ct][0] + FORMATS[ct][1]), c.dtype), c)
    if case == "special":
        return (fields(rng, (M, K), at, ba - 3, ba + 2, special=0.02),
                fields(rng, (K, N), bt, bb - 3, bb + 2, special=0.02),
                fields(rng, (M, N), ct, bc - 2, bc + 3, special=0.02))
    raise ValueError(case)


CASES = ("random", "attention", "ties", "cancel", "gap", "denormal", "tiny", "zeros", "special")
CHAINED = ("v_mfma_f32_16x16x16_f16", "v_mfma_f32_16x16x16_bf16", "v_mfma_f32_16x16x32_fp8_fp8",
           "v_mfma_f32_32x32x16_bf8_fp8", "v_mfma_f32_16x16x16bf16_1k", "v_mfma_f32_16x16x16f16",
           "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32",
           "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "v_mfma_f32_16x16x8_xf32")


def experiments():
    for mn, m, n, k, bl, at, bt in CDNA3_FLOAT:
        ct = "f64" if at == "f64" else "f32"
        yield "gfx942", mn, "MFMA", "CDNA3", mn.removeprefix("v_mfma_"), m, n, k, bl, at, bt, ct
    for mn, m, n, k, bl, t in CDNA2_FLOAT:
        ct = "f64" if t == "f64" else "f32"
        yield "gfx90a", mn, "MFMA", "CDNA2", mn.removeprefix("v_mfma_"), m, n, k, bl, t, t, ct
    for arch, mn, cls, march, name, m, n, k, t in NV:
        yield arch, mn, cls, march, name, m, n, k, 1, t, t, "f32"


TORCH = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "xf32": "float32", "f64": "float64",
         "fp8": "float8_e4m3fnuz", "bf8": "float8_e5m2fnuz", "fp8_e4m3": "float8_e4m3fn"}
TORCH_INT = {8: "uint8", 16: "int16", 32: "int32", 64: "int64"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="golden_mmasim.npz")
    ap.add_argument("--seed", type=int, default=29)
    args = ap.parse_args()
    import torch
    import mmasim
    from mmasim.amd.sim import MFMA
    from mmasim.nv_ptx.sim import MMA, WGMMA
    classes = {"MFMA": MFMA, "MMA": MMA, "WGMMA": WGMMA}

    def tensor(bits, t):
        w = FORMATS[t][3]
        x = torch.from_numpy(bits.view(getattr(np, TORCH_INT[w]) if w > 8 else np.uint8).copy())
        return x.view(getattr(torch, TORCH[t]))

    def bits_of(x, t):
        w = FORMATS[t][3]
        return x.contiguous().view(getattr(torch, TORCH_INT[w])).numpy().view(UINT[w]).copy()

    rng = np.random.default_rng(args.seed)
    out, index, failed = {}, [], {}
    for arch, mn, cls, march, name, m, n, k, bl, at, bt, ct in experiments():
        try:
            op = classes[cls](march, name)
        except Exception as e:          # noqa: BLE001 - recorded in the golden file
            failed[f"{arch}:{mn}"] = f"{type(e).__name__}: {e}"
            continue
        cases = list(CASES) + (["chain16"] if mn in CHAINED else [])
        for case in cases:
            key = f"{arch}|{mn}|{case}"
            try:
                if case == "chain16":
                    kinds = [CASES[i % 2] for i in range(16)]       # random, attention, ...
                    ops = [operands(rng, kd, m, n, k, at, bt, ct) for kd in kinds]
                    a = np.stack([o[0] for o in ops])
                    b = np.stack([o[1] for o in ops])
                    c = ops[0][2]
                    d = tensor(c, ct)
                    for s in range(16):
                        d = op(tensor(a[s], at), tensor(b[s], bt), d)
                    a, b, d = a[None], b[None], bits_of(d, ct)[None]
                    c = c[None]
                else:
                    blocks = [operands(rng, case, m, n, k, at, bt, ct) for _ in range(bl)]
                    a = np.stack([x[0] for x in blocks])
                    b = np.stack([x[1] for x in blocks])
                    c = np.stack([x[2] for x in blocks])
                    d = np.stack([bits_of(op(tensor(a[i], at), tensor(b[i], bt), tensor(c[i], ct)), ct)
                                  for i in range(bl)])
            except Exception as e:      # noqa: BLE001 - recorded in the golden file
                failed[key] = f"{type(e).__name__}: {e}"
                continue
            out[key + "|A"], out[key + "|B"], out[key + "|C"], out[key + "|D"] = a, b, c, d
            index.append({"key": key, "arch": arch, "insn": mn, "case": case, "mmasim": f"{cls}({march!r}, {name!r})",
                          "types": [at, bt, ct], "steps": 16 if case == "chain16" else 1})
    meta = {"mmasim": getattr(mmasim, "__version__", None) or "2.1.1", "torch": torch.__version__,
            "numpy": np.__version__, "seed": args.seed, "experiments": index, "failed": failed}
    out["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    np.savez_compressed(args.out, **out)
    print(f"{len(index)} experiments, {len(failed)} failed: {json.dumps(failed)[:2000]}")


if __name__ == "__main__":
    main()
