"""gfx942's sparse v_smfmac_* through the asm front end: A 4:2 sparse (two random positions of every
group of four K, in random order), compressed and indexed as AMD's calculator lays A and the
compression index out (the golden file), B dense, C in D's registers; D against an exact numpy
reference of the dense product, with the index set chosen by ABID (CBSZ 0) or set 0 (CBSZ != 0)
while the other sets hold other positions."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from gfxsim.arch import get_arch
from gfxsim.asm.run import kernel_from_text, run_asm
from gfxsim.machine.memory import Buffer

from support.amd_calculator import byte_tags, golden, inputs, loads, NP, pack, pack_sparse, reference, sparse_a, unpack


SPARSE = sorted(m for m in golden()["archs"]["CDNA3"] if m.startswith("v_smfmac_"))
A_AT, B_AT, I_AT, D_AT = 2, 4, 8, 64


def _kernel(mnemonic, insn, mods):
    rng_ = lambda first, n: f"v[{first}:{first + n - 1}]"
    body = ["s_load_dwordx2 s[4:5], s[0:1], 0x0", "s_load_dwordx2 s[6:7], s[0:1], 0x8",
            "s_load_dwordx2 s[8:9], s[0:1], 0x10", "s_load_dwordx2 s[10:11], s[0:1], 0x18",
            "s_load_dwordx2 s[12:13], s[0:1], 0x20", "s_waitcnt lgkmcnt(0)", "v_lshlrev_b32_e32 v1, 2, v0",
            *loads(A_AT, insn.regs("A"), 4), *loads(B_AT, insn.regs("B"), 6), *loads(D_AT, insn.regs("D"), 8),
            *loads(I_AT, 1, 12), "s_waitcnt vmcnt(0)",
            f"{mnemonic} {rng_(D_AT, insn.regs('D'))}, {rng_(A_AT, insn.regs('A'))}, {rng_(B_AT, insn.regs('B'))}, "
            f"v{I_AT} {mods}".strip(), "s_nop 7", "s_nop 7"]
    body += [f"global_store_dword v1, v{D_AT + r}, s[10:11] offset:{r * 256}" for r in range(insn.regs("D"))]
    args = [(n, "global_buffer", 8) for n in ("a", "b", "c", "d", "idx")]
    return kernel_from_text("\n".join(body), "sparse", args=args, vgprs=128)


def _a_tags(mnemonic, pos, eb, wrong=False) -> np.ndarray:
    """int32 per byte of compressed A: the dense K of the value it belongs to (``wrong``: the K
    position mirrored within its group, as if a kernel had built the index the other way round)."""
    g = golden()["archs"]["CDNA3"][mnemonic]["layouts"]["A"]
    out = np.full((1 + max(c[0] for c in g["columns"]), 64, 4), -1, np.int32)
    for (first, _, lo, _), cells in zip(g["columns"], g["cells"]):
        c = np.array(cells)
        p = pos[c[:, 0], c[:, 1] // 4]                          # [64, 2]
        k = c[:, 1, None] + (3 - p if wrong else p)
        for s in range(2):
            out[first, :, lo // 8 + s * eb:lo // 8 + (s + 1) * eb] = k[:, s, None]
    return out.reshape(-1)


def _run(mnemonic, cbsz=0, abid=0, tags=None, a_tags=None):
    insn = get_arch("gfx942").instruction(mnemonic)
    rng = np.random.default_rng(zlib.crc32(f"{mnemonic}{cbsz}{abid}".encode()))
    dense, pos, vals = sparse_a(insn, rng)
    _, b, c = inputs(insn, rng)
    a_words, index = pack_sparse(mnemonic, vals, pos, 0 if cbsz else abid, rng)
    b_raw = pack("gfx942", mnemonic, "B", b, insn.regs("B")).reshape(-1)
    a_tag = None if a_tags is None else {"token": _a_tags(mnemonic, pos, vals.dtype.itemsize, a_tags == "wrong")}
    bufs = {"a": Buffer("a", a_words.reshape(-1).view(np.uint8), a_tag), "idx": Buffer("idx", index),
            "b": Buffer("b", b_raw.view(np.uint8), tags and {"token": tags(insn)}),
            "c": Buffer("c", pack("gfx942", mnemonic, "D", c, insn.regs("D")).reshape(-1))}
    d = Buffer.empty("d", (insn.regs("D") * 64,), np.uint32)
    mods = " ".join(f"{k}:{v}" for k, v in (("cbsz", cbsz), ("abid", abid)) if v)
    run = run_asm(_kernel(mnemonic, insn, mods), args={**bufs, "d": d})
    return insn, run, unpack("gfx942", mnemonic, d.array, insn, NP[insn.cd_type]), reference(insn, dense, b, c)


@pytest.mark.parametrize("mnemonic", SPARSE)
def test_smfmac_executes_as_the_dense_product(mnemonic):
    _, run, got, want = _run(mnemonic)
    assert not run.findings, [f.message for f in run.findings]
    assert np.array_equal(got, want), f"{int((got != want).sum())} of {got.size} elements differ"


@pytest.mark.parametrize("mnemonic,cbsz,abid", [("v_smfmac_f32_16x16x32_f16", 0, 3), ("v_smfmac_f32_16x16x32_f16", 1, 2),
                                                ("v_smfmac_i32_16x16x64_i8", 0, 1), ("v_smfmac_i32_32x32x32_i8", 2, 1),
                                                ("v_smfmac_f32_32x32x16_bf16", 0, 2)])
def test_cbsz_abid_choose_the_index_set(mnemonic, cbsz, abid):
    _, run, got, want = _run(mnemonic, cbsz, abid)
    assert np.array_equal(got, want)


def test_an_abid_beyond_the_index_sets_is_refused():
    insn = get_arch("gfx942").instruction("v_smfmac_i32_16x16x64_i8")        # two sets of 16 bits
    with pytest.raises(Exception, match="abid:2 out of range"):
        run_asm(_kernel("v_smfmac_i32_16x16x64_i8", insn, "abid:2"),
                args={n: Buffer(n, np.zeros(64 * 16, np.uint32)) for n in ("a", "b", "c", "d", "idx")})


def test_b_provenance_reaches_d_through_the_expanded_a():
    """B tagged by K: the K-slot check sees A's stored values at their expanded positions (A carries
    no tag, so no mismatch) and D records the product; tags on B's K rows survive the expansion."""
    tags = lambda insn: byte_tags("gfx942", insn.mnemonic, "B", insn.regs("B"), lambda k, j, blk: k)
    insn, run, got, want = _run("v_smfmac_f32_16x16x32_f16", tags=tags)
    assert not run.findings and np.array_equal(got, want)
    (rec,) = list(run.mmacs())
    assert rec.insn.mnemonic == "v_smfmac_f32_16x16x32_f16" and rec.insn.operand("A").cols == insn.K


@pytest.mark.parametrize("second", [0.0, 2.0])
def test_two_values_at_one_position(second):
    """Python front end: both stored values of a group naming one K position. A stored zero is no
    value (the group's other value stands); two nonzero values are refused, naming the lane."""
    from gfxsim.machine import launch
    from gfxsim.errors import GfxSimError
    insn = get_arch("gfx942").instruction("v_smfmac_f32_16x16x32_f16")
    got = {}

    def kernel(w):
        # every lane: group 0 holds (1, second), both at position 1; group 1 holds (3, 0) at 2 and 0
        a = np.tile(np.array([1, second, 3, 0], np.float16)[:, None], (1, 64))
        idx = w.from_lanes(np.full(64, 0b0101 | (0b0010 << 4), np.uint32), "u32")
        vb = w.from_lanes(np.ones((8, 64), np.float16), "f16")
        got["d"] = w.smfmac(insn.mnemonic, w.from_lanes(a, "f16"), vb, None, idx).val.copy()

    if second:
        with pytest.raises(GfxSimError, match="values 0 and 1 of lane 0 both name K position 1"):
            launch(kernel, arch="gfx942")
        return
    launch(kernel, arch="gfx942")
    assert (got["d"] == 4 * (1 + 3)).all()          # each row: 8 groups over 4 lane groups, 1 + 3 per pair


def test_one_event_per_sparse_instruction():
    """The back end records the smfmac's event (as for v_mfma_*): the asm front end adds none, so
    instruction numbers stay one per instruction."""
    body = "\n".join([f"v_mov_b32_e32 v{i}, 0" for i in range(12)] +
                     ["v_smfmac_f32_16x16x32_f16 v[8:11], v[0:1], v[2:5], v6", "s_nop 0"])
    run = run_asm(kernel_from_text(body, "k", args=[("x", "global_buffer", 8)]),
                  args={"x": Buffer("x", np.zeros(4, np.uint32))})
    assert run.machine.trace.n_events == len(body.splitlines()) + 1          # s_endpgm too


@pytest.mark.parametrize("mnemonic", ["v_smfmac_f32_16x16x32_f16", "v_smfmac_i32_32x32x32_i8"])
@pytest.mark.parametrize("a_tags", ["right", "wrong"])
def test_a_provenance_lands_where_the_index_puts_it(mnemonic, a_tags):
    """A's stored values tagged by their dense K, B's rows by K: the expansion routes each value's
    bytes to the K slot its index field names, so the K-slot check agrees; tags naming the mirrored
    position (an index built the other way round) are a mismatch."""
    tags = lambda insn: byte_tags("gfx942", insn.mnemonic, "B", insn.regs("B"), lambda k, j, blk: k)
    _, run, got, want = _run(mnemonic, tags=tags, a_tags=a_tags)
    assert np.array_equal(got, want)
    kinds = {f.kind for f in run.findings}
    assert kinds == (set() if a_tags == "right" else {"ab-kslot-mismatch"}), [f.message for f in run.findings]
