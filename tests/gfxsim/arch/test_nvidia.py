"""NVIDIA warp32 profiles (sm_89, sm_90): records, the machine on 32 lanes, shared-memory banks,
accumulator records, and gfxsim against the golden file the H200 probe wrote (no GPU needed)."""
import hashlib
import json
import os
from dataclasses import replace

import numpy as np
import pytest

from gfxsim import Buffer, launch
from gfxsim.arch import AccumulatorPrecision, get_arch, get_instruction, nvidia
from gfxsim.cli import main
from gfxsim.machine.accum import accumulate, product_terms
from gfxsim.machine.banks import bank_conflicts, phases
from gfxsim.machine.mma import compute
from support import ROOT

ROOT = str(ROOT)
PROBE = os.path.join(ROOT, "hw_probes", "nvidia")
S8 = "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"
S4 = "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32"
E4M3 = "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"
F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
BF16 = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
ALL = (S8, S4, E4M3, F16, BF16)


@pytest.fixture(scope="module")
def golden():
    with open(os.path.join(PROBE, "golden_h200.json")) as f:
        return json.load(f)


# -- profiles and the CLI ------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ["sm_89", "sm_90", "h200", "ada"])
def test_profiles_are_warp32_with_32_banks_of_4_bytes(arch):
    p = get_arch(arch)
    assert p.wave_size == 32 and (p.lds_banks, p.lds_bank_bytes, p.lds_rule) == (32, 4, "nvidia")
    assert list(p.instructions) == list(ALL)
    for insn in p.instructions.values():
        assert insn.wave_size == 32 and (insn.regs("A"), insn.regs("B"), insn.regs("C")) == (4, 2, 4)


def test_layout_list_and_json(capsys):
    assert main(["layout", "sm_90", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(m in out for m in ALL)
    assert main(["layout", "sm_90", S8, "--format", "json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert (js["arch"], js["M"], js["N"], js["K"]) == ("sm_90", 16, 8, 32)
    a = {(e["row"], e["col"]): (e["lane"], e["reg"], e["elem"]) for e in js["operands"]["A"]}
    # PTX: a_i with i = 13 of lane 4 (groupID 1, threadID_in_group 0): row g+8 = 9, col 16 + 0 + (13 & 3) = 17
    assert len(a) == 512 and a[(9, 17)] == (4, 3, 1)
    d = {(e["row"], e["col"]): (e["lane"], e["reg"]) for e in js["operands"]["D"]}
    assert d[(9, 5)] == (4 * 1 + 2, 3)                  # c3 of lane g*4 + col//2


def test_exported_layout_file_is_gfxsims_records(golden):
    """layouts.json (what the probe placed its inputs by) is what gfxsim's records export now, and
    the golden file was made with that very file."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("export_layouts", os.path.join(PROBE, "export_layouts.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with open(os.path.join(PROBE, "layouts.json"), "rb") as f:
        raw = f.read()
    assert json.loads(raw) == mod.export("sm_90")
    assert golden["layouts_sha256"] == hashlib.sha256(raw).hexdigest()


# -- the machine on 32 lanes ---------------------------------------------------------------------
def _pack(lay, mat, bits):
    """Per-lane register words [regs, 32] holding ``mat`` placed by the layout."""
    t = lay.table()
    words = np.zeros((lay.n_regs, 32), np.uint64)
    codes = mat[t["row"], t["col"]].astype(np.int64) & ((1 << bits) - 1)
    np.add.at(words, (t["reg"], t["lane"]), codes.astype(np.uint64) << (t["elem"] * bits).astype(np.uint64))
    return words.astype(np.uint32)


@pytest.mark.parametrize("mn", ALL)
def test_every_record_executes_on_a_warp32(mn):
    import ml_dtypes
    insn = get_instruction("sm_90", mn)
    rng = np.random.default_rng(3)
    lo, hi = {"i8": (-128, 127), "i4": (-8, 7)}.get(insn.a_type, (-8, 8))
    A = rng.integers(lo, hi + 1, (16, insn.K))
    B = rng.integers(lo, hi + 1, (insn.K, 8))
    C = rng.integers(-100, 100, (16, 8))
    npt = {"fp8_e4m3": ml_dtypes.float8_e4m3fn, "f16": np.float16, "bf16": ml_dtypes.bfloat16}

    def k(w):
        regs = []
        for op, m in (("A", A), ("B", B)):
            lay = insn.operand(op)
            if insn.a_type in npt:             # float inputs: their bit patterns
                m = m.astype(npt[insn.a_type]).view(np.uint8 if lay.elem_bits == 8 else np.uint16)
            words = _pack(lay, m, lay.elem_bits)
            v = w.from_lanes(words, "u32")
            regs.append(v if insn.a_type == "i4" else w.bitcast(v, insn.a_type))
        c = w.from_lanes(_pack(insn.operand("C"), C.astype(np.float32).view(np.int32) if insn.cd_type == "f32"
                                else C, 32), "u32")
        return w.mma(mn, *regs, w.bitcast(c, insn.cd_type)).numpy()
    out = {}
    run = launch(lambda w: out.setdefault("d", k(w)), arch="sm_90")
    t = insn.operand("D").table()
    got = np.zeros((16, 8))
    got[t["row"], t["col"]] = out["d"][t["reg"], t["lane"]]
    assert np.array_equal(got, A @ B + C) and not run.findings


def test_s4_operand_must_be_packed_registers():
    with pytest.raises(TypeError, match="must be passed as its 4 packed 32-bit registers"):
        launch(lambda w: w.mma(S4, w.const(1, "i8", 32), w.const(1, "u32", 2)), arch="sm_90")


def test_kslot_mismatch_is_found_on_a_warp32():
    """The A/B K-slot check works on the NVIDIA fragments: B's tokens shifted by 4 are named."""
    tok = np.broadcast_to(np.arange(32), (16, 32))
    a = Buffer("q", np.ones((16, 32), np.int8), {"token": tok})
    b = Buffer("k", np.ones((8, 32), np.int8), {"token": tok[:8]})

    def k(w, shift):
        g, t = w.lane_id // 4, w.lane_id % 4
        av = w.cat(*(w.global_load(a, (g + 8 * (r % 2)) * 32 + 4 * t + 16 * (r // 2), 4, "i8") for r in range(4)))
        bv = w.cat(*(w.global_load(b, g * 32 + (4 * t + 16 * r + shift) % 32, 4, "i8") for r in range(2)))
        w.mma(S8, av, bv)
    f = launch(k, args=(4,), arch="sm_90").findings_of("ab-kslot-mismatch")
    assert f and f[0].details["a_values"] == [0] and f[0].details["b_values"] == [4]
    assert not launch(k, args=(0,), arch="sm_90").findings


def test_nvidia_bank_rule_is_quarter_warps_for_16_bytes():
    l = np.arange(32)
    assert np.array_equal(phases(4, 32, "nvidia"), np.zeros(32)) and np.array_equal(phases(8, 32, "nvidia"), l // 16)
    assert np.array_equal(phases(16, 32, "nvidia"), l // 8)
    # lanes 0 and 4 hit bank 0 in different dwords: one quarter-warp on NVIDIA, two phases on gfx9
    addr = (l % 4) * 16 + (l // 4) * 512
    on = l < 8
    assert bank_conflicts(addr, on, 16, rule="nvidia")[0] == 2
    assert bank_conflicts(addr, on, 16, rule="gfx9")[0] == 1
    assert bank_conflicts(l * 16, np.ones(32, bool), 16, rule="nvidia") == (1, 4, 4)
    with pytest.raises(ValueError, match="unknown bank-conflict rule"):
        phases(4, 32, "amd")


def test_shared_memory_conflict_finding_on_sm_90():
    """The DS path applies the arch's rule: 16-byte stores by lanes 0 and 4 to one bank conflict on
    sm_90 (one quarter-warp) and not on gfx942 (two phases), the same kernel otherwise."""
    def k(w):
        s = w.shared("s", (4096,), "f32")
        l = w.lane_id
        with w.if_(l < 8):
            w.lds_store(s, (l % 4) * 16 + (l // 4) * 512, w.zeros("f32", 4))
    nv = launch(k, arch="sm_90").findings_of("lds-bank-conflict")
    assert nv and nv[0].details["degree"] == 2
    assert not launch(k, arch="gfx942").findings_of("lds-bank-conflict")


# -- accumulator records ------------------------------------------------------------------------------
def test_accumulator_records_validate():
    with pytest.raises(ValueError, match="rounding"):
        AccumulatorPrecision(13, rounding="stochastic")
    with pytest.raises(ValueError, match="c_entry"):
        AccumulatorPrecision(13, c_entry="before")
    with pytest.raises(ValueError, match="k_steps"):
        AccumulatorPrecision(13, c_entry="fused", k_steps=((0, 1), (1, 2)))


def _one(acc, c, terms, K=32):
    a = np.zeros((1, 16, K))
    b = np.zeros((1, K, 8))
    for k, x, y in terms:
        a[0, 0, k], b[0, k, 0] = x, y
    prod, pexp = product_terms(a, b)
    cc = np.zeros((1, 16, 8))
    cc[0, 0, 0] = c
    return float(accumulate(acc, prod, pexp, cc)[0, 0, 0])


def test_fp22_is_selectable_on_sm_89():
    sm89 = get_arch("sm_89")
    assert sm89.instruction(E4M3).accumulator is nvidia.FP22_ADA
    assert _one(nvidia.FP22_ADA, 2.0 ** 13, [(0, 1, 1)]) == 2 ** 13 + 1
    assert _one(nvidia.FP22_ADA, 2.0 ** 14, [(0, 1, 1)]) == 2 ** 14          # 13 fraction bits: the 1 is cut
    exact = sm89.with_accumulator(E4M3, nvidia.ACCUMULATORS["exact"], name="sm_89_exact")
    assert exact.name == "sm_89_exact" and exact.instruction(E4M3).accumulator.mantissa_bits is None
    A = np.zeros((1, 16, 32)); B = np.zeros((1, 32, 8)); C = np.zeros((1, 16, 8), np.float32)
    A[0, 0, 0] = B[0, 0, 0] = 1
    C[0, 0, 0] = 2 ** 14
    assert compute(exact.instruction(E4M3), A, B, C)[0][0, 0, 0] == 2 ** 14 + 1
    assert compute(sm89.instruction(E4M3), A, B, C)[0][0, 0, 0] == 2 ** 14


def test_fused_truncation_cuts_each_term_toward_zero():
    acc = AccumulatorPrecision(13, rounding="truncate", c_entry="fused")
    assert _one(acc, 4096.0, [(0, -0.75, 1)]) == 4095.5          # quantum 0.5: -0.75 -> -0.5
    near = replace(acc, rounding="nearest")
    assert _one(near, 2.0 ** 14, [(0, 1.5, 1)]) == 2 ** 14 + 2    # quantum 2: 1.5 rounds up


# -- gfxsim against the H200 -------------------------------------------------------------------------
def _replay(insn_or_acc, e, K, M=16, N=8):
    """D[0][0] of a golden experiment through gfxsim: the record's compute(), step after step."""
    f32 = not hasattr(insn_or_acc, "cd_type") or insn_or_acc.cd_type == "f32"
    d = np.zeros((1, M, N), np.float32 if f32 else np.int32)
    d[0, 0, 0] = e["c"] if f32 else np.int64(e["c"]).astype(np.int32)
    for st in e["steps"]:
        a, b = np.zeros((1, M, K)), np.zeros((1, K, N))
        for k, x, y in st:
            a[0, 0, k] += x
            b[0, k, 0] += y
        if hasattr(insn_or_acc, "cd_type"):
            d, _ = compute(insn_or_acc, a, b, d)
        else:
            prod, pexp = product_terms(a, b)
            d = accumulate(insn_or_acc, prod, pexp, d)
    return float(d[0, 0, 0])


def test_sm90_lowers_fp8_mma_sync_to_f16_hmma(golden):
    """What ptxas made of each mma.sync on the H200 (per kernel, from cuobjdump): the e4m3 record's
    model (two chained f16 HMMA, then an FADD of C) is what the machine code does."""
    sass = {fn: ops for lib in golden["build"].values() for fn, ops in lib["sass_mma"].items()}
    by = {name: next(ops for fn, ops in sass.items() if name in fn) for name in ("MmaS8", "MmaS4", "MmaE4M3", "MmaF16")}
    assert set(by["MmaS8"]) == set(by["MmaS4"]) == {"IMMA.16832.S8.S8"}        # no INT4 tensor cores on sm_90
    assert set(by["MmaE4M3"]) == {"HMMA.16816.F32"} and set(by["MmaF16"]) == {"HMMA.16816.F32"}
    assert by["MmaE4M3"]["HMMA.16816.F32"] == 2 * by["MmaF16"]["HMMA.16816.F32"]
    assert nvidia.SM90_MMA_E4M3.c_entry == "after" and len(nvidia.SM90_MMA_E4M3.k_steps) == 2


def test_golden_file_names_its_gpu_and_toolchain(golden):
    dev = golden["device"]
    assert dev["name"] == "NVIDIA H200" and dev["compute_capability"] == "9.0"
    assert "580." in dev["nvidia_smi"] and "release 13.0" in dev["nvcc"] and dev["cuda_runtime"] == 13000
    assert golden["wgmma_triton"]["triton"] and golden["wgmma_triton"]["torch"]


@pytest.mark.parametrize("mn", ALL)
def test_h200_ran_every_record_with_gfxsims_layouts(golden, mn):
    r = golden["mma_sync"][mn]
    for check in (r["layout_check"], r["layout_check_chained"]):
        assert check["mismatches"] == 0 and check["elements"] >= 1024
    assert r["stray_nonzero"] == 0


@pytest.mark.parametrize("mn", ALL)
def test_sm90_records_reproduce_the_h200_bit_for_bit(golden, mn):
    insn = get_instruction("sm_90", mn)
    exps = golden["mma_sync"][mn]["experiments"]
    bad = [(e["name"], e["x"], e["d"], _replay(insn, e, insn.K)) for e in exps if _replay(insn, e, insn.K) != e["d"]]
    assert not bad, bad[:5]
    assert len(exps) >= (500 if insn.cd_type == "f32" else 2)


def test_exact_fp32_would_not_match_the_h200(golden):
    """The golden file tells models apart: exact fp32 misses dozens of the f16 experiments."""
    insn = replace(get_instruction("sm_90", F16), accumulator=nvidia.F32_EXACT)
    exps = golden["mma_sync"][F16]["experiments"]
    assert sum(_replay(insn, e, 16) != e["d"] for e in exps) > 30


@pytest.mark.parametrize("variant", ["tl.dot k32 chained", "tl.dot k128 one dot"])
def test_wgmma_e4m3_keeps_13_bits(golden, variant):
    """Hopper's QGMMA (wgmma e4m3 -> f32), one k32 instruction after another (Triton splits a K=128
    dot into four): every experiment, random ones included, bit for bit."""
    v = golden["wgmma_triton"]["variants"][variant]
    assert v["exact_check"]["mismatches"] == 0 and v["stray_nonzero"] == 0
    ops = {op for per_k in v["asm"]["sass_mma"].values() for fn in per_k.values() for op in fn}
    assert ops == {"QGMMA.64x16x32.F32.E4M3.E4M3"}
    acc = nvidia.SM90_WGMMA_E4M3
    bad = [(e["name"], e["x"], e["d"], _replay(acc, e, 32, 64, 16)) for e in v["experiments"]
           if _replay(acc, e, 32, 64, 16) != e["d"]]
    assert not bad, bad[:5]
    assert sum(e["name"].startswith("random") for e in v["experiments"]) >= 70
    # what the 13 bits mean: 2^14 + 1 loses the 1, 2^13 + 1 keeps it
    c1 = {e["x"]: e["d"] for e in v["experiments"] if e["name"] == "c_plus_1"}
    assert c1[13] == 2 ** 13 + 1 and c1[14] == 2 ** 14


def test_wgmma_result_keeps_13_mantissa_bits(golden):
    """The QGMMA result itself has 13 mantissa bits (FP22): where the sum carries past the largest
    term's exponent, the 13-bit window alone keeps one bit too many; the record's result_bits cut
    reproduces those experiments."""
    v = golden["wgmma_triton"]["variants"]["tl.dot k32 chained"]
    no_cut = replace(nvidia.SM90_WGMMA_E4M3, result_bits=None)
    missed = [e for e in v["experiments"] if _replay(no_cut, e, 32, 64, 16) != e["d"]]
    assert len(missed) >= 5
    assert all(_replay(nvidia.SM90_WGMMA_E4M3, e, 32, 64, 16) == e["d"] for e in missed)


def test_triton_promotion_adds_each_k32_block_in_fp32(golden):
    """max_num_imprecise_acc=32: each k32 wgmma starts from 0 and its sum is added by an fp32 add,
    so C survives cancellation inside a block and small products are no longer lost against C."""
    v = golden["wgmma_triton"]["variants"]["tl.dot k128 max_num_imprecise_acc=32"]
    blk = nvidia.SM90_WGMMA_E4M3
    for e in v["experiments"]:
        d = np.float32(e["c"])
        for st in e["steps"]:
            part = _replay(blk, {"c": 0.0, "steps": [st]}, 32, 64, 16)
            d = np.float32(d + np.float32(part))
        assert float(d) == e["d"], (e["name"], e["x"])


def test_token_sets_follow_the_ptx_k_groups():
    """A lane's K group on mma.sync is threadID_in_group (lane % 4), not lane // 16: with 16-byte
    B loads the two k32 instructions take the wave64 PV's interleaved token sets; 8-byte loads feed one
    instruction with all 32 tokens."""
    from gfxsim.arch.kslots import format_token_set, tokens_per_instruction
    insn = get_instruction("sm_90", S8)
    t16 = tokens_per_instruction(insn, "B", 16)
    assert [format_token_set(r) for r in t16] == ["{0-7,16-23,32-39,48-55}", "{8-15,24-31,40-47,56-63}"]
    assert format_token_set(tokens_per_instruction(insn, "B", 8)[0]) == "{0-31}"
    with pytest.raises(ValueError, match="spreads a lane's registers"):
        tokens_per_instruction(insn, "A", 16)           # a lane's A registers hold rows g and g+8
    with pytest.raises(ValueError, match="byte-sized elements"):
        tokens_per_instruction(get_instruction("sm_90", S4), "B", 16)


def test_layout_detail_json_states_the_accumulator_record(capsys):
    assert main(["layout", "sm_90", F16, "--detail", "--format", "json"]) == 0
    rec = json.loads(capsys.readouterr().out)["accumulator_record"]
    assert (rec["mantissa_bits"], rec["rounding"], rec["c_entry"]) == (25, "truncate", "fused")


def test_cross_lane_ops_span_the_warp():
    """Shuffles and reductions act on the 32 lanes of a warp (the quantization amax of a SageAttention
    thread group reduces over lane % 4 with xor 1, 2)."""
    out = {}

    def k(w):
        x = w.lane_id.to("f32")
        out["sum"] = w.reduce(x, "sum").numpy()[0]
        out["xor16"] = w.shfl_xor(w.lane_id, 16).numpy()[0]
        out["quad_max"] = w.reduce(x, "max", width=4).numpy()[0]
    launch(k, arch="sm_90")
    l = np.arange(32)
    assert np.all(out["sum"] == l.sum()) and np.array_equal(out["xor16"], l ^ 16)
    assert np.array_equal(out["quad_max"], (l // 4) * 4 + 3)
