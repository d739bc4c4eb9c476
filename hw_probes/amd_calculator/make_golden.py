"""Dump AMD's matrix instruction calculator's layouts of every CDNA2/CDNA3 v_mfma_* into a golden file.

    python3 hw_probes/amd_calculator/make_golden.py PATH/TO/matrix_calculator.py [OUT.json.gz]

The calculator (github.com/ROCm/amd_matrix_instruction_calculator, needs `tabulate`) is run, never
copied: for every instruction its `--detail-instruction` facts (M, N, K, blocks, cycles, GPR counts,
modifier support) and, for each of A, B, C, D, its `--matrix-layout --csv` table, kept as, per register
column, the (row, col, block) of every lane. tests/gfxsim/arch/test_calculator_golden.py replays the
file against gfxsim's records. For the sparse v_smfmac_* the calculator names, per register slice,
the four K positions of one 4:2 group of A (two of them stored there) and of the compression index
K (Src2, one 4-bit field per group): the file keeps the group's first position and `"group": 4`.
"""
from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

ARCHS = ("CDNA2", "CDNA3")
DEFAULT_OUT = Path(__file__).resolve().parents[2] / "tests/gfxsim/arch/golden/amd_calculator.json.gz"
COLUMN = re.compile(r"^v(?:\[(\d+):(\d+)\]|(\d+))(?:\.\[(\d+):(\d+)\])?$")
CELL = re.compile(r"^-?[ABCDK]\[(\d+)\]\[(\d+)\](?:\.B(\d+))?$")


def calc(tool: str, *args: str) -> str:
    out = subprocess.run([sys.executable, tool, *args], capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"matrix_calculator.py {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
    return out.stdout


def instructions(tool: str, arch: str) -> list[str]:
    lines = calc(tool, "-a", arch, "-L").splitlines()[1:]
    return [s.strip() for s in lines if s.strip().startswith(("v_mfma_", "v_smfmac_"))]


def detail(tool: str, arch: str, insn: str) -> dict:
    text = calc(tool, "-a", arch, "-i", insn, "-d")
    def num(label):
        m = re.search(rf"^\s*{label}:\s*(\d+)", text, re.M)
        return int(m.group(1)) if m else None
    flag = lambda label: re.search(rf"^\s*{label}:\s*(True|False)", text, re.M).group(1) == "True"
    types = dict(re.findall(r"^\s*(Src0|Src1|Src2|Vdst): (\S+)", text, re.M))
    sparse = flag("Sparse A matrix")
    ops = "ABD" if sparse else "ABCD"              # a sparse instruction's C is its D (Vdst)
    return {"M": num("M"), "N": num("N"), "K": num("K"), "blocks": num("blocks"),
            "cycles": num("Execution cycles"), "sparse": sparse,
            "gprs": {op: num(f"GPRs required for {op}") for op in ops},
            "types": {"A": types["Src0"], "B": types["Src1"], "C": types["Vdst" if sparse else "Src2"],
                      "D": types["Vdst"]},
            "cbsz_abid": flag("CBSZ and ABID bits supported"), "blgp": flag("BLGP bits supported")}


def column(head: str) -> list[int]:
    """A register column's header as [first VGPR, VGPRs, low bit, bits]."""
    m = COLUMN.match(head)
    if m is None:
        raise SystemExit(f"unexpected register column {head!r}")
    if m.group(3) is not None:
        first, count = int(m.group(3)), 1
    else:
        first, count = int(m.group(2)), int(m.group(1)) - int(m.group(2)) + 1
    lo, bits = (int(m.group(5)), int(m.group(4)) - int(m.group(5)) + 1) if m.group(4) else (0, 32 * count)
    return [first, count, lo, bits]


def _cell(arch: str, insn: str, op: str, lane: str, entry: str) -> tuple[list[int], int]:
    """One cell as ([row, col, block], entries): one element, or a sparse group of four
    consecutive K positions (the first kept)."""
    got = []
    for part in entry.split():
        m = CELL.match(part)
        if m is None:
            raise SystemExit(f"{arch} {insn} {op}: unexpected cell {entry!r} at lane {lane}")
        got.append([int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)])
    if len(got) not in (1, 4) or any(g != [got[0][0], got[0][1] + i, got[0][2]] for i, g in enumerate(got)):
        raise SystemExit(f"{arch} {insn} {op}: cell {entry!r} at lane {lane} is neither one element nor a group")
    return got[0], len(got)


def layout(tool: str, arch: str, insn: str, op: str) -> dict:
    flag = "-k" if op == "K" else f"-{op}"
    lines = [s for s in calc(tool, "-a", arch, "-i", insn, "-M", flag, "-c").splitlines() if s.strip()]
    start = next(i for i, s in enumerate(lines) if s.startswith("lane,"))
    heads = lines[start].split(",")[1:]
    cells = [[None] * 64 for _ in heads]
    sizes = set()
    for s in lines[start + 1:]:
        lane, *row = s.split(",")
        for c, entry in enumerate(row):
            cells[c][int(lane)], n = _cell(arch, insn, op, lane, entry.strip())
            sizes.add(n)
    if len(sizes) != 1:
        raise SystemExit(f"{arch} {insn} {op}: cells of both one element and groups")
    return {"columns": [column(h) for h in heads], "cells": cells, "group": sizes.pop()}


def main(argv: list[str]) -> None:
    if not argv or not Path(argv[0]).is_file():
        raise SystemExit(__doc__)
    tool, out = argv[0], Path(argv[1]) if len(argv) > 1 else DEFAULT_OUT
    version = calc(tool, "-v").strip()
    golden = {"tool": version, "archs": {}}
    for arch in ARCHS:
        got = golden["archs"][arch] = {}
        for insn in instructions(tool, arch):
            rec = detail(tool, arch, insn)
            ops = "ABDK" if rec["sparse"] else "ABCD"
            rec["layouts"] = {op: layout(tool, arch, insn, op) for op in ops}
            got[insn] = rec
            print(arch, insn, file=sys.stderr)
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(out, "wb", mtime=0) as f:        # byte-identical on a rerun
        f.write(json.dumps(golden, separators=(",", ":"), sort_keys=True).encode())
    print(f"wrote {out} ({sum(len(v) for v in golden['archs'].values())} instructions)")


if __name__ == "__main__":
    main(sys.argv[1:])
