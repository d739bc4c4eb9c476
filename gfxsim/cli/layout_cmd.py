"""`gfxsim layout`: the matrix instruction calculator, from the arch records.

numpy is imported only by the views that need whole tables; --get-register, --get-element,
--list and --detail run on plain ints.
"""
from __future__ import annotations

import json

from ..arch import OPERANDS, get_arch, get_instruction
from ..arch.matrix_insn import OPERAND_FIELDS
from ..errors import UsageError
from ..tables import render

FORMATS = ("text", "markdown", "csv", "json")


def add_parser(sub):
    p = sub.add_parser("layout", help="matrix-instruction register layouts (calculator)",
                       description="Register layouts of matrix instructions, from gfxsim's arch records. "
                                   "With no arguments: the gfx936 PV token sets and the gfx936 vs gfx942 "
                                   "C/D comparison.")
    p.add_argument("arch", nargs="?", help="target, e.g. gfx942, gfx940, gfx90a, gfx936, gfx928")
    p.add_argument("instruction", nargs="?", help="ISA mnemonic, e.g. v_mfma_i32_16x16x32_i8")
    p.add_argument("--list", "-L", action="store_true", help="list the arch's matrix instructions")
    p.add_argument("--detail", "-d", action="store_true", help="shape, types, registers, cycles, formulas")
    p.add_argument("--operand", "-o", choices=OPERANDS, type=str.upper, help="restrict to one operand")
    p.add_argument("--view", choices=("matrix", "register"), default="matrix",
                   help="matrix-shaped (cell: register, lane, bits) or register-shaped (cell: coordinates)")
    p.add_argument("--get-register", "-g", nargs=2, type=int, metavar=("ROW", "COL"),
                   help="where element [ROW][COL] of --operand lives")
    p.add_argument("--block", "-b", type=int, default=0, help="block for --get-register")
    p.add_argument("--get-element", "-m", nargs=2, type=int, metavar=("LANE", "REG"),
                   help="which elements register REG of LANE holds (for --operand)")
    p.add_argument("--token-sets", type=int, metavar="BYTES",
                   help="tokens each instruction consumes when every lane loads BYTES consecutive K elements")
    p.add_argument("--compare", nargs=4, metavar=("ARCH1", "INSTR1", "ARCH2", "INSTR2"),
                   help="where two instructions place the same element differently")
    p.add_argument("--format", "-f", choices=FORMATS, default="text",
                   help="output format (json: the same fields as the tables, machine-readable)")
    p.set_defaults(func=run)
    return p


LOAD_BYTES = (4, 8, 12, 16)      # --token-sets: one lane's load, 1-4 dwords (global_load_dwordx4 at most)


def run(args) -> int:
    fmt = args.format
    if args.token_sets is not None and args.token_sets not in LOAD_BYTES:
        raise UsageError(f"--token-sets BYTES must be one of {', '.join(map(str, LOAD_BYTES))} (one lane's "
                         f"load of consecutive K, at most a 16-byte dwordx4); got {args.token_sets}")
    if args.block < 0:
        raise UsageError(f"--block must be >= 0, got {args.block}")
    _one_question(args)
    if args.compare:
        print(compare(*args.compare, fmt=fmt))
        return 0
    if args.arch is None:
        if args.list:
            raise UsageError("--list needs an ARCH, e.g. gfxsim layout gfx942 --list")
        _need_instruction(args)
        _unused(args, "the default tables (no ARCH)")
        print(default_tour(fmt))
        return 0
    arch = get_arch(args.arch)
    if args.instruction is None:
        _need_instruction(args)
    if args.list or args.instruction is None:
        _unused(args, "the instruction list (no INSTRUCTION)")
        print(list_instructions(arch, fmt))
        return 0
    insn = arch.instruction(args.instruction)
    ops = [args.operand] if args.operand else list(OPERANDS)
    if args.get_register:
        if not args.operand:
            raise UsageError("--get-register needs --operand A|B|C|D")
        print(get_register(insn, args.operand, *args.get_register, args.block, fmt))
    elif args.get_element:
        if not args.operand:
            raise UsageError("--get-element needs --operand A|B|C|D")
        print(get_element(insn, args.operand, *args.get_element, fmt))
    elif args.token_sets is not None:
        print(token_sets(arch, insn, args.operand or "B", args.token_sets, fmt))
    elif args.detail:
        print(detail(arch, insn, fmt))
    elif fmt == "json":
        print(json.dumps(layout_json(arch, insn, ops)))
    else:
        views = matrix_view if args.view == "matrix" else register_view
        print("\n\n".join(views(insn, op, fmt) for op in ops))
    return 0


# the questions `gfxsim layout` answers, one per command: a second one would be ignored
QUESTIONS = (("--list", "list"), ("--compare", "compare"), ("--get-register", "get_register"),
             ("--get-element", "get_element"), ("--token-sets", "token_sets"), ("--detail", "detail"))


def _one_question(args) -> None:
    """At most one question, and no option the chosen one does not use (it would be ignored)."""
    asked = [flag for flag, dest in QUESTIONS if getattr(args, dest) not in (None, False, [])]
    if len(asked) > 1:
        raise UsageError(f"{' and '.join(asked)} cannot be combined: give one of them per command")
    given = getattr(args, "given_options", set())
    unused = {"--list": ("--operand", "--view", "--block"), "--compare": ("--operand", "--view", "--block"),
              "--get-register": ("--view",), "--get-element": ("--view", "--block"),
              "--token-sets": ("--view", "--block"), "--detail": ("--operand", "--view", "--block")}
    for flag in asked:
        for opt in unused[flag]:
            if opt.lstrip("-") in given:
                raise UsageError(f"{opt} has no effect with {flag}: leave it out")
    if not asked and "block" in given:
        raise UsageError("--block has no effect without --get-register: leave it out")


def _unused(args, what: str) -> None:
    """--operand, --view or --block given where ``what`` is printed, which uses none of them."""
    given = getattr(args, "given_options", set())
    for opt in ("operand", "view", "block"):
        if opt in given:
            raise UsageError(f"--{opt} has no effect on {what}: leave it out or name an INSTRUCTION")


def _need_instruction(args) -> None:
    """An option that is about one instruction, given without ARCH INSTRUCTION: a usage error."""
    for flag, given in (("--get-register", args.get_register), ("--get-element", args.get_element),
                        ("--token-sets", args.token_sets is not None), ("--detail", args.detail)):
        if given:
            raise UsageError(f"{flag} needs an ARCH and an INSTRUCTION, e.g. gfxsim layout gfx942 "
                             f"v_mfma_i32_16x16x32_i8 {flag} ...")


# -- pieces ----------------------------------------------------------------------------------

def slot_name(insn, op, lane, reg, elem) -> str:
    """Calculator-style ``v1{18}.[15:8]``; whole registers print without bits, a 64-bit element
    as its register pair ``v[3:2]{5}`` (``reg`` counts pairs there)."""
    bits = insn.operand(op).elem_bits
    if bits == 64:
        return f"v[{2 * reg + 1}:{2 * reg}]{{{lane}}}"
    if bits == 32:
        return f"v{reg}{{{lane}}}"
    lo = elem * bits
    return f"v{reg}{{{lane}}}.[{lo + bits - 1}:{lo}]"


def elem_name(insn, op, row, col, block) -> str:
    s = f"{op}[{row}][{col}]"
    return s + (f".B{block}" if insn.blocks > 1 else "")


def layout_json(arch, insn, ops=OPERANDS) -> dict:
    operands = {}
    for op in ops:
        t = insn.operand(op).table()
        operands[op] = [{k: int(e[k]) for k in ("lane", "reg", "elem", "row", "col", "block")} for e in t]
    return {"arch": arch.name, "instruction": insn.mnemonic, "M": insn.M, "N": insn.N, "K": insn.K,
            "blocks": insn.blocks, "operands": operands}


def _spellings(arch) -> dict:
    """Each record's other assembler spellings (gfx942 takes CDNA2's v_mfma_f32_32x32x1f32)."""
    out = {}
    for alias, mn in arch.insn_aliases.items():
        out.setdefault(mn, []).append(alias)
    return out


def list_instructions(arch, fmt):
    also = _spellings(arch)
    regs = lambda i: "/".join(str(i.regs(op)) for op in OPERANDS)
    rows = [[i.mnemonic, f"{i.M}x{i.N}x{i.K}", i.blocks, f"{i.a_type}*{i.b_type}->{i.cd_type}", regs(i),
             i.cycles if i.cycles is not None else "n/a", ",".join(i.modifiers) or "-",
             ", ".join(also.get(i.mnemonic, ())) or "-"] for i in arch.instructions.values()]
    if fmt == "json":
        return json.dumps({"arch": arch.name, "family": arch.family, "aliases": list(arch.aliases),
                           "instructions": [{"instruction": i.mnemonic, "M": i.M, "N": i.N, "K": i.K,
                                             "blocks": i.blocks, "a_type": i.a_type, "b_type": i.b_type,
                                             "cd_type": i.cd_type, "cycles": i.cycles,
                                             "registers": {op: i.regs(op) for op in OPERANDS},
                                             "modifiers": list(i.modifiers), "also_spelled": also.get(i.mnemonic, [])}
                                            for i in arch.instructions.values()]})
    return render(["instruction", "MxNxK", "blocks", "types", "VGPRs A/B/C/D", "cycles", "modifiers", "also spelled"],
                  rows, fmt, title=f"{arch.name} ({arch.family}; aliases {', '.join(arch.aliases)}): matrix instructions")


def _checked(insn) -> str:
    """What checked the record's accumulator bit for bit, or that nothing has."""
    if insn.cd_type == "i32":
        return "exact integer arithmetic (nothing to round)"
    return insn.accumulator.measured or "NOT measured or validated on hardware: a model"


def detail(arch, insn, fmt):
    info = {
        "arch": arch.name, "family": arch.family, "instruction": insn.mnemonic,
        "M": insn.M, "N": insn.N, "K": insn.K, "blocks": insn.blocks,
        "ops": insn.ops, "cycles": insn.cycles, "builtin": insn.builtin,
        "types": {"A": insn.a.description, "B": insn.b.description, "C": insn.cd.description,
                  "D": insn.cd.description},
        "accumulator": insn.accumulator.note,
        "accumulator_record": insn.accumulator.as_dict(), "accumulator_checked": _checked(insn),
        "registers": {op: insn.regs(op) for op in OPERANDS},
        "fields": {**OPERAND_FIELDS, "C": "Vdst"} if insn.sparse else OPERAND_FIELDS,
        "element_to_register": {op: insn.operand(op).formulas_to_register() for op in OPERANDS},
        "register_to_element": {op: insn.operand(op).formulas_to_matrix() for op in OPERANDS},
        "modifiers": list(insn.modifiers), "also_spelled": _spellings(arch).get(insn.mnemonic, []),
        "index_to_register": insn.index.formulas_to_register() if insn.sparse else None,
        "source": insn.source, "notes": insn.notes,
    }
    if fmt == "json":
        return json.dumps(info, indent=1)
    rows = [["shape", f"M={insn.M} N={insn.N} K={insn.K} blocks={insn.blocks}"],
            ["ops", insn.ops], ["cycles", insn.cycles if insn.cycles is not None else "not published"],
            ["builtin", insn.builtin or "-"], ["accumulator", insn.accumulator.note],
            ["accumulator checked", _checked(insn)]]
    for op in OPERANDS:
        pairs = " (reg below counts register pairs)" if insn.operand(op).elem_bits == 64 else ""
        packed = f" compressed: {insn.M}x{insn.K // 2}, column 2g+s the s-th stored value of group g" \
            if op == "A" and insn.sparse else ""
        rows.append([f"{op} ({info['fields'][op]})", f"{info['types'][op]}, {insn.regs(op)} VGPR(s){pairs}{packed}"])
    if insn.sparse:
        f = insn.index.formulas_to_register()
        rows.append(["index (Src2)", f"4-bit field per group g of four K, 1 VGPR: field[i][g] at lane = {f['lane']}; "
                                     f"bits 4*({f['elem']}) (+ the set CBSZ/ABID choose)"])
    rows.append(["modifiers", ", ".join(insn.modifiers) or "none"])
    if info["also_spelled"]:
        rows.append(["also spelled", ", ".join(info["also_spelled"])])
    for op in OPERANDS:
        r, c = insn.operand(op).axis_names()
        f = info["element_to_register"][op]
        blk = "[.block]" if insn.blocks > 1 else ""
        rows.append([f"{op}[{r}][{c}]{blk} ->", f"lane = {f['lane']}; reg = {f['reg']}; elem = {f['elem']}"])
    for op in OPERANDS:
        f = info["register_to_element"][op]
        rows.append([f"{op} lane,reg,elem ->", "; ".join(f"{k} = {v}" for k, v in f.items())])
    rows.append(["source", insn.source])
    if insn.notes:
        rows.append(["notes", insn.notes])
    return render(["field", "value"], rows, fmt, title=f"{arch.name} {insn.mnemonic}")


def matrix_view(insn, op, fmt):
    """One table per block, shaped like the matrix; each cell is register, lane and bits."""
    lay = insn.operand(op)
    slot = lay.slot_of()
    out = []
    for b in range(lay.blocks):
        header = [f"{op}[row][col]"] + [str(c) for c in range(lay.cols)]
        rows = [[str(r)] + [slot_name(insn, op, *slot[:, b, r, c]) for c in range(lay.cols)]
                for r in range(lay.rows)]
        title = f"{insn.mnemonic} operand {op} ({lay.rows}x{lay.cols}" + (f", block {b})" if lay.blocks > 1 else ")")
        out.append(render(header, rows, fmt, title=title))
    return "\n\n".join(out)


def register_view(insn, op, fmt):
    """Lanes x register slices; each cell is the matrix element held there."""
    lay = insn.operand(op)
    m = lay.matrix_of()
    cols = [(r, e) for r in range(lay.reg_slots) for e in range(lay.n_elems)]
    bits = lay.elem_bits
    head = {64: lambda r, e: f"v[{2 * r + 1}:{2 * r}]", 32: lambda r, e: f"v{r}"}.get(
        bits, lambda r, e: f"v{r}.[{e * bits + bits - 1}:{e * bits}]")
    header = ["lane"] + [head(r, e) for r, e in cols]
    rows = [[str(l)] + [elem_name(insn, op, *m[:, r, e, l]) for r, e in cols] for l in range(lay.wave_size)]
    return render(header, rows, fmt, title=f"{insn.mnemonic} operand {op}: register view")


def get_register(insn, op, row, col, block, fmt):
    lane, reg, elem = insn.operand(op).register_of(row, col, block)
    name = slot_name(insn, op, lane, reg, elem)
    if fmt == "json":
        return json.dumps({"operand": op, "row": row, "col": col, "block": block,
                           "lane": lane, "reg": reg, "elem": elem, "register": name})
    if fmt in ("markdown", "csv"):
        return render(["element", "lane", "reg", "elem", "register"],
                      [[elem_name(insn, op, row, col, block), lane, reg, elem, name]], fmt)
    return f"{elem_name(insn, op, row, col, block)} = {name}"


def get_element(insn, op, lane, reg, fmt):
    lay = insn.operand(op)
    entries = [{"elem": e, "row": r, "col": c, "block": b, "register": slot_name(insn, op, lane, reg, e)}
               for e, (r, c, b) in ((e, lay.element_of(lane, reg, e)) for e in range(lay.n_elems))]
    if fmt == "json":
        return json.dumps({"operand": op, "lane": lane, "reg": reg, "elements": entries})
    if fmt in ("markdown", "csv"):
        return render(["register", "element", "row", "col", "block"],
                      [[e["register"], elem_name(insn, op, e["row"], e["col"], e["block"]), e["row"], e["col"],
                        e["block"]] for e in entries], fmt)
    return "\n".join(f"{e['register']} = {elem_name(insn, op, e['row'], e['col'], e['block'])}" for e in entries)


def token_sets(arch, insn, op, load_bytes, fmt):
    from ..arch.kslots import format_token_set, k_lane_groups, tokens_per_instruction
    t = tokens_per_instruction(insn, op, load_bytes)
    tile = k_lane_groups(insn.operand(op)) * load_bytes // (insn.operand(op).elem_bits // 8)
    missing = sorted(set(range(tile)) - set(t[t >= 0].ravel().tolist()))
    rows = [[m, format_token_set(t[m]), int((t[m] >= 0).sum())] for m in range(t.shape[0])]
    if fmt == "json":
        return json.dumps({"arch": arch.name, "instruction": insn.mnemonic, "operand": op,
                           "load_bytes": load_bytes, "tile_tokens": tile,
                           "instructions": [{"index": m, "tokens": [int(x) for x in t[m]]} for m in range(t.shape[0])],
                           "never_consumed": missing})
    title = (f"{arch.name} {insn.mnemonic}: operand {op}, each lane loads {load_bytes} B of consecutive K "
             f"(a {tile}-token tile)")
    text = render(["instruction", "tokens consumed", "K slots"], rows, fmt, title=title)
    if missing:
        text += f"\nnever consumed: {format_token_set(missing)}"
    return text


def compare(arch1, mn1, arch2, mn2, fmt="text"):
    import numpy as np
    a, b = get_instruction(arch1, mn1), get_instruction(arch2, mn2)
    if (a.M, a.N, a.K, a.blocks) != (b.M, b.N, b.K, b.blocks):
        raise UsageError(f"cannot compare {mn1} ({a.M}x{a.N}x{a.K}x{a.blocks}) with "
                         f"{mn2} ({b.M}x{b.N}x{b.K}x{b.blocks}): shapes differ")
    result = {}
    for op in OPERANDS:
        sa, sb = a.operand(op).slot_of(), b.operand(op).slot_of()
        diff = np.argwhere(np.any(sa != sb, axis=0))
        result[op] = {"elements": int(sa[0].size), "differ": int(len(diff)),
                      "cells": [{"block": int(k), "row": int(r), "col": int(c),
                                 "first": dict(zip(("lane", "reg", "elem"), map(int, sa[:, k, r, c]))),
                                 "second": dict(zip(("lane", "reg", "elem"), map(int, sb[:, k, r, c])))}
                                for k, r, c in diff]}
    if fmt == "json":
        return json.dumps({"first": [get_arch(arch1).name, a.mnemonic], "second": [get_arch(arch2).name, b.mnemonic],
                           "operands": result})
    rows = [[op, r["elements"], r["differ"], "identical" if not r["differ"] else "DIFFERENT"]
            for op, r in result.items()]
    out = [render(["operand", "elements", "placed differently", "verdict"], rows, fmt,
                  title=f"{get_arch(arch1).name} {a.mnemonic}  vs  {get_arch(arch2).name} {b.mnemonic}")]
    for op, r in result.items():
        if r["differ"]:
            cells = r["cells"]
            sample = [[elem_name(a, op, c["row"], c["col"], c["block"]),
                       slot_name(a, op, *c["first"].values()), slot_name(b, op, *c["second"].values())]
                      for c in cells[:8]]
            out.append(render([f"{op} element", get_arch(arch1).name, get_arch(arch2).name], sample, fmt,
                              title=f"{op}: first {len(sample)} of {len(cells)} differing elements"))
    return "\n\n".join(out)


def default_tour(fmt="text"):
    arch = get_arch("gfx936")
    insn = arch.instruction("v_mmac_i32_16x16x32_i8")
    return "\n\n".join([token_sets(arch, insn, "B", 16, fmt), token_sets(arch, insn, "B", 8, fmt),
                        compare("gfx936", "v_mmac_i32_16x16x32_i8", "gfx942", "v_mfma_i32_16x16x32_i8", fmt)])
