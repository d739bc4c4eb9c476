"""Bytes of unknown origin (gfxsim/asm/origin.py): a token that reaches a register along a path
gfxsim does not route — through an SGPR, or through arithmetic on a word whose bytes hold different
tokens — is marked, and a matrix instruction whose K slots hold such bytes reports it."""
from __future__ import annotations

import numpy as np
import pytest

from gfxsim import Buffer, launch
from gfxsim.asm.run import kernel_from_text, run_asm
from gfxsim.errors import ArgumentError
from gfxsim.machine.provenance import UNKNOWN

ARGS = [("k", "global_buffer", 8), ("out", "global_buffer", 8)]
HEAD = """
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_load_dwordx2 s[6:7], s[0:1], 0x8
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32_e32 v1, 2, v0
"""


def _k(tagged: bool) -> Buffer:
    k = np.arange(1, 257, dtype=np.uint32)
    return Buffer("k", k, {"token": np.arange(256)}) if tagged else Buffer("k", k)


def _unknown_bytes(out: Buffer) -> np.ndarray:
    mp = out.prov
    if mp is None or mp.flags is None:
        return np.zeros(out.nbytes, bool)
    f = np.repeat(mp.flags, mp.unit) if mp.unit > 1 else mp.flags
    return (f & UNKNOWN) != 0


BODIES = {
    # s_load of a tagged word, moved to a VGPR
    "s_load -> v_mov_b32": "  s_load_dword s8, s[4:5], 0x10\n  s_waitcnt lgkmcnt(0)\n  v_mov_b32_e32 v3, s8",
    # ... through scalar arithmetic first
    "s_load -> s_add_u32 -> v_add_u32": """
  s_load_dword s8, s[4:5], 0x10
  s_waitcnt lgkmcnt(0)
  s_add_u32 s9, s8, 1
  v_add_u32_e32 v3, s9, v0""",
    # a tagged VGPR through v_readfirstlane and back
    "v_readfirstlane_b32 -> v_mov_b32": """
  global_load_dword v2, v1, s[4:5]
  s_waitcnt vmcnt(0)
  v_readfirstlane_b32 s8, v2
  v_mov_b32_e32 v3, s8""",
}


@pytest.mark.parametrize("form", sorted(BODIES))
@pytest.mark.parametrize("tagged", [True, False])
def test_a_token_through_an_sgpr_is_marked(form, tagged):
    out = Buffer.empty("out", 64, np.uint32)
    kern = kernel_from_text(HEAD + BODIES[form] + "\n  global_store_dword v1, v3, s[6:7]", "sgpr", args=ARGS)
    run_asm(kern, args={"k": _k(tagged), "out": out})
    marked = _unknown_bytes(out)
    assert marked.all() if tagged else not marked.any(), (form, tagged, marked.sum())


def test_an_sgpr_overwritten_by_an_untagged_value_is_clean():
    out = Buffer.empty("out", 64, np.uint32)
    kern = kernel_from_text(HEAD + """
  s_load_dword s8, s[4:5], 0x10
  s_waitcnt lgkmcnt(0)
  s_mov_b32 s8, 7
  v_mov_b32_e32 v3, s8
  global_store_dword v1, v3, s[6:7]""", "sgpr_clean", args=ARGS)
    run_asm(kern, args={"k": _k(True), "out": out})
    assert not _unknown_bytes(out).any()


def test_carry_adds_keep_what_v_add_u32_keeps():
    """v_add_co_u32 on a tagged value: the 32-bit add's rule (the token kept), not a silent clear."""
    out = Buffer.empty("out", 64, np.uint32)
    kern = kernel_from_text(HEAD + """
  global_load_dword v2, v1, s[4:5]
  s_waitcnt vmcnt(0)
  v_add_co_u32_e32 v3, vcc, 5, v2
  global_store_dword v1, v3, s[6:7]""", "carry", args=ARGS)
    k = Buffer("k", np.arange(64, dtype=np.uint32), {"token": np.arange(64)})
    run_asm(kern, args={"k": k, "out": out})
    ids = np.repeat(out.prov.ids["token"], out.prov.unit)[:256].reshape(64, 4)
    assert (ids == np.arange(64)[:, None]).all()
    assert (out.array == np.arange(64) + 5).all()


MFMA = """
  s_load_dword s8, s[4:5], 0x10
  global_load_dwordx2 v[4:5], v1, s[4:5]
  s_waitcnt vmcnt(0) lgkmcnt(0)
  v_mov_b32_e32 v2, {a}
  v_mov_b32_e32 v3, {a}
  v_mfma_i32_16x16x32_i8 v[6:9], v[2:3], v[4:5], 0
  s_nop 7
  s_nop 7
  s_nop 2
  v_lshlrev_b32_e32 v10, 4, v0
  global_store_dwordx4 v10, v[6:9], s[6:7]
"""


@pytest.mark.parametrize("a", ["s8", "v4"])
def test_a_matrix_instruction_reports_kslots_of_unknown_origin(a):
    """A from an SGPR loaded from tagged bytes: every K slot of A is of unknown origin (a finding
    naming the instruction, operand and slots); A from the tagged VGPR itself: none."""
    kern = kernel_from_text(HEAD.replace("v_lshlrev_b32_e32 v1, 2, v0", "v_lshlrev_b32_e32 v1, 3, v0")
                            + MFMA.format(a=a), "mfma_unknown", args=ARGS)
    k = Buffer("k", np.ones(128, np.uint32), {"token": np.arange(128)})
    out = Buffer.empty("out", 256, np.int32)
    run = run_asm(kern, args={"k": k, "out": out}, arch="gfx942")
    got = [f for f in run.findings if f.kind == "kslot-unknown-origin"]
    if a == "s8":
        assert got and got[0].details["operand"] == "A" and got[0].details["slots"] == list(range(32)), run.findings
        assert "v_mfma_i32_16x16x32_i8" in got[0].message and "K slots {0-31}" in got[0].message
    else:
        assert not got, [f.message for f in got]


def test_python_scalar_load_of_tagged_bytes_is_refused():
    """A Python number cannot carry tags: w.scalar_load of tagged bytes says so and how to keep them."""
    k = Buffer("k", np.arange(64, dtype=np.int32), {"token": np.arange(64)})
    meta = Buffer("meta", np.arange(64, dtype=np.int32))

    def kern(w, buf):
        w.scalar_load(buf, 8, "i32")
    launch(kern, grid=1, arch="gfx942", args=(meta,))                # untagged: a plain number
    with pytest.raises(ArgumentError, match=r"s_load from 'k' at byte 8: the bytes carry tags \(token\).*global_load"):
        launch(kern, grid=1, arch="gfx942", args=(k,))


@pytest.mark.parametrize("batch", [1, 4])
def test_members_loading_different_scalar_words_are_marked_by_their_own(batch):
    """Four workgroups side by side load the scalar word at 4 x workgroup id: only k[0] and k[2]
    are tagged, so workgroups 0 and 2 store bytes of unknown origin and 1 and 3 do not, in a
    batch (one gather for every member's address) as one at a time."""
    k = np.arange(1, 257, dtype=np.uint32)
    tok = np.full(256, -1)
    tok[[0, 2]] = [0, 2]
    out = Buffer.empty("out", 4 * 64, np.uint32)
    kern = kernel_from_text("""
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_load_dwordx2 s[6:7], s[0:1], 0x8
  s_lshl_b32 s9, s2, 2
  s_waitcnt lgkmcnt(0)
  s_load_dword s8, s[4:5], s9
  s_lshl_b32 s10, s2, 8
  v_lshlrev_b32_e32 v1, 2, v0
  v_add_u32_e32 v1, s10, v1
  s_waitcnt lgkmcnt(0)
  v_mov_b32_e32 v3, s8
  global_store_dword v1, v3, s[6:7]""", "sgpr_members", args=ARGS)
    run_asm(kern, grid=(4,), args={"k": Buffer("k", k, {"token": tok}), "out": out}, batch=batch)
    assert (out.array.reshape(4, 64) == np.array([1, 2, 3, 4])[:, None]).all()
    marked = _unknown_bytes(out).reshape(4, 256).all(axis=1)
    assert marked.tolist() == [True, False, True, False]


def test_a_per_element_register_is_marked_as_its_bytes_would_be(monkeypatch):
    """mark_unknown keeps a register read per element (4-byte words) per element: the stored bytes'
    identities and marks are those of marking every byte (the reference below)."""
    from gfxsim.asm.state import WaveState
    from gfxsim.machine.provenance import Prov
    from gfxsim.machine.vgpr import VGPRs

    def by_bytes(self, f, first, n):
        if not self.w.provenance:
            return
        cols = np.repeat(self.taint_v, self.lanes) & self.exec
        if not cols.any():
            return
        v = self.vread(f, first, n)
        p = v.prov.per_byte() if v.prov is not None else Prov(1, {})
        pc = self.w.pcols(cols[None, :], "the lanes of an SGPR of unknown origin")
        flags = np.zeros((4 * n, self.w.pw), np.uint8) if p.flags is None else p.flags.copy()
        flags |= np.where(pc, UNKNOWN, np.uint8(0)).astype(np.uint8)
        self.regfile(f).write(first, VGPRs(self.w, v.val, v.dtype, Prov(1, p.ids, p.fp, flags), regs=(first, n)))

    body = """
  s_load_dword s8, s[4:5], 0x10
  global_load_dword v2, v1, s[4:5]
  s_waitcnt vmcnt(0) lgkmcnt(0)
  v_cmp_gt_u32_e32 vcc, 40, v0
  s_and_saveexec_b64 s[10:11], vcc
  v_add_u32_e32 v2, s8, v2
  s_or_b64 exec, exec, s[10:11]
  global_store_dword v1, v2, s[6:7]"""
    runs = []
    for mark in (WaveState.mark_unknown, by_bytes):
        monkeypatch.setattr(WaveState, "mark_unknown", mark)
        out = Buffer.empty("out", 64, np.uint32)
        run_asm(kernel_from_text(HEAD + body, "per_element_mark", args=ARGS), args={"k": _k(True), "out": out})
        mp = out.prov
        runs.append(({f: np.repeat(a, mp.unit) if mp.unit > 1 else a for f, a in mp.ids.items()}, _unknown_bytes(out)))
    (ids_a, marked_a), (ids_b, marked_b) = runs
    assert marked_a[:160].all() and not marked_a[160:].any()          # lanes 0-39 only
    assert np.array_equal(marked_a, marked_b) and ids_a.keys() == ids_b.keys() and ids_a
    assert all(np.array_equal(ids_a[f], ids_b[f]) for f in ids_a)
