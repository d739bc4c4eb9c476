"""Parse the AMDGPU assembly clang writes (`clang -S`, code object v4/v5) into kernels and
instruction records: what `gfxsim hip inspect` reports on, and what an asm front end executes.

Per kernel: the instructions (mnemonic, operand text, basic-block label, line), the labels, the
`.amdhsa_*` kernel-descriptor directives, its entry of the `amdhsa.kernels` metadata (YAML), and
the "; Key: value" statistics clang prints after the function. Loops are found from backward
branches. Encoding families follow the mnemonic rules of the CDNA3 ISA; the tests check them
against `llvm-mc --show-encoding` (gfxsim/asm/encoding.py).
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from collections.abc import Mapping

import yaml

from ..errors import GfxSimError, located

MATRIX_PREFIXES = ("v_mfma_", "v_mmac_", "v_smfmac_")
BRANCHES = ("s_branch", "s_cbranch_")

_LABEL = re.compile(r"^([.\w$]+):")
# DWARF line tables in clang's assembly: `.file N ["dir"] "name" [md5 ...]`, `.loc N LINE [COL] ...`
_FILE = re.compile(r'^\.file\s+(\d+)\s+"([^"]*)"(?:\s+"([^"]*)")?')
_LOC = re.compile(r"^\.loc\s+(\d+)\s+(\d+)")
_SET = re.compile(r"^\.set\s+([.\w$]+)\s*,\s*(.+)$")
_TYPE_FUNC = re.compile(r"^\s*\.type\s+([.\w$]+)\s*,\s*@function")


class AsmFileError(GfxSimError, ValueError):
    """A .s file the asm front end cannot read (empty, not UTF-8, truncated, bad metadata, a branch to
    no label, an unknown instruction); the message names the file or kernel and the line."""


@dataclass(frozen=True)
class Instruction:
    index: int          # position in the kernel's instruction list
    line: int           # 1-based line in the .s file
    mnemonic: str       # verbatim, e.g. "v_mfma_i32_16x16x32_i8", "v_add_f32_e32"
    operands: str       # operand text as printed, modifiers included ("" if none)
    label: str          # the basic block: the last label before it (the kernel symbol for the entry block)
    source: str | None = None   # "file.hip:LINE" of clang's last .loc before it (debug line tables), else None

    @property
    def family(self) -> str:
        return encoding_family(self.mnemonic, self.operands)

    @property
    def is_matrix(self) -> bool:
        return self.mnemonic.startswith(MATRIX_PREFIXES)

    @property
    def branch_target(self) -> str | None:
        if self.mnemonic.startswith(BRANCHES) and self.operands and not self.mnemonic.startswith("s_cbranch_join"):
            return self.operands.split(",")[0].strip()
        return None

    def __str__(self):
        return f"{self.mnemonic} {self.operands}".rstrip()


@dataclass(frozen=True)
class Block:
    label: str                  # its label; the kernel symbol for the entry block, "@<index>" if unlabelled
    start: int                  # index of its first instruction
    end: int                    # one past its last instruction
    successors: tuple[int, ...]  # start indices of the blocks control can go to next


@dataclass(frozen=True)
class Loop:
    header: str                 # label of the loop header
    blocks: tuple[int, ...]     # start indices of the blocks in the loop (header first)
    indices: tuple[int, ...]    # its instructions, in layout order
    depth: int                  # 1 for an outermost loop

    @property
    def start(self) -> int:
        return self.indices[0]

    @property
    def end(self) -> int:
        return self.indices[-1]

    def contains(self, other: Loop) -> bool:
        return self != other and set(other.blocks) <= set(self.blocks)


@dataclass(frozen=True)
class Kernel:
    name: str
    instructions: tuple[Instruction, ...]
    labels: Mapping[str, int]          # label -> index of the first instruction after it
    descriptor: Mapping[str, int]      # ".amdhsa_group_segment_fixed_size" -> 29184, ...
    metadata: Mapping[str, object]     # this kernel's entry of amdhsa.kernels (".args", ".vgpr_count", ...)
    info: Mapping[str, str] = field(default_factory=dict)   # clang's "; NumVgprs: 142" lines
    target: str = ""                   # the file's .amdgcn_target, "amdgcn-amd-amdhsa--gfx942" ("": none)

    @cached_property
    def program(self):
        """The kernel decoded for execution (run.Program), once per Kernel object."""
        from .run import Program
        return Program(self)

    @cached_property
    def liveness(self):
        """Which registers an instruction writes that die unread (liveness.Liveness)."""
        from .liveness import Liveness
        return Liveness(self)

    @cached_property
    def blocks(self) -> tuple[Block, ...]:
        """Basic blocks: split at labels and after branches and s_endpgm."""
        n = len(self.instructions)
        names: dict[int, str] = {}
        for label, i in self.labels.items():
            names.setdefault(i, label)
        leaders = {0, *(i for i in self.labels.values() if i < n)}
        for ins in self.instructions:
            if ins.branch_target or ins.mnemonic.startswith(("s_endpgm", "s_setpc_b64")):
                leaders.add(ins.index + 1)
        starts = sorted(i for i in leaders if i < n)
        blocks = []
        for k, start in enumerate(starts):
            end = starts[k + 1] if k + 1 < len(starts) else n
            last = self.instructions[end - 1]
            target = last.branch_target
            if last.mnemonic.startswith(("s_endpgm", "s_setpc_b64")):
                succ = ()
            elif target is not None:
                if target not in self.labels:
                    raise AsmFileError(f"{self.name}: line {last.line}: branch to unknown label {target}")
                taken = self.labels[target]
                succ = (taken,) if last.mnemonic == "s_branch" else (taken, *((end,) if end < n else ()))
            else:
                succ = (end,) if end < n else ()
            blocks.append(Block(names.get(start, f"@{start}"), start, end, succ))
        return tuple(blocks)

    @cached_property
    def loops(self) -> tuple[Loop, ...]:
        """Natural loops: a back edge b -> h where h dominates b; the loop is h and every block
        that reaches b without passing through h. Loops sharing a header are one loop."""
        blocks = {b.start: b for b in self.blocks}
        if not blocks:
            return ()
        preds: dict[int, set[int]] = {s: set() for s in blocks}
        for b in blocks.values():
            for t in b.successors:
                preds[t].add(b.start)
        order, seen, stack = [], set(), [0]        # reachable blocks, depth first
        while stack:
            s = stack.pop()
            if s in seen:
                continue
            seen.add(s)
            order.append(s)
            stack.extend(reversed(blocks[s].successors))
        dom = {s: set(seen) for s in seen}
        dom[0] = {0}
        changed = True
        while changed:
            changed = False
            for s in order[1:]:
                ps = [dom[p] for p in preds[s] if p in seen]
                new = {s} | (set.intersection(*ps) if ps else set())
                if new != dom[s]:
                    dom[s], changed = new, True
        bodies: dict[int, set[int]] = {}
        for b in order:
            for h in blocks[b].successors:
                if h in dom[b]:
                    body, work = bodies.setdefault(h, {h}), [b]
                    while work:
                        x = work.pop()
                        if x not in body:
                            body.add(x)
                            work.extend(p for p in preds[x] if p in seen)
        loops = []
        for h, body in bodies.items():
            depth = sum(1 for h2, b2 in bodies.items() if body <= b2)
            idx = tuple(i for s in sorted(body) for i in range(s, blocks[s].end))
            loops.append(Loop(blocks[h].label, (h, *sorted(body - {h})), idx, depth))
        return tuple(sorted(loops, key=lambda lp: lp.start))

    def body(self, loop: Loop) -> tuple[Instruction, ...]:
        return tuple(self.instructions[i] for i in loop.indices)

    def innermost(self, loop: Loop) -> bool:
        return not any(loop.contains(o) for o in self.loops)

    def __repr__(self):
        return f"Kernel({self.name}, {len(self.instructions)} instructions, {len(self.loops)} loops)"


@dataclass(frozen=True)
class AsmFile:
    path: Path | None
    target: str                        # ".amdgcn_target": "amdgcn-amd-amdhsa--gfx942"
    kernels: Mapping[str, Kernel]

    @property
    def processor(self) -> str:
        return processor_of(self.target)

    def kernel(self, name: str) -> Kernel:
        if name not in self.kernels:
            raise located(KeyError, f"{self.path or 'assembly'} has no kernel {name!r}; it has: "
                                    f"{', '.join(self.kernels)}")
        return self.kernels[name]


_PROCESSOR = re.compile(r"(gfx[0-9a-f]+(?:-[0-9a-f]+)*-generic|gfx[0-9a-f]+)(?::[^\s\"]*)?$")


def processor_of(target: str) -> str:
    """The processor of a target id: "gfx942" of "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-", and of
    the forms with an environment ("amdgcn-amd-amdhsa-unknown-gfx942") or another arch spelling
    (Triton 3.9's "amdgpu9.42-amd-amdhsa-unknown-gfx942"), and code object v6's generic targets
    ("gfx9-4-generic"); "" where it names none."""
    m = _PROCESSOR.search(target.strip())
    return m.group(1) if m else ""


class _MetadataLoader(yaml.SafeLoader):
    """LLVM's metadata YAML (its msgpack document printed as YAML, YAML 1.2 scalars): a scalar whose
    plain form would read as another type carries a local tag (``.name: !str n``, ``!int``,
    ``!float``, ``!bool``, ``!nil``); yes/no/on/off are strings, as in YAML 1.2."""


_MetadataLoader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.copy().items()}
_MetadataLoader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                      list("tTfF"))


def _scalar_tag(convert):
    def construct(loader, node):
        return convert(loader.construct_scalar(node))
    return construct


def _llvm_bool(v: str) -> bool:
    if v.lower() not in ("true", "false"):
        raise yaml.constructor.ConstructorError(None, None, f"!bool {v!r}: true or false expected")
    return v.lower() == "true"


for _tag, _convert in (("!str", str), ("!int", lambda v: int(v, 0)), ("!float", float), ("!bool", _llvm_bool),
                       ("!nil", lambda v: None)):
    _MetadataLoader.add_constructor(_tag, _scalar_tag(_convert))


def load_metadata(text: str):
    """The .amdgpu_metadata block's YAML as Python values."""
    return yaml.load(text, Loader=_MetadataLoader)


# LLVM 20+ may write a descriptor field as an expression over `.set` symbols (the register counts
# of the kernel and its callees): ".amdhsa_next_free_vgpr max(totalnumvgprs(k.num_agpr, k.num_vgpr), 1, 0)"
def _total_vgprs(agprs, vgprs):
    """totalnumvgprs on gfx90a/gfx94x: AGPRs follow the VGPRs at a 4-register boundary."""
    return -(-vgprs // 4) * 4 + agprs if agprs else vgprs


_EXPR_FUNCS = {"max": max, "min": min, "alignto": lambda x, a: -(-x // a) * a, "totalnumvgprs": _total_vgprs}
_EXPR_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
             ast.Div: lambda a, b: int(a / b) if b else 0, ast.Mod: lambda a, b: a % b if b else 0,
             ast.BitAnd: lambda a, b: a & b, ast.BitOr: lambda a, b: a | b, ast.BitXor: lambda a, b: a ^ b,
             ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b}


class _Unresolved(GfxSimError):
    """An expression with a symbol or operator evaluate() does not know (it stays text)."""


def evaluate(expr: str, symbols: Mapping[str, object]):
    """An MC expression as LLVM's AMDGPU assembly writes one (integers, symbols, + - * / % & | ^ << >>
    ~, max/min/alignto/totalnumvgprs) -> int, or the text unchanged where it is not one of those."""
    text = expr.strip()
    try:
        return int(text, 0)
    except ValueError:
        pass
    names: dict[str, str] = {}

    def symbol(m):
        names.setdefault(m.group(0), f"_s{len(names)}")
        return names[m.group(0)]
    py = re.sub(r"(?<![\w.$])[A-Za-z_.$][\w.$]*", symbol, text)
    back = {v: k for k, v in names.items()}

    def ev(n):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return n.value
        if isinstance(n, ast.Name):
            name = back[n.id]
            v = symbols.get(name)
            if isinstance(v, int):
                return v
            if isinstance(v, str) and v != expr:
                v = evaluate(v, {k: x for k, x in symbols.items() if k != name})
                if isinstance(v, int):
                    return v
            raise _Unresolved(name)
        if isinstance(n, ast.BinOp) and type(n.op) in _EXPR_OPS:
            return _EXPR_OPS[type(n.op)](ev(n.left), ev(n.right))
        if isinstance(n, ast.UnaryOp):
            v = ev(n.operand)
            return {ast.USub: -v, ast.UAdd: v, ast.Invert: ~v}[type(n.op)]
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and back[n.func.id] in _EXPR_FUNCS:
            return int(_EXPR_FUNCS[back[n.func.id]](*(ev(a) for a in n.args)))
        raise _Unresolved(type(n).__name__)
    try:
        return int(ev(ast.parse(py, mode="eval")))
    except (_Unresolved, KeyError, SyntaxError, TypeError, ValueError, RecursionError):
        return text


def _strip_comment(s: str) -> str:
    i = s.find(";")
    return s if i < 0 else s[:i]


def parse(text: str, path: Path | str | None = None) -> AsmFile:
    lines = text.splitlines()
    target = ""
    functions = set()
    in_text = True
    current: dict | None = None        # the function being read
    funcs: dict[str, dict] = {}
    descriptors: dict[str, dict] = {}
    desc_of: str | None = None
    info_of: str | None = None
    meta_lines: list[str] | None = None
    metadata_text = ""
    last_func: str | None = None
    files: dict[int, str] = {}          # .file number -> its name (the HIP source, a header)
    loc: str | None = None              # "name:LINE" of the last .loc (None: no line tables)
    symbols: dict[str, object] = {}     # `.set NAME, EXPR` (LLVM 20+: a kernel's register counts)

    for lineno, raw in enumerate(lines, 1):
        s = raw.strip()
        if meta_lines is not None:
            if s == ".end_amdgpu_metadata":
                metadata_text, meta_lines = "\n".join(meta_lines), None
            else:
                meta_lines.append(raw)
            continue
        if info_of is not None:
            if s.startswith(";"):
                key, sep, val = s[1:].partition(":")
                if not sep:
                    key, sep, val = s[1:].partition("=")
                if sep:
                    funcs[info_of]["info"][key.strip()] = val.strip()
                continue
            info_of = None
        if s == "; Kernel info:" and last_func is not None:
            info_of = last_func
            continue
        if desc_of is not None:
            if s.startswith(".end_amdhsa_kernel"):
                desc_of = None
            elif s.startswith(".amdhsa_"):
                key, _, val = _strip_comment(s).partition(" ")
                descriptors[desc_of][key] = val.strip()
            continue
        if not s or s.startswith(";"):
            continue
        m = _SET.match(s)
        if m:
            symbols[m.group(1)] = evaluate(_strip_comment(m.group(2)), symbols)
            continue
        if s.startswith(".amdgcn_target"):
            target = s.split(None, 1)[1].strip().strip('"')
            continue
        if s.startswith(".amdgpu_metadata"):
            meta_lines = []
            continue
        if s.startswith(".amdhsa_kernel "):
            desc_of = s.split(None, 1)[1].strip()
            descriptors[desc_of] = {}
            continue
        m = _TYPE_FUNC.match(s)
        if m:
            functions.add(m.group(1))
            continue
        if s.startswith((".text", ".section", ".data", ".bss", ".rodata")):
            in_text = s.startswith(".text") or (s.startswith(".section") and ".text" in s.split(",")[0])
            continue
        m = _LABEL.match(s)
        if m:
            name = m.group(1)
            if name in functions:
                current = funcs[name] = {"instructions": [], "labels": {name: 0}, "label": name, "info": {}}
                last_func = name
                loc = None                 # a function's lines start at its own first .loc
            elif current is not None and name.startswith(".Lfunc_end"):
                current = None
            elif current is not None:
                current["labels"][name] = len(current["instructions"])
                current["label"] = name
            continue
        if s.startswith(".file") or s.startswith(".loc"):
            m = _FILE.match(s)
            if m:
                files[int(m.group(1))] = Path(m.group(3) or m.group(2)).name
                continue
            m = _LOC.match(s)
            if m:
                n, ln = int(m.group(1)), int(m.group(2))
                loc = f"{files.get(n, f'file {n}')}:{ln}" if ln else None     # line 0: no source line
                continue
        if s.startswith(".") or current is None or not in_text:
            continue
        body = _strip_comment(s).strip()
        if not body:
            continue
        mnemonic, _, operands = body.partition(" ")
        ins = current["instructions"]
        ins.append(Instruction(len(ins), lineno, mnemonic, operands.strip(), current["label"], loc))

    where = path if path else "assembly"
    if meta_lines is not None:
        raise AsmFileError(f"{where}: truncated: .amdgpu_metadata has no .end_amdgpu_metadata")
    if desc_of is not None:
        raise AsmFileError(f"{where}: truncated: .amdhsa_kernel {desc_of} has no .end_amdhsa_kernel")
    for fields in descriptors.values():          # the .set symbols may follow the descriptor
        for key, val in fields.items():
            fields[key] = evaluate(val, symbols)
    try:
        meta = load_metadata(metadata_text) if metadata_text else {}
    except yaml.YAMLError as e:
        raise AsmFileError(f"{where}: the .amdgpu_metadata block is not valid YAML: {str(e).splitlines()[0]}") from e
    if not isinstance(meta, dict):
        raise AsmFileError(f"{where}: the .amdgpu_metadata block is not a YAML mapping")
    meta_by_name = {k.get(".name"): k for k in (meta or {}).get("amdhsa.kernels", [])}
    kernels = {}
    for name, f in funcs.items():
        if name not in descriptors:          # a device function, not a kernel
            continue
        f = _with_callees(name, funcs)
        kernels[name] = Kernel(name, tuple(f["instructions"]), MappingProxyType(f["labels"]),
                               MappingProxyType(descriptors[name]), MappingProxyType(meta_by_name.get(name, {})),
                               MappingProxyType(f["info"]), target)
    return AsmFile(Path(path) if path else None, target, MappingProxyType(kernels))


_SYMBOL_REF = re.compile(r"([.A-Za-z_$][\w.$]*)@(?:rel32|abs32)@")


def _with_callees(name: str, funcs: dict) -> dict:
    """A kernel's function followed by every device function of the file it refers to (clang's
    calls: s_getpc_b64, then s_add_u32/s_addc_u32 of sym@rel32@lo/hi, s_swappc_b64), transitively,
    so that one instruction list (and one set of labels) holds all the code a wave can run."""
    order, work = [name], [name]
    while work:
        for ins in funcs[work.pop()]["instructions"]:
            for sym in _SYMBOL_REF.findall(ins.operands):
                if sym in funcs and sym not in order:
                    order.append(sym)
                    work.append(sym)
    if len(order) == 1:
        return funcs[name]
    instructions, labels = [], {}
    for fn in order:
        base = len(instructions)
        instructions += [Instruction(base + i.index, i.line, i.mnemonic, i.operands, i.label, i.source)
                         for i in funcs[fn]["instructions"]]
        for label, i in funcs[fn]["labels"].items():
            if label in labels:
                raise AsmFileError(f"{name}: label {label} is defined in two of the functions it calls")
            labels[label] = base + i
    return {**funcs[name], "instructions": instructions, "labels": labels}


def parse_file(path: Path | str) -> AsmFile:
    path = Path(path)
    if not path.is_file():
        raise located(FileNotFoundError, f"{path}: no such assembly file")
    data = path.read_bytes()
    if not data.strip():
        raise AsmFileError(f"{path}: empty assembly file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise AsmFileError(f"{path}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); "
                         "expected a clang AMDGPU .s file") from e
    return parse(text, path)


# ---- encoding families ------------------------------------------------------------------------
# Rules from the CDNA3 ISA encodings (SOP2/SOPK/SOP1/SOPC/SOPP/SMEM, VOP1/VOP2/VOPC/VOP3/VOP3P,
# VOP3P-MAI, DS, FLAT/GLOBAL/SCRATCH, MUBUF/MTBUF) and how LLVM prints them: `_e32` is the 32-bit
# VOP1/VOP2/VOPC form, `_e64` the VOP3 form of the same opcode, `_sdwa`/`_dpp` the 32-bit forms
# with an SDWA/DPP word, VOP3-only and VOP3P-only opcodes have no suffix.
FAMILIES = ("SOP1", "SOP2", "SOPC", "SOPK", "SOPP", "SMEM", "VOP1", "VOP2", "VOPC", "VOP3", "VOP3P", "MFMA",
            "SDWA", "DPP", "DS", "GLOBAL", "FLAT", "SCRATCH", "MUBUF", "MTBUF", "MIMG", "EXP")

_SOPP = {"s_nop", "s_endpgm", "s_endpgm_saved", "s_endpgm_ordered_ps_done", "s_branch", "s_wakeup",
         "s_barrier", "s_setkill", "s_waitcnt", "s_sethalt", "s_sleep", "s_setprio", "s_sendmsg",
         "s_sendmsghalt", "s_trap", "s_icache_inv", "s_incperflevel", "s_decperflevel", "s_ttracedata",
         "s_set_gpr_idx_off", "s_set_gpr_idx_mode"}
_SOPK = ("s_movk_i32", "s_cmovk_i32", "s_cmpk_", "s_addk_i32", "s_mulk_i32", "s_cbranch_i_fork",
         "s_getreg_b32", "s_setreg_b32", "s_setreg_imm32_b32", "s_call_b64")
_SOPC = ("s_cmp_", "s_bitcmp0_", "s_bitcmp1_", "s_setvskip", "s_set_gpr_idx_on")
_SMEM = ("s_load_", "s_buffer_load_", "s_store_", "s_buffer_store_", "s_scratch_", "s_dcache_", "s_memtime",
         "s_memrealtime", "s_atc_probe", "s_atomic_", "s_buffer_atomic_")
_SOP1 = ("s_mov_b", "s_cmov_b", "s_not_", "s_wqm_", "s_brev_", "s_bcnt0_", "s_bcnt1_", "s_ff0_", "s_ff1_",
         "s_flbit_", "s_sext_", "s_bitset0_", "s_bitset1_", "s_getpc_", "s_setpc_", "s_swappc_", "s_rfe_",
         "s_quadmask_", "s_movrels_", "s_movreld_", "s_cbranch_join", "s_abs_", "s_set_gpr_idx_idx",
         "s_andn1_wrexec_", "s_andn2_wrexec_", "s_orn1_", "s_bitreplicate_")
_VOP1_BARE = {"v_nop", "v_readfirstlane_b32", "v_swap_b32", "v_clrexcp", "v_accvgpr_mov_b32"}
_VOP2_BARE = ("v_fmamk_", "v_fmaak_", "v_madmk_", "v_madak_")
_VOP3P = ("v_pk_", "v_dot2_", "v_dot4_", "v_dot8_", "v_fma_mix", "v_mad_mix")
_MEM = (("ds_", "DS"), ("global_", "GLOBAL"), ("flat_", "FLAT"), ("scratch_", "SCRATCH"),
        ("buffer_", "MUBUF"), ("tbuffer_", "MTBUF"), ("image_", "MIMG"))


def _top_level_operands(operands: str) -> int:
    return 0 if not operands else len([p for p in operands.split(",") if p.strip()])


def encoding_family(mnemonic: str, operands: str = "") -> str:
    """The instruction's encoding family, e.g. "VOP2" for v_add_f32_e32, "MFMA" for v_mfma_*."""
    mn = mnemonic
    if mn.startswith("s_"):
        if mn in _SOPP or mn.startswith("s_cbranch_") and not mn.startswith(("s_cbranch_i_fork", "s_cbranch_join",
                                                                             "s_cbranch_g_fork")):
            return "SOPP"
        if mn.startswith(_SOPK):
            return "SOPK"
        if mn.startswith(_SOPC):
            return "SOPC"
        if mn.startswith(_SMEM):
            return "SMEM"
        if mn.startswith(_SOP1) or "saveexec" in mn:
            return "SOP1"
        return "SOP2"
    for prefix, fam in _MEM:
        if mn.startswith(prefix):
            return fam
    if mn == "exp" or mn.startswith("exp_"):
        return "EXP"
    if not mn.startswith("v_"):
        raise AsmFileError(f"unknown instruction {mnemonic!r}: no encoding family")
    if mn.startswith(MATRIX_PREFIXES) or mn.startswith(("v_accvgpr_read", "v_accvgpr_write")):
        return "MFMA"
    if mn.endswith("_sdwa"):
        return "SDWA"
    if mn.endswith("_dpp"):
        return "DPP"
    if mn.endswith("_e64"):
        return "VOP3"
    if mn.endswith("_e32"):
        if mn.startswith(("v_cmp_", "v_cmpx_")):
            return "VOPC"
        return "VOP1" if _top_level_operands(operands) <= 2 else "VOP2"
    if mn in _VOP1_BARE:
        return "VOP1"
    if mn.startswith(_VOP2_BARE):
        return "VOP2"
    if mn.startswith(_VOP3P):
        return "VOP3P"
    return "VOP3"
