"""The figures a kernel engineer reads off the compiler's output (what `gfxsim hip inspect` shows).

Per kernel entry point: instruction counts by encoding family, matrix instructions per loop
iteration, LDS bytes, VGPR/AGPR/SGPR counts, scratch and spills, and an occupancy estimate from
registers and LDS. Everything comes from one clang AMDGPU .s file (parse.py); which file, and how
it was built, is the HIP toolchain's business (gfxsim/hip/inspect.py).
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..tables import render
from .parse import FAMILIES, AsmFileError, Kernel, parse_file

# gfx90a/gfx94x compute unit (CDNA3 ISA guide; LLVM AMDGPU occupancy rules): 4 SIMDs, up to 8 waves
# each; 512 unified VGPRs (ArchVGPRs + AGPRs) per lane allocated in granules of 8; 800 SGPRs per
# SIMD; 64 KiB LDS per CU allocated in granules of 512 bytes (128 dwords).
SIMDS_PER_CU = 4
MAX_WAVES_PER_SIMD = 8
VGPRS_PER_SIMD, VGPR_GRANULE = 512, 8
SGPRS_PER_SIMD = 800
LDS_PER_CU, LDS_GRANULE = 64 * 1024, 512
VECTOR_MEMORY = ("GLOBAL", "FLAT", "MUBUF", "SCRATCH")


def _align(x: int, g: int) -> int:
    return -(-x // g) * g


@dataclass(frozen=True)
class Occupancy:
    waves_per_simd: int
    vgpr_limit: int
    sgpr_limit: int
    lds_limit: int
    workgroups_per_cu: int | None      # by LDS; None when the kernel uses none
    waves_per_workgroup: int
    formula: str


def occupancy(unified_vgprs: int, sgprs: int, lds_bytes: int, workgroup_size: int, wave_size: int = 64) -> Occupancy:
    vgpr = min(MAX_WAVES_PER_SIMD, VGPRS_PER_SIMD // _align(max(unified_vgprs, 1), VGPR_GRANULE))
    sgpr = min(MAX_WAVES_PER_SIMD, SGPRS_PER_SIMD // max(sgprs, 1))
    wpg = -(-workgroup_size // wave_size)
    if lds_bytes:
        wg = LDS_PER_CU // _align(lds_bytes, LDS_GRANULE)
        lds = min(MAX_WAVES_PER_SIMD, -(-wg * wpg // SIMDS_PER_CU))     # the busiest SIMD
        lds_text = (f"LDS {LDS_PER_CU}/align{LDS_GRANULE}({lds_bytes})={wg} workgroups/CU x {wpg} waves"
                    f" / {SIMDS_PER_CU} SIMDs={lds}")
    else:
        wg, lds, lds_text = None, MAX_WAVES_PER_SIMD, "LDS none"
    waves = min(MAX_WAVES_PER_SIMD, vgpr, sgpr, lds)
    formula = (f"min({MAX_WAVES_PER_SIMD}, VGPR {VGPRS_PER_SIMD}/align{VGPR_GRANULE}({unified_vgprs})={vgpr}, "
               f"SGPR {SGPRS_PER_SIMD}/{sgprs}={SGPRS_PER_SIMD // max(sgprs, 1)}, {lds_text})")
    return Occupancy(waves, vgpr, sgpr, lds, wg, wpg, formula)


@dataclass(frozen=True)
class LoopReport:
    header: str
    lines: tuple[int, int]             # first and last line of the loop's instructions in the .s
    depth: int
    innermost: bool
    instructions: int
    matrix: dict[str, int]             # matrix instructions per iteration (static count in the body)
    vector_memory: dict[str, int]      # global/flat/buffer instructions per iteration


@dataclass(frozen=True)
class KernelReport:
    name: str
    instructions: int
    families: dict[str, dict[str, int]]    # family -> mnemonic -> count
    matrix: dict[str, int]                  # matrix instructions in the whole kernel
    loops: tuple[LoopReport, ...]           # the loops that contain matrix instructions
    loop_count: int                         # all loops
    lds_bytes: int
    vgprs: int                              # ArchVGPRs
    agprs: int
    unified_vgprs: int                      # what the VGPR file holds per lane: ArchVGPRs (aligned) + AGPRs
    accum_offset: int | None
    sgprs: int
    scratch_bytes: int
    vgpr_spills: int
    sgpr_spills: int
    workgroup_size: int
    occupancy: Occupancy
    clang_occupancy: int | None             # clang's own "; Occupancy:" figure
    vector_memory: dict[str, int] = field(default_factory=dict)


def _meta_int(k: Kernel, key: str, info_key: str | None = None, default: int = 0) -> int:
    if key in k.metadata:
        return int(k.metadata[key])
    if info_key and info_key in k.info:
        return int(str(k.info[info_key]).split()[0])
    return default


def report_kernel(k: Kernel) -> KernelReport:
    fam: dict[str, Counter] = {}
    for ins in k.instructions:
        fam.setdefault(ins.family, Counter())[ins.mnemonic] += 1
    families = {f: dict(fam[f].most_common()) for f in FAMILIES if f in fam}
    matrix = dict(Counter(i.mnemonic for i in k.instructions if i.is_matrix).most_common())
    vmem = dict(Counter(i.mnemonic for i in k.instructions if i.family in VECTOR_MEMORY).most_common())
    loops = []
    for lp in k.loops:
        body = k.body(lp)
        mx = Counter(i.mnemonic for i in body if i.is_matrix)
        if mx:
            loops.append(LoopReport(lp.header, (body[0].line, body[-1].line), lp.depth, k.innermost(lp), len(body),
                                    dict(mx.most_common()),
                                    dict(Counter(i.mnemonic for i in body if i.family in VECTOR_MEMORY).most_common())))
    d = k.descriptor
    agprs = _meta_int(k, ".agpr_count", "NumAgprs")
    vgprs = int(k.info["NumVgprs"]) if "NumVgprs" in k.info else int(d.get(".amdhsa_accum_offset", 0))
    unified = _meta_int(k, ".vgpr_count", "TotalNumVgprs", vgprs)
    sgprs = _meta_int(k, ".sgpr_count", "NumSgprs")
    lds = int(d.get(".amdhsa_group_segment_fixed_size", _meta_int(k, ".group_segment_fixed_size")))
    wg_size = _meta_int(k, ".max_flat_workgroup_size", default=1024)
    clang_occ = int(k.info["Occupancy"]) if "Occupancy" in k.info else None
    return KernelReport(
        name=k.name, instructions=len(k.instructions), families=families, matrix=matrix, loops=tuple(loops),
        loop_count=len(k.loops), lds_bytes=lds, vgprs=vgprs, agprs=agprs, unified_vgprs=unified,
        accum_offset=d.get(".amdhsa_accum_offset"), sgprs=sgprs,
        scratch_bytes=int(d.get(".amdhsa_private_segment_fixed_size", _meta_int(k, ".private_segment_fixed_size"))),
        vgpr_spills=_meta_int(k, ".vgpr_spill_count"), sgpr_spills=_meta_int(k, ".sgpr_spill_count"),
        workgroup_size=wg_size, occupancy=occupancy(unified, sgprs, lds, wg_size,
                                                    _meta_int(k, ".wavefront_size", default=64)),
        clang_occupancy=clang_occ, vector_memory=vmem)


@dataclass(frozen=True)
class Inspection:
    kernel: str                  # what was asked for: a file stem, an entry point or a .s path
    arch: str
    asm: Path
    processor: str               # from .amdgcn_target
    compiler: str                # clang --version first line (from build.json), "" for a foreign .s
    flags: tuple[str, ...]
    stand_in: bool
    reports: tuple[KernelReport, ...]

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "arch": self.arch, "asm": str(self.asm), "processor": self.processor,
                "compiler": self.compiler, "flags": list(self.flags), "stand_in": self.stand_in,
                "kernels": [asdict(r) for r in self.reports]}


def inspect_file(path, names=None, *, arch: str | None = None, record: dict | None = None,
                 label: str | None = None) -> Inspection:
    """Reports on the entry points ``names`` (default: all) of one .s file; ``record`` is the build
    record (compiler, flags, stand-in) when the file came from a build, ``arch`` the target asked for."""
    f = parse_file(path)
    if not f.kernels:
        raise AsmFileError(f"{path}: no kernel entry point (no .amdhsa_kernel descriptor): not clang AMDGPU "
                         "assembly, or truncated")
    record = record or {}
    return Inspection(label or str(path), arch or f.processor, Path(path), f.processor,
                      record.get("compiler", {}).get("version", ""), tuple(record.get("flags", ())),
                      bool(record.get("stand_in", False)), tuple(report_kernel(f.kernel(n)) for n in names or f.kernels))


# ---- text ------------------------------------------------------------------------------------

def _counts(d: dict[str, int], limit: int | None = None) -> str:
    items = list(d.items())
    text = ", ".join(f"{n} {m}" for m, n in items[:limit])
    return text + (f", +{len(items) - limit} more" if limit and len(items) > limit else "")


def shown_path(path: Path) -> str:
    """Relative to the working directory when below it."""
    path = Path(path).resolve()
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


def format_text(res: Inspection) -> str:
    head = [f"{res.kernel} for {res.arch}: {shown_path(res.asm)}"]
    if res.stand_in:
        head.append(f"  gfx936 stand-in: {res.processor} code with gfx936's D-layout index formulas "
                    "(jump layout); its v_mfma_* stand for v_mmac_*")
    if res.compiler:
        head.append(f"  {res.compiler}; flags: {' '.join(res.flags)}")
    out = ["\n".join(head)]
    for r in res.reports:
        total_mx = sum(r.matrix.values())
        lines = [r.name,
                 f"  instructions   {r.instructions} ({r.loop_count} loops); matrix: "
                 f"{_counts(r.matrix) or 'none'}"]
        if r.loops:
            for lp in r.loops:
                kind = "innermost loop" if lp.innermost else f"loop (depth {lp.depth})"
                lines.append(f"  per iteration  {kind} {lp.header}, lines {lp.lines[0]}-{lp.lines[1]}, "
                             f"{lp.instructions} instructions: {_counts(lp.matrix)}"
                             + (f"; {_counts(lp.vector_memory)}" if lp.vector_memory else ""))
        elif total_mx:
            lines.append(f"  per iteration  no loop holds matrix instructions ({total_mx} in straight-line code)")
        lines += [
            f"  LDS            {r.lds_bytes} bytes (.amdhsa_group_segment_fixed_size)",
            f"  registers      VGPR {r.vgprs}, AGPR {r.agprs}: {r.unified_vgprs} unified"
            + (f" (accum_offset {r.accum_offset})" if r.accum_offset is not None else "") + f"; SGPR {r.sgprs}",
            f"  scratch        {r.scratch_bytes} bytes (.amdhsa_private_segment_fixed_size); "
            f"spills: VGPR {r.vgpr_spills}, SGPR {r.sgpr_spills}",
            f"  occupancy      {r.occupancy.waves_per_simd} waves/SIMD = {r.occupancy.formula}"
            + (f"; clang: {r.clang_occupancy}" if r.clang_occupancy is not None else ""),
            f"  vector memory  {_counts(r.vector_memory) or 'none'}",
        ]
        rows = [[f, sum(m.values()), _counts(m, 4)] for f, m in r.families.items()]
        table = render(["family", "count", "mnemonics"], rows, "text")
        lines.append("  " + table.replace("\n", "\n  "))
        out.append("\n".join(lines))
    return "\n\n".join(out)


def format_json(res: Inspection) -> str:
    return json.dumps(res.to_json(), indent=2, default=str)


# ---- check: what would stop a run, found before anything runs ----------------------------------

@dataclass(frozen=True)
class Problem:
    kernel: str
    kind: str                  # "instruction" | "matrix record" | "abi"
    line: int | None           # the .s line (None: the kernel as a whole)
    text: str

    def __str__(self):
        return f"{self.kernel}: {self.kind}" + (f" line {self.line}" if self.line else "") + f": {self.text}"


def check_kernel(k: Kernel, arch: str | None = None) -> list[Problem]:
    """Everything the asm front end would refuse in ``k`` on ``arch`` (default: the kernel's own
    processor): every instruction without semantics (or with operands it cannot read), every
    matrix instruction without a record on the arch, and every ABI feature the launch does not set
    up; empty when the kernel can run."""
    from ..arch import get_arch
    from ..errors import GfxSimError
    from . import launch
    from .run import MATRIX, check_target, decode, semantics_of
    out: list[Problem] = []
    try:
        check_target(k)
    except GfxSimError as e:
        return [Problem(k.name, "abi", None, e.message)]
    proc = arch or k.target.rpartition("--")[2].split(":")[0] or "gfx942"
    records = set(get_arch(proc).instructions)
    try:                                  # the kernel's decoded Program, when it builds (kept with the kernel)
        decoded = k.program.decoded
    except GfxSimError:
        decoded = None
    for n, ins in enumerate(k.instructions):
        if decoded is not None:
            d = decoded[n]
        else:
            try:
                d = decode(ins, k.name)
            except GfxSimError as e:
                out.append(Problem(k.name, "instruction", ins.line, f"{ins.mnemonic}: {e.message}"))
                continue
        if d.mnemonic.startswith(MATRIX):
            alt = d.mnemonic.replace("v_mfma_", "v_mmac_", 1)
            if d.mnemonic not in records and alt not in records:
                out.append(Problem(k.name, "matrix record", ins.line, f"{ins.mnemonic} has no record on {proc}"))
        elif semantics_of(d) is None:
            what = "DPP" if d.enc == "dpp" else "no semantics"
            out.append(Problem(k.name, "instruction", ins.line, f"{ins.mnemonic} ({what})"))
    out += _abi_problems(k, launch)
    return out


# Descriptor fields that enable an optional feature (LLVM AMDGPUUsage, "Kernel Descriptor"): field ->
# (its neutral value, the user SGPRs it takes). Whether the launch sets a feature up is the launch's
# own answer (KernelABI.of), asked of each feature alone.
OPTIONAL_FIELDS = {".amdhsa_user_sgpr_private_segment_buffer": (0, 4), ".amdhsa_user_sgpr_dispatch_ptr": (0, 2),
                   ".amdhsa_user_sgpr_queue_ptr": (0, 2), ".amdhsa_user_sgpr_dispatch_id": (0, 2),
                   ".amdhsa_user_sgpr_flat_scratch_init": (0, 2), ".amdhsa_user_sgpr_private_segment_size": (0, 1),
                   ".amdhsa_enable_private_segment": (0, 0),
                   ".amdhsa_system_sgpr_private_segment_wavefront_offset": (0, 0),
                   ".amdhsa_system_sgpr_workgroup_info": (0, 0), ".amdhsa_uses_dynamic_stack": (0, 0),
                   ".amdhsa_float_round_mode_32": (0, 0), ".amdhsa_float_denorm_mode_32": (3, 0),
                   ".amdhsa_ieee_mode": (1, 0)}


def _abi_problems(k: Kernel, launch) -> list[Problem]:
    """What the launch (KernelABI.of) refuses, one feature at a time: each enabled optional
    descriptor field on the kernel with the others neutral, then each argument alone."""
    import dataclasses

    def refusal(descriptor=None, args=None) -> str | None:
        meta = dict(k.metadata) if args is None else {**k.metadata, ".args": args}
        try:
            launch.KernelABI.of(dataclasses.replace(k, descriptor=descriptor or k.descriptor, metadata=meta))
        except launch.LaunchError as e:
            return e.message.removeprefix(f"{k.name}: ")
        return None

    whole = refusal()
    if whole is None:
        return []
    d = dict(k.descriptor)
    enabled = [f for f, (neutral, _) in OPTIONAL_FIELDS.items() if f in d and d[f] != neutral]
    base = {**d, **{f: OPTIONAL_FIELDS[f][0] for f in enabled}}
    if ".amdhsa_user_sgpr_count" in d:
        base[".amdhsa_user_sgpr_count"] = d[".amdhsa_user_sgpr_count"] - sum(OPTIONAL_FIELDS[f][1] for f in enabled)
    found = []
    for f in enabled:
        one = {**base, f: d[f]}
        if ".amdhsa_user_sgpr_count" in d:
            one[".amdhsa_user_sgpr_count"] = base[".amdhsa_user_sgpr_count"] + OPTIONAL_FIELDS[f][1]
        found.append(refusal(one))
    if refusal(base) is not None:                # the descriptor aside: the arguments, one at a time
        args = list(k.metadata.get(".args", []))
        found += [refusal(base, [a]) for a in args]
        if refusal(base, []) is not None:
            found.append(refusal(base, []))
    found = list(dict.fromkeys(t for t in found if t))
    return [Problem(k.name, "abi", None, t) for t in found or [whole]]
