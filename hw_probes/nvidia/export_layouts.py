"""Write layouts.json: gfxsim's sm_90 mma.sync records as (lane, reg, elem) -> (row, col) tables.

The probe (probe.py, on the GPU) places its inputs and reads its outputs through this file only,
so a run on hardware checks gfxsim's layouts, not a second copy of the PTX tables.
Run from the repository root:  PYTHONPATH=$PWD python3 hw_probes/nvidia/export_layouts.py
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from gfxsim.arch import get_arch  # noqa: E402


def export(arch="sm_90") -> dict:
    prof = get_arch(arch)
    out = {"arch": prof.name, "warp": prof.wave_size, "instructions": {}}
    for insn in prof.instructions.values():
        ops = {}
        for op in "ABCD":
            lay = insn.operand(op)
            t = lay.table()
            ops[op] = {"regs": lay.n_regs, "elem_bits": lay.elem_bits, "rows": lay.rows, "cols": lay.cols,
                       "slots": [[int(e["lane"]), int(e["reg"]), int(e["elem"]), int(e["row"]), int(e["col"])]
                                 for e in t]}
        out["instructions"][insn.mnemonic] = {"M": insn.M, "N": insn.N, "K": insn.K, "a_type": insn.a_type,
                                              "cd_type": insn.cd_type, "operands": ops}
    return out


def main():
    path = os.path.join(HERE, "layouts.json")
    with open(path, "w") as f:
        json.dump(export(), f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
