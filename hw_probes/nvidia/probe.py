#!/usr/bin/env python3
"""Run gfxsim's NVIDIA mma.sync records on a real GPU and measure what each accumulator keeps.

    python3 hw_probes/nvidia/probe.py --out golden.json      (needs nvcc and a GPU; Triton optional)

Inputs are placed into lane registers and outputs read back through ``layouts.json`` alone, which
``export_layouts.py`` writes from gfxsim's records, so a clean layout check proves gfxsim's layouts
on this GPU. Then each f32-accumulating instruction (and Hopper's wgmma through Triton's tl.dot)
runs a set of accumulator experiments: each puts a few products into D[0][0] (A[0][k], B[k][0]),
C[0][0] = c, everything else zero, over one instruction or a chain of them (D of one step is C of
the next). The golden file keeps every experiment's inputs with the value the hardware returned, so
CI can replay them through gfxsim's accumulator models bit for bit.
Only numpy and ctypes are needed for mma.sync; torch + triton for the wgmma part.
"""
from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SHORT = {"i8": "s8", "i4": "s4", "f16": "f16", "bf16": "bf16", "fp8_e4m3": "e4m3"}
# exponent range of a power of two each input type holds exactly (subnormals included)
POW2 = {"f16": (-24, 15), "bf16": (-133, 127), "fp8_e4m3": (-9, 8)}


# -- element codecs (numpy only) ---------------------------------------------------------------------
def _e4m3_table():
    vals = np.zeros(256)
    for code in range(256):
        s, e, m = code >> 7, (code >> 3) & 15, code & 7
        v = math.nan if (e == 15 and m == 7) else (m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
        vals[code] = -v if s else v
    return vals


E4M3 = _e4m3_table()
E4M3_CODE = {float(v): c for c, v in enumerate(E4M3) if not math.isnan(v) and c != 0x80}


def encode(t: str, x) -> np.ndarray:
    """Exact bit codes of ``x`` in type t (an error if a value is not representable)."""
    x = np.asarray(x, np.float64)
    if t in ("i8", "i4"):
        lo, hi = (-128, 127) if t == "i8" else (-8, 7)
        if np.any(x != np.round(x)) or np.any(x < lo) or np.any(x > hi):
            raise ValueError(f"{t}: value out of range")
        return x.astype(np.int64) & (0xFF if t == "i8" else 0xF)
    if t == "f16":
        h = x.astype(np.float16)
        if np.any(h.astype(np.float64) != x):
            raise ValueError("f16: value not representable")
        return h.view(np.uint16).astype(np.int64)
    if t == "bf16":
        u = x.astype(np.float32).view(np.uint32)
        if np.any(x.astype(np.float32).astype(np.float64) != x) or np.any(u & 0xFFFF):
            raise ValueError("bf16: value not representable")
        return (u >> 16).astype(np.int64)
    if t == "fp8_e4m3":
        try:
            return np.vectorize(lambda v: E4M3_CODE[float(v)])(x).astype(np.int64) if x.size else x.astype(np.int64)
        except KeyError as e:
            raise ValueError(f"e4m3: {e} not representable") from None
    raise ValueError(f"no codec for {t}")


def representable(t, v) -> bool:
    try:
        encode(t, [v])
        return True
    except ValueError:
        return False


# -- placement through the layout file --------------------------------------------------------------
def pack(op: dict, t: str, mats: np.ndarray) -> np.ndarray:
    """mats [n, rows, cols] -> register words uint32 [n, 32, regs] placed by the layout's slots."""
    s = np.asarray(op["slots"])             # lane, reg, elem, row, col
    bits = op["elem_bits"]
    n = mats.shape[0]
    words = np.zeros((n, 32, op["regs"]), np.uint64)
    if t in ("f32", "i32"):
        raw = mats.astype(np.float32).view(np.uint32) if t == "f32" else mats.astype(np.int64).astype(np.uint32)
        codes = raw[:, s[:, 3], s[:, 4]].astype(np.uint64)
    else:
        codes = encode(t, mats[:, s[:, 3], s[:, 4]]).astype(np.uint64)
    np.add.at(words, (slice(None), s[:, 0], s[:, 1]), codes << (s[:, 2] * bits).astype(np.uint64))
    return words.astype(np.uint32)


def unpack_d(op: dict, t: str, words: np.ndarray) -> np.ndarray:
    s = np.asarray(op["slots"])
    w = words[:, s[:, 0], s[:, 1]]
    vals = w.view(np.float32).astype(np.float64) if t == "f32" else w.view(np.int32).astype(np.float64)
    out = np.zeros((words.shape[0], op["rows"], op["cols"]))
    out[:, s[:, 3], s[:, 4]] = vals
    return out


# -- building and calling the CUDA libraries -------------------------------------------------------
def sh(cmd) -> str:
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()


def sass_by_function(text: str) -> dict:
    """{kernel function: {tensor-core opcode: count}} from ``cuobjdump -sass`` output."""
    out, fn = {}, None
    for line in text.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            fn = m.group(1)
            out.setdefault(fn, {})
            continue
        for op in re.findall(r"\b([A-Z]*MMA[A-Z0-9._x]*)", line):
            if fn is not None:
                out[fn][op] = out[fn].get(op, 0) + 1
    return out


def build(arch: str, tmp: str) -> dict:
    libs, logs = {}, {}
    for name in ("mma_probe", "mma_e4m3"):
        so = os.path.join(tmp, f"lib{name}.so")
        cmd = ["nvcc", "-O2", f"-arch={arch}", "-shared", "-Xcompiler", "-fPIC", "-I", HERE, "-o", so,
               os.path.join(HERE, f"{name}.cu")]
        r = subprocess.run(cmd, capture_output=True, text=True)
        logs[name] = {"cmd": " ".join(cmd), "rc": r.returncode, "stderr": r.stderr[-2000:]}
        if r.returncode == 0:
            lib = ctypes.CDLL(so)
            lib.probe_mma.restype = ctypes.c_int
            libs[name] = lib
            logs[name]["sass_mma"] = sass_by_function(sh(f"cuobjdump -sass {so}"))
    return {"libs": libs, "logs": logs}


def run_mma(lib, which, lay, t_in, cd, A, B, C):
    """A [n, iters, M, K], B [n, iters, K, N], C [n, M, N] -> D [n, M, N] from the GPU."""
    n, iters = A.shape[:2]
    pa = pack(lay["A"], t_in, A.reshape(n * iters, *A.shape[2:]))
    pb = pack(lay["B"], t_in, B.reshape(n * iters, *B.shape[2:]))
    pc = pack(lay["C"], cd, C)
    d = np.zeros((n, 32, 4), np.uint32)
    ptr = lambda x: np.ascontiguousarray(x).ctypes.data_as(ctypes.POINTER(ctypes.c_uint32))
    pa, pb, pc = (np.ascontiguousarray(x) for x in (pa, pb, pc))
    err = lib.probe_mma(which.encode(), n, iters, ptr(pa), ptr(pb), ptr(pc), d.ctypes.data_as(ctypes.POINTER(ctypes.c_uint32)))
    if err:
        raise RuntimeError(f"{which}: CUDA error {err}")
    return unpack_d(lay["D"], cd, d)


# -- experiments --------------------------------------------------------------------------------------
def split_pow2(t, e, q=1.0):
    """(a, b) with a*b = q*2^e, both exact in t, or None."""
    lo, hi = POW2[t]
    ea = -(-e // 2)
    eb = e - ea
    for da in (0, 1, -1, 2, -2, 3, -3):
        a, b = q * 2.0 ** (ea + da), 2.0 ** (eb - da)
        if lo <= eb - da <= hi and representable(t, a) and representable(t, b):
            return a, b
    return None


def experiments(t: str, K: int, rng) -> list:
    """The accumulator experiments for one input type and K (see the module docstring)."""
    out = []

    def add(name, x, c, steps):
        if all(tm is not None for st in steps for tm in st) and float(np.float32(c)) == c:
            out.append({"name": name, "x": x, "c": float(c), "steps": [[list(tm) for tm in st] for st in steps]})

    def term(k, e, q=1.0):
        ab = split_pow2(t, e, q)
        return None if ab is None else (k, ab[0], ab[1])

    for s in range(0, 31):
        add("c_plus_1", s, 2.0 ** s, [[term(0, 0)]])
        add("c_plus_1_klast", s, 2.0 ** s, [[term(K - 1, 0)]])
    for q in (0.75, 1.25, 1.5, 1.75, -0.75, -1.0, -1.5):
        for s in range(8, 31):
            add(f"c_plus_q{q:g}", s, 2.0 ** s, [[term(0, 0, q)]])
    for j in range(6, 25):            # ties and near-ties at the j-th bit below C's leading bit
        add("tie_even", j, 2.0 ** 20, [[term(0, 19 - j)]])
        add("tie_odd", j, 2.0 ** 20 + 2.0 ** (20 - j), [[term(0, 19 - j)]])
        add("above_half", j, 2.0 ** 20, [[term(0, 19 - j, 1.5)]])
        add("neg_tie_odd", j, -(2.0 ** 20 + 2.0 ** (20 - j)), [[term(0, 19 - j, -1.0)]])
    lo, hi = POW2[t]
    top = min(2 * hi, 20)
    for g in range(0, 41):
        if top - g >= 2 * lo:
            add("gap", g, 0.0, [[term(0, top), term(1, top - g)]])
            add("gap_rev", g, 0.0, [[term(0, top - g), term(1, top)]])
            add("gap_far", g, 0.0, [[term(0, top), term(K - 1, top - g)]])
            add("gap_neg", g, 0.0, [[term(0, top), term(1, top - g, -1.0)]])
    for g in range(0, min(2 * hi, 30) + 1):
        add("c_entry", g, 1.0, [[term(0, g), term(1, g, -1.0)]])            # C = 1 beside cancelling products
        add("cancel_then_small", g, 0.0, [[term(0, g), term(1, g, -1.0), term(2, 0)]])
        add("c_cancels", g, 2.0 ** g, [[term(0, g, -1.0), term(1, 0)]])    # C cancels a product, a 1 beside
    for s in (8, 11, 12, 13, 14, 16, 20, 24):
        for n in sorted({1, 2, 4, 8, 16, K}):
            add(f"k_ones_{n}", s, 2.0 ** s, [[term(k, 0) for k in range(n)]])
    for n in (2, 4, 16):
        for s in range(8, 27, 2):
            add(f"loop{n}_c_plus_1", s, 2.0 ** s, [[term(0, 0)] for _ in range(n)])
    vals = sorted(v for v in (E4M3 if t == "fp8_e4m3" else np.arange(-64, 65) / 8.0)
                  if not math.isnan(v) and abs(v) <= 64 and representable(t, v))
    for i in range(48):           # a few products of random values and a random C: the adder's details
        n = int(rng.integers(2, 5))
        ks = rng.choice(K, n, replace=False)
        c = float(np.float32(rng.normal() * 2.0 ** rng.integers(-4, 12)))
        add("random_small", i, c, [[(int(k), float(rng.choice(vals)), float(rng.choice(vals))) for k in ks]])
    for i in range(24):
        n_steps = 1 if i < 16 else 4
        c = float(np.float32(rng.normal() * 2.0 ** rng.integers(-4, 12)))
        steps = [[(k, float(rng.choice(vals)), float(rng.choice(vals))) for k in range(K)] for _ in range(n_steps)]
        add("random", i, c, steps)
    return out


def exp_mats(exps, M, N, K):
    n, iters = len(exps), len(exps[0]["steps"])
    A, B, C = np.zeros((n, iters, M, K)), np.zeros((n, iters, K, N)), np.zeros((n, M, N))
    for i, e in enumerate(exps):
        C[i, 0, 0] = e["c"]
        for it, st in enumerate(e["steps"]):
            for k, a, b in st:
                A[i, it, 0, k] += a
                B[i, it, k, 0] += b
    return A, B, C


def by_steps(exps):
    groups = {}
    for e in exps:
        groups.setdefault(len(e["steps"]), []).append(e)
    return groups


def run_experiments(runner, exps, M, N, K):
    """Fill e["d"] (the hardware's D[0][0]); count nonzero elsewhere (should be none)."""
    stray = 0
    for iters, group in by_steps(exps).items():
        A, B, C = exp_mats(group, M, N, K)
        D = runner(A, B, C)
        for e, d in zip(group, D):
            e["d"] = float(d[0, 0])
            stray += int(np.count_nonzero(d) - (d[0, 0] != 0))
    return stray


def layout_check(runner, t_in, cd, M, N, K, rng, n=16, iters=1):
    lo, hi = {"i8": (-128, 127), "i4": (-8, 7)}.get(t_in, (-8, 8))
    A = rng.integers(lo, hi + 1, (n, iters, M, K)).astype(np.float64)
    B = rng.integers(lo, hi + 1, (n, iters, K, N)).astype(np.float64)
    C = rng.integers(-1000, 1000, (n, M, N)).astype(np.float64)
    want = C + np.einsum("nimk,nikj->nmj", A, B)
    got = runner(A, B, C)
    bad = np.argwhere(got != want)
    first = None if not len(bad) else {"experiment": int(bad[0][0]), "row": int(bad[0][1]), "col": int(bad[0][2]),
                                        "got": float(got[tuple(bad[0])]), "want": float(want[tuple(bad[0])])}
    return {"trials": n, "iters": iters, "elements": int(want.size), "mismatches": int(len(bad)), "first": first}


# -- Hopper wgmma through Triton -------------------------------------------------------------------
def triton_part(rng, log):
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def dot_default(A, B, C, D, K: tl.constexpr, BK: tl.constexpr):
        pid = tl.program_id(0)
        m, n, k = tl.arange(0, 64), tl.arange(0, 16), tl.arange(0, BK)
        acc = tl.load(C + pid * 1024 + m[:, None] * 16 + n[None, :])
        for k0 in tl.static_range(0, K, BK):
            a = tl.load(A + pid * 64 * K + m[:, None] * K + k0 + k[None, :])
            b = tl.load(B + pid * K * 16 + (k0 + k)[:, None] * 16 + n[None, :])
            acc = tl.dot(a, b, acc)
        tl.store(D + pid * 1024 + m[:, None] * 16 + n[None, :], acc)

    @triton.jit
    def dot_promote(A, B, C, D, K: tl.constexpr, BK: tl.constexpr, IMPRECISE: tl.constexpr):
        pid = tl.program_id(0)
        m, n, k = tl.arange(0, 64), tl.arange(0, 16), tl.arange(0, BK)
        acc = tl.load(C + pid * 1024 + m[:, None] * 16 + n[None, :])
        for k0 in tl.static_range(0, K, BK):
            a = tl.load(A + pid * 64 * K + m[:, None] * K + k0 + k[None, :])
            b = tl.load(B + pid * K * 16 + (k0 + k)[:, None] * 16 + n[None, :])
            acc = tl.dot(a, b, acc, max_num_imprecise_acc=IMPRECISE)
        tl.store(D + pid * 1024 + m[:, None] * 16 + n[None, :], acc)

    dev = "cuda"

    def runner_for(variant, bk, promote):
        info = {}

        def run(A, Bm, C):
            n, iters = A.shape[:2]
            K = iters * A.shape[3]
            a = np.concatenate(list(A.transpose(1, 0, 2, 3)), axis=2)          # [n, 64, K]
            b = np.concatenate(list(Bm.transpose(1, 0, 2, 3)), axis=1)         # [n, K, 16]
            ta = torch.tensor(encode("fp8_e4m3", a).astype(np.uint8), device=dev).view(torch.float8_e4m3fn)
            tb = torch.tensor(encode("fp8_e4m3", b).astype(np.uint8), device=dev).view(torch.float8_e4m3fn)
            tc = torch.tensor(C.astype(np.float32), device=dev)
            td = torch.empty_like(tc)
            if promote is None:
                h = dot_default[(n,)](ta, tb, tc, td, K=K, BK=bk if bk else K, num_warps=4)
            else:
                h = dot_promote[(n,)](ta, tb, tc, td, K=K, BK=bk if bk else K, IMPRECISE=promote, num_warps=4)
            torch.cuda.synchronize()
            try:
                ptx = h.asm["ptx"]
                info.setdefault("ptx_mma", {})[str(K)] = sorted(set(re.findall(r"wgmma\.mma_async[\w.:]*", ptx))) or \
                    sorted(set(re.findall(r"mma\.sync[\w.]*", ptx)))
                info.setdefault("ptx_wgmma_count", {})[str(K)] = len(re.findall(r"wgmma\.mma_async", ptx))
                with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
                    f.write(h.asm["cubin"])
                info.setdefault("sass_mma", {})[str(K)] = sass_by_function(sh(f"cuobjdump -sass {f.name}"))
            except Exception as e:  # noqa: BLE001 - the asm is a report, not a requirement
                info["asm_error"] = repr(e)
            return td.cpu().numpy().astype(np.float64)
        return run, info

    out = {"triton": triton.__version__, "torch": torch.__version__, "variants": {}}
    # one instruction per dot (BK=32): a K loop of chained tl.dot; one dot over K=128 (Triton splits
    # it into k32 wgmma); the same with max_num_imprecise_acc=32 (Triton's promotion into fp32).
    for variant, bk, promote, kdot in (("tl.dot k32 chained", 32, None, 32), ("tl.dot k128 one dot", None, None, 128),
                                      ("tl.dot k128 max_num_imprecise_acc=32", None, 32, 128)):
        t0 = time.time()
        run, info = runner_for(variant, bk, promote)
        try:
            exps = experiments("fp8_e4m3", 32, rng) if kdot == 32 else \
                [e for e in experiments("fp8_e4m3", 32, rng) if len(e["steps"]) in (1, 4)]
            if kdot == 128:       # four k32 steps laid side by side along K of one dot
                exps = [e for e in exps if len(e["steps"]) == 4] + \
                    [dict(e, steps=e["steps"] + [[]] * 3) for e in exps if len(e["steps"]) == 1]
            check = layout_check(run, "fp8_e4m3", "f32", 64, 16, 32, rng, n=8, iters=kdot // 32)
            stray = run_experiments(run, exps, 64, 16, 32)
            out["variants"][variant] = {"K_per_dot": kdot, "max_num_imprecise_acc": promote, "exact_check": check,
                                        "stray_nonzero": stray, "experiments": exps, "asm": info,
                                        "seconds": round(time.time() - t0, 1)}
        except Exception as e:  # noqa: BLE001 - record and go on to the next variant
            out["variants"][variant] = {"error": repr(e)[-2000:]}
        log(f"triton {variant}: {time.time() - t0:.1f}s")
    return out


# -- main --------------------------------------------------------------------------------------------
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="golden.json")
    ap.add_argument("--arch", default=None, help="nvcc -arch (default: sm_XY of GPU 0, 'a' suffix on sm_90)")
    ap.add_argument("--no-triton", action="store_true")
    args = ap.parse_args(argv)
    log = lambda m: print(m, flush=True)
    with open(os.path.join(HERE, "layouts.json"), "rb") as f:
        raw = f.read()
    layouts = json.loads(raw)
    rng = np.random.default_rng(20261201)
    cc = sh("nvidia-smi --query-gpu=compute_cap --format=csv,noheader").splitlines()[0].strip()
    arch = args.arch or ("sm_" + cc.replace(".", "") + ("a" if cc == "9.0" else ""))
    tmp = tempfile.mkdtemp()
    b = build(arch, tmp)
    golden = {"schema": 1, "layouts_sha256": hashlib.sha256(raw).hexdigest(), "layouts_arch": layouts["arch"],
              "device": {"nvidia_smi": sh("nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.max.sm "
                                          "--format=csv,noheader"),
                         "nvcc": sh("nvcc --version | tail -2"), "nvcc_arch": arch},
              "build": b["logs"], "mma_sync": {}, "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if "mma_probe" in b["libs"]:
        lib = b["libs"]["mma_probe"]
        name, mj, mn, drv, rt = ctypes.create_string_buffer(256), ctypes.c_int(), ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        lib.probe_device(name, 256, ctypes.byref(mj), ctypes.byref(mn), ctypes.byref(drv), ctypes.byref(rt))
        golden["device"].update(name=name.value.decode(), compute_capability=f"{mj.value}.{mn.value}",
                                cuda_driver_api=drv.value, cuda_runtime=rt.value)
    for mnem, rec in layouts["instructions"].items():
        t, cd = rec["a_type"], rec["cd_type"]
        which = SHORT[t]
        lib = b["libs"].get("mma_e4m3" if which == "e4m3" else "mma_probe")
        if lib is None:
            golden["mma_sync"][mnem] = {"error": "did not build (see build)"}
            continue
        t0 = time.time()
        M, N, K = rec["M"], rec["N"], rec["K"]
        runner = lambda A, B, C, which=which, rec=rec, t=t, cd=cd: run_mma(lib, which, rec["operands"], t, cd, A, B, C)
        res = {"layout_check": layout_check(runner, t, cd, M, N, K, rng),
               "layout_check_chained": layout_check(runner, t, cd, M, N, K, rng, n=8, iters=4)}
        if cd == "f32":
            exps = experiments(t, K, rng)
            res["stray_nonzero"] = run_experiments(runner, exps, M, N, K)
            res["experiments"] = exps
        else:          # int32: wrap or saturate on overflow
            exps = [{"name": "int_overflow", "x": 0, "c": 2.0 ** 31 - 1, "steps": [[[0, 1, 1]]]},
                    {"name": "int_overflow", "x": 1, "c": -(2.0 ** 31), "steps": [[[0, 1, -1]]]}]
            res["stray_nonzero"] = run_experiments(runner, exps, M, N, K)
            res["experiments"] = exps
        res["seconds"] = round(time.time() - t0, 2)
        golden["mma_sync"][mnem] = res
        log(f"{mnem}: layout mismatches {res['layout_check']['mismatches']}/{res['layout_check']['elements']}, "
            f"chained {res['layout_check_chained']['mismatches']}, {len(res['experiments'])} experiments, "
            f"{res['seconds']}s")
    if not args.no_triton:
        try:
            golden["wgmma_triton"] = triton_part(rng, log)
        except Exception as e:  # noqa: BLE001
            golden["wgmma_triton"] = {"error": repr(e)[-2000:]}
    with open(args.out, "w") as f:
        json.dump(golden, f, indent=None, separators=(",", ":"))
    log(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
