"""Moves and selects: instructions whose result is one of their operands' bits, whole or byte by
byte (their provenance is routed: each byte keeps its source byte's identity)."""
from __future__ import annotations

import numpy as np

from . import ROUTE, define
from .conversion import unfit, wrap

U32 = np.uint32


def _move(a):
    return np.array(a, copy=True)


def cndmask(a, b, mask):
    """D = mask ? S1 : S0."""
    return np.where(mask, b, a)


def byte_permute(a, b, sel):
    """v_perm_b32 D = byte_permute({S0, S1}, S2) on 32-bit words: selector byte i picks the
    result's byte i — 0-3: S1's bytes, 4-7: S0's, 8-11: 0xFF if the sign bit of byte 1, 3, 5, 7 of
    {S0, S1} is set else 0x00, 12: 0x00, >= 13: 0xFF. Returns (D, each result byte's source byte:
    0-7 a byte of {S1, S0}, -1 none) [4, lanes]."""
    a, b, sel = (np.asarray(x, U32) for x in (a, b, sel))
    if a.ndim == 1 and sel.size and (sel.ndim == 0 or (sel == sel.flat[0]).all()):
        return _permute_uniform(a, b, int(sel.flat[0]))
    src = np.concatenate([b[None, :].view(np.uint8).reshape(-1, 4).T, a[None, :].view(np.uint8).reshape(-1, 4).T])
    sb = np.stack([(sel >> U32(8 * i)) & U32(0xFF) for i in range(4)]).astype(np.int64)
    cols = np.arange(src.shape[1])[None, :]
    sign_src = np.clip(2 * (sb - 8) + 1, 0, 7)
    out = np.where(sb < 8, src[np.where(sb < 8, sb, 0), cols], 0).astype(np.uint8)
    sign = np.where((src[sign_src, cols] & 0x80) != 0, 0xFF, 0).astype(np.uint8)
    out = np.where((sb >= 8) & (sb < 12), sign, out)
    out = np.where(sb >= 13, 0xFF, out).astype(np.uint8)
    route = np.where(sb < 8, sb, np.where(sb < 12, sign_src, -1))
    return np.ascontiguousarray(out.T).view(U32).reshape(-1), route


def _permute_uniform(a, b, sel: int):
    """byte_permute with one selector for every lane (an SGPR or a constant: clang's case): the
    selector bytes pick columns of each lane's {S1, S0} bytes (and of 0x00, 0xFF and, for the sign
    selectors 8-11, the sign of their source byte, where a selector asks for them); one gather."""
    n = a.shape[0]
    x = np.empty((n, 8), np.uint8)
    x[:, :4] = np.ascontiguousarray(b).view(np.uint8).reshape(n, 4)
    x[:, 4:] = np.ascontiguousarray(a).view(np.uint8).reshape(n, 4)
    cols, route, extra = [], [], []
    for i in range(4):
        k = (sel >> (8 * i)) & 0xFF
        if k < 8:
            cols.append(k)
            route.append(k)
            continue
        if k < 12:
            src = 2 * (k - 8) + 1
            extra.append(np.where(x[:, src] & 0x80, np.uint8(0xFF), np.uint8(0)))
            route.append(src)
        else:
            extra.append(np.full(n, 0 if k == 12 else 0xFF, np.uint8))
            route.append(-1)
        cols.append(7 + len(extra))
    table = np.concatenate([x, np.stack(extra, axis=1)], axis=1) if extra else x
    out = np.ascontiguousarray(table[:, cols]).view(U32).reshape(-1)
    return out, np.repeat(np.asarray(route, np.int64)[:, None], n, axis=1)


define("v_mov_b32", ("u32",), "u32", _move, ROUTE, asm="own", convert=wrap, checked=unfit)
define("v_cndmask_b32", ("u32", "u32", "mask"), "u32", cndmask, ROUTE, asm="own")
define("v_perm_b32", ("u32", "u32", "u32"), "u32", lambda a, b, s: byte_permute(a, b, s)[0], ROUTE, asm="own")

__all__ = ["byte_permute", "cndmask"]
