"""The matrix unit: ``w.mma`` gathers its operands through the instruction record's plans
(``plans``), computes D exactly (``mma``; 8-bit operands as one batched GEMM here), and logs one
compact record per issued instruction (``mmalog.MmaRecord``), its fields summarised by the compiled
passes of ``summaries``.

Provenance of a matrix instruction, per (batched workgroup, block):
* the K-slot check: on every identity field both A and B carry, K slot k must hold one value;
* the record keeps, per field, the values feeding the K slots (compact: ``[K]`` when a field is
  the same along M (A) / N (B), ``[M]``/``[N]`` when it is the same along K, else the full grid);
* the K set of D[m][n], per field that varies along K: A row m's values ∪ B column n's values,
  as bitmask windows (``Mask``); through C it chains to the instruction that produced C, which
  must have summed the same element and other K values (``chain``: accumulator-carried,
  double-count);
* D[m][n]'s identity: the fields constant along K of A's row m and B's column n, plus ``@mma``
  (this instruction's index) and ``@mn`` — the mark that lets a scale check or a finding name
  the instruction wherever the result travels (moves, LDS, bpermute, conversions).
"""
from __future__ import annotations

import numpy as np

from ..arch.kslots import format_token_set
from .dtypes import itemsize, np_dtype
from .errors import GfxSimError, StepLimit
from .mma import compute
from .mmalog import MmaRecord
from .foldrec import FoldedRecord
from .plans import batched_plan, d_inverse, flat_form, flat_plan, inverse_form, name_absent, name_planes, word_plan
from . import strided
from . import chain, encoding, i8words, jit, mmagrid, qdir
from .provenance import RESERVED, UNKNOWN, OneSet, Prov, known_one
from . import summaries          # compiled functions by the module: jit.njit rebinds their names
from .summaries import Field, row_sets, row_sets_many
from .trace import BatchEvent
from .valueprov import elem_prov
from .vgpr import VGPRs


def _side_identity(f, op, s, compact, on_other, kept, empty):
    """(values, values as contiguous int32 or ``empty``) of operand ``op``'s rows (A) or columns
    (B) that name D[m][n] on field ``f`` (None: no name). A field on one side only (a query row, a
    V dim) names the row or column wherever it is one value along K; a field on both sides
    (``on_other``) is summed over (a token) or shared (a sequence), and names D only where it
    is constant along K on both. ``kept``: the call's answers for this operand (_side), or None."""
    key = ("identity", f, on_other)
    got = None if kept is None else kept.get(key)
    if got is None:
        if f not in s:
            v = None
        elif on_other:
            v = compact[f][1] if compact[f][0] == "mn" else None
        else:
            v = s[f].one_along_k()
        got = (v, None if v is None else np.ascontiguousarray(v, np.int32))
        if kept is not None:
            kept[key] = got
    return got[0], (empty if got[1] is None else got[1])


def _stacked_names(names: list, shape: tuple) -> np.ndarray:
    """Each issue's row (A) or column (B) names ``shape`` as int32 stacked ``[n, *shape]``, an issue
    without any as -1; ``[n, 0, 0]`` where no issue has any (summaries.d_planes' "none")."""
    if not any(x.size for x in names):
        return np.empty((len(names), 0, 0), np.int32)
    return np.stack([x if x.size else np.full(shape, -1, np.int32) for x in names])


def _content(x: np.ndarray | None) -> tuple | None:
    """An array's content as a key: equal keys are equal dtype, shape and bytes, so the same
    computation on either gives the same result (a bytes compare is one memcmp, where array_equal
    costs several numpy calls)."""
    return None if x is None else (x.dtype.str, x.shape, x.tobytes())


def _varies(x: Field, f: str, live_rows: np.ndarray, every: bool, known: dict) -> bool:
    """x.varies(live_rows); where every row is live, the answer over all rows, kept in ``known``
    (the remembered operand's) by field."""
    if not every:
        return x.varies(live_rows)
    got = known.get(f)
    if got is None:
        got = known[f] = x.varies()
    return got


def _i8_path(insn, a, b) -> bool:
    """Whether an issue takes the 8-bit integer GEMM (``_mma_i8``)."""
    return insn.cd_type == "i32" and a.dtype in ("i8", "u8") and b.dtype in ("i8", "u8")


def _i8_float_type(K, a_dtype, b_dtype):
    """The float type whose GEMM sums K products of these 8-bit types exactly: float32 while every
    partial sum is an integer below 2^24, else float64 (below 2^53)."""
    bound = K * (255 if a_dtype == np.uint8 else 128) * (255 if b_dtype == np.uint8 else 128)
    return np.float32 if bound < 2 ** 24 else np.float64


def _mma_i8(fa, fb, c, tc, td, d, inv=None, inv_form=None):
    """D = A.B + C for 8-bit A/B (``fa``, ``fb``: the operands gathered as floats, ``[members*blocks,
    rows, cols]``, _i8_float_type) and int32 C/D read and written through the flat operand plans
    (indices into ``[regs, width]``). The products are summed as one batched float GEMM, which is
    exact (_i8_float_type). C is added in int64 and the sum wrapped to int32; returns where it
    overflowed (None: it cannot: a float32 sum, below 2^24, without C or with every C element
    2^24 inside the int32 range, is added in int32). ``inv``: where D's plan puts every element of
    ``d`` exactly once and C's plan is D's, each element of ``d``'s index into the sums (a take then
    writes D, and C is added where it lies, with no gather; ``inv_form``: its strided form, a copy)."""
    return _i8_sums_to_d(np.matmul(fa, fb), c, tc, td, d, inv, inv_form)


def _i8_sums_to_d(s, c, tc, td, d, inv=None, inv_form=None):
    """``_mma_i8`` past its GEMM: the exact float sums ``s`` (``[members*blocks, rows, cols]``)
    plus C written to D; returns where it overflowed (None: it cannot)."""
    if s.dtype == np.float32:                    # every sum below 2^24, far inside int32
        si = s.astype(np.int32)
        if c is None:
            _write_d(si, td, d, inv, inv_form)
            return None
        cc = c if inv is not None else np.take(c, tc)     # C where it lies (where D goes), or gathered
        if int(cc.min()) > -2 ** 31 + 2 ** 24 and int(cc.max()) < 2 ** 31 - 2 ** 24:
            if inv is None:
                si += cc
            _write_d(si, td, d, inv, inv_form)
            if inv is not None:
                d += c
            return None
    s = s.astype(np.int64)
    if c is not None:
        s += np.take(c, tc)
    over = (s < -2 ** 31) | (s > 2 ** 31 - 1)
    d.reshape(-1)[td] = s.astype(np.int32)          # C-style cast: wraps modulo 2^32
    return over


def _write_d(si, td, d, inv, inv_form=None):
    """d's elements from the sums ``si``: by D's plan, or (``inv``) as a take of every element (a
    strided copy where ``inv_form`` is given)."""
    if inv is None:
        d.reshape(-1)[td] = si
    else:
        strided.take_into(d, si, inv, inv_form)



def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _labelled(label) -> str:
    return f" ({label})" if label else ""



def _unpack_nibbles(w, insn, op, v):
    """A 4-bit operand (mma.sync .s4) arrives as its packed 32-bit registers (i32/u32, one per
    VGPR, as PTX passes .b32): unpack it into one signed element per nibble, little-endian, each
    nibble taking the provenance and written bit of its byte. Other operands pass through."""
    lay = insn.operand(op)
    if lay.elem_bits != 4 or not isinstance(v, VGPRs):
        return v
    if v.dtype not in ("i32", "u32") or v.n != lay.n_regs:
        raise w.error(TypeError, f"{insn.mnemonic}: operand {op} ({lay.n_regs * 8} x i4) must be passed as its "
                      f"{lay.n_regs} packed 32-bit registers (i32/u32), got {v.n} x {v.dtype}")
    raw = np.ascontiguousarray(v.val).view(np.uint32)
    shifts = (np.arange(8, dtype=np.uint32) * 4)[None, :, None]
    nib = ((raw[:, None, :] >> shifts) & np.uint32(0xF)).astype(np.int8)       # [regs, 8, width]
    nib = np.where(nib > 7, nib - 16, nib).astype(np.int8).reshape(-1, raw.shape[1])
    prov = None if v.prov is None else v.prov.per_byte().map(lambda x: np.repeat(x, 2, axis=0))
    valid = None if v.valid is None else np.repeat(v.valid, 2, axis=0)
    return VGPRs(None, nib, "i4", prov, valid, regs=v.regs, rfile=v.rfile)


OPERAND_MEMO = 4         # operands a wave remembers per side (A, B): QK alternates four A registers
MEMO_TRIAL = 8           # operands of a side looked up before a side that never repeats is no longer remembered


class _OperandMemo:
    """The last OPERAND_MEMO operands of one side of a wave's matrix instructions, most recent
    first, found by content (the keys hold copies, so an in-place write elsewhere cannot make a
    stale match). ``trial``: after that many lookups without a hit the side is no longer remembered."""
    __slots__ = ("entries", "looked", "hits", "trial")

    def __init__(self, trial=None):
        self.entries, self.looked, self.hits, self.trial = [], 0, 0, trial

    def _off(self) -> bool:
        return self.trial is not None and self.looked >= self.trial and not self.hits

    def on(self) -> bool:
        """Whether the side is still remembered (a caller skips making a key where it is not)."""
        if self._off():
            self.entries.clear()
            return False
        return True

    def recall(self, matches, same=None):
        """The remembered value whose key ``matches``, moved to the front; None if none does.
        ``same``: a cheaper test that implies ``matches`` (the same object), tried on every entry
        first, so an operand found as itself costs no content key (an equal entry found first
        instead would hold the same answers: equal content)."""
        if self._off():
            return None
        self.looked += 1
        for test in (same, matches):
            if test is None:
                continue
            for i, (key, value) in enumerate(self.entries):
                if test(key):
                    if i:
                        self.entries.insert(0, self.entries.pop(i))
                    self.hits += 1
                    return value
        return None

    def remember(self, key, value):
        if self._off():
            self.entries.clear()
            return
        self.entries.insert(0, (key, value))
        del self.entries[OPERAND_MEMO:]


ISSUE_TOGETHER = True      # mma_many computes its instructions' D in one pass (False: one by one, the exact path)
GATHER_TOGETHER = True     # and gathers their operands in one take each (False: one gather an operand)
CHAIN_UNIONS = 8           # K-set unions of a matrix chain kept by the objects united (0: none kept)
GRID_TOGETHER = True       # and a float batch pairing each A with each B as one matrix (mmagrid; False: batched)
OPERANDS_TOGETHER = True  # and the distinct operands of a side have their provenance fields made together (False: each alone)
_CALL_OPERANDS = "call operands"   # mma_memos' key of those answers, held while the call issues
SUM_TOGETHER = True        # and an 8-bit record's D of all of them in one take and add (False: one by one)
SIDES_TOGETHER = True      # and its records share what each reads of one operand or EXEC (False: each record its own)
# mma_words' 8-bit records as one compiled pass (i8words.py; False: the numpy GEMM, the A/B and the
# tests comparing both). A sum that leaves int32 takes the numpy path again, which says where.
I8_COMPILED = True
_NO_C = np.zeros(0, np.int32)      # i8words.mma_i8's C where C is the constant 0


class MatrixOps:
    def mma(self, mnemonic: str, a: VGPRs, b: VGPRs, c: VGPRs | None = None, label: str | None = None) -> VGPRs:
        """D = A*B + C by the arch's record of ``mnemonic`` (C = 0 when omitted). ``label``: what the
        kernel calls this instruction (e.g. "chunk 2 tile 1 j 0"), shown beside its index in the
        pictures and the findings."""
        insn, regs_in, a, b, c, live = self._mma_operands(mnemonic, a, b, c, label)
        plans = self._mma_plans(insn)
        dval, overflow = self._mma_d(insn, a, b, c, plans)
        return self._mma_issue(insn, regs_in, a, b, c, live, label, plans, dval, overflow)

    def mma_words(self, mnemonic: str, a: np.ndarray, b: np.ndarray, c: np.ndarray | None,
                  label: str | None = None) -> np.ndarray | None:
        """``w.mma`` of operands given as their registers' words (uint32 ``[regs, width]``, every
        byte written; ``c`` None: the constant 0) in a run without provenance or trace, the whole
        wave active: D's words ``[regs, width]``. Each operand is gathered from its words through
        the plans (no value made per operand) and D taken into its registers' order; the values,
        record, findings and events are w.mma's of the same registers read as values. None where
        it does not apply (a 4- or 64-bit element, 8-bit operands of a non-8-bit pair, a sparse
        record): the caller takes w.mma."""
        if self.machine.provenance or self.machine.trace.enabled or not self.exec_full:
            return None
        if label is not None and not isinstance(label, str):
            raise self.error(TypeError, f"{mnemonic}: label must be a str, got {type(label).__name__}")
        prep = self.mma_memos.get(("words", mnemonic))
        if prep is None:
            prep = self.mma_memos[("words", mnemonic)] = self._words_prep(self.insn(mnemonic))
        if prep is False:
            return None
        insn, plans, tc, td, inv, pa, pb, ta, tb, ft, cd, live = prep
        dval = np.empty((insn.elems("D"), self.width), cd)
        overflow = None
        if ft is not None and I8_COMPILED and i8words.exact_in_int32(insn.K) and jit.worth_starting(self.width) \
                and not i8words.mma_i8(a.view(ta).reshape(-1), b.view(tb).reshape(-1),
                                       _NO_C if c is None else c.view(np.int32).reshape(-1), pa, pb, tc, td,
                                       dval.reshape(-1)):
            pass                            # one compiled pass, no sum left int32 (overflow stays None)
        elif ft is not None:                # _mma_d's 8-bit GEMM, its operands gathered from the words
            overflow = _mma_i8(self._float_operand(insn, "A", a, ft, ta), self._float_operand(insn, "B", b, ft, tb),
                               None if c is None else c.view(np.int32), tc, td, dval, inv)
        else:
            # ndarray.take: np.take's dispatch (fromnumeric) costs a µs or so, four times an instruction
            d_mat, overflow = compute(insn, a.view(ta).reshape(-1).take(pa), b.view(tb).reshape(-1).take(pb),
                                      np.zeros(tc.shape, cd) if c is None else c.view(cd).reshape(-1).take(tc),
                                      batch=self.members)
            if inv is not None:             # D's plan names every element once: a take, not a scatter
                np.asarray(d_mat, cd).reshape(-1).take(inv, out=dval.reshape(-1))
            else:
                dval[plans["D"]] = d_mat
        return self._mma_issue(insn, None, None, None, None, live, label, plans, dval, overflow).val.view(np.uint32)

    def _words_prep(self, insn):
        """What mma_words needs of a record, once per wave: (record, plans, C's and D's flat plans,
        D's inverse, A's and B's word plans, A's and B's numpy types, the 8-bit GEMM's float type
        or None, the C/D type, every member live: read-only); False where mma_words does not apply."""
        if insn.sparse or itemsize(insn.cd_type) != 4 or any(insn.operand(op).elem_bits not in (8, 16, 32)
                                                             for op in "AB"):
            return False
        ta, tb = np_dtype(insn.a_type), np_dtype(insn.b_type)
        i8 = insn.cd_type == "i32" and insn.a_type in ("i8", "u8") and insn.b_type in ("i8", "u8")     # _i8_path
        if insn.cd_type == "i32" and not i8:
            return False
        cache, members, lanes = self.machine.plan_cache, self.members, self.lanes
        pa, pb = (word_plan(cache, insn, op, members, lanes, 4 // t.itemsize) for op, t in (("A", ta), ("B", tb)))
        return (insn, self._mma_plans(insn), flat_plan(cache, insn, "C", members, lanes),
                flat_plan(cache, insn, "D", members, lanes), d_inverse(cache, insn, members, lanes), pa, pb, ta, tb,
                _i8_float_type(insn.K, ta, tb) if i8 else None, np_dtype(insn.cd_type), _read_only(np.ones(members, bool)))

    def mma_many(self, mnemonic: str, issues) -> list[VGPRs]:
        """``[w.mma(mnemonic, a, b, c, label) for a, b, c, label in issues]``, in that order: the
        same values, records, provenance, findings and events. The instructions are independent
        (each C was made before the call), so a float record's D of all of them comes from one
        pass of its accumulator model (exact per element: the model works element by element,
        and a batch that takes its general path gives each element that path's bits, which
        equal the fast path's); an 8-bit integer record's products of all of them are one
        batched GEMM (each sum exact). Where an operand holds never-written bytes, EXEC is not
        full, an integer record's operands are not all 8-bit, or an operand is refused, the
        instructions run one by one."""
        issues = [tuple(x) for x in issues]
        prepared = None
        if ISSUE_TOGETHER and self.exec_full and all(isinstance(v, VGPRs) and v.valid is None for x in issues for v in x[:3]
                                  if v is not None):
            try:
                prepared = self._mma_operands_many(mnemonic, issues)
            except Exception:            # refused: one by one, so the error comes after the earlier ones issue
                prepared = None
        if not prepared:
            return [self.mma(mnemonic, a, b, c, label) for a, b, c, label in issues]
        insn = prepared[0][0]
        if self.machine.provenance:        # the call's answers, held while it issues
            self.mma_memos[_CALL_OPERANDS] = self._operands_together(insn, prepared) if OPERANDS_TOGETHER else {}
            self.mma_memos[_CALL_OPERANDS]["c values"] = [p[4] for p in prepared]
            self.mma_memos[_CALL_OPERANDS]["issues"] = [p[2:6] for p in prepared]     # (a, b, c, live)
        try:
            return self._mma_many_issue(insn, prepared, issues)
        finally:
            self.mma_memos.pop(_CALL_OPERANDS, None)

    def _mma_many_issue(self, insn, prepared, issues) -> list[VGPRs]:
        """mma_many's issue of its prepared instructions (``_mma_operands_many``)."""
        mnemonic = insn.mnemonic
        plans = self._mma_plans(insn)
        source = self.source()             # one statement of the kernel issues them all
        if all(_i8_path(p[0], p[2], p[3]) for p in prepared):
            return self._mma_many_i8(prepared, issues, plans, source)
        if insn.cd_type == "i32":          # 4-bit or mixed operands: each one's overflow found one by one
            return [self.mma(mnemonic, a, b, c, label) for a, b, c, label in issues]
        d_all = self._grid_d(insn, prepared, plans)
        if d_all is None:
            d_all, _ = compute(insn, *(self._gathered_many(insn, op, [p[i].val for p in prepared], plans[op])
                                       for i, op in ((2, "A"), (3, "B"), (4, "C"))), batch=self.members * len(prepared))
        n = len(prepared)
        # every instruction's D placed by D's plan in one scatter: row i is instruction i's registers
        dvals = np.empty((n, insn.elems("D"), self.width), np_dtype(insn.cd_type))
        dvals[(slice(None),) + tuple(plans["D"])] = d_all.reshape((n, len(d_all) // n) + d_all.shape[1:])
        ids = np.nonzero(prepared[0][5])[0].tolist()        # full EXEC: every issue's live members alike
        out = []
        for i, ((insn, regs_in, a, b, c, live), (*_, label)) in enumerate(zip(prepared, issues)):
            self._issuing(i)
            out.append(self._mma_issue(insn, regs_in, a, b, c, live, label, plans, dvals[i], None, source, ids))
        return out

    def _issuing(self, i) -> None:
        """Notes that issue ``i`` of an mma_many call issues next (_d_planes finds its answers by it)."""
        call = self.mma_memos.get(_CALL_OPERANDS)
        if call is not None:
            call["issue"] = i

    def _operands_together(self, insn, prepared) -> dict:
        """{side: {provenance: _operand_fields' answer}} for the distinct operand provenances of
        one side of an mma_many call that the operand memory does not hold as themselves, where
        a side has two or more (PV's sixteen V tiles, QK's eight K tiles): their fields gathered
        and summarised together (Field.gathered_many), each answer what _operand_fields would make
        of it alone. Planes of other names or sizes: none (each is made alone)."""
        held = {"clean": set()}            # (plane test, provenance) pairs found clean (_clean)
        for op, i in (("A", 2), ("B", 3)):
            memo = self._memo("_operand_memo", op, MEMO_TRIAL)
            ps = []
            for x in prepared:
                p = elem_prov(self, x[i], x[i].n)
                if p is None or any(q is p for q in ps) or any(k[0] is insn and k[2] is p for k, _ in memo.entries):
                    continue
                ps.append(p)
            if len(ps) < 2:
                continue
            names = [tuple(f for f in p.ids if f not in RESERVED) for p in ps]
            planes = {f: [p.ids[f] for p in ps] for f in names[0]}
            if any(n != names[0] for n in names) or any(len({x.size for x in xs}) > 1 for xs in planes.values()):
                continue
            plan = flat_plan(self.machine.plan_cache, insn, op, len(self.pmember_ids), self.lanes)
            per, rows = [{} for _ in ps], [{} for _ in ps]
            for f, xs in planes.items():
                got, stacked = Field.gathered_many(xs, plan, op)
                for d, x in zip(per, got):
                    d[f] = x
                # the K sets of its rows, where some operand's field is not one value along K
                # (_mma_provenance asks them of such a field; none is interned: one window each)
                sets = None if all(x.eq_k for x in got) else row_sets_many(stacked)
                for r, m in zip(rows, sets or ()):
                    r[f] = known_one(m)
            # by the object itself, for the call alone (Prov defines no __eq__: found as itself)
            held[op] = {p: (fields, {f: v.compact(op) for f, v in fields.items()}, r, q, {})
                        for p, fields, r, q in zip(ps, per, rows, self._quant_rows_many(insn, op, ps, plan))}
        return held

    def _clean(self, what, p, test) -> bool:
        """``test()``, a question about provenance ``p``'s planes alone (``what``: no operand byte
        of another encoding than the record reads, none of unknown origin), asked once per object
        during an mma_many call (its instructions share operands) where the answer is "clean":
        planes are not written in place once made."""
        clean = self.mma_memos.get(_CALL_OPERANDS, {}).get("clean")
        # by the object itself (Prov defines no __eq__: found as itself), for the call alone
        if clean is not None and (what, p) in clean:
            return True
        got = test()
        if got and clean is not None:
            clean.add((what, p))
        return got

    def _quant_rows_many(self, insn, op, ps, plan) -> list:
        """``[self._quant_rows(insn, op, p) for p in ps]``, the flags read in one compiled pass
        (qdir.operand_directions_at); each alone where numba has not started or the flags differ
        in shape or type."""
        got = qdir.operand_directions_at([p.flags for p in ps], plan, op)
        return [self._quant_rows(insn, op, p) for p in ps] if got is None else got

    def _mma_many_i8(self, prepared, issues, plans, source) -> list[VGPRs]:
        """mma_many of 8-bit integer instructions: their products summed in one batched GEMM (each
        sum exact, so the same bits as one GEMM per instruction: ``_i8_float_type``), then each
        instruction's C, D, overflow and issue in order as ``_mma_d`` and ``_mma_issue`` give them."""
        cache = self.machine.plan_cache
        fas, fbs, fts = [], [], []
        seen = {"A": [], "B": []}         # (registers, type, numbers) gathered in this call: nothing writes between
        for insn, _, a, b, _, _ in prepared:   # A then B of each, in order, each array once
            ft = _i8_float_type(insn.K, a.val.dtype, b.val.dtype)
            for op, v, into in (("A", a.val, fas), ("B", b.val, fbs)):
                got = next((f for x, t, f in seen[op] if x is v and t is ft), None)
                if got is None:
                    got = self._float_operand(insn, op, v, ft)
                    seen[op].append((v, ft, got))
                into.append(got)
            fts.append(ft)
        if len(set(fts)) > 1:
            fas, fbs = [x.astype(np.float64) for x in fas], [x.astype(np.float64) for x in fbs]
        sums = np.matmul(np.concatenate(fas), np.concatenate(fbs))
        nb = len(sums) // len(prepared)
        dvals = self._i8_many_to_d(insn, prepared, sums, fts) if SUM_TOGETHER else None
        ids = np.nonzero(prepared[0][5])[0].tolist()        # full EXEC: every issue's live members alike
        out = []
        for i, ((insn, regs_in, a, b, c, live), (*_, label)) in enumerate(zip(prepared, issues)):
            self._issuing(i)
            if dvals is not None:          # every D written at once, no overflow possible
                out.append(self._mma_issue(insn, regs_in, a, b, c, live, label, plans, dvals[i], None, source, ids))
                continue
            dval = np.empty((insn.elems("D"), self.width), np_dtype(insn.cd_type))
            s = sums[i * nb:(i + 1) * nb]
            overflow = _i8_sums_to_d(s if s.dtype == fts[i] else s.astype(fts[i]), None if c.literal else c.val,
                                     flat_plan(cache, insn, "C", self.members, self.lanes),
                                     flat_plan(cache, insn, "D", self.members, self.lanes), dval,
                                     d_inverse(cache, insn, self.members, self.lanes),
                                     inverse_form(cache, insn, self.members, self.lanes))
            out.append(self._mma_issue(insn, regs_in, a, b, c, live, label, plans, dval, overflow, source, ids))
        return out

    def _grid_d(self, insn, prepared, plans):
        """mma_many's D ``[issues, M, N]`` of a float batch that pairs each of its distinct A
        registers with each of its distinct B registers once, from one pass of the accumulator
        model over them as one matrix (mmagrid); None where that does not apply (another
        batch, several members or blocks, a model that is not elementwise over D: exact, f64)."""
        acc = insn.accumulator
        if not GRID_TOGETHER or self.members != 1 or insn.blocks != 1 or insn.cd_type != "f32" or \
                acc.is_exact or acc.c_entry not in ("fused", "after"):
            return None
        grid = mmagrid.grid_of([p[2].val for p in prepared], [p[3].val for p in prepared])
        if grid is None:
            return None
        a_vals, b_vals, at = grid
        a, b, c = mmagrid.stacked(self._gathered_many(insn, "A", a_vals, plans["A"]),
                                  self._gathered_many(insn, "B", b_vals, plans["B"]),
                                  self._gathered_many(insn, "C", [p[4].val for p in prepared], plans["C"]), at)
        d, _ = compute(insn, a, b, c)
        return mmagrid.unstacked(d, at, len(a_vals), len(b_vals))

    def _i8_many_to_d(self, insn, prepared, sums, fts):
        """``_i8_sums_to_d`` of every instruction of an 8-bit mma_many at once, ``[n, regs, width]``
        (D of instruction i is row i), where it takes the same path for each: float32 sums (below
        2^24), D's plan naming every register element once (``d_inverse``) and C either omitted by
        all or, for all, 2^24 inside the int32 range (no overflow). None otherwise: one by one."""
        cache, n = self.machine.plan_cache, len(prepared)
        inv = d_inverse(cache, insn, self.members, self.lanes)
        literal = {p[4].literal for p in prepared}
        if inv is None or sums.dtype != np.float32 or set(fts) != {np.float32} or len(literal) > 1:
            return None
        d = np.take(sums.astype(np.int32).reshape(n, -1), inv, axis=1).reshape(n, insn.elems("D"), self.width)
        if not literal.pop():
            c = np.stack([p[4].val for p in prepared])
            if c.dtype != np.int32 or c.shape != d.shape or not (int(c.min()) > -2 ** 31 + 2 ** 24 and
                                                                  int(c.max()) < 2 ** 31 - 2 ** 24):
                return None
            d += c
        return d

    def _mma_operands(self, mnemonic, a, b, c, label):
        """The checks of an issue: (record, the operands as the kernel passed them, A, B, C, the
        live members)."""
        if label is not None and not isinstance(label, str):
            raise self.error(TypeError, f"{mnemonic}: label must be a str, got {type(label).__name__}")
        insn = self.insn(mnemonic)
        mnemonic = insn.mnemonic
        if insn.sparse:
            raise self.error(TypeError, f"{mnemonic} takes a compression index: use w.smfmac")
        regs_in = (a, b)                   # as the kernel passed them (the trace shows these)
        elems, nibbles = self._operand_shape(insn)
        if nibbles:
            a, b = (_unpack_nibbles(self, insn, op, v) for op, v in (("A", a), ("B", b)))
        need = {"A": (a, insn.a_type), "B": (b, insn.b_type)}
        if c is None:
            c = VGPRs(self, np.zeros((elems["C"], self.width), np_dtype(insn.cd_type)), insn.cd_type, literal=True)
        need["C"] = (c, insn.cd_type)
        for op, (v, t) in need.items():
            n_want = elems[op]
            if not isinstance(v, VGPRs):
                raise self.error(TypeError, f"{mnemonic}: operand {op} must be a register value")
            if v.dtype != t and not (itemsize(v.dtype) == itemsize(t) and op in "AB" and
                                     ({v.dtype, t} <= {"i8", "u8"} or {v.dtype, t} <= {"f32", "xf32"})):
                raise self.error(TypeError, f"{mnemonic}: operand {op} must be {t}, got {v.dtype}")
            if v.n != n_want:
                raise self.error(ValueError, f"{mnemonic}: operand {op} needs {n_want} x {t} per lane "
                                 f"({insn.operand(op).n_regs} VGPRs), got {v.n}")
        if self.exec_full:
            live = np.ones(self.members, bool)
        else:
            ex = self.exec.reshape(self.members, self.lanes)
            live = ex.all(axis=1)
        if not self.exec_full and not np.all(live | ~ex.any(axis=1)):
            m = int(np.argmax(~(live | ~ex.any(axis=1))))
            raise self.error(GfxSimError, f"{mnemonic} issued with EXEC {ex[m].sum()}/{self.lanes}: "
                             "matrix instructions need the whole wave", lane=m * self.lanes)
        for op, v in (("A", a), ("B", b), ("C", c)):
            if v.valid is not None and (~v.valid & self.exec[None, :]).any():
                lane = self.first_lanes((~v.valid & self.exec[None, :]).any(axis=0))[0]
                self.finding("uninitialized-read", f"{mnemonic}: operand {op} ({v.reg_name()}) holds never-written "
                             f"bytes", lane=lane, what=f"operand {op}", name=v.reg_name())
        return insn, regs_in, a, b, c, live

    def _mma_operands_many(self, mnemonic, issues):
        """``[self._mma_operands(mnemonic, a, b, c, label) for a, b, c, label in issues]``: the first
        checked in full; a later one whose label, operand types and counts pass as they are (A and B
        of the record's types, C of its type or omitted, every byte written, no nibbles to unpack)
        takes the first's record and live members (read only); any other is checked in full."""
        first = self._mma_operands(mnemonic, *issues[0])
        insn, live = first[0], first[5]
        elems, nibbles = self._operand_shape(insn)
        want = ((elems["A"], insn.a_type), (elems["B"], insn.b_type), (elems["C"], insn.cd_type))
        quick = not nibbles and self.exec_full
        out = [first]
        for a, b, c, label in issues[1:]:
            if not (quick and (label is None or type(label) is str) and type(a) is VGPRs and type(b) is VGPRs and
                    (c is None or type(c) is VGPRs) and all(v.dtype == t and v.n == n and v.valid is None for v, (n, t)
                                                            in zip((a, b, c), want) if v is not None)):
                out.append(self._mma_operands(mnemonic, a, b, c, label))
                continue
            if c is None:
                c = VGPRs(self, np.zeros((elems["C"], self.width), np_dtype(insn.cd_type)), insn.cd_type, literal=True)
            out.append((insn, (a, b), a, b, c, live))
        return out

    def _operand_shape(self, insn):
        """({operand: elements per lane} of A, B, C, whether A or B is 4-bit: _unpack_nibbles),
        read off the record once per wave, not at every issue."""
        key = ("operand shape", insn.mnemonic)
        got = self.mma_memos.get(key)
        if got is None or got[0] is not insn:
            got = self.mma_memos[key] = (insn, {op: insn.elems(op) for op in "ABC"},
                                         any(insn.operand(op).elem_bits == 4 for op in "AB"))
        return got[1:]

    def _mma_plans(self, insn) -> dict:
        cache = self.machine.plan_cache
        # [members*blocks, rows, cols]
        return {op: batched_plan(cache, insn, op, self.members, self.lanes) for op in "ABCD"}

    def _mma_d(self, insn, a, b, c, plans):
        """D's registers and the int32 overflow mask (None for a float record)."""
        cache = self.machine.plan_cache
        dval = np.empty((insn.elems("D"), self.width), np_dtype(insn.cd_type))
        overflow = None
        if _i8_path(insn, a, b):
            # the hot path of the INT8 kernels: one exact batched GEMM for every member and block
            ft = _i8_float_type(insn.K, a.val.dtype, b.val.dtype)
            overflow = _mma_i8(self._float_operand(insn, "A", a.val, ft), self._float_operand(insn, "B", b.val, ft),
                               None if c.literal else c.val, flat_plan(cache, insn, "C", self.members, self.lanes),
                               flat_plan(cache, insn, "D", self.members, self.lanes), dval,
                               d_inverse(cache, insn, self.members, self.lanes),
                               inverse_form(cache, insn, self.members, self.lanes))
        else:
            mats = {op: self._gathered(insn, op, v.val, plans[op]) for op, v in (("A", a), ("B", b), ("C", c))}
            d_mat, overflow = compute(insn, mats["A"], mats["B"], mats["C"], batch=self.members)
            dval[plans["D"]] = d_mat
        return dval, overflow

    def _mma_issue(self, insn, regs_in, a, b, c, live, label, plans, dval, overflow, source=None,
                   live_ids=None) -> VGPRs:
        """The issue of one instruction whose D is computed: its index, D's value and provenance,
        findings, record and trace event (``source``: where the kernel issued it, when the caller
        knows; ``live_ids``: the live members' numbers, where the caller has them: mma_many's
        issues under full EXEC, each a copy)."""
        mnemonic = insn.mnemonic
        tr = self.machine.trace
        idx = tr.n_events
        tr.n_events += self.members             # member m's instruction is idx + m
        out = self.new_value(dval, insn.cd_type)
        if source is None:
            source = self.source()
        fields = {}                        # the record's provenance fields (MmaRecord)
        if self.machine.provenance and (a.prov is not None or b.prov is not None):
            self._format_check(insn, idx, label, a, b, live)
        # operands that carry no more than their bytes' encoding name nothing a result could carry
        if self.machine.provenance and any(v.prov is not None and not encoding.only(v.prov) for v in (a, b, c)):
            out.prov, fields = self._mma_provenance(insn, a, b, c, idx, label, live)
            if self.fold is not None:           # the representatives' rows, completed for every member
                fields = self.fold.unfold_record(insn, fields, self.machine.mma_log)
        if overflow is not None and (overflow & np.repeat(live, insn.blocks)[:, None, None]).any():
            blk, m, n = (int(x) for x in np.argwhere(overflow & np.repeat(live, insn.blocks)[:, None, None])[0])
            lane = int(plans["D"][1][blk, m, n])
            self.finding("int32-overflow", f"{mnemonic}{_labelled(label)}: int32 accumulator overflow at D[{m}][{n}]"
                         + (f" block {blk % insn.blocks}" if insn.blocks > 1 else ""), lane=lane, instruction=idx,
                         elements=int(overflow.sum()))
        operands = None
        if tr.enabled:
            operands = (self.trace_operands((*regs_in, c), False), self.trace_operands((out,), True))
        make = FoldedRecord if "folded" in fields else MmaRecord      # a folded batch's: placed where read
        rec = make(first=idx, insn=insn, kernel=self.kernel, wave=self.wave_id, workgroups=self.wg.ids,
                   live=np.nonzero(live)[0].tolist() if live_ids is None else list(live_ids), source=source,
                   exec_mask=self.exec, label=label,
                   operands=operands, **fields)
        if tr.enabled:
            tr.record(BatchEvent(idx, insn.mnemonic, self.kernel, self.wg.ids, self.wave_id, source, rec.exec_mask,
                                 operands[0], operands[1], {}, self.lanes, record=rec),
                      lambda msg: self.error(StepLimit, msg))
        self.machine.mma_log.add(rec)
        if self.member_events is not None:       # waves as members: numbered per wave at the end
            executing = list(range(self.members)) if self.live is None else list(self.live)
            self.wg.member_records.append((rec, self.wg.epoch, list(self.member_events), executing))
            rec.exec_mask = self.exec.copy()
            for m in executing:
                self.member_events[m] += 1
        for cov in self.coverages:
            cov.add(self, rec)
        return out

    def _gathered(self, insn, op, val, plan):
        """An operand's elements ``[members*blocks, rows, cols]`` through its plan: one take by the
        flat plan where the registers are ``[regs, members*lanes]`` (the plan's columns), else by
        the plan's two index arrays."""
        if val.ndim == 2 and val.shape[1] == self.members * self.lanes:
            return self._flat_gather(insn, op, val)
        return val[plan]

    def _gathered_many(self, insn, op, vals, plan):
        """``np.concatenate([self._gathered(insn, op, v, plan) for v in vals])``: where every array
        is ``[regs, members*lanes]`` of one dtype, one take by the flat plan over the distinct
        arrays stacked (a K step's instructions feed one A, or one B, to several: each is read
        once), the same elements in the same order."""
        first = vals[0]
        if not GATHER_TOGETHER or not all(v.ndim == 2 and v.shape == first.shape and v.dtype == first.dtype
                                         for v in vals) or first.shape[1] != self.members * self.lanes:
            return np.concatenate([self._gathered(insn, op, v, plan) for v in vals])
        distinct, at = [], []              # each array once, found as itself (a few per call)
        for v in vals:
            j = next((j for j, x in enumerate(distinct) if x is v), len(distinct))
            if j == len(distinct):
                distinct.append(v)
            at.append(j)
        stacked = np.stack(distinct).reshape(len(distinct), -1)
        got = np.take(stacked, flat_plan(self.machine.plan_cache, insn, op, self.members, self.lanes), axis=1)
        if len(distinct) < len(vals):
            got = got[at]
        return got.reshape((-1,) + got.shape[2:])

    def _flat_gather(self, insn, op, val, dtype=None):
        """``np.take(val, flat plan)`` (as ``dtype``): a strided copy where the plan is a view."""
        cache = self.machine.plan_cache
        plan = flat_plan(cache, insn, op, self.members, self.lanes)
        return strided.take(val, plan, flat_form(cache, insn, op, self.members, self.lanes), dtype)

    def _memo(self, name, side, trial=None) -> _OperandMemo:
        return self.mma_memos.setdefault((name, side), _OperandMemo(trial))

    def _float_operand(self, insn, op, val, ft, words_of=None):
        """An 8-bit operand's numbers gathered through its plan as ``ft`` ``[members*blocks, rows,
        cols]``, remembered by content (QK's A feeds four tiles, PV's W eight D tiles); a side whose
        first MEMO_TRIAL operands were all new (a B loaded afresh for every instruction) is not
        remembered further: its copies would be memory for nothing. ``words_of``: ``val`` is the
        registers' words, holding elements of that numpy type (mma_words)."""
        memo = self._memo("_float_memo", op, MEMO_TRIAL)

        def gather():
            if words_of is None:
                return self._flat_gather(insn, op, val, ft)
            plan = word_plan(self.machine.plan_cache, insn, op, self.members, self.lanes, 4 // words_of.itemsize)
            return np.take(val.view(words_of).reshape(-1), plan).astype(ft)
        if not memo.on():
            return gather()
        key = (insn, ft, _content(val))        # words and values differ in dtype: never one another's key
        got = memo.recall(lambda k: k[0] is insn and k[1] is ft and k[2] == key[2])
        if got is None:
            got = gather()
            memo.remember(key, got)
        return got

    def _unknown_kslots(self, insn, idx, label, operands, live_rows):
        """K slots fed by bytes of unknown origin (provenance.UNKNOWN): a token there cannot be
        named, so the slot would silently count as one without a token."""
        for op, p in operands:
            if p is None or p.flags is None or self._clean("known origin", p, lambda: not (p.flags & UNKNOWN).any()):
                continue
            plan = flat_plan(self.machine.plan_cache, insn, op, len(self.pmember_ids), self.lanes)
            marks = np.where(p.flags & UNKNOWN, 1, -1).astype(np.int32)
            v = Field.gathered(marks, plan, op).v                     # [nb, M|N, K] for both
            bad = (v >= 0).any(axis=1) & live_rows[:, None]           # [nb, K]
            lanes = batched_plan(self.machine.plan_cache, insn, op, len(self.pmember_ids), self.lanes)[1]
            for row in np.nonzero(bad.any(axis=1))[0].tolist():
                slots = [int(x) for x in np.nonzero(bad[row])[0]]
                k = slots[0]
                self.finding("kslot-unknown-origin",
                             f"{insn.mnemonic}{_labelled(label)}: operand {op}'s K slot"
                             f"{'s' if len(slots) > 1 else ''} {format_token_set(slots)} hold bytes of unknown origin "
                             f"(derived from tagged data by a route gfxsim does not follow): their tokens "
                             f"cannot be checked", lane=int(lanes[row, 0, k] if op == "A" else lanes[row, k, 0]),
                             instruction=idx, operand=op, slots=slots)

    def _format_check(self, insn, idx, label, a, b, live):
        """Operand bytes written in another encoding than the record says the operand reads
        (encoding.py): one ``format-mismatch`` per operand, naming the first element."""
        live_rows = None
        for op, v in (("A", a), ("B", b)):
            reads = insn.reads(op)
            if reads is None or v.prov is None or encoding.ENC not in v.prov.ids or \
                    self._clean(("read as", reads), v.prov,
                                lambda: not encoding.mismatch(v.prov.ids[encoding.ENC], reads).any()):
                continue
            p = elem_prov(self, v, v.n)
            if p is None or encoding.ENC not in p.ids:         # the bytes of an element disagree: unchecked
                continue
            if live_rows is None:
                live_rows = np.repeat(live[self.pmember_ids], insn.blocks)
            plan = flat_plan(self.machine.plan_cache, insn, op, len(self.pmember_ids), self.lanes)
            enc = Field.gathered(p.ids[encoding.ENC], plan, op).v                 # [nb, M|N, K] for both
            bad = encoding.mismatch(enc, reads) & live_rows[:, None, None]
            if not bad.any():
                continue
            row, i, k = (int(x) for x in np.argwhere(bad)[0])
            at = -1 if encoding.AT not in p.ids else Field.gathered(p.ids[encoding.AT], plan, op).v[row, i, k]
            lanes = batched_plan(self.machine.plan_cache, insn, op, len(self.pmember_ids), self.lanes)[1]
            lane = int(lanes[row, i, k] if op == "A" else lanes[row, k, i])
            encoding.report(self, f"{insn.mnemonic}{_labelled(label)}", op, reads, int(enc[row, i, k]), int(at), lane,
                            int(bad.sum()), idx)

    def _operand_fields(self, insn, operand, p):
        """({field: Field} gathered through the operand's plan, {field: compact record form},
        {field: K sets of its rows, filled on demand}, the quantization directions of its rows or
        columns: _quant_rows, {field: Field.varies over every row, filled on demand}) of an operand's
        provenance ``p``. The last OPERAND_MEMO operands are
        remembered by the content of their planes and flags (kept as copies, so an in-place write
        elsewhere cannot make a stale match): one register feeds several instructions (QK's A in
        each of four tiles, PV's W in each of eight D tiles), and its gather, summary, K sets and
        directions are the same each time. A side whose first MEMO_TRIAL operands were all new (K
        or V loaded afresh for every instruction) is not remembered further: its compares and
        copies would be time for nothing."""
        out = self.mma_memos.get(_CALL_OPERANDS, {}).get(operand, {}).get(p) if p is not None else None
        if out is not None:                # made with the call's other operands (mma_many)
            return out
        items = tuple((f, x) for f, x in p.ids.items() if f not in RESERVED) if p is not None else ()
        memo = self._memo("_operand_memo", operand, MEMO_TRIAL)
        key, out = [], None

        def content():                 # made where first asked: not for an operand found as itself
            if not key:
                key.append((tuple((f, _content(x)) for f, x in items), _content(None if p is None else p.flags)))
            return key[0]
        if memo.on():
            # the same provenance object (an operand register fed to several instructions: planes
            # are not written in place once made) is the same content; else the bytes compare
            out = memo.recall(lambda k: k[0] is insn and k[1] == content(), lambda k: k[0] is insn and k[2] is p)
        if out is None:
            plan = flat_plan(self.machine.plan_cache, insn, operand, len(self.pmember_ids), self.lanes)
            fields = {f: Field.gathered(x, plan, operand) for f, x in items}
            out = (fields, {f: v.compact(operand) for f, v in fields.items()}, {}, self._quant_rows(insn, operand, p), {})
            if memo.on():
                memo.remember((insn, content(), p), out)
        return out

    def _side(self, insn, op, v):
        """(v's per-element provenance, then _operand_fields' answer for it, its fields' planes
        [nb, M, K] (A) or [nb, K, N] (B), and a dict of further answers about it, or None) for
        operand ``op``'s value ``v``. During an mma_many call its records share them
        (SIDES_TOGETHER: P~ feeds 16 PV instructions, each V tile 2), found by the value and
        its provenance object themselves (planes are not written in place once made)."""
        call = self.mma_memos.get(_CALL_OPERANDS) if SIDES_TOGETHER else None
        kept = None if call is None else call.setdefault(("side", op), [])
        for x, p, got in kept or ():
            if x is v and p is v.prov:
                return got
        p = elem_prov(self, v, v.n)
        fields, compact, rows, quant, varies = self._operand_fields(insn, op, p)
        planes = {f: x.v for f, x in fields.items()} if op == "A" else \
            {f: np.swapaxes(x.v, 1, 2) for f, x in fields.items()}
        got = (p, fields, compact, rows, quant, varies, planes, None if kept is None else {})
        if kept is not None:
            kept.append((v, v.prov, got))
        return got

    def _live_rows(self, insn, live):
        """(the provenance rows that issue: ``live`` of the provenance columns, each block's,
        whether all do), kept for an mma_many call's records (SIDES_TOGETHER) by the bytes of
        ``live``."""
        call = self.mma_memos.get(_CALL_OPERANDS) if SIDES_TOGETHER else None
        key = None if call is None else live.tobytes()
        got = None if call is None else call.get(("live rows", key))
        if got is None:
            rows = np.repeat(live[self.pmember_ids], insn.blocks)
            got = (rows, bool(rows.all()))
            if call is not None:
                call[("live rows", key)] = got
        return got

    @staticmethod
    def _k_fields(fields, compact, live_rows, every, varies, kept) -> set:
        """The operand's fields that take K sets: not one value along K on a row (compact "mn")
        and two present values in one row or column of a live member (_varies). Where every row
        is live, kept for the call (``kept``: _side's further answers, or None)."""
        got = kept.get("k fields") if kept is not None and every else None
        if got is None:
            got = {f for f, x in fields.items() if compact[f][0] != "mn" and _varies(x, f, live_rows, every, varies)}
            if kept is not None and every:
                kept["k fields"] = got
        return got

    def _c_side(self, insn, pc, flat_c):
        """(C's fields but its names, gathered through C's flat plan; its @mma and @mn so gathered;
        the record whose D it is: MmaLog.aligned), for C's per-element provenance ``pc`` during
        an mma_many call (SIDES_TOGETHER): made for every C of the call at once where each has
        the same planes (names, shapes and types), else None (each made alone)."""
        call = self.mma_memos.get(_CALL_OPERANDS) if SIDES_TOGETHER and pc is not None else None
        if call is None:
            return None
        made = call.get("c sides")
        if made is None:
            made = call["c sides"] = self._c_sides(insn, call.get("c values", ()), flat_c)
        return made.get(pc)            # by the object itself (Prov defines no __eq__)

    def _c_sides(self, insn, cs, flat_c) -> dict:
        """_c_side's answers {provenance: answer} for the C values ``cs`` of a call: each plane
        stacked over the distinct provenances and gathered in one take, the records found in
        one pass (MmaLog.aligned_many). Empty where fewer than two, or their planes differ in
        names, shape or type."""
        ps = []
        for c in cs:
            p = elem_prov(self, c, c.n)
            if p is not None and not any(q is p for q in ps):
                ps.append(p)
        names = tuple(ps[0].ids) if len(ps) > 1 else ()
        if not names or any(tuple(p.ids) != names for p in ps) or ("@mma" in names) != ("@mn" in names):
            return {}
        taken = {}
        for f in names:
            xs = [p.ids[f] for p in ps]
            if any(x.shape != xs[0].shape or x.dtype != xs[0].dtype for x in xs):
                return {}
            taken[f] = np.take(np.stack(xs).reshape(len(xs), -1), flat_c, axis=1)      # [n, nb, M, N]
        prevs = [None] * len(ps) if "@mma" not in names else \
            self.machine.mma_log.aligned_many(taken["@mma"], taken["@mn"], insn, self.pmember_ids)
        return {p: ({f: taken[f][i] for f in names if f not in RESERVED},
                    *((taken["@mma"][i], taken["@mn"][i]) if "@mma" in names else (None, None)), prevs[i])
                for i, p in enumerate(ps)}

    def _d_planes(self, insn, a, b, c, shape, flat_c, flat_d):
        """([(field, D's identity plane)] where it names an element, clashes, unsure, the fields
        whose K-slot check finds no slot that disagrees) of issue ``(a, b, c)`` of an mma_many
        call, as _mma_provenance makes them, made for every issue of the call at once (a field's
        planes in one compiled call, summaries.d_planes; its K-slot check over the issues
        stacked) where each issue's operands carry the same fields and C names alike; else None."""
        call = self.mma_memos.get(_CALL_OPERANDS) if SIDES_TOGETHER else None
        if call is None or call.get("issue") is None:
            return None
        made = call.get("d planes")
        if made is None:
            made = call["d planes"] = self._d_planes_made(insn, call.get("issues", ()), shape, flat_c, flat_d)
        i = call["issue"]
        if i >= len(made) or made[i][0] is not a or made[i][1] is not b or made[i][2] is not c:
            return None
        return made[i][3]

    def _d_planes_made(self, insn, issues, shape, flat_c, flat_d) -> list:
        """_d_planes' answers, ``[(a, b, c, answer)]`` in issue order; empty where some issue's
        provenance is not made (_mma_issue) or the issues' fields or C names differ."""
        if len(issues) < 2 or not all(any(v.prov is not None and not encoding.only(v.prov) for v in x[:3]) for x in issues):
            return []
        sides = [(self._side(insn, "A", a), self._side(insn, "B", b)) for a, b, _, _ in issues]
        pcs = [elem_prov(self, c, c.n) for _, _, c, _ in issues]
        cs = [self._c_side(insn, p, flat_c) for p in pcs]
        if any(p is not None and x is None for p, x in zip(pcs, cs)) or \
                len({p is not None and "@mma" in p.ids for p in pcs}) > 1:
            return []
        fcs = [{} if x is None else x[0] for x in cs]
        if len({(tuple(sa[6]), tuple(sb[6]), tuple(fc)) for (sa, sb), fc in zip(sides, fcs)}) > 1:
            return []
        named_c = pcs[0] is not None and "@mma" in pcs[0].ids
        n, (nb, M, N) = len(issues), flat_d.shape
        none2, none4 = np.empty((0, 0), np.int32), np.empty((n, 0, 0, 0), np.int32)
        planes, clashes = [[] for _ in range(n)], [[] for _ in range(n)]
        unsure = np.zeros((n,) + flat_d.shape, bool)
        fa, fb, fc = sides[0][0][6], sides[0][1][6], fcs[0]
        lr = np.stack([self._live_rows(insn, x[3])[0] for x in issues])[:, :, None]          # [n, nb, 1]
        k_clean = [set() for _ in range(n)]
        for f in sorted(fa.keys() & fb.keys()):
            (la, ha), (lb, hb) = ([np.stack([getattr(x[j][1][f], a) for x in sides]) for a in ("lo_r", "hi_r")]
                                  for j in (0, 1))
            bad = (ha >= 0) & (hb >= 0) & (np.minimum(la, lb) != np.maximum(ha, hb)) & lr
            for i in np.nonzero(~bad.reshape(n, -1).any(axis=1))[0].tolist():
                k_clean[i].add(f)
        for f in sorted(fa.keys() | fb.keys() | fc.keys()):
            # each issue's rows' and columns' names (_side_identity), stacked; an issue without: -1
            ra = [_side_identity(f, "A", sa[1], sa[2], f in sb[1], sa[7], none2)[1] for sa, sb in sides]
            cb = [_side_identity(f, "B", sb[1], sb[2], f in sa[1], sb[7], none2)[1] for sa, sb in sides]
            ra, cb = _stacked_names(ra, (nb, M)), _stacked_names(cb, (nb, N))
            if not ra.size and not cb.size and f not in fc:
                continue
            plane = np.full((n,) + shape, -1, np.int32)
            clash = np.full((n,) + flat_d.shape, -1, np.int32) if f in fc else none4
            vc = np.stack([np.ascontiguousarray(x[f], np.int32) for x in fcs]) if f in fc else none4
            got, clashed = np.zeros(n, np.bool_), np.zeros(n, np.bool_)
            summaries.d_planes(ra, cb, vc, flat_d, plane.reshape(n, -1), clash, got, clashed)
            for i in np.nonzero(got)[0].tolist():
                planes[i].append((f, plane[i]))
            for i in np.nonzero(clashed)[0].tolist():
                clashes[i].append((f, clash[i], fcs[i][f]))
            if f in fc:
                unsure |= clash == -2
            elif named_c:                  # C names no value of f: A's row or B's column does
                unsure |= ((ra[:, :, :, None] >= 0) if ra.size else False) | ((cb[:, :, None, :] >= 0) if cb.size else False)
        return [(a, b, c, (planes[i], clashes[i], unsure[i], k_clean[i])) for i, (a, b, c, _) in enumerate(issues)]

    def _mma_provenance(self, insn, a, b, c, idx, label, live):
        """K-slot check, the record's per-field K-slot values and K sets, and D's provenance, on the
        provenance columns (a folded batch's representatives: ``pmember_ids``). Returns (D's
        provenance, the record's fields: a, b, ks_a, ks_b, c_mma, c_mn)."""
        pm = len(self.pmember_ids)
        cache = self.machine.plan_cache
        shape, flat_c, flat_d, d_lanes, member_plane, mn_plane, absent = self._prov_plans(insn)
        if not self.exec_full:
            self.pexec(f"EXEC of {insn.mnemonic}")       # a folded batch's members all issue it, or none
        wide = self.machine.wide
        pa, sa, compact_a, rows_a, quant_a, varies_a, fa, side_a = self._side(insn, "A", a)      # [nb, M, K]
        pb, sb, compact_b, rows_b, quant_b, varies_b, fb, side_b = self._side(insn, "B", b)      # [nb, N, K]; fb [nb, K, N]
        live_rows, every = self._live_rows(insn, live)
        made = self._d_planes(insn, a, b, c, shape, flat_c, flat_d)       # made with the call's others
        # the K-slot check: on every field both carry, one value per K slot
        for f in sorted(fa.keys() & fb.keys()):
            if made is not None and f in made[3]:       # no K slot disagrees (made with the call's others)
                continue
            va, vb = fa[f], fb[f]                                     # [nb, M, K], [nb, K, N]
            la, lb, ha, hb = sa[f].lo_r, sb[f].lo_r, sa[f].hi_r, sb[f].hi_r
            # both sides hold a value in the slot, and the values are not all one
            bad = (ha >= 0) & (hb >= 0) & (np.minimum(la, lb) != np.maximum(ha, hb)) & live_rows[:, None]
            if bad.any():
                for row in np.nonzero(bad.any(axis=1))[0].tolist():
                    k = int(np.argmax(bad[row]))
                    ka_set = sorted(set(va[row, :, k].tolist()) - {-1})
                    kb_set = sorted(set(vb[row, k, :].tolist()) - {-1})
                    lane = int(batched_plan(cache, insn, "A", pm, self.lanes)[1][row, 0, k])
                    if len(ka_set) == 1 and len(kb_set) == 1:
                        what = f"gets {f} {ka_set} from A but {kb_set} from B"
                    else:                     # one side's rows (or columns) disagree among themselves
                        what = f"must hold one {f} in every row of A and column of B, but " + ", ".join(
                            f"{side} hold{' several:' if len(vals) > 1 else ''} {vals}"
                            for side, vals in ((f"A's {insn.M} rows", ka_set), (f"B's {insn.N} columns", kb_set)))
                    self.finding("ab-kslot-mismatch", f"{insn.mnemonic}{_labelled(label)}: K slot {k} {what} "
                                 f"({int(bad[row].sum())} K slots disagree)", lane=lane,
                                 instruction=idx, field=f, k_slot=k, a_values=ka_set, b_values=kb_set,
                                 slots=[int(x) for x in np.nonzero(bad[row])[0]])
        self._unknown_kslots(insn, idx, label, (("A", pa), ("B", pb)), live_rows)
        quant = {op: d for op, d in (("A", quant_a), ("B", quant_b)) if d is not None}
        rec_a, rec_b = dict(compact_a), dict(compact_b)
        ks_a, ks_b = {}, {}
        # K sets per field that varies along K (two present values in one A row or B column of a
        # member that issues the instruction)
        k_fields = self._k_fields(sa, compact_a, live_rows, every, varies_a, side_a) | \
            self._k_fields(sb, compact_b, live_rows, every, varies_b, side_b)
        for f in k_fields:
            if f in fa:
                if f not in rows_a:
                    rows_a[f] = known_one(row_sets(fa[f], wide))      # [nb, M]
                ks_a[f] = rows_a[f]
            if f in fb:
                if f not in rows_b:
                    rows_b[f] = known_one(row_sets(np.swapaxes(fb[f], 1, 2), wide))   # [nb, N]
                ks_b[f] = rows_b[f]
        # D[m][n]: the identities of A row m and B column n (_d_identity), then @mma/@mn
        ids = {}
        pc = elem_prov(self, c, c.n)
        c_side = self._c_side(insn, pc, flat_c)       # (fc, C's @mma and @mn, the record whose D C is)
        fc = c_side[0] if c_side is not None else \
            {f: np.take(p, flat_c) for f, p in (pc.ids.items() if pc is not None else ()) if f not in RESERVED}
        none2, none3 = np.empty((0, 0), np.int32), np.empty((0, 0, 0), np.int32)
        as_i32 = lambda x, empty: empty if x is None else np.ascontiguousarray(x, np.int32)
        clashes = []                       # (field, D's value where C holds another, C's values)
        unsure = np.zeros(flat_d.shape, bool)  # C or A.B names the element on a field, the other does not
        named_c = pc is not None and "@mma" in pc.ids
        if made is not None:
            planes, clashes, unsure, _ = made
            ids.update(planes)
        for f in sorted(fa.keys() | fb.keys() | fc.keys()) if made is None else ():
            # [nb, M], [nb, N] (None: no name) and as int32 ([0, 0]: none)
            ra, ra32 = _side_identity(f, "A", sa, compact_a, f in sb, side_a, none2)
            cb, cb32 = _side_identity(f, "B", sb, compact_b, f in sa, side_b, none2)
            if ra is None and cb is None and f not in fc:
                continue
            plane = np.full(shape, -1, np.int32)
            clash = np.full(flat_d.shape, -1, np.int32) if f in fc else none3
            # D = A.B + C: the row's and column's identity where they agree, then C's element's
            got, clashed = summaries.d_plane(ra32, cb32, as_i32(fc.get(f), none3), flat_d, plane.reshape(-1), clash)
            if got:
                ids[f] = plane
            if clashed:
                clashes.append((f, clash, fc[f]))
            if f in fc:
                unsure |= clash == -2
            elif named_c:                  # C names no value of f: A's row or B's column does
                unsure |= ((np.full(flat_d.shape[:2], -1) if ra is None else ra)[:, :, None] >= 0) | \
                    ((np.full(flat_d.shape[::2], -1) if cb is None else cb)[:, None, :] >= 0)
        ids["@mma"] = member_plane + np.int32(idx)
        if absent is not None:
            ids["@mma"][absent] = -1
        ids["@mn"] = mn_plane.copy()
        c_mma = c_mn = None
        other = np.zeros(flat_d.shape, bool)     # elements whose C was summed for another element
        if pc is not None and "@mma" in pc.ids:
            c_mma, c_mn = (np.take(pc.ids["@mma"], flat_c), np.take(pc.ids["@mn"], flat_c)) if c_side is None \
                else c_side[1:3]
        if clashes:
            other = chain.report_carried(self, insn, idx, label, clashes, c_mma, c_mn, d_lanes, live_rows)
            if c_mma is not None and other.any():     # another element's sums are no part of this one's
                c_mma, c_mn = np.where(other, -1, c_mma), np.where(other, -1, c_mn)
        if c_mma is not None:
            prev = c_side[3] if c_side is not None and c_mma is c_side[1] else \
                self.machine.mma_log.aligned(c_mma, c_mn, insn, self.pmember_ids)
            rows = None if prev is None or self.fold is None else prev.rows_of(self.pmember_ids)
            if ks_a or ks_b:             # what C consumed, summed again by A.B
                theirs = chain.c_sets(self.machine.mma_log, prev, rows, c_mma, c_mn, wide)
                chain.report_summed_again(self, insn, idx, label, ks_a, ks_b, theirs, c_mma, c_mn, d_lanes,
                                          live_rows, other | unsure)
            if prev is not None:         # C is the previous instruction's D, element for element
                fields, at = prev.fields_for(rows) if rows is not None else ({"ks_a": prev.ks_a, "ks_b": prev.ks_b}, None)
                for side, pside in ((ks_a, fields["ks_a"]), (ks_b, fields["ks_b"])):
                    for f in pside.keys() | side.keys():
                        ps = pside.get(f) if rows is None or f not in pside else pside[f].map(lambda x: x[at])
                        if f in side and f in pside:
                            side[f] = self._chain_union(side[f], ps, wide)
                        elif f in pside:
                            side[f] = ps
                c_mma, c_mn = (prev.c_mma, prev.c_mn) if prev.chained() else (None, None)
        return Prov(itemsize(insn.cd_type), ids), dict(a=rec_a, b=rec_b, ks_a=ks_a, ks_b=ks_b, c_mma=c_mma, c_mn=c_mn,
                                                        quant=quant or None)

    def _chain_union(self, mine, theirs, wide):
        """``mine.union(theirs, wide)``: an instruction's K sets united with those its C consumed.
        The instructions of a K step that share an operand (QK's Q tile, PV's P~) unite the same
        two objects, so the last CHAIN_UNIONS answers are kept by the objects asked and shared by
        those records, read-only (a write raises); the instructions whose operands are other
        objects with the same sets (a K step's V tiles, its K tiles) find it by the two triples
        and shapes. Only where both hold one set of one window everywhere: the union is then the
        two triples' alone (no wide set interned)."""
        # kept by the two objects themselves (Mask defines no __eq__: found as themselves)
        memo = self.mma_memos.setdefault("chain unions", {})
        got = memo.get((mine, theirs))
        if got is not None:
            return got
        one_a, one_b = getattr(mine, "one", None), getattr(theirs, "one", None)
        window = CHAIN_UNIONS and one_a is not None and one_b is not None and one_a[2] == 0 == one_b[2] and \
            (one_a[0] < 0 or one_b[0] < 0 or one_a[0] == one_b[0])
        key = None
        if window:          # other objects, the same two sets (a K step's V tiles, its K tiles): the same union
            key = (one_a[0], one_a[1].tobytes(), one_b[0], one_b[1].tobytes(), mine.base.shape, theirs.base.shape)
            sets = self.mma_memos.setdefault("chain unions by sets", {})
            got = sets.get(key)
            if got is not None:
                return got
        got = mine.union(theirs, wide)
        if window and isinstance(got, OneSet):
            for x in (got.base, got.bits, got.wide):
                x.setflags(write=False)
            for d, k in ((memo, (mine, theirs)), (sets, key)):
                d[k] = got                 # the last CHAIN_UNIONS kept: the oldest goes first
                while len(d) > CHAIN_UNIONS:
                    del d[next(iter(d))]
        return got

    def _prov_plans(self, insn):
        """What _mma_provenance reads of the plan cache for ``insn`` on this wave's provenance
        columns: (D's register shape, C's and D's flat plans, D's lanes, D's member and @mn name
        planes, where D names no element or None), looked up once per (record, columns) instead
        of seven lookups a record (the same cached arrays: read only)."""
        ids = self.pmember_ids
        key = ("prov plans", insn.mnemonic, self.lanes, self.pw, ids.tobytes())
        got = self.mma_memos.get(key)
        if got is None:
            cache, pm = self.machine.plan_cache, len(ids)
            shape = (insn.elems("D"), self.pw)
            got = self.mma_memos[key] = (shape, flat_plan(cache, insn, "C", pm, self.lanes),
                                         flat_plan(cache, insn, "D", pm, self.lanes),
                                         batched_plan(cache, insn, "D", pm, self.lanes)[1],
                                         *name_planes(cache, insn, shape, ids, self.lanes),
                                         name_absent(cache, insn, shape, ids, self.lanes))
        return got

    def _quant_rows(self, insn, op, p):
        """The direction operand ``op``'s rows (A) or columns (B) were quantized in (qdir.py),
        int8 [nb, M|N]; None when no byte of it carries a mark."""
        if p is None or p.flags is None or not (p.flags & (qdir.QPOS | qdir.QNEG)).any():
            return None
        plan = flat_plan(self.machine.plan_cache, insn, op, len(self.pmember_ids), self.lanes)
        got = qdir.operand_direction_at(p.flags, plan, op)
        if got is not None:
            return got
        q = qdir.quantized(p, p.flags.shape).astype(np.int32)
        return qdir.operand_direction(Field.gathered(q, plan, op).v)      # [nb, M|N, K] for both
