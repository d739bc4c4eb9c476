"""Findings: what the debugger reports, each with the coordinates where it applies."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional

KINDS = {
    "ab-kslot-mismatch": "A and B feed different tags into the same K slot",
    "scale-group-mismatch": "a quantization scale was computed over other elements than the instruction's K set",
    "token-coverage": "a token was consumed zero or several times for one output tile",
    "lds-race": "two waves touched one LDS byte in the same barrier epoch, at least one writing",
    "uninitialized-read": "a never-written register, LDS or global byte was read",
    "int32-overflow": "an int32 accumulator overflowed",
    "lds-bank-conflict": "an LDS access serialised on a bank (performance)",
}


@dataclass
class Finding:
    kind: str
    message: str
    kernel: Optional[str] = None
    workgroup: Optional[tuple] = None
    wave: Optional[int] = None
    lane: Optional[int] = None
    instruction: Optional[int] = None      # index of the event in the trace
    source: Optional[str] = None           # file:line of the kernel statement
    address: Optional[int] = None
    details: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown finding kind {self.kind!r}")

    @property
    def is_performance(self) -> bool:
        return self.kind == "lds-bank-conflict"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["workgroup"] = list(self.workgroup) if self.workgroup is not None else None
        return d

    def __str__(self):
        where = [f"{k} {v}" for k, v in (("workgroup", self.workgroup), ("wave", self.wave), ("lane", self.lane),
                                         ("instruction", self.instruction), ("address", self.address))
                 if v is not None]
        loc = f" at {self.source}" if self.source else ""
        return f"[{self.kind}] {self.message} ({', '.join(where)}){loc}"
