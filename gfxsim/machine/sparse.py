"""Sparse matrix instructions (v_smfmac_*): A 4:2 structured along K, each lane holding two of
every four K values of its groups and a compression index telling where they go.

``w.smfmac`` puts each stored value at its K position (bits 2*s+1:2*s of the lane's index set give
the position, within its group, of the lane's compressed value s; the other two positions of the
group are zero), its bytes' provenance with it, and runs the record's dense form (dense_form) on
the matrix unit: D = A.B + C exactly as a dense instruction of the same shape. Two stored values
of one group naming the same position, both nonzero, are an error: the ISA guide does not say
what the unit sums then.
"""
from __future__ import annotations

import numpy as np

from .dtypes import itemsize
from .errors import GfxSimError
from .routing import route_prov
from .vgpr import VGPRs


class SparseOps:
    def smfmac(self, mnemonic: str, a: VGPRs, b: VGPRs, c: VGPRs | None, index: VGPRs, index_set: int = 0,
               label: str | None = None) -> VGPRs:
        """D = A.B + C of a v_smfmac_* record: ``a`` its compressed A (``insn.elems("A")`` values per
        lane), ``index`` one 32-bit register of compression fields, ``index_set`` the set of them
        used (the instruction's ABID when CBSZ is 0, else 0)."""
        insn = self.insn(mnemonic)
        if not insn.sparse:
            raise self.error(TypeError, f"{insn.mnemonic} is not a sparse instruction: use w.mma")
        sets = insn.index_sets
        if not 0 <= int(index_set) < sets:
            raise self.error(ValueError, f"{insn.mnemonic}: index set {index_set} out of range 0-{sets - 1}")
        if not isinstance(a, VGPRs) or a.dtype != insn.a_type or a.n != insn.elems("A"):
            raise self.error(TypeError, f"{insn.mnemonic}: compressed A must be {insn.elems('A')} x {insn.a_type} "
                                        f"per lane ({insn.regs('A')} VGPRs)")
        if not isinstance(index, VGPRs) or itemsize(index.dtype) * index.n != 4:
            raise self.error(TypeError, f"{insn.mnemonic}: the compression index must be one 32-bit register")
        if index.valid is not None and (~index.valid & self.exec[None, :]).any():
            lane = self.first_lanes((~index.valid & self.exec[None, :]).any(axis=0))[0]
            self.finding("uninitialized-read", f"{insn.mnemonic}: its compression index ({index.reg_name()}) holds "
                         f"never-written bytes", lane=lane, what="compression index", name=index.reg_name())
        dense = self._expand_sparse(insn, a, index, int(index_set))
        return self.mma(insn.dense_form, dense, b, c, label=label)

    def _expand_sparse(self, insn, a: VGPRs, index: VGPRs, index_set: int) -> VGPRs:
        n = a.n                                           # compressed values per lane
        words = np.ascontiguousarray(index.val).view(np.uint32).reshape(-1)
        shift = np.uint32(index_set * 2 * n)
        s = np.arange(n)
        field = (words[None, :] >> (shift + 2 * s[:, None].astype(np.uint32))) & np.uint32(3)     # [n, width]
        pos = (4 * (s // 2))[:, None] + field.astype(np.int64)                                    # dense element
        src = np.full((2 * n, self.width), -1, np.int64)   # the compressed value feeding each dense element
        cols = np.arange(self.width)
        nonzero = a.val != 0
        for k in range(n):                                 # a stored zero never displaces a value
            take = (src[pos[k], cols] < 0) | nonzero[k]
            clash = (src[pos[k], cols] >= 0) & nonzero[k] & nonzero[np.maximum(src[pos[k], cols], 0), cols]
            if (clash & self.exec).any():
                lane = int(np.argmax(clash & self.exec))
                raise self.error(GfxSimError, f"{insn.mnemonic}: compressed values {k - 1} and {k} of lane "
                                 f"{lane % self.lanes} both name K position {int(pos[k, lane]) % 4} of their group "
                                 f"(both nonzero)", lane=lane)
            src[pos[k, take], cols[take]] = k
        have = src >= 0
        val = np.zeros((2 * n, self.width), a.val.dtype)
        val[have] = a.val[src[have], np.nonzero(have)[1]]
        eb = itemsize(a.dtype)
        byte_src = np.where(have, src * eb, -1)[:, None, :] + np.arange(eb)[None, :, None]
        byte_src = np.where(have[:, None, :], byte_src, -1).reshape(2 * n * eb, self.width)
        valid = None
        if a.valid is not None:
            valid = np.where(byte_src >= 0, np.take_along_axis(a.valid, np.maximum(byte_src, 0), axis=0), True)
        prov = None
        if a.prov is not None and self.machine.provenance:
            prov = route_prov(a.prov.per_byte(), self.pcols(byte_src, "a sparse A's compression index"), self.pw)
        return VGPRs(self, val, a.dtype, prov, valid)
