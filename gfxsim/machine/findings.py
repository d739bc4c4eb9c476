"""Findings: what the debugger reports — one registry entry per kind.

Each kind names a frozen details record (the fields its findings carry, checked when a finding is
made) and its dedupe key: the coordinates and details that make two reports one finding (the
finding then counts them, ``details["count"]``). An empty key means every report stands alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from ..errors import ArgumentError

# A kind's details record: frozen and keyword-only, the fields its findings carry (checked when one is
# made). No __eq__, __hash__ or __repr__: FindingLog.report reads a record's fields into the finding's
# dict at once and nothing compares or shows a record, while every method a dataclass makes is source
# compiled when this module is imported (all 18 records' were 20-35 ms of every command's start-up).
details_record = dataclass(frozen=True, kw_only=True, eq=False, repr=False)


@details_record
class ABKSlotMismatch:
    field: str
    k_slot: int
    a_values: list
    b_values: list
    slots: list


@details_record
class KSlotUnknownOrigin:
    operand: str                # "A" or "B"
    slots: list                 # the K slots holding bytes of unknown origin


@details_record
class ScaleGroupMismatch:
    field: str
    scale_over: list            # the scale's set (first distinct mismatch)
    k_set: list                 # what the instruction consumed
    foreign: list               # consumed, but scaled by a group without them
    extra: list                 # in the scale's group, not consumed (harmless)
    lanes: list
    mma_event: int              # the instruction's index
    mismatches: list = ()       # every distinct (scale_over, k_set, foreign, lanes) of the instruction
    axis: str = "K"             # where the scale met the result: "K" (the summed axis), "M/N" (its own
                                # row/column), "M/N group" (a group scale that must hold the element)


@details_record
class DequantDirection:
    operand: str                # "A" or "B": the operand quantized with the scale
    quantized: str              # how: "x*amax" or "x/amax" (amax: the extremum the scale came from)
    rescaled: str               # what the result was multiplied by: "amax" or "1/amax" (the same way)
    scale: float                # the rescale's value in the first lane reported
    lanes: list
    mma_event: int              # the instruction's index


@details_record
class TokenCoverage:
    tile: str                   # the w.coverage scope's key ("" for an output buffer's declaration)
    never: list
    multiple: dict              # value -> how often (for an output: of its first element)
    buffer: str = ""            # an output buffer's declaration (Buffer.expect): the buffer,
    field: str = "token"
    where: str = ""             # the elements, as index ranges and the buffer's tags
    elements: list = ()         # their indices (the first 16)
    element_count: int = 0
    unexpected: list = ()       # consumed, but outside the declaration
    launches: list = ()         # the launches the stored values were made by (a chain: decode, reduce)


@details_record
class DoubleCount:
    field: str
    values: list                # what both partial sums consumed (the first element that overlaps)
    left: str                   # where each operand came from
    right: str
    left_instruction: int
    right_instruction: int
    elements: int               # elements of this add whose operands overlap


@details_record
class IdentityMismatch:
    field: str                  # the field the operands disagree on (head, seq, row, ...)
    values: list                # [the first operand's value, the second's] in the first lane reported
    lanes: list                 # the wave's lanes (under EXEC) whose operands disagree
    operation: str              # the instruction or operation that combined them
    operands: list = ()         # their registers, where the front end names them


@details_record
class AccumulatorCarried:
    field: str                  # the identity C and D disagree on (a query row, a token, a V dim)
    element: list               # [m, n] of D (the first element that disagrees)
    c_value: int                # what C's element holds
    d_value: int                # what A's row and B's column make D's element
    c_from: str                 # where C's value was made (its instruction, label and element)
    c_instruction: int          # that instruction's index (-1: not a matrix result)
    elements: int               # elements of this instruction whose C is another element's


@details_record
class LdsRace:
    other_wave: int
    where: str                  # region+offset


@details_record
class UninitializedRead:
    what: str                   # register | lds | global | operand A/B/C
    name: str


@details_record
class StoreMismatch:
    buffer: str
    field: str
    element: list               # the destination element's index in the buffer's shape
    expected: int               # the destination's tag
    holds: int                  # what the stored value's identity says
    register: str
    elements: int               # bytes of this store that disagree
    value: dict = field(default_factory=dict)   # every identity the stored byte holds (field -> value)
    tags: dict = field(default_factory=dict)    # every tag of the destination element


@details_record
class Int32Overflow:
    elements: int


@details_record
class LdsBankConflict:
    degree: int
    cycles: int
    passes: int
    region: str


@details_record
class BufferOutOfRange:
    buffer: str                 # the buffer the descriptor's base points into
    reason: str                 # "num_records": past the descriptor's range (the hardware reads 0);
                                # "buffer": in range, past the buffer (the hardware reads another allocation)
    access: str                 # load | store | atomic
    lanes: list
    offset: int                 # the first out-of-range byte offset (the descriptor's, soffset excluded)
    num_records: int
    nbytes: int                 # bytes per lane of the access


@details_record
class MissingWait:
    register: str               # the register read (or overwritten) before its data returned; "LDS" at a barrier
    access: str                 # "read" | "overwrite" | "barrier" (an LDS write outstanding at s_barrier)
    load: int                   # the instruction index of the access that writes it
    load_line: str              # its assembly line
    counter: str                # "vmcnt" | "lgkmcnt"
    needed: str                 # the s_waitcnt that, before the read, would have covered it
    lanes: list


@details_record
class FormatMismatch:
    operand: str                # "A", "B" (a matrix instruction's) or "its source" (a conversion's)
    written: str                # the encoding the bytes were written in (dtypes.ENCODINGS)
    reads: str                  # the encoding the instruction reads them in
    written_by: str             # "buffer 'q'" or the conversion instruction that wrote them
    element: int                # the first such element's flat index in that buffer (-1: an instruction's,
                                # or a buffer whose dtype named the encoding)
    elements: int               # elements (lanes, for a conversion) of this instruction read in the wrong encoding


@dataclass(frozen=True)
class Kind:
    name: str
    summary: str
    details: type
    dedupe: tuple               # names of coordinates/details; () = never deduplicated
    performance: bool = False


REGISTRY = {k.name: k for k in (
    Kind("ab-kslot-mismatch", "A and B feed different tags into the same K slot", ABKSlotMismatch,
         ("instruction", "workgroup", "field")),
    Kind("kslot-unknown-origin", "a matrix instruction's K slots hold bytes derived from tagged data by a route "
         "gfxsim does not follow, so their tokens cannot be checked", KSlotUnknownOrigin,
         ("instruction", "workgroup", "operand")),
    Kind("scale-group-mismatch", "a quantization scale does not cover every element an instruction consumed",
         ScaleGroupMismatch, ("mma_event", "wave", "field")),
    Kind("dequant-direction", "a matrix result is rescaled by the scale its operand was quantized with in the "
         "same direction, not the inverse: the scale is applied twice instead of undone", DequantDirection,
         ("mma_event", "wave", "operand")),
    Kind("token-coverage", "a token was consumed zero or several times for one output tile or output element",
         TokenCoverage, ()),
    Kind("double-count", "an add of two partial sums of one element that consumed the same tokens", DoubleCount,
         ("source", "field", "workgroup")),
    Kind("identity-mismatch", "an elementwise add, sub, product or fma combines values of different heads, "
         "sequences or rows: a field the operation does not reduce over", IdentityMismatch,
         ("source", "operation", "field", "workgroup")),
    Kind("accumulator-carried", "a matrix instruction's C holds the partial sum of another output element than its "
         "D (an accumulator not zeroed between output tiles)", AccumulatorCarried,
         ("source", "field", "workgroup")),
    Kind("lds-race", "two waves touched one LDS byte in the same barrier epoch, at least one writing", LdsRace,
         ("source", "other_wave", "workgroup")),
    Kind("uninitialized-read", "a never-written register, LDS or global byte was read", UninitializedRead,
         ("source", "what", "name", "workgroup")),
    Kind("int32-overflow", "an int32 accumulator overflowed", Int32Overflow, ("instruction", "workgroup")),
    Kind("store-mismatch", "a stored value's identity disagrees with the tags of the element it lands in",
         StoreMismatch, ("source", "buffer", "field", "workgroup")),
    Kind("buffer-out-of-range", "a buffer access outside its descriptor's num_records or its buffer (not a masked lane)",
         BufferOutOfRange, ("source", "buffer", "reason", "workgroup")),
    Kind("missing-wait", "a register is read or overwritten before the s_waitcnt that covers the memory access "
         "writing it: on hardware it holds stale data", MissingWait, ("source", "load_line", "register", "workgroup")),
    Kind("format-mismatch", "an instruction reads bytes in another numeric encoding than they were written in "
         "(e4m3fn bytes read as gfx942's e4m3fnuz: off by 2x, or NaN)", FormatMismatch,
         ("source", "operand", "written", "reads", "workgroup")),
    Kind("lds-bank-conflict", "an LDS access serialised on a bank (performance)", LdsBankConflict,
         ("source", "degree", "workgroup"), performance=True),
)}
KINDS = {k: v.summary for k, v in REGISTRY.items()}


@dataclass
class Finding:
    kind: str
    message: str
    kernel: str | None = None
    workgroup: tuple | None = None
    wave: int | None = None
    lane: int | None = None
    instruction: int | None = None      # index of the instruction in the launch
    source: str | None = None           # file:line of the kernel statement
    address: int | None = None
    details: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in REGISTRY:
            raise ArgumentError(f"unknown finding kind {self.kind!r}; known: {', '.join(REGISTRY)}")

    @property
    def is_performance(self) -> bool:
        return REGISTRY[self.kind].performance

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["details"] = dict(self.details)
        d["workgroup"] = list(self.workgroup) if self.workgroup is not None else None
        return d

    def __str__(self):
        where = [f"{k} {v}" for k, v in (("workgroup", self.workgroup), ("wave", self.wave), ("lane", self.lane),
                                         ("instruction", self.instruction), ("address", self.address))
                 if v is not None]
        loc = f" at {self.source}" if self.source else ""
        return f"[{self.kind}] {self.message}" + (f" ({', '.join(where)})" if where else "") + loc


class FindingLog:
    """The findings of a launch, deduplicated by each kind's key."""

    def __init__(self, kernel: str):
        self.kernel = kernel
        self.findings: list[Finding] = []
        self._seen: dict = {}

    def report(self, kind: str, message: str, details: dict, **coords) -> Finding:
        k = REGISTRY.get(kind)
        if k is None:
            raise ArgumentError(f"unknown finding kind {kind!r}; known: {', '.join(REGISTRY)}")
        rec = k.details(**details)            # the kind's fields, no more, no fewer
        d = {f.name: getattr(rec, f.name) for f in fields(rec)}     # the reporter's values (made for it)
        key = None
        if k.dedupe:
            both = {**coords, **d}
            key = (kind,) + tuple(_hashable(both.get(n)) for n in k.dedupe)
            got = self._seen.get(key)
            if got is not None:
                got.details["count"] += 1
                if "lanes" in d:
                    got.details["lanes"] = sorted(set(got.details["lanes"]) | set(d["lanes"]))
                return got
            d["count"] = 1
        f = Finding(kind, message, kernel=self.kernel, details=d, **coords)
        if key is not None:
            self._seen[key] = f
        self.findings.append(f)
        return f


def _hashable(x):
    if isinstance(x, list):
        return tuple(x)
    if isinstance(x, dict):
        return tuple(sorted(x.items()))
    return x
