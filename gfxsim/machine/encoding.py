"""Numeric-format provenance: the encoding (``gfxsim.arch.dtypes.ENCODINGS``) each byte was written
in, and the ``format-mismatch`` check of an instruction that reads it in another.

Two reserved identity planes of ``Prov`` (provenance.py) carry it, so it travels exactly as a
token does — loads, moves, LDS, byte routing (a packing ``v_perm_b32`` or ``v_or_b32`` keeps each
byte's), stores, later launches:

* ``@enc``: the encoding's index in ENCODINGS plus 16 x the id of what wrote the byte (a buffer
  declared in that encoding, or the conversion instruction; ``source_name``);
* ``@encat``: the element's flat index in a buffer that declared its encoding (absent or -1:
  written by an instruction, or from a buffer whose dtype named it — int8 and float16 caches are
  loaded a dword at a time, and four indices per dword would keep their provenance per byte).

Arithmetic writes a number of its own type, so its result carries neither (``numeric``);
fp8/bf8 conversions set what they write (``with_encoding``). Only a buffer with an encoding
(declared, or named by its dtype: int8, float16) or such a conversion starts the planes: a launch
with neither pays nothing, and bytes with no encoding are never checked.
"""
from __future__ import annotations

import numpy as np

from ..arch.dtypes import ENCODINGS
from ..errors import ArgumentError
from .provenance import Prov

ENC = "@enc"
AT = "@encat"
PLANES = (ENC, AT)
_CODE = {n: i for i, n in enumerate(ENCODINGS)}
_SOURCES: list[str] = [""]          # id -> what wrote the bytes (append-only: ids outlive launches)
_SOURCE_IDS: dict[str, int] = {"": 0}
# dtypes whose name says how their bytes encode a number (numpy's, and ml_dtypes' that the doors
# hand over as their bits); uint8 holds fp8 as often as u8, so it names none
_OF_DTYPE = {"int8": "i8", "float16": "f16", "bfloat16": "bf16", "int4": "i4", "float8_e4m3fn": "e4m3fn",
             "float8_e4m3fnuz": "e4m3fnuz", "float8_e5m2": "e5m2", "float8_e5m2fnuz": "e5m2fnuz"}


def check_name(encoding: str, what: str) -> str:
    if encoding not in _CODE:
        raise ArgumentError(f"{what}: unknown encoding {encoding!r}; known: {', '.join(ENCODINGS)}")
    return encoding


def of_dtype(dtype) -> str | None:
    """The encoding a dtype names (int8, float16, ml_dtypes' bfloat16 and float8 types), else None."""
    return _OF_DTYPE.get(np.dtype(dtype).name)


def source_id(text: str) -> int:
    got = _SOURCE_IDS.get(text)
    if got is None:
        got = _SOURCE_IDS[text] = len(_SOURCES)
        _SOURCES.append(text)
    return got


def code(encoding: str, source: str) -> np.int32:
    """The ``@enc`` value of bytes in ``encoding`` written by ``source``."""
    return np.int32(_CODE[encoding] | (source_id(source) << 4))


def encoding_name(value: int) -> str:
    return ENCODINGS[int(value) & 15]


def source_name(value: int) -> str:
    return _SOURCES[int(value) >> 4]


def buffer_planes(name: str, encoding: str, elem: np.ndarray, declared: bool) -> dict:
    """The planes of bytes loaded from buffer ``name`` (in ``encoding``) at flat elements ``elem``
    (their indices only where the buffer ``declared`` it)."""
    out = {ENC: np.full(elem.shape, code(encoding, f"buffer {name!r}"), np.int32)}
    if declared:
        out[AT] = np.asarray(elem, np.int32)
    return out


def numeric(p: Prov | None) -> Prov | None:
    """``p`` without the encoding planes: a result of arithmetic, a number of the instruction's type."""
    if p is None or ENC not in p.ids:
        return p
    out = Prov(p.g, {f: a for f, a in p.ids.items() if f not in PLANES}, p.fp, p.flags)
    return None if out.empty_like() else out          # nothing else: no provenance at all


def only(p: Prov | None) -> bool:
    """Whether ``p`` holds nothing but the encoding planes (bytes a conversion wrote from numbers)."""
    return p is not None and ENC in p.ids and not p.fp and p.flags is None and all(f in PLANES for f in p.ids)


def with_encoding(p: Prov | None, g: int, shape, encoding: str | None, source: str) -> Prov | None:
    """``p`` (rows of ``g`` bytes, ``shape``) as written by conversion ``source`` in ``encoding``
    (None: a type whose encoding is not tracked, the planes dropped)."""
    p = numeric(p)
    if encoding is None:
        return p
    ids = {} if p is None else dict(p.ids)
    ids[ENC] = np.full(shape, code(encoding, source), np.int32)
    return Prov(g, ids, {} if p is None else p.fp, None if p is None else p.flags)


def mismatch(enc: np.ndarray, reads: str) -> np.ndarray:
    """Where bytes with an encoding hold another than ``reads``."""
    return (enc >= 0) & ((enc & 15) != _CODE[reads])


def describe(enc: int, at: int) -> str:
    """What wrote a byte: "buffer 'q' element 17" or the conversion instruction."""
    where = source_name(enc) or "an instruction"
    return where + (f" element {int(at)}" if at >= 0 else "")


def report(w, what: str, operand: str, reads: str, enc: int, at: int, lane: int, count: int,
           instruction: int | None = None) -> None:
    """One ``format-mismatch`` finding: ``what`` (an instruction, with its label) reads ``operand``
    in ``reads``, and ``count`` of its elements were written in another; ``enc``/``at``/``lane``:
    the first of them."""
    written = encoding_name(enc)
    by = describe(enc, at)
    noun = f"operand {operand}" if operand in ("A", "B") else "its source"
    w.finding("format-mismatch", f"{what}: {noun} is read as {reads}, but lane {lane}'s byte was written "
              f"in {written} by {by} ({count} element{'s' if count != 1 else ''} in another encoding)",
              lane=lane, instruction=instruction, operand=operand, written=written, reads=reads,
              written_by=source_name(enc), element=int(at), elements=int(count))


def check_values(w, what: str, operand: str, reads: str | None, p: Prov | None, cols=None,
                 instruction: int | None = None) -> None:
    """The check of an instruction that reads every row of ``p`` (a conversion's source, per
    element) in ``reads``: ``cols``, bool per provenance column, the lanes that read."""
    if reads is None or p is None or ENC not in p.ids:
        return
    enc = p.ids[ENC]
    bad = mismatch(enc, reads)
    if cols is not None:
        bad &= np.asarray(cols, bool)[None, :]
    if not bad.any():
        return
    r, c = (int(x) for x in np.argwhere(bad)[0])
    at = p.ids.get(AT)
    report(w, what, operand, reads, int(enc[r, c]), -1 if at is None else int(at[r, c]), c,
           int(bad.any(axis=0).sum()) if bad.shape[0] else 0, instruction)


__all__ = ["ENC", "AT", "PLANES", "check_name", "of_dtype", "code", "encoding_name", "source_name", "buffer_planes",
           "numeric", "only", "with_encoding", "mismatch", "describe", "report", "check_values"]
