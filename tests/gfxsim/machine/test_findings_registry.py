"""Every finding kind of the registry has a defective kernel that reports it and a fixed twin that
does not. A kind added to ``findings.REGISTRY`` without a pair here fails.

``PAIRS`` maps each kind to its pairs: ``(variant, defective, fixed)``, where ``defective`` and
``fixed`` are zero-argument callables returning a ``Run``. The defective kernel must report the
kind, with every field of the kind's details record present in ``finding.details`` (and ``count``
when the kind deduplicates), and nothing but that kind; the fixed twin reports no finding at all.
"""
from dataclasses import fields

import numpy as np
import pytest

from gfxsim import Buffer, launch
from gfxsim.machine import findings
from gfxsim.machine.findings import REGISTRY, FindingLog, Finding

from support.pv_tile import run_pv
from support.qk_chain import run_chain
from support import mubuf

MMAC = "v_mmac_i32_16x16x32_i8"          # gfx936, K = 32 i8 per instruction
TOK = np.broadcast_to(np.arange(64), (16, 64))


# -- kslot-unknown-origin: A's packed bytes went through integer arithmetic ----------------------
def _unknown_origin(arithmetic):
    a = Buffer("a", np.ones((16, 64), np.int8), {"token": TOK})
    b = Buffer("b", np.ones((16, 64), np.int8), {"token": TOK})

    def unknown_origin(w):
        r, c = w.lane_id // 16, w.lane_id % 16
        av = w.global_load(a, c * 64 + r * 8, 8, "i8")
        if arithmetic:       # a byte-wise bias done by adds on the packed words: carries cross bytes
            av = ((av.bitcast("u32") + 0x01010101) - 0x01010101).bitcast("i8")
        bv = w.global_load(b, c * 64 + r * 8, 8, "i8")
        w.mma(MMAC, av, bv)
    return launch(unknown_origin, arch="gfx936")


# -- ab-kslot-mismatch: B loaded 8 tokens later than A -------------------------------------------
def _ab_kslot(shift):
    a = Buffer("a", np.ones((16, 64), np.int8), {"token": TOK})
    b = Buffer("b", np.ones((16, 64), np.int8), {"token": TOK})

    def ab_kslot(w):
        r, c = w.lane_id // 16, w.lane_id % 16
        av = w.global_load(a, c * 64 + r * 8, 8, "i8")
        bv = w.global_load(b, c * 64 + r * 8 + shift, 8, "i8")
        w.mma(MMAC, av, bv)
    return launch(ab_kslot, arch="gfx936")


# -- scale-group-mismatch: the PV tile, contiguous vs fragment-aligned scale groups --------
def _scale_group(grouping):
    return run_pv(grouping)[0]


# -- dequant-direction: Q quantized to fp8 by a per-wave amax scale, the QK^T result rescaled ------
def _dequant_direction(fixed):
    """q_scale = 224 / amax; fixed: q * q_scale, rescaled by 0.5 / q_scale (undone). Defective:
    q / q_scale (a multiplier used as a divisor), rescaled the same: amax applied twice."""
    rng = np.random.default_rng(0)
    dims = np.broadcast_to(np.arange(32), (16, 32))
    rows = np.broadcast_to(np.arange(16)[:, None], (16, 32))
    q = Buffer("q", rng.standard_normal((16, 32)).astype(np.float32), {"head": rows, "dim": dims})
    k = Buffer("k", rng.standard_normal((16, 32)).astype(np.float32), {"token": rows, "dim": dims})

    def dequant_direction(w):
        g, c = w.lane_id // 16, w.lane_id % 16         # token/head c, dims 8g..8g+7
        kv = w.cat(*[w.global_load(k, c * 128 + g * 32 + h, 16, "f32") for h in (0, 16)])
        qv = w.cat(*[w.global_load(q, c * 128 + g * 32 + h, 16, "f32") for h in (0, 16)])
        amax = abs(qv[0])
        for e in range(1, 8):
            amax = w.max(amax, abs(qv[e]))
        q_scale = 224.0 / w.reduce(amax, "max")
        q8 = (qv * q_scale if fixed else qv / q_scale).to("fp8")
        acc = w.mma("v_mfma_f32_16x16x32_fp8_fp8", kv.to("fp8"), q8)
        w.dequant(acc, w.group_scale(0.5 / q_scale))
    return launch(dequant_direction, arch="gfx942")


# -- token-coverage: inside w.coverage, one MMAC consumes 32 of the 64 expected tokens twice ------
def _coverage(fixed):
    v = Buffer("v", np.ones((16, 64), np.int8), {"token": TOK})

    def coverage(w):
        r, c = w.lane_id // 16, w.lane_id % 16
        p = w.const(1, "i8", 8)
        with w.coverage("O", expect=range(64)):
            for j in range(2):
                jj = j if fixed else 0                   # the defect: the second k-step reloads step 0
                w.mma(MMAC, p, w.global_load(v, c * 64 + r * 16 + 8 * jj, 8, "i8"))
    return launch(coverage, arch="gfx936")


# -- lds-race: wave 0 writes, wave 1 reads; only a barrier between them orders the two ---------------
def _lds_race(fixed):
    def lds_race(w):
        reg = w.shared("x", (64,), "f32")
        if w.wave_id == 0:
            w.lds_store(reg, w.lane_id * 4, w.lane_id.to("f32"))
        if fixed:
            w.barrier()
        if w.wave_id == 1:
            w.lds_load(reg, w.lane_id * 4, 4, "f32")
    return launch(lds_race, grid=1, waves_per_group=2, arch="gfx942")


# -- uninitialized-read, four places a never-written byte can come from ---------------------------
def _uninit_register(fixed):
    def uninit_register(w):
        if fixed:
            v = w.zeros("f32")                           # written in every lane first
        with w.if_(w.lane_id < 32):
            if fixed:
                v[0] = w.lane_id.to("f32")               # then updated in lanes 0-31
            else:
                v = w.lane_id.to("f32")                  # a new value written in lanes 0-31 only
        v + 1.0                                          # every lane reads it
    return launch(uninit_register, arch="gfx942")


def _uninit_lds(fixed):
    def uninit_lds(w):
        reg = w.shared("s", (64,), "f32")
        if fixed:
            w.lds_store(reg, w.lane_id * 4, w.lane_id.to("f32"))
        w.lds_load(reg, w.lane_id * 4, 4, "f32")
    return launch(uninit_lds, arch="gfx942")


def _uninit_global(fixed):
    out = Buffer.empty("out", (64,), np.float32)

    def uninit_global(w):
        if fixed:
            w.global_store(out, w.lane_id * 4, w.lane_id.to("f32"))
        w.global_load(out, w.lane_id * 4, 4, "f32")
    return launch(uninit_global, arch="gfx942")


def _uninit_operand(fixed):
    def uninit_operand(w):
        b = w.const(1, "i8", 8)
        if fixed:
            a = w.const(2, "i8", 8)
        else:
            with w.if_(w.lane_id < 48):
                a = w.const(2, "i8", 8)                  # lanes 48-63 of A never written
        w.mma(MMAC, a, b)
    return launch(uninit_operand, arch="gfx936")


# -- int32-overflow: C close to INT32_MAX plus 32 products of 127*127 --------------------------------
def _int32_overflow(fixed):
    def int32_overflow(w):
        a = w.const(127, "i8", 8)
        c = w.const(0 if fixed else 2 ** 31 - 1000, "i32", 4)
        w.mma(MMAC, a, a, c)
    return launch(int32_overflow, arch="gfx936")


# -- lds-bank-conflict: a 128-byte row stride puts every lane of a phase on one bank; 132 pads it ---
def _bank_conflict(fixed):
    stride = 132 if fixed else 128

    def bank_conflict(w):
        reg = w.shared("rows", (64 * 132,), "u8")
        w.lds_store(reg, w.lane_id * stride, w.zeros("f32"))
    return launch(bank_conflict, arch="gfx942")


def _store_mismatch(transposed):
    """Row r of a tagged input stored to out[r] — or, transposed, to out[63 - r]."""
    rows = np.arange(64)
    x = Buffer("x", np.ones((64, 4), np.float32), tags={"row": rows[:, None]})
    out = Buffer.empty("out", (64, 4), np.float32, tags={"row": rows[:, None]})

    def k(w):
        v = w.global_load(x, w.lane_id * 16, 16, "f32")
        w.global_store(out, ((63 - w.lane_id) if transposed else w.lane_id) * 16, v)
    return launch(k)


# -- double-count: a k-step's result added to the accumulator a second time --------------------------
def _double_count(fixed):
    v = Buffer("v", np.ones((16, 64), np.int8), {"token": TOK})

    def double_count(w):
        r, c = w.lane_id // 16, w.lane_id % 16
        p = w.const(1, "i8", 8)
        o = w.zeros("f32", 4)
        for j in range(2):
            acc = w.mma(MMAC, p, w.global_load(v, c * 64 + r * 16 + 8 * j, 8, "i8")).to("f32")
            o += acc
        if not fixed:
            o += acc                                     # the defect: step 1 added again
    return launch(double_count, arch="gfx936")


# -- accumulator-carried: the int32 accumulator zeroed once, not once per output tile ---------------
def _qk_tiles(zero_per_tile, steps=(0, 1)):
    """S = Q.K^T over two 16-token tiles, each the chain of its k-steps ``steps`` (32 dims each)
    through C. The defect: ``acc`` zeroed once before the tiles, so tile 1 starts from tile 0's sums."""
    rng = np.random.default_rng(0)
    q = Buffer("q", rng.integers(-5, 5, (16, 64)).astype(np.int8),
               {"row": np.broadcast_to(np.arange(16)[:, None], (16, 64)), "dim": np.broadcast_to(np.arange(64), (16, 64))})
    k = Buffer("k", rng.integers(-5, 5, (32, 64)).astype(np.int8),
               {"token": np.broadcast_to(np.arange(32)[:, None], (32, 64)), "dim": np.broadcast_to(np.arange(64), (32, 64))})

    def qk_tiles(w):
        r, c = w.lane_id // 16, w.lane_id % 16          # A row / B token c, dims 32*ks + 8r .. +7
        qa = [w.global_load(q, c * 64 + 32 * ks + 8 * r, 8, "i8") for ks in range(2)]
        acc = w.zeros("i32", 4)
        for t in range(2):
            if zero_per_tile:
                acc = w.zeros("i32", 4)
            for ks in steps:
                kb = w.global_load(k, (16 * t + c) * 64 + 32 * ks + 8 * r, 8, "i8")
                acc = w.mma(MMAC, qa[ks], kb, acc, label=f"tile {t} k {ks}")
    return launch(qk_tiles, arch="gfx936")


# -- buffer-out-of-range: 40 rows behind a raw descriptor of num_records 0x7ffffffe, 64 lanes reading --
def _buffer_overrun(masked):
    x = Buffer("x", np.arange(40, dtype=np.int32), {"token": np.arange(40)})
    return mubuf.run(mubuf.MASKED if masked else mubuf.COPY, x, nr_x=0x7FFFFFFE, nr_y=0x7FFFFFFE)[1]


def _buffer_past_records(nr):
    return mubuf.run(mubuf.COPY, Buffer("x", np.arange(64, dtype=np.int32)), nr_x=nr)[1]


# -- missing-wait: a global load's register read before s_waitcnt vmcnt(0) ---------------------------
MISSING_WAIT = """
s_load_dwordx4 s[4:7], s[0:1], 0x0
s_waitcnt lgkmcnt(0)
v_lshlrev_b32_e32 v1, 2, v0
global_load_dword v2, v1, s[4:5]
{wait}
v_add_f32_e32 v3, 1.0, v2
global_store_dword v1, v3, s[6:7]
"""


def _missing_wait(wait):
    from gfxsim.asm.run import kernel_from_text, run_asm
    k = kernel_from_text(MISSING_WAIT.format(wait=wait), "test_missing_wait",
                         args=[("x", "global_buffer", 8), ("y", "global_buffer", 8)])
    return run_asm(k, 1, 64, args=dict(x=Buffer("x", np.ones(64, np.float32)), y=Buffer.empty("y", (64,), np.float32)))


# -- format-mismatch: OCP e4m3fn bytes from the host fed to gfx942's fp8 MFMA, which reads e4m3fnuz --
def fp8_qk(q_encoding, q=None, k=None):
    """S = Q Kᵀ of one 16x16x32 fp8 MFMA, Q's bytes encoded (and declared) in ``q_encoding``, K's in
    e4m3fnuz. Returns (run, S, the exact product of the numbers the host meant)."""
    import ml_dtypes
    rng = np.random.default_rng(0)
    q = rng.standard_normal((16, 32)).astype(np.float32) if q is None else q
    k = rng.standard_normal((16, 32)).astype(np.float32) if k is None else k
    qa = Buffer("q", q.astype(getattr(ml_dtypes, "float8_" + q_encoding)).view(np.uint8), encoding=q_encoding)
    ka = Buffer("k", k.astype(ml_dtypes.float8_e4m3fnuz).view(np.uint8), encoding="e4m3fnuz")
    s = Buffer.empty("s", (16, 16), np.float32)

    def qk(w):
        g, c = w.lane_id // 16, w.lane_id % 16           # row/token c, K bytes 8g..8g+7
        d = w.mma("v_mfma_f32_16x16x32_fp8_fp8", w.global_load(qa, c * 32 + g * 8, 8, "fp8"),
                  w.global_load(ka, c * 32 + g * 8, 8, "fp8"))
        for i in range(4):
            w.global_store(s, ((4 * g + i) * 16 + c) * 4, d[i])
    run = launch(qk, arch="gfx942")
    meant = q.astype(getattr(ml_dtypes, "float8_" + q_encoding)).astype(np.float32) @ \
        k.astype(ml_dtypes.float8_e4m3fnuz).astype(np.float32).T
    return run, s.array, meant


# -- identity-mismatch: another head's weight, and a row sum over lanes of four rows ------------------
def _other_heads_weight(fixed):
    """out[h][d] = part[h][d] * wt[h]; the defect reads the weight of head h + 1."""
    heads = np.arange(4)
    part = Buffer("part", np.ones((4, 16), np.float32), {"head": heads[:, None]})
    wt = Buffer("wt", np.full(4, 0.5, np.float32), {"head": heads})

    def other_heads_weight(w):
        h = w.lane_id // 16
        x = w.global_load(part, w.lane_id * 4, 4, "f32")
        x * w.global_load(wt, (h if fixed else (h + 1) % 4) * 4, 4, "f32")
    return launch(other_heads_weight, arch="gfx942")


def _row_sum_too_wide(fixed):
    """Lane l holds x[row l // 16][token l % 16]: a row sum reduces over 16 lanes (tokens); the
    defect's butterfly runs over the whole wave, adding other rows' values."""
    x = Buffer("x", np.ones((4, 16), np.float32), {"row": np.arange(4)[:, None], "token": np.arange(16)[None, :]})

    def row_sum_too_wide(w):
        w.reduce(w.global_load(x, w.lane_id * 4, 4, "f32"), "sum", 16 if fixed else 64)
    return launch(row_sum_too_wide, arch="gfx942")


PAIRS = {
    "ab-kslot-mismatch": [("B 8 tokens ahead", lambda: _ab_kslot(8), lambda: _ab_kslot(0))],
    "kslot-unknown-origin": [("packed bytes through an add", lambda: _unknown_origin(True),
                              lambda: _unknown_origin(False))],
    "scale-group-mismatch": [("contiguous groups", lambda: _scale_group("contiguous"),
                              lambda: _scale_group("fragment")),
                             ("a wrong part of a scale product", lambda: run_chain("combined", True)[0],
                              lambda: run_chain("combined", False)[0])],
    "dequant-direction": [("Q divided by its multiplier", lambda: _dequant_direction(False),
                           lambda: _dequant_direction(True))],
    "token-coverage": [("k-step reloaded", lambda: _coverage(False), lambda: _coverage(True))],
    "lds-race": [("no barrier", lambda: _lds_race(False), lambda: _lds_race(True))],
    "uninitialized-read": [
        ("register", lambda: _uninit_register(False), lambda: _uninit_register(True)),
        ("lds", lambda: _uninit_lds(False), lambda: _uninit_lds(True)),
        ("global", lambda: _uninit_global(False), lambda: _uninit_global(True)),
        ("operand A", lambda: _uninit_operand(False), lambda: _uninit_operand(True)),
    ],
    "int32-overflow": [("C near INT32_MAX", lambda: _int32_overflow(False), lambda: _int32_overflow(True))],
    "lds-bank-conflict": [("128-byte stride", lambda: _bank_conflict(False), lambda: _bank_conflict(True))],
    "store-mismatch": [("output transposed", lambda: _store_mismatch(True), lambda: _store_mismatch(False))],
    "format-mismatch": [("e4m3fn bytes read as e4m3fnuz", lambda: fp8_qk("e4m3fn")[0],
                         lambda: fp8_qk("e4m3fnuz")[0])],
    "double-count": [("k-step added twice", lambda: _double_count(False), lambda: _double_count(True)),
                     ("k-step chained twice through C", lambda: _qk_tiles(True, (0, 1, 1)),
                      lambda: _qk_tiles(True, (0, 1)))],
    "accumulator-carried": [("acc zeroed once, not per tile", lambda: _qk_tiles(False), lambda: _qk_tiles(True))],
    "missing-wait": [("no s_waitcnt vmcnt(0)", lambda: _missing_wait(""), lambda: _missing_wait("s_waitcnt vmcnt(0)"))],
    "identity-mismatch": [("another head's weight", lambda: _other_heads_weight(False),
                           lambda: _other_heads_weight(True)),
                          ("row sum across rows", lambda: _row_sum_too_wide(False), lambda: _row_sum_too_wide(True))],
    "buffer-out-of-range": [("unmasked tail", lambda: _buffer_overrun(False), lambda: _buffer_overrun(True)),
                            ("past num_records", lambda: _buffer_past_records(100), lambda: _buffer_past_records(256))],
}

# what a variant's finding says about itself, beyond the registry's fields
EXPECT = {
    ("uninitialized-read", "register"): {"what": "register"},
    ("uninitialized-read", "lds"): {"what": "lds", "name": "s"},
    ("uninitialized-read", "global"): {"what": "global", "name": "out"},
    ("uninitialized-read", "operand A"): {"what": "operand A"},
    ("lds-race", "no barrier"): {"other_wave": 0},
    ("missing-wait", "no s_waitcnt vmcnt(0)"): {"register": "v2", "access": "read", "counter": "vmcnt",
                                                "needed": "s_waitcnt vmcnt(0)", "lanes": list(range(64))},
    ("lds-bank-conflict", "128-byte stride"): {"degree": 32, "region": "rows"},
    ("kslot-unknown-origin", "packed bytes through an add"): {"operand": "A", "slots": list(range(32))},
    ("ab-kslot-mismatch", "B 8 tokens ahead"): {"field": "token", "k_slot": 0, "a_values": [0], "b_values": [8]},
    ("token-coverage", "k-step reloaded"): {"tile": repr("O")},
    ("scale-group-mismatch", "a wrong part of a scale product"): {"field": "dim", "axis": "K",
                                                                 "scale_over": list(range(16))},
    ("dequant-direction", "Q divided by its multiplier"): {"operand": "B", "quantized": "x*amax", "rescaled": "amax",
                                                           "lanes": list(range(64))},     # the key as written (repr)
    ("buffer-out-of-range", "unmasked tail"): {"reason": "buffer", "buffer": "x", "lanes": list(range(40, 64)),
                                               "offset": 160, "access": "load"},
    ("buffer-out-of-range", "past num_records"): {"reason": "num_records", "lanes": list(range(25, 64)), "offset": 100},
    ("identity-mismatch", "another head's weight"): {"field": "head", "values": [0, 1], "lanes": list(range(64)),
                                                     "operation": "v_mul_f32"},
    ("identity-mismatch", "row sum across rows"): {"field": "row", "values": [0, 1], "operation": "v_add_f32"},
    ("double-count", "k-step added twice"): {"field": "token",
                                             "values": [t for t in range(64) if t % 16 >= 8]},
    ("double-count", "k-step chained twice through C"): {"field": "dim", "values": list(range(32, 64))},
    ("accumulator-carried", "acc zeroed once, not per tile"): {"field": "token", "element": [0, 0], "c_value": 0,
                                                               "d_value": 16, "elements": 256},
}


def _cases():
    """(kind, variant) for every registry kind; a kind without a pair is a case that fails."""
    out = []
    for kind in REGISTRY:
        pairs = PAIRS.get(kind) or [(None, None, None)]
        out += [pytest.param(kind, i, id=f"{kind}-{p[0] or 'MISSING'}") for i, p in enumerate(pairs)]
    return out


@pytest.mark.parametrize("kind,variant", _cases())
def test_every_kind_has_a_defective_and_a_fixed_kernel(kind, variant):
    assert kind in PAIRS and PAIRS[kind], f"finding kind {kind!r} has no defective/fixed kernel pair in PAIRS"
    name, defective, fixed = PAIRS[kind][variant]
    bad = defective()
    got = bad.findings_of(kind)
    assert got, f"{kind} ({name}): the defective kernel reports no {kind}; it reports {bad.findings}"
    assert {f.kind for f in bad.findings} == {kind}, f"{kind} ({name}): other findings too: {bad.findings}"
    rec = REGISTRY[kind]
    want = {f.name for f in fields(rec.details)} | ({"count"} if rec.dedupe else set())
    for f in got:
        assert want <= set(f.details), f"{kind}: details {sorted(f.details)} lack {sorted(want - set(f.details))}"
        assert set(f.details) <= want, f"{kind}: details has fields outside the record: {set(f.details) - want}"
        assert f.kernel == bad.kernel and f.workgroup == (0, 0, 0) and f.wave is not None
        assert f.source and f.source.startswith(("test_", "pv_tile.py:", "qk_chain.py:")), \
            f"{kind}: source {f.source!r} is not the kernel's line"
        assert f.is_performance == rec.performance
    for k, v in EXPECT.get((kind, name), {}).items():
        assert got[0].details[k] == v, (kind, name, k, got[0].details[k])
    good = fixed()
    assert not good.findings_of(kind), f"{kind} ({name}): the fixed twin still reports {good.findings_of(kind)}"
    assert not good.findings, f"{kind} ({name}): the fixed twin reports {good.findings}"


def test_the_readme_findings_table_lists_every_kind_and_only_those():
    from support import ROOT
    text = (ROOT / "README.md").read_text()
    table = text.split("## Findings", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip().strip("`") for line in table.splitlines()
            if line.startswith("| `") or line.startswith("| ") and "`" in line.split("|")[1]}
    assert rows == set(REGISTRY), (set(REGISTRY) - rows, rows - set(REGISTRY))


def test_pairs_name_only_registry_kinds():
    assert set(PAIRS) <= set(REGISTRY), set(PAIRS) - set(REGISTRY)
    assert findings.KINDS == {k: v.summary for k, v in REGISTRY.items()}


def test_token_coverage_names_the_tokens():
    f = _coverage(False).findings_of("token-coverage")
    assert len(f) == 1
    never = [t for t in range(64) if t % 16 >= 8]          # step 1's tokens, never loaded
    assert f[0].details["never"] == never
    assert sorted(f[0].details["multiple"]) == [t for t in range(64) if t % 16 < 8]


# -- the dedupe key ------------------------------------------------------------------------------------
def test_the_same_finding_at_the_same_statement_is_counted_not_repeated():
    out = Buffer.empty("out", (64,), np.float32)

    def k(w):
        for _ in range(2):
            w.global_load(out, w.lane_id * 4, 4, "f32")        # one statement, executed twice
        w.global_load(out, w.lane_id * 4, 4, "f32")            # another statement
    f = launch(k, arch="gfx942").findings_of("uninitialized-read")
    assert [x.details["count"] for x in f] == [2, 1]
    assert f[0].source != f[1].source


def test_bank_conflicts_in_a_loop_are_one_finding_counted():
    def k(w):
        reg = w.shared("rows", (64 * 128,), "u8")
        for _ in range(3):
            w.lds_store(reg, w.lane_id * 128, w.zeros("f32"))
    f = launch(k, arch="gfx942").findings_of("lds-bank-conflict")
    assert len(f) == 1 and f[0].details["count"] == 3


def test_finding_log_dedupes_by_the_kinds_key():
    log = FindingLog("k")
    d = dict(what="global", name="out")
    a = log.report("uninitialized-read", "m", d, source="k.py:3", workgroup=(0, 0, 0), wave=0, lane=0)
    b = log.report("uninitialized-read", "m", d, source="k.py:3", workgroup=(0, 0, 0), wave=0, lane=5)
    assert a is b and a.details["count"] == 2 and len(log.findings) == 1
    log.report("uninitialized-read", "m", d, source="k.py:4", workgroup=(0, 0, 0))        # another statement
    log.report("uninitialized-read", "m", d, source="k.py:3", workgroup=(1, 0, 0))        # another workgroup
    log.report("uninitialized-read", "m", dict(d, name="o2"), source="k.py:3", workgroup=(0, 0, 0))
    assert [f.details["count"] for f in log.findings] == [2, 1, 1, 1]
    # a kind with an empty key: every report stands alone, and carries no count
    cov = dict(tile="O", never=[1], multiple={})
    log.report("token-coverage", "m", cov, source="k.py:9")
    log.report("token-coverage", "m", cov, source="k.py:9")
    tc = [f for f in log.findings if f.kind == "token-coverage"]
    assert len(tc) == 2 and all("count" not in f.details for f in tc)


def test_dedupe_merges_lanes_of_scale_findings():
    log = FindingLog("k")
    base = dict(field="token", scale_over=[0], k_set=[0, 1], foreign=[1], extra=[], mma_event=7)
    log.report("scale-group-mismatch", "m", dict(base, lanes=[3, 1]), wave=0, instruction=7)
    f = log.report("scale-group-mismatch", "m", dict(base, lanes=[2, 1]), wave=0, instruction=7)
    assert len(log.findings) == 1 and f.details["count"] == 2 and f.details["lanes"] == [1, 2, 3]


def test_unknown_details_field_is_a_type_error():
    log = FindingLog("k")
    with pytest.raises(TypeError):
        log.report("uninitialized-read", "m", dict(what="global", name="out", colour="red"))
    with pytest.raises(TypeError):                       # and a missing one
        log.report("uninitialized-read", "m", dict(what="global"))
    assert not log.findings


def test_unknown_kind_is_a_value_error():
    with pytest.raises(ValueError, match="no-such-kind"):
        FindingLog("k").report("no-such-kind", "m", {})
    with pytest.raises(ValueError, match="no-such-kind"):
        Finding("no-such-kind", "m")


def test_every_details_record_is_frozen_and_keyword_only():
    from dataclasses import FrozenInstanceError
    for kind, rec in REGISTRY.items():
        names = [f.name for f in fields(rec.details)]
        assert names, kind
        with pytest.raises(TypeError):                   # keyword-only
            rec.details(*range(len(names)))
        inst = rec.details(**{n: [] for n in names})
        with pytest.raises(FrozenInstanceError):
            setattr(inst, names[0], 1)
        # no generated __eq__/__hash__/__repr__ (findings.details_record: each is compiled at import)
        assert (rec.details.__eq__, rec.details.__hash__, rec.details.__repr__) == \
            (object.__eq__, object.__hash__, object.__repr__), kind
        both = {n for n in names} | {"source", "workgroup", "wave", "lane", "instruction", "address", "kernel"}
        assert set(rec.dedupe) <= both, f"{kind}: dedupe key names {set(rec.dedupe) - both}"
