"""Numeric-format provenance (gfxsim/machine/encoding.py): a buffer's encoding travels with its
bytes, and a matrix instruction or conversion that reads them in another reports format-mismatch
— on both front ends. Bytes with no encoding are never checked."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from gfxsim import Buffer, launch
from gfxsim.arch import get_arch
from gfxsim.asm.run import kernel_from_text, run_asm
from gfxsim.errors import ArgumentError
from gfxsim.machine import encoding

from test_findings_registry import fp8_qk

MFMA = "v_mfma_f32_16x16x32_fp8_fp8"


def test_the_records_say_which_encoding_each_operand_reads():
    g942 = get_arch("gfx942").instruction(MFMA)
    assert (g942.reads("A"), g942.reads("B")) == ("e4m3fnuz", "e4m3fnuz")
    assert get_arch("gfx942").instruction("v_mfma_f32_16x16x32_bf8_fp8").reads("A") == "e5m2fnuz"
    assert get_arch("gfx942").instruction("v_mfma_i32_16x16x32_i8").reads("B") == "i8"
    assert get_arch("gfx942").instruction("v_mfma_f32_16x16x16_f16").reads("A") == "f16"
    assert get_arch("gfx942").instruction("v_mfma_f32_16x16x16_bf16").reads("A") == "bf16"
    e4m3 = [i for m, i in get_arch("sm_90").instructions.items() if "e4m3" in m]
    assert e4m3 and {i.reads("A") for i in e4m3} == {"e4m3fn"}            # OCP, not CDNA3's
    assert get_arch("gfx942").cvt8_encodings == {"fp8": "e4m3fnuz", "bf8": "e5m2fnuz"}


def test_e4m3fn_bytes_read_as_e4m3fnuz_are_half_the_numbers_and_named():
    run, s, meant = fp8_qk("e4m3fn")
    np.testing.assert_allclose(s, meant / 2, rtol=1e-6)            # bias 7 read with bias 8
    (f,) = run.findings
    assert f.kind == "format-mismatch" and f.details["operand"] == "A"
    assert (f.details["written"], f.details["reads"]) == ("e4m3fn", "e4m3fnuz")
    assert f.details["written_by"] == "buffer 'q'" and f.details["element"] == 0 and f.details["elements"] == 512
    assert "e4m3fn by buffer 'q' element 0" in f.message and MFMA in f.message and f.lane == 0
    run, s, meant = fp8_qk("e4m3fnuz")
    assert run.findings == [] and np.allclose(s, meant, rtol=1e-6)


def test_negative_zero_in_e4m3fn_is_nan_in_e4m3fnuz():
    q = np.ones((16, 32), np.float32)
    q[3, 5] = -0.0                     # 0x80: -0 in OCP e4m3fn, the only NaN in e4m3fnuz
    run, s, _ = fp8_qk("e4m3fn", q=q)
    assert np.isnan(s[3]).all() and not np.isnan(np.delete(s, 3, axis=0)).any()
    assert [f.kind for f in run.findings] == ["format-mismatch"]


def test_the_element_named_is_the_buffers_where_it_declared_its_encoding():
    enc = encoding.buffer_planes("q", "e4m3fn", np.array([[40]]), declared=True)
    assert encoding.describe(int(enc[encoding.ENC][0, 0]), int(enc[encoding.AT][0, 0])) == "buffer 'q' element 40"
    # an int8 array names its encoding, not the element (no index plane: the cache's dwords stay whole)
    q = Buffer("q", np.ones((16, 32), np.int8))
    assert encoding.AT not in encoding.buffer_planes("q", q.encoding, np.array([[0]]), declared=False)

    def int8_as_fp8(w):
        g, c = w.lane_id // 16, w.lane_id % 16
        v = w.global_load(q, c * 32 + g * 8, 8, "fp8")
        w.mma(MFMA, v, v)
    a, b = launch(int8_as_fp8, arch="gfx942").findings
    assert (a.details["operand"], b.details["operand"]) == ("A", "B")
    assert (a.details["written"], a.details["reads"], a.details["element"]) == ("i8", "e4m3fnuz", -1)
    assert "written in i8 by buffer 'q' (" in a.message


def _load_through(route, declared):
    """Q's bytes through ``route`` on their way to the MFMA: "lds" (a store and a load), "perm"
    (v_perm_b32 swapping the words twice), "arith" (an add of 0 on the packed words, which writes a
    number)."""
    rng = np.random.default_rng(1)
    q = Buffer("q", rng.standard_normal((16, 32)).astype(ml_dtypes.float8_e4m3fn).view(np.uint8), encoding=declared)
    k = Buffer("k", rng.standard_normal((16, 32)).astype(ml_dtypes.float8_e4m3fnuz).view(np.uint8),
               encoding="e4m3fnuz")

    def kern(w):
        g, c = w.lane_id // 16, w.lane_id % 16
        qv = w.global_load(q, c * 32 + g * 8, 8, "fp8")
        if route == "lds":
            lds = w.shared("tile", (64, 8), np.uint8)
            w.lds_store(lds, w.lane_id * 8, qv)
            w.barrier()
            qv = w.lds_load(lds, w.lane_id * 8, 8, "fp8")
        elif route == "perm":
            for _ in range(2):
                u = qv.bitcast("u32")
                qv = w.cat(w.perm(u[1], u[0], 0x03020100), w.perm(u[1], u[0], 0x07060504)).bitcast("fp8")
        elif route == "arith":
            qv = (qv.bitcast("u32") + 0).bitcast("fp8")
        return w.mma(MFMA, qv, w.global_load(k, c * 32 + g * 8, 8, "fp8"))
    return launch(kern, arch="gfx942")


@pytest.mark.parametrize("route", ["lds", "perm"])
def test_the_encoding_travels_through_lds_and_byte_routing(route):
    assert [f.kind for f in _load_through(route, "e4m3fn").findings] == ["format-mismatch"]
    assert _load_through(route, "e4m3fnuz").findings == []


def test_arithmetic_writes_a_number_not_the_bytes_encoding():
    assert [f.kind for f in _load_through("arith", "e4m3fn").findings if f.kind == "format-mismatch"] == []


def test_bytes_without_an_encoding_are_not_checked():
    assert _load_through("lds", None).findings == []


def test_a_conversion_reads_its_source_in_its_type_and_writes_its_own():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 32)).astype(np.float32)

    def run(declared, to=None):
        q = Buffer("q", x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8), encoding=declared)
        k = Buffer("k", x.astype(ml_dtypes.float8_e4m3fnuz).view(np.uint8), encoding="e4m3fnuz")

        def kern(w):
            g, c = w.lane_id // 16, w.lane_id % 16
            qv = w.global_load(q, c * 32 + g * 8, 8, "fp8")
            if to is not None:          # f32 and back: the fp8 bytes are the conversion's
                qv = qv.bitcast("fp8_e4m3").to("f32").to(to).bitcast("fp8")
            else:
                qv.to("f32")
            w.mma(MFMA, qv, w.global_load(k, c * 32 + g * 8, 8, "fp8"))
        return launch(kern, arch="gfx942")
    f = run("e4m3fn").findings                     # v_cvt_f32_fp8 reads fnuz; so does the MFMA
    assert [x.details["operand"] for x in f] == ["source", "A"] and "v_cvt_f32_fp8" in f[0].message
    assert run("e4m3fnuz").findings == []
    assert run("e4m3fn", to="fp8").findings == []                    # read as what it is, written as fnuz
    (f,) = run("e4m3fn", to="fp8_e4m3").findings                     # written as OCP e4m3fn, read as fnuz
    assert f.details["written_by"] == "v_cvt_pk_fp8_f32" and f.details["element"] == -1


def test_provenance_off_checks_nothing():
    rng = np.random.default_rng(0)
    q = Buffer("q", rng.standard_normal((16, 32)).astype(ml_dtypes.float8_e4m3fn).view(np.uint8), encoding="e4m3fn")

    def kern(w):
        g, c = w.lane_id // 16, w.lane_id % 16
        v = w.global_load(q, c * 32 + g * 8, 8, "fp8")
        assert v.prov is None
        w.mma(MFMA, v, v)
    assert launch(kern, arch="gfx942", provenance=False).findings == []


def test_a_buffer_declares_an_encoding_its_elements_can_hold():
    assert Buffer("a", np.zeros(4, np.int8)).encoding == "i8"
    assert Buffer("a", np.zeros(4, np.float16)).encoding == "f16"
    assert Buffer("a", np.zeros(4, np.uint8)).encoding is None          # fp8 or u8: the user says
    # ml_dtypes' types name theirs (the Triton door hands such arrays over as declared bits)
    assert [encoding.of_dtype(getattr(ml_dtypes, t)) for t in ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
                                                               "float8_e5m2fnuz", "bfloat16")] == \
        ["e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz", "bf16"]
    assert Buffer("a", np.zeros(4, np.uint16), encoding="bf16").encoding == "bf16"
    assert Buffer.empty("a", 4, "u8", encoding="e5m2fnuz").encoding == "e5m2fnuz"
    with pytest.raises(ArgumentError, match="unknown encoding 'e4m3'.*e4m3fn"):
        Buffer("a", np.zeros(4, np.uint8), encoding="e4m3")
    with pytest.raises(ArgumentError, match="e4m3fn is 8-bit.*float32.*uint8"):
        Buffer("a", np.zeros(4, np.float32), encoding="e4m3fn")


ASM_ARGS = [("q", "global_buffer", 8), ("k", "global_buffer", 8), ("s", "global_buffer", 8)]
ASM_HEAD = """
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_load_dwordx2 s[6:7], s[0:1], 0x8
  s_load_dwordx2 s[8:9], s[0:1], 0x10
  s_waitcnt lgkmcnt(0)
  v_and_b32_e32 v1, 15, v0
  v_lshrrev_b32_e32 v2, 4, v0
  v_lshlrev_b32_e32 v3, 5, v1
  v_lshl_add_u32 v3, v2, 3, v3
  global_load_dwordx2 v[4:5], v3, s[4:5]
  global_load_dwordx2 v[6:7], v3, s[6:7]
  s_waitcnt vmcnt(0)
"""
ASM_STORE = """
  v_lshlrev_b32_e32 v12, 8, v2
  v_lshl_add_u32 v12, v1, 2, v12
  global_store_dword v12, v8, s[8:9]
  global_store_dword v12, v9, s[8:9] offset:64
  global_store_dword v12, v10, s[8:9] offset:128
  global_store_dword v12, v11, s[8:9] offset:192
"""


def _asm_qk(declared, body):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 16, 32)).astype(np.float32)
    fp8 = getattr(ml_dtypes, "float8_" + declared)          # the host encodes as it declares
    q = Buffer("q", x.astype(fp8).view(np.uint8), encoding=declared)
    k = Buffer("k", y.astype(ml_dtypes.float8_e4m3fnuz).view(np.uint8), encoding="e4m3fnuz")
    s = Buffer.empty("s", (16, 16), np.float32)
    kern = kernel_from_text(ASM_HEAD + body + ASM_STORE, "qk_fp8", args=ASM_ARGS)
    run = run_asm(kern, args={"q": q, "k": k, "s": s})
    meant = x.astype(fp8).astype(np.float32) @ \
        y.astype(ml_dtypes.float8_e4m3fnuz).astype(np.float32).T
    return run, s.array, meant


def test_the_asm_front_end_checks_its_mfma_through_the_same_unit():
    body = f"  {MFMA} v[8:11], v[4:5], v[6:7], 0\n"
    run, s, meant = _asm_qk("e4m3fn", body)
    (f,) = run.findings
    assert f.kind == "format-mismatch" and (f.details["written"], f.details["reads"]) == ("e4m3fn", "e4m3fnuz")
    assert f.details["operand"] == "A" and f.details["written_by"] == "buffer 'q'"
    np.testing.assert_allclose(s, meant / 2, rtol=1e-6)
    run, s, meant = _asm_qk("e4m3fnuz", body)
    assert run.findings == [] and np.allclose(s, meant, rtol=1e-6)


def test_the_asm_conversions_read_and_write_gfx942s_encoding():
    # q's first byte to f32 (v_cvt_f32_fp8 reads fnuz on gfx942) and back into byte 0 of v4
    body = (f"  v_cvt_f32_fp8_e32 v20, v4\n  v_cvt_pk_fp8_f32 v4, v20, v20\n  {MFMA} v[8:11], v[4:5], v[6:7], 0\n")
    run, _, _ = _asm_qk("e4m3fn", body)
    f = run.findings_of("format-mismatch")
    assert [x.details["operand"] for x in f] == ["source", "A"]       # the cvt, then the MFMA's other bytes
    assert "v_cvt_f32_fp8" in f[0].message
    run, _, _ = _asm_qk("e4m3fnuz", body)
    assert run.findings == []


def test_the_encoding_travels_through_a_store_into_the_next_launch():
    """A copy kernel stores Q's bytes into an undeclared buffer; the next launch's MFMA reads them:
    the bytes still say what wrote them."""
    def twice(declared):
        rng = np.random.default_rng(3)
        q = Buffer("q", rng.standard_normal((16, 32)).astype(ml_dtypes.float8_e4m3fn).view(np.uint8),
                   encoding=declared)
        tmp = Buffer.empty("tmp", (16, 32), np.uint8)

        def copy(w):
            w.global_store(tmp, w.lane_id * 8, w.global_load(q, w.lane_id * 8, 8, "u8"))
        assert launch(copy, arch="gfx942").findings == []

        def qk(w):
            g, c = w.lane_id // 16, w.lane_id % 16
            v = w.global_load(tmp, c * 32 + g * 8, 8, "fp8")
            w.mma(MFMA, v, v)
        return launch(qk, arch="gfx942").findings
    f = twice("e4m3fn")
    assert [x.details["operand"] for x in f] == ["A", "B"]
    assert f[0].details["written_by"] == "buffer 'q'" and f[0].details["element"] == 0
    assert twice("e4m3fnuz") == [] and twice(None) == []
