"""AMD's matrix-core examples (the ``matrix-cores`` folder of github.com/amd/amd-lab-notes): one
wave multiplies 16x16 / 32x32 / 4x4 tiles (batched or not) with one MFMA builtin each.

The examples guard their device code with ``__gfx90a__ || __gfx908__``, so they are compiled for
gfx90a (for gfx942 the kernel bodies are empty). Each source is compiled whole (device code only:
its host code parses against Debian's HIP headers). The shape comes from the source's own
``constexpr int`` lines (M, N, K, nBatch, LDA/LDB/LDD) and its ``<<<1, dim3(X, Y)>>>`` launch;
A [batch][M][LDA], B [batch][K][LDB] and D [batch][M][LDD] row-major, D = A B per batch, compared
with float64. A and B carry their row / column index as a tag (``arow``, ``bcol``), so each matrix
instruction's operands name which rows and columns they consumed.
"""
from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np

from gfxsim.asm.parse import parse_file
from gfxsim.asm.run import run_asm
from gfxsim.machine.memory import Buffer

from .compile import compile_device
from .vllm_run import Outcome, _rel, _short, blocker

FOLDER = "matrix-cores"
TYPES = {"fp16": (np.float16, 1e-3), "fp32": (np.float32, 1e-5), "fp64": (np.float64, 1e-12), "i8": (np.int8, 0)}


def sources(checkout: Path) -> list[Path]:
    d = checkout / FOLDER / "src"
    if not d.is_dir():
        raise FileNotFoundError(f"{d}: not found (give the root of an amd-lab-notes checkout)")
    return sorted(d.glob("mfma_*.cpp"))


def shape_of(text: str) -> dict:
    """The example's constants and its launch's block."""
    c = {k: int(v) for k, v in re.findall(r"constexpr int (\w+) = (\d+);", text)}
    m = re.search(r"<<<\s*1\s*,\s*dim3\((\d+),\s*(\d+)(?:,\s*(\d+))?\)\s*>>>", text)
    if not m or not {"M", "N", "K"} <= set(c):
        raise ValueError("no M/N/K constants or <<<1, dim3(X, Y)>>> launch found")
    c.setdefault("nBatch", 1)
    for ld, dflt in (("LDA", c["K"]), ("LDB", c["N"]), ("LDD", c["N"])):
        c.setdefault(ld, dflt)
    c["block"] = tuple(int(g) for g in m.groups() if g)
    return c


def in_type(path: Path) -> str:
    """The input type the file name states (``mfma_fp32_16x16x16fp16`` -> fp16)."""
    return re.search(r"(fp16|fp32|fp64|i8)$", path.stem).group(1)


def run_example(path: Path, checkout: Path, build: Path, seed: int = 0, arch: str = "gfx90a") -> Outcome:
    """One example: its blocker as clang writes it for gfx90a, then a run with argument names,
    for ``arch`` (gfx942: the gfx90a guard defined, so the same builtins compile for CDNA3)."""
    o = Outcome(f"{path.stem} ({arch})", "")
    text = path.read_text()
    try:
        c = shape_of(text)
    except ValueError as e:
        o.error = str(e)
        return o
    o.shape = f"{c['nBatch']} x {c['M']}x{c['N']}x{c['K']}, block {c['block']}"
    build.mkdir(parents=True, exist_ok=True)
    inc = [str(checkout / FOLDER / "include")]
    try:     # as clang writes it by default (no argument names), then with names
        raw = compile_device(path, build / f"{path.stem}_raw.s", build=build, includes=inc, arch="gfx90a")
        o.extra["unchanged"] = blocker(raw, "gfx90a") or "nothing before running"
        s = compile_device(path, build / f"{path.stem}.s", build=build, includes=inc, arch=arch,
                           flags=["-fhip-kernel-arg-name"] + (["-D__gfx90a__=1"] if arch == "gfx942" else []))
    except Exception as e:
        o.error = f"{type(e).__name__}: {_short(str(e))}"
        return o
    o.error = blocker(s, arch)
    if o.error:
        return o
    (kernel,) = parse_file(s).kernels.values()
    t = in_type(path)
    dt, tol = TYPES[t]
    rng = np.random.default_rng(seed)
    B, M, N, K = c["nBatch"], c["M"], c["N"], c["K"]
    if t == "i8":
        a = rng.integers(-128, 128, (B, M, c["LDA"])).astype(dt)
        b = rng.integers(-128, 128, (B, K, c["LDB"])).astype(dt)
    else:
        a = rng.uniform(-1, 1, (B, M, c["LDA"])).astype(dt)
        b = rng.uniform(-1, 1, (B, K, c["LDB"])).astype(dt)
    out_t = {"fp64": np.float64, "i8": np.int32}.get(t, np.float32)
    d = Buffer("D", np.zeros((B, M, c["LDD"]), out_t))
    rows = np.broadcast_to(np.arange(M)[None, :, None] + 100 * np.arange(B)[:, None, None], a.shape)
    cols = np.broadcast_to(np.arange(c["LDB"])[None, None, :] + 100 * np.arange(B)[:, None, None], b.shape)
    names = [x.name for x in kernel.program.abi.args if not x.kind.startswith("hidden")]
    t0 = time.perf_counter()
    try:
        run = run_asm(kernel, grid=1, block=c["block"], arch=arch, args=dict(zip(names, [
            Buffer("A", a, tags={"arow": rows}), Buffer("B", b, tags={"bcol": cols}), d])))
    except Exception as e:
        o.error = f"{type(e).__name__}: {_short(str(e))}"
        return o
    o.ran, o.seconds = True, time.perf_counter() - t0
    o.lane_instructions = run.lane_instructions
    want = np.einsum("bmk,bkn->bmn", a[:, :, :K].astype(np.float64), b[:, :, :N].astype(np.float64))
    o.errors = {"D": _rel(d.array[:, :, :N], want)}
    o.ok = o.errors["D"] <= tol
    mm = run.mmacs()
    o.tokens = (f"{len(mm)} matrix instructions ({', '.join(sorted({m.insn.mnemonic for m in mm}))}); A rows per "
                f"instruction {sorted({len(m.token_set('A', 'arow')) for m in mm})}, B columns "
                f"{sorted({len(m.token_set('B', 'bcol')) for m in mm})}")
    o.findings = run.summary().split("traced, ")[-1] if run.findings else "no findings"
    return o
