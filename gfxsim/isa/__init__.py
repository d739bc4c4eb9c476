"""The ISA semantics table both front ends share: one entry per vector ALU instruction, keyed by its
verbatim gfx9 mnemonic, stating its numbers and its provenance rule once.

An entry's numbers are a numpy function of typed arrays of any shape: the asm front end passes
one register's words per lane ([lanes], read as ``srcs`` says), the Python front end its values
([elements, lanes], of the value's own element type; an operation that only moves or wraps bits,
such as ``v_add_u32``, is the same function on signed and unsigned arrays). Where the two front
ends deliberately differ, the difference is a named option of the entry (``Entry.option``), never
a second implementation. An operation of the Python front end that no single instruction
performs is a *pseudo-op* (``pseudo.<name>``): its numbers are an entry of ``pseudo``, its
instructions listed in ``expands``.

The provenance rule says what a result is named by (``Rule``); the front ends apply it with their
own machinery (the wave's merge and matrix-result naming, byte routing).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from ..errors import ArgumentError, NotFoundError


@dataclass(frozen=True)
class Rule:
    """What a result's provenance is, from its operands' (machine/provenance.py's ``merge``)."""
    name: str
    reducing: bool = False          # a reduction (max, min, add): the operands' footprints unite
    summing: str | None = None      # "add"/"sub": a sum of two matrix results is named by a pair record
    product: bool = False           # a product of two named values (consumed.product_names)
    extremum: bool = False          # max/min: a result's name survives only where both are that element
    fused: bool = False             # a*b then + c as an accumulation (a product, then a sum)
    routes: bool = False            # bytes move: each result byte has its source byte's identity
    byte_extract: bool = False      # a uniform whole-byte field moves to the bottom (bfe)
    none: bool = False              # the result (a lane mask) carries no provenance
    quantizes: bool = False         # a float rounded into an integer: a new operand, no matrix result's name


KEEP = Rule("keep")                 # fields the operands agree on survive (one operand: its element's)
SUM = Rule("sum", reducing=True, summing="add")
DIFFERENCE = Rule("difference", summing="sub")
REDUCE = Rule("reduce", reducing=True)
EXTREMUM = Rule("extremum", reducing=True, extremum=True)
PRODUCT = Rule("product", product=True)
FUSED = Rule("fused", fused=True)
ROUTE = Rule("route", routes=True)
BYTE_EXTRACT = Rule("byte_extract", byte_extract=True)
NONE = Rule("none", none=True)
QUANTIZE = Rule("quantize", quantizes=True)
RULES = (KEEP, SUM, DIFFERENCE, REDUCE, EXTREMUM, PRODUCT, FUSED, ROUTE, BYTE_EXTRACT, NONE, QUANTIZE)

# How the asm front end runs an entry: "valu" through its generic VALU row (read the sources,
# apply ``fn``, write one register), "cmp" as a VOPC compare writing a lane mask, "own" through a
# function of its own that still takes its numbers from the entry (the 16-bit rows, which read and
# write halves; the binary64 rows, on register pairs; the division helpers); None: the Python
# front end only (pseudo-ops).
ASM_FORMS = ("valu", "cmp", "own", None)


@dataclass(frozen=True)
class Entry:
    mnemonic: str                   # verbatim ISA name, or "pseudo.<name>"
    srcs: tuple                     # each source's element type, in the instruction's operand order
    result: str                     # the result's element type ("mask": a lane mask)
    fn: Callable[..., np.ndarray]
    rule: Rule
    asm: str | None = "valu"
    options: tuple = ()             # (name, function): a front end's deliberate difference
    expands: tuple = ()             # a pseudo-op's instructions
    reversed: bool = False          # a *rev instruction: operands the other way round (v_lshlrev_b32 D = S1 << S0)

    @property
    def pseudo(self) -> bool:
        return self.mnemonic.startswith("pseudo.")

    def convert(self, x: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """This conversion applied to typed values, as values of ``dtype`` (the Python front end's
        elements): the entry's ``convert`` option where the element type decides the numbers (an
        integer move wraps into the destination type; fp8 has two encodings), else ``fn``."""
        for n, fn in self.options:
            if n == "convert":
                return fn(x, dtype)
        return self.fn(x).astype(dtype, copy=False)

    def option(self, name: str) -> Callable[..., np.ndarray]:
        for n, fn in self.options:
            if n == name:
                return fn
        raise NotFoundError(f"{self.mnemonic} has no option {name!r}; it has {[n for n, _ in self.options] or 'none'}")


TABLE: dict[str, Entry] = {}


class UnknownInstruction(KeyError):
    """A mnemonic with no entry in the table."""


def define(mnemonic: str, srcs, result: str, fn: Callable[..., np.ndarray], rule: Rule = KEEP, *,
           asm: str | None = "valu", expands=(), **options: Callable[..., np.ndarray]) -> Entry:
    """Add one entry (a mnemonic defined twice is an error)."""
    if mnemonic in TABLE:
        raise ArgumentError(f"ISA entry {mnemonic} defined twice")
    if asm not in ASM_FORMS:
        raise ArgumentError(f"{mnemonic}: asm form {asm!r} is not one of {ASM_FORMS}")
    rev = not mnemonic.startswith("pseudo.") and mnemonic.split("_")[1].endswith("rev")
    e = Entry(mnemonic, tuple(srcs), result, fn, rule, asm, tuple(options.items()), tuple(expands), rev)
    TABLE[mnemonic] = e
    return e


def entry(mnemonic: str) -> Entry:
    """The entry of ``mnemonic`` (verbatim, or ``pseudo.<name>``)."""
    try:
        return TABLE[mnemonic]
    except KeyError:
        raise UnknownInstruction(f"no ISA entry for {mnemonic}") from None


def asm_entries(form: str) -> list[Entry]:
    """The entries the asm front end registers in ``form`` ("valu", "cmp" or "own")."""
    return [e for e in TABLE.values() if e.asm == form]


from . import compare, conversion, double, floating, half, integer, moves, pseudo  # noqa: E402,F401  (they define their entries)

__all__ = ["ASM_FORMS", "BYTE_EXTRACT", "DIFFERENCE", "EXTREMUM", "FUSED", "KEEP", "NONE", "PRODUCT", "QUANTIZE", "REDUCE",
           "ROUTE", "RULES", "SUM", "TABLE", "Entry", "Rule", "UnknownInstruction", "asm_entries", "define", "entry"]
