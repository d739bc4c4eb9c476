"""The operations of the Python front end by hardware unit, each with its verbatim gfx9 mnemonic.

Every event in the trace names an instruction from this table. A vector ALU operation computes
its numbers through the ISA table's entry of that mnemonic (gfxsim/isa, which the asm front end
dispatches into too). A Python operation that no single instruction performs is a *pseudo-op*:
its name starts with ``pseudo.`` and the ISA table's pseudo section states its numbers and the
instructions it stands for (e.g. ``e**x`` is ``v_mul_f32`` by log2(e), then ``v_exp_f32``, which
computes 2**x). An (operation, type) the table does not have raises ``UnknownOperation``.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from .. import isa
from ..isa.fp import APPROXIMATED

from ..errors import GfxSimError

UNITS = ("VALU", "SALU", "VMEM", "SMEM", "DS", "matrix")


@dataclass(frozen=True)
class Op:
    unit: str
    mnemonic: str                    # verbatim ISA name, or "pseudo.<name>"
    expands: tuple = ()              # the instructions a pseudo-op stands for

    @property
    def pseudo(self) -> bool:
        return self.mnemonic.startswith("pseudo.")

    @cached_property
    def entry(self) -> isa.Entry:
        """The ISA table's entry of this operation: its numbers and its provenance rule."""
        return isa.entry(self.mnemonic)

    @cached_property
    def approximated(self) -> tuple:
        """Its instructions whose numbers are stand-ins (isa.fp.APPROXIMATED), looked up once: the
        wave asks at every event."""
        return tuple(m for m in (self.expands or (self.mnemonic,)) if m in APPROXIMATED)


class UnknownOperation(GfxSimError, TypeError):
    """An (operation, type) pair with no instruction or pseudo-op."""


def _v(m):
    return Op("VALU", m)


def _p(name):
    """A pseudo-op: the instructions it stands for are its ISA entry's."""
    return Op("VALU", f"pseudo.{name}", isa.entry(f"pseudo.{name}").expands)


# (operation, type) -> Op. Integer ops wrap (two's complement) as the hardware's do.
VALU = {
    **{("add", t): _v(m) for t, m in (("f32", "v_add_f32"), ("f16", "v_add_f16"), ("i32", "v_add_u32"),
                                      ("u32", "v_add_u32"), ("i16", "v_add_u16"), ("u16", "v_add_u16"))},
    **{("sub", t): _v(m) for t, m in (("f32", "v_sub_f32"), ("f16", "v_sub_f16"), ("i32", "v_sub_u32"),
                                      ("u32", "v_sub_u32"), ("i16", "v_sub_u16"), ("u16", "v_sub_u16"))},
    **{("mul", t): _v(m) for t, m in (("f32", "v_mul_f32"), ("f16", "v_mul_f16"), ("i32", "v_mul_lo_u32"),
                                      ("u32", "v_mul_lo_u32"), ("i16", "v_mul_lo_u16"), ("u16", "v_mul_lo_u16"))},
    **{("max", t): _v(m) for t, m in (("f32", "v_max_f32"), ("f16", "v_max_f16"), ("i32", "v_max_i32"),
                                      ("u32", "v_max_u32"), ("i16", "v_max_i16"), ("u16", "v_max_u16"))},
    **{("min", t): _v(m) for t, m in (("f32", "v_min_f32"), ("f16", "v_min_f16"), ("i32", "v_min_i32"),
                                      ("u32", "v_min_u32"), ("i16", "v_min_i16"), ("u16", "v_min_u16"))},
    **{(op, t): _v(f"v_{op}_b32") for op in ("and", "or", "xor") for t in ("i32", "u32")},
    # gfx9 has no 16-bit bitwise ops (v_and_b16 & co. are gfx11 true16): the b32 op gives the low half
    **{(op, t): _v(f"v_{op}_b32") for op in ("and", "or", "xor") for t in ("i16", "u16")},
    ("shl", "i32"): _v("v_lshlrev_b32"), ("shl", "u32"): _v("v_lshlrev_b32"),
    ("shr", "i32"): _v("v_ashrrev_i32"), ("shr", "u32"): _v("v_lshrrev_b32"),
    ("shl", "i16"): _v("v_lshlrev_b16"), ("shl", "u16"): _v("v_lshlrev_b16"),
    ("shr", "i16"): _v("v_ashrrev_i16"), ("shr", "u16"): _v("v_lshrrev_b16"),
    ("div", "f32"): _p("div_f32"), ("div", "f16"): _p("div_f16"),
    ("idiv", "i32"): _p("div_i32"), ("idiv", "u32"): _p("div_u32"),
    ("mod", "i32"): _p("rem_i32"), ("mod", "u32"): _p("rem_u32"),
    ("exp", "f32"): _p("exp_f32"),                                    # e**x = 2**(x*log2 e)
    ("exp2", "f32"): _v("v_exp_f32"),
    ("sqrt", "f32"): _v("v_sqrt_f32"),
    ("rcp", "f32"): _v("v_rcp_f32"),
    ("rndne", "f32"): _v("v_rndne_f32"),
    ("abs", "f32"): _v("v_and_b32"),                                  # clear the sign bit
    ("abs", "f16"): _v("v_and_b32"),
    ("abs", "i32"): _p("abs_i32"),
    ("fma", "f32"): _v("v_fma_f32"),
    ("cndmask", "any"): _v("v_cndmask_b32"),
    ("mov", "any"): _v("v_mov_b32"),
    ("perm", "any"): _v("v_perm_b32"),
    ("bfe", "i32"): _v("v_bfe_i32"), ("bfe", "u32"): _v("v_bfe_u32"),
}
for _op in ("lt", "le", "gt", "ge", "eq", "ne"):
    for _t in ("f32", "f16", "i32", "u32", "i16", "u16"):
        # a != b is true with a NaN: the float compare is the unordered neq
        VALU[(f"cmp_{_op}", _t)] = _v(f"v_cmp_{'neq' if _op == 'ne' and _t[0] == 'f' else _op}_{_t}")

# conversions (source, destination) -> Op
CVT = {
    ("i32", "f32"): _v("v_cvt_f32_i32"), ("u32", "f32"): _v("v_cvt_f32_u32"),
    ("f32", "i32"): _v("v_cvt_i32_f32"), ("f32", "u32"): _v("v_cvt_u32_f32"),
    ("f32", "f16"): _v("v_cvt_f16_f32"), ("f16", "f32"): _v("v_cvt_f32_f16"),
    ("f32", "bf16"): _p("cvt_bf16_f32"),
    ("bf16", "f32"): _v("v_lshlrev_b32"),                             # bf16 is the top half of an fp32
    ("i8", "i32"): _v("v_bfe_i32"), ("u8", "u32"): _v("v_bfe_u32"), ("u8", "i32"): _v("v_bfe_u32"),
    ("i16", "i32"): _v("v_bfe_i32"), ("u16", "u32"): _v("v_bfe_u32"), ("u16", "i32"): _v("v_bfe_u32"),
    ("i8", "f32"): _v("v_cvt_f32_i32"), ("u8", "f32"): _v("v_cvt_f32_ubyte0"),
    ("i32", "i8"): _p("cvt_i8_i32"), ("i32", "u8"): _p("cvt_u8_i32"),
    ("i32", "i16"): _p("cvt_i16_i32"), ("i32", "u32"): _v("v_mov_b32"),
    ("u32", "i32"): _v("v_mov_b32"), ("i32", "i64"): _v("v_ashrrev_i32"), ("u32", "u64"): _v("v_mov_b32"),
    ("f32", "fp8"): _v("v_cvt_pk_fp8_f32"), ("f32", "bf8"): _v("v_cvt_pk_bf8_f32"),
    ("fp8", "f32"): _v("v_cvt_f32_fp8"), ("bf8", "f32"): _v("v_cvt_f32_bf8"),
    # OCP e4m3 (gfx950's encoding of the same opcodes; NVIDIA cvt.rn.satfinite.e4m3x2.f32)
    ("f32", "fp8_e4m3"): _v("v_cvt_pk_fp8_f32"), ("fp8_e4m3", "f32"): _v("v_cvt_f32_fp8"),
    ("i8", "bf16"): _p("cvt_bf16_i8"), ("i8", "f16"): _p("cvt_f16_i8"), ("i32", "bf16"): _p("cvt_bf16_i32"),
    ("f16", "bf16"): _p("cvt_bf16_f16"), ("bf16", "f16"): _p("cvt_f16_bf16"),
    ("i16", "f32"): _v("v_cvt_f32_i32"), ("i32", "f16"): _p("cvt_f16_i32"),
}

VMEM_LOAD = {1: "global_load_ubyte", 2: "global_load_ushort", 4: "global_load_dword", 8: "global_load_dwordx2",
             12: "global_load_dwordx3", 16: "global_load_dwordx4"}
VMEM_STORE = {1: "global_store_byte", 2: "global_store_short", 4: "global_store_dword",
              8: "global_store_dwordx2", 12: "global_store_dwordx3", 16: "global_store_dwordx4"}
DS_READ = {1: "ds_read_u8", 2: "ds_read_u16", 4: "ds_read_b32", 8: "ds_read_b64", 12: "ds_read_b96",
           16: "ds_read_b128"}
DS_WRITE = {1: "ds_write_b8", 2: "ds_write_b16", 4: "ds_write_b32", 8: "ds_write_b64", 12: "ds_write_b96",
            16: "ds_write_b128"}
SMEM_LOAD = {4: "s_load_dword", 8: "s_load_dwordx2"}
OTHER = {"barrier": Op("SALU", "s_barrier"), "bpermute": Op("DS", "ds_bpermute_b32"),
         "endpgm": Op("SALU", "s_endpgm"), "saveexec": Op("SALU", "s_and_saveexec_b64"),
         "readlane": Op("VALU", "v_readlane_b32")}


def valu(op: str, dtype: str) -> Op:
    got = VALU.get((op, dtype)) or VALU.get((op, "any"))
    if got is None:
        raise UnknownOperation(f"no instruction performs {op} on {dtype} values")
    return got


def cvt(src: str, dst: str) -> Op:
    if src == dst:
        return VALU[("mov", "any")]
    got = CVT.get((src, dst))
    if got is None:
        raise UnknownOperation(f"no instruction converts {src} to {dst}")
    return got


def table(arch=None) -> list:
    """Every operation as (unit, key, mnemonic, expands): the README's and the tests' view.

    The matrix unit's rows are the instruction records of ``arch`` (a name or profile), or of every
    registered arch when None; their key is ``mma.<arch>`` (``w.mma(mnemonic, ...)``)."""
    rows = [(o.unit, f"{k[0]}.{k[1]}", o.mnemonic, o.expands) for k, o in VALU.items()]
    rows += [(o.unit, f"cvt.{s}->{d}", o.mnemonic, o.expands) for (s, d), o in CVT.items()]
    for unit, tab in (("VMEM", VMEM_LOAD), ("VMEM", VMEM_STORE), ("DS", DS_READ), ("DS", DS_WRITE),
                      ("SMEM", SMEM_LOAD)):
        rows += [(unit, f"{n}B", m, ()) for n, m in tab.items()]
    rows += [(o.unit, k, o.mnemonic, o.expands) for k, o in OTHER.items()]
    from ..arch import ARCHS, get_arch
    for prof in (ARCHS.values() if arch is None else (get_arch(arch),)):
        rows += [("matrix", f"mma.{prof.name}", insn.mnemonic, ()) for insn in prof.instructions.values()]
    return rows
