"""The machine speaks gfx9: the trace records only mnemonics of the ops table,
unknown (operation, type) pairs raise at the statement, register numbers are deterministic, one
dtype vocabulary, and no module-level cache keyed by ``id()``."""
import gc
import re
import sys

import numpy as np
import pytest

from gfxsim import Buffer, launch
from gfxsim.arch import ARCHS
from gfxsim.machine import ops
from gfxsim.machine.errors import GfxSimError
from support import ROOT

TABLE = ops.table()
MNEMONICS = {r[2] for r in TABLE}
EXPANDS = {r[2]: r[3] for r in TABLE if r[2].startswith("pseudo.")}
MATRIX = {i.mnemonic for p in ARCHS.values() for i in p.instructions.values()}
# names the old back end recorded that no ISA has, and gfx11-only 16-bit bitwise ops
NOT_GFX9 = {"v_add_i32", "v_sub_i32", "v_mul_i32", "v_mod_i32", "v_idiv_i32", "v_div_i32", "v_exp_e32",
            "v_and_b16", "v_or_b16", "v_xor_b16", "v_not_b16"}
ISA_NAME = re.compile(r"^(v|s|ds|global|buffer|flat)_[a-z0-9_]+$")
PTX_NAME = re.compile(r"^mma\.sync\.aligned\.m\d+n\d+k\d+\.row\.col(\.[a-z0-9]+){4}$")    # NVIDIA records
NVIDIA = {p.name for p in ARCHS.values() if p.family.startswith("NVIDIA")}


# -- (a) the trace records the table's mnemonics ------------------------------------------------------
def _everything(w, buf, out):
    """One kernel touching every unit: VALU (int, float, 16-bit, conversions), routing, VMEM of
    every width, SMEM, DS of every width, a barrier, and a matrix instruction."""
    i = w.lane_id
    u = i.bitcast("u32")
    f = i.to("f32")
    h = w.from_lanes(np.arange(64), "i16")
    vals = [i + 3, i - 1, i * 7, i // 3, i % 5, w.max(i, 2), w.min(i, 4), abs(i), i << 2, i >> 1, u >> 1, u + u,
            i & 3, i | 4, i ^ 5, h + h, h & 3, h | h, h ^ h, h << 1, h >> 1, h * h,
            f + 1.0, f - 1.0, f * 2.0, f / 3.0, -f, abs(f), w.max(f, 2.0), w.min(f, 3.0), w.fma(f, f, f),
            w.exp(f * 0.01), w.exp2(f * 0.01), w.sqrt(f), w.rcp(f + 1.0), w.rint(f),
            f.to("bf16"), f.to("f16"), f.to("bf16").to("f32"), f.to("f16").to("f32"), f.to("i32"), i.to("u32"),
            w.select(i < 3, f, 0.0), w.select(f >= 2.0, i, 0), w.shfl_xor(f, 1), w.reduce(f, "max"),
            w.cat(f, f), w.perm(i, i, 0x05040100)]
    w.readlane(f, 3)
    for nb in (1, 2, 4, 8, 12, 16):
        v = w.global_load(buf, i * 16, nb, "u8")
        w.global_store(out, i * 16, v)
    w.scalar_load(buf, 0, "u32")
    reg = w.shared("s", (64 * 16,), "u8")
    for nb in (1, 2, 4, 8, 12, 16):
        w.lds_store(reg, i * 16, w.zeros("u8", nb))
        w.barrier()
        w.lds_load(reg, i * 16, nb, "u8")
    a = w.const(1, "i8", 8)
    w.mma("v_mmac_i32_16x16x32_i8", a, a)
    return vals


def _run_everything(**kw):
    buf = Buffer("buf", np.arange(64 * 16, dtype=np.uint8))
    out = Buffer.empty("out", (64 * 16,), np.uint8)
    return launch(_everything, arch="gfx936", args=(buf, out), **kw)


def test_the_trace_records_only_mnemonics_of_the_ops_table():
    run = _run_everything()
    seen = {e.op for e in run.events}
    assert seen <= MNEMONICS | MATRIX, sorted(seen - MNEMONICS - MATRIX)
    assert not seen & NOT_GFX9, seen & NOT_GFX9
    for e in run.events:
        if e.op.startswith("pseudo."):
            assert e.details["expands"] == EXPANDS[e.op] and e.details["expands"], e
        else:
            assert ISA_NAME.match(e.op) and "expands" not in e.details, e
    # the units all took part
    unit = {r[2]: r[0] for r in TABLE}
    assert {unit.get(op, "matrix") for op in seen} >= {"VALU", "VMEM", "SMEM", "DS", "SALU", "matrix"}


def test_the_table_names_gfx9_instructions_only():
    """gfx9 mnemonics everywhere, except the NVIDIA profiles' matrix rows, which carry PTX names."""
    for unit, key, mnem, expands in TABLE:
        assert mnem not in NOT_GFX9, (key, mnem)
        if mnem.startswith("pseudo."):
            assert expands, f"pseudo-op {mnem} ({key}) lists no instructions"
            assert all(ISA_NAME.match(x) and x not in NOT_GFX9 for x in expands), (key, expands)
        elif key.startswith("mma.") and key[4:] in NVIDIA:
            assert PTX_NAME.match(mnem) and not expands, (key, mnem, expands)
        else:
            assert ISA_NAME.match(mnem) and not expands, (key, mnem, expands)


def _statement_ops(stmt, arch="gfx942"):
    """The events of ``stmt(w, i, u, f, h)`` alone (those after an s_barrier that follows the setup)."""
    def k(w):
        i = w.lane_id
        u, f, h = i.bitcast("u32"), i.to("f32") + 1.0, w.from_lanes(np.arange(64), "i16")
        w.barrier()
        stmt(w, i, u, f, h)
    run = launch(k, arch=arch)
    ev = run.events
    start = max(j for j, e in enumerate(ev) if e.op == "s_barrier") + 1
    return ev[start:]


STATEMENTS = [
    ("i32 add", lambda w, i, u, f, h: i + 3, ["v_add_u32"]),
    ("u32 add", lambda w, i, u, f, h: u + 3, ["v_add_u32"]),
    ("i32 sub", lambda w, i, u, f, h: i - 3, ["v_sub_u32"]),
    ("i32 mul", lambda w, i, u, f, h: i * 3, ["v_mul_lo_u32"]),
    ("i32 idiv", lambda w, i, u, f, h: i // 3, ["pseudo.div_i32"]),
    ("i32 mod", lambda w, i, u, f, h: i % 3, ["pseudo.rem_i32"]),
    ("u32 idiv", lambda w, i, u, f, h: u // 3, ["pseudo.div_u32"]),
    ("i32 shr", lambda w, i, u, f, h: i >> 1, ["v_ashrrev_i32"]),
    ("u32 shr", lambda w, i, u, f, h: u >> 1, ["v_lshrrev_b32"]),
    ("i32 shl", lambda w, i, u, f, h: i << 2, ["v_lshlrev_b32"]),
    ("i16 and", lambda w, i, u, f, h: h & 3, ["v_and_b32"]),
    ("i16 add", lambda w, i, u, f, h: h + h, ["v_add_u16"]),
    ("f32 add", lambda w, i, u, f, h: f + 1.0, ["v_add_f32"]),
    ("f32 div", lambda w, i, u, f, h: f / 3.0, ["pseudo.div_f32"]),
    ("e**x", lambda w, i, u, f, h: w.exp(f), ["pseudo.exp_f32"]),
    ("2**x", lambda w, i, u, f, h: w.exp2(f), ["v_exp_f32"]),
    ("rcp", lambda w, i, u, f, h: w.rcp(f), ["v_rcp_f32"]),
    ("sqrt", lambda w, i, u, f, h: w.sqrt(f), ["v_sqrt_f32"]),
    ("rint", lambda w, i, u, f, h: w.rint(f), ["v_rndne_f32"]),
    ("fma", lambda w, i, u, f, h: w.fma(f, f, f), ["v_fma_f32"]),
    ("i32 -> f32", lambda w, i, u, f, h: i.to("f32"), ["v_cvt_f32_i32"]),
    ("f32 -> i32", lambda w, i, u, f, h: f.to("i32"), ["v_cvt_i32_f32"]),
    ("f32 -> bf16", lambda w, i, u, f, h: f.to("bf16"), ["pseudo.cvt_bf16_f32"]),
    ("select", lambda w, i, u, f, h: w.select(i < 3, f, 0.0), ["v_cmp_lt_i32", "v_cndmask_b32"]),
    ("shfl_xor", lambda w, i, u, f, h: w.shfl_xor(f, 1), ["ds_bpermute_b32"]),
]


@pytest.mark.parametrize("name,stmt,want", STATEMENTS, ids=[s[0] for s in STATEMENTS])
def test_each_statement_records_its_instruction(name, stmt, want):
    ev = _statement_ops(stmt)
    assert [e.op for e in ev] == want
    for e in ev:
        if e.op.startswith("pseudo."):
            assert e.details["expands"] == ops.table()[[r[2] for r in TABLE].index(e.op)][3]


def test_exp_is_the_pseudo_op_for_a_multiply_then_v_exp_f32():
    (e,) = _statement_ops(lambda w, i, u, f, h: w.exp(f))
    assert e.op == "pseudo.exp_f32" and e.details["expands"] == ("v_mul_f32", "v_exp_f32")
    (e2,) = _statement_ops(lambda w, i, u, f, h: w.exp2(f))
    assert e2.op == "v_exp_f32" and "expands" not in e2.details
    # and the numbers: exp is e**x, exp2 is 2**x (what v_exp_f32 computes)
    got = {}
    launch(lambda w: got.update(e=w.exp(w.const(1.0, "f32")).numpy()[0, 0],
                                t=w.exp2(w.const(3.0, "f32")).numpy()[0, 0]), arch="gfx942")
    assert abs(got["e"] - np.e) < 3e-7 and got["t"] == 8.0


def test_exp_and_exp2_are_correctly_rounded():
    x = np.linspace(-20, 20, 64 * 16, dtype=np.float32).reshape(16, 64)
    got = {}

    def k(w):
        v = w.from_lanes(x, "f32")
        got.update(e=w.exp(v).numpy(), t=w.exp2(v).numpy())
    launch(k, arch="gfx942")
    want_e = np.exp(x.astype(np.float64)).astype(np.float32)       # one rounding of the exact value
    want_t = np.exp2(x.astype(np.float64)).astype(np.float32)
    assert np.array_equal(got["e"], want_e) and np.array_equal(got["t"], want_t)


def test_idiv_is_a_pseudo_op_naming_its_instructions():
    (e,) = _statement_ops(lambda w, i, u, f, h: i // 3)
    assert e.op == "pseudo.div_i32" and "v_rcp_iflag_f32" in e.details["expands"]
    assert "v_mul_hi_u32" in e.details["expands"]


def test_matrix_events_carry_the_records_verbatim_mnemonic():
    def k(w):
        a = w.const(1, "i8", 8)
        w.mma("V_MMAC_I32_16X16X32_I8", a, a)              # the lookup is case-insensitive
    for trace in (True, False):
        run = launch(k, arch="gfx936", trace=trace)
        assert [m.op for m in run.mmacs()] == ["v_mmac_i32_16x16x32_i8"]


# -- (b) an unknown (operation, type) raises at the statement ----------------------------------------
def test_adding_two_bf16_values_raises_unknown_operation_with_coordinates():
    where = {}

    def bf16_add(w):
        b = w.lane_id.to("f32").to("bf16")
        where["line"] = sys._getframe().f_lineno + 1
        b + b
    with pytest.raises(ops.UnknownOperation) as ei:
        launch(bf16_add, arch="gfx942")
    e = ei.value
    assert isinstance(e, GfxSimError) and isinstance(e, TypeError)
    assert "add" in str(e) and "bf16" in str(e)
    c = e.coords
    assert c["kernel"] == "bf16_add" and c["workgroup"] == (0, 0, 0) and c["wave"] == 0
    assert c["source"] == f"test_machine_isa.py:{where['line']}" and c["instruction"] is not None
    assert f"test_machine_isa.py:{where['line']}" in str(e)


@pytest.mark.parametrize("stmt,words", [
    (lambda w, i, f: w.exp(f.to("f16")), ("exp", "f16")),
    (lambda w, i, f: w.const(1, "i8") * w.const(2, "i8"), ("mul", "i8")),
    (lambda w, i, f: f.to("bf16") < f.to("bf16"), ("cmp_lt", "bf16")),
    (lambda w, i, f: f.to("bf16").to("i32"), ("bf16", "i32")),
    (lambda w, i, f: w.max(f.to("bf16"), f.to("bf16")), ("max", "bf16")),
], ids=["exp f16", "mul i8", "cmp bf16", "cvt bf16->i32", "max bf16"])
def test_other_unknown_operations_raise(stmt, words):
    with pytest.raises(ops.UnknownOperation) as ei:
        launch(lambda w: stmt(w, w.lane_id, w.lane_id.to("f32")), arch="gfx942")
    assert all(x in str(ei.value) for x in words) and ei.value.coords["source"].startswith("test_machine_isa.py:")


def test_the_lookups_raise_outside_a_kernel_too():
    with pytest.raises(ops.UnknownOperation, match="bf16"):
        ops.valu("add", "bf16")
    with pytest.raises(ops.UnknownOperation, match="bf16 to i32"):
        ops.cvt("bf16", "i32")
    assert ops.valu("add", "i32").mnemonic == "v_add_u32" and ops.cvt("f32", "f32").mnemonic == "v_mov_b32"


# -- (c) register numbers are deterministic ----------------------------------------------------------
def _churn(w, keep):
    """Many short-lived intermediates; with ``keep`` the test holds a reference to every one."""
    x = w.lane_id.to("f32")
    acc = w.zeros("f32")
    for j in range(6):
        t = x * float(j)
        u = t + 1.0
        v = w.max(u, acc)
        if keep is not None:
            keep += [t, u, v]
        del t, u
        gc.collect()                  # an old back end freed registers in __del__, here
        acc += v
        acc = acc * 0.5
    return acc


def _regs(run):
    return [(e.op, [o.regs for o in e.inputs], [o.regs for o in e.outputs]) for e in run.events]


def test_registers_are_the_same_whatever_python_keeps_alive():
    held = []
    a = launch(_churn, arch="gfx942", args=(None,))
    b = launch(_churn, arch="gfx942", args=(held,))
    assert held and _regs(a) == _regs(b)
    c = launch(_churn, arch="gfx942", args=(None,))
    assert _regs(a) == _regs(c)
    # and history of a register is the same too
    regs = sorted({o.regs[0] for e in a.events for o in e.outputs})
    for r in regs:
        ha = [(e.index, word) for e, word in a.history(0, 0, lane=5, reg=r)]
        hb = [(e.index, word) for e, word in b.history(0, 0, lane=5, reg=r)]
        assert ha == hb and ha, r


def test_registers_are_handed_out_in_order_and_never_reused():
    run = launch(_churn, arch="gfx942", args=(None,))
    top, owners = None, {}
    for e in run.events:
        for o in e.outputs:
            base, n = o.regs
            if top is None:                          # after the wave's own (lane_id, thread_id)
                top = base
            if base >= top:                      # a new value: numbers above every earlier one
                top = base + n
                owners[base] = e.index
            else:                                # an in-place update (acc += v) keeps its registers
                assert base in owners and (base, n) in [i.regs for i in e.inputs], e


# -- (d) one dtype vocabulary -------------------------------------------------------------------------
def test_shared_accepts_isa_names_and_numpy_dtypes_alike():
    got = {}

    def k(w):
        r = [w.shared("a", (64,), d) for d in ("i8", np.int8, np.dtype("int8"), "int8")]
        f = [w.shared("f", (64,), d) for d in ("f32", np.float32)]
        got.update(i8=r, f32=f)
    launch(k, arch="gfx942")
    assert all(x is got["i8"][0] for x in got["i8"]) and got["i8"][0].dtype == np.dtype(np.int8)
    assert got["f32"][0] is got["f32"][1] and got["f32"][0].dtype == np.dtype(np.float32)


def test_loads_accept_isa_names_and_numpy_dtypes_alike():
    buf = Buffer("b", np.arange(-128, 128, dtype=np.int8).repeat(4))
    got = {}

    def k(w):
        reg = w.shared("s", (256,), "i8")
        w.lds_store(reg, w.lane_id * 4, w.global_load(buf, w.lane_id * 4, 4, "i8"))
        w.barrier()
        for d in ("i8", np.int8):
            key = "i8" if isinstance(d, str) else "np"
            g = w.global_load(buf, w.lane_id * 4, 4, d)
            s = w.lds_load(reg, w.lane_id * 4, 4, d)
            got[key] = (g.dtype, s.dtype, g.numpy(), s.numpy())
        got["to"] = (w.lane_id.to(np.float32).dtype, w.zeros(np.float16).dtype, w.lane_id.bitcast(np.uint32).dtype)
    run = launch(k, arch="gfx942")
    assert got["i8"][:2] == got["np"][:2] == ("i8", "i8")
    assert np.array_equal(got["i8"][2], got["np"][2]) and np.array_equal(got["i8"][3], got["np"][2])
    assert got["to"] == ("f32", "f16", "u32") and not run.findings


@pytest.mark.parametrize("bad", ["i9", "f128", "bogus", "int9"])
def test_a_bad_dtype_string_is_a_value_error_naming_it(bad):
    buf = Buffer("b", np.zeros(256, np.uint8))
    cases = [lambda w: w.shared("x", (4,), bad), lambda w: w.global_load(buf, 0, 4, bad),
             lambda w: w.lane_id.to(bad), lambda w: w.zeros(bad), lambda w: w.lane_id.bitcast(bad)]
    for c in cases:
        with pytest.raises(ValueError, match=repr(bad)):
            launch(c, arch="gfx942")


def test_f64_is_a_register_type_without_arithmetic_in_python():
    """f64 values load and store as VGPR pairs (as the asm front end's binary64 ops need); the
    Python front end has no binary64 instruction, and says so by name."""
    a = Buffer("a", np.arange(8, dtype=np.float64) * 1.5)
    out = Buffer.empty("out", (64,), "f64")

    def k(w):
        w.global_store(out, w.lane_id * 8, w.global_load(a, (w.lane_id % 8) * 8, 8, "f64"))
    launch(k, arch="gfx942")
    assert (out.array == np.tile(np.arange(8) * 1.5, 8)).all()
    from gfxsim.machine.ops import UnknownOperation
    with pytest.raises(UnknownOperation, match="no instruction converts i32 to f64"):
        launch(lambda w: w.lane_id.to("f64"), arch="gfx942")


def test_buffer_empty_speaks_the_isa_vocabulary_too():
    assert Buffer.empty("o", (4,), "i8").array.dtype == np.int8
    assert Buffer.empty("o", (4,), "f32").array.dtype == np.float32


# -- (e) the table by unit ----------------------------------------------------------------------------
def test_the_table_lists_every_unit_with_units_from_UNITS():
    units = {r[0] for r in TABLE}
    assert units <= set(ops.UNITS) and units == set(ops.UNITS), (units, ops.UNITS)
    for unit, key, mnem, expands in TABLE:
        assert isinstance(key, str) and isinstance(mnem, str) and isinstance(expands, tuple)
    by_unit = {u: {r[2] for r in TABLE if r[0] == u} for u in ops.UNITS}
    assert "v_add_u32" in by_unit["VALU"] and "global_load_dwordx4" in by_unit["VMEM"]
    assert "ds_read_b128" in by_unit["DS"] and "s_load_dword" in by_unit["SMEM"] and "s_barrier" in by_unit["SALU"]
    assert by_unit["matrix"] == MATRIX
    assert {r[2] for r in ops.table("gfx936") if r[0] == "matrix"} == set(ARCHS["gfx936"].instructions)
    # every VALU/conversion entry of the lookup tables is in the table, under its unit
    for (op, t), o in ops.VALU.items():
        assert (o.unit, f"{op}.{t}", o.mnemonic, o.expands) in TABLE


# -- no module-level caches keyed by id() -----------------------------------------------------------
def test_no_module_level_cache_is_keyed_by_id():
    root = ROOT / "gfxsim"
    hits = [f"{p.relative_to(root.parent)}:{n}" for p in root.rglob("*.py")
            for n, line in enumerate(p.read_text().splitlines(), 1)
            if re.search(r"(?<![\w.])id\(", line.split("#")[0])]
    assert not hits, hits


def test_matrix_plans_are_cached_by_layout_not_by_object_identity():
    import weakref
    from dataclasses import replace
    from gfxsim.arch import get_instruction
    from gfxsim.machine.mma import gather_plan
    insn = get_instruction("gfx942", "v_mfma_i32_16x16x32_i8")
    e, l = gather_plan(insn, "B")
    assert not e.flags.writeable and not l.flags.writeable           # shared: nobody may write them
    twin = replace(insn, notes="a copy")                             # another record, equal layouts
    e2, l2 = gather_plan(twin, "B")
    assert e2 is e and l2 is l
    ref = weakref.ref(twin)
    del twin, e2, l2
    gc.collect()
    assert ref() is None, "the plan cache keeps instruction records alive"
    # a record with another layout under the same mnemonic gets its own plan
    other = get_instruction("gfx936", "v_mmac_i32_16x16x32_i8")
    moved = replace(insn, layouts={**insn.layouts, "D": other.operand("D")})
    assert np.array_equal(gather_plan(moved, "D")[1], other.operand("D").slot_of()[0])
    assert not np.array_equal(gather_plan(moved, "D")[1], gather_plan(insn, "D")[1])


@pytest.mark.parametrize("batch", [1, 3])
def test_a_compare_writes_zero_in_inactive_lanes_and_its_value_in_active_ones(batch):
    """VOPC under a partial EXEC: the mask holds 0 for the inactive lanes (read after the branch
    closes), the compare's answer for the active ones; under a full EXEC, the answer everywhere."""
    def k(w, out):
        i = w.lane_id
        with w.if_(i < 40):
            inside = i >= 8                     # true in lanes 8..63, but EXEC holds lanes 0..39
        everywhere = i >= 8
        one, two = w.const(1, "i32"), w.const(2, "i32")
        w.global_store(out, (w.workgroup_id[0] * 64 + i) * 4, w.select(inside, one, 0) + w.select(everywhere, two, 0))
    out = Buffer.empty("out", (64 * batch,), np.int32)
    launch(k, arch="gfx942", grid=batch, args=(out,))
    lane = np.arange(64)
    want = np.where((lane >= 8) & (lane < 40), 1, 0) + np.where(lane >= 8, 2, 0)
    assert np.array_equal(out.array.reshape(batch, 64), np.broadcast_to(want, (batch, 64)))
