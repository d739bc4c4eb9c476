"""The ISA table is the one implementation both front ends use: every entry the Python front end
traces and the asm front end runs gives equal result bits and equal provenance through both, on
the same operands (edge values included); every mnemonic ops.py names is an entry; every asm VALU
row and compare is registered from the table."""
import numpy as np
import pytest

from gfxsim import Buffer, isa, launch
from gfxsim.asm.run import kernel_from_text, run_asm
from gfxsim.asm.semantics import OPS, vop
from gfxsim.machine import ops

LANES = 64
U32 = np.uint32
ARCH = "gfx942"
NP = {"f32": np.float32, "i32": np.int32, "u32": np.uint32}


def _f32_words():
    special = [0x7FC00000, 0xFFC00000, 0x7F800001, 0x7F800000, 0xFF800000, 0x00000000, 0x80000000,
               0x00000001, 0x807FFFFF, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF]
    special += [int(np.float32(x).view(U32)) for x in
                (1.0, -1.0, 0.5, 1.5, 2.5, -2.5, 3.0, 0.1, 1 / 3, 16777217.0, -0.75, 1e-38, 2.0 ** -126,
                 100.0, -100.0, -126.5, -127.0, -149.5,
                 2.0 ** 31, -(2.0 ** 31), 2.0 ** 32, 4294967040.0, 0.999999, 88.7, -87.3, 127.5, 7.0)]
    rng = np.random.default_rng(7)
    rest = (rng.standard_normal(LANES - len(special)) * 10.0 ** rng.integers(-3, 4, LANES - len(special)))
    return np.concatenate([np.array(special, U32), rest.astype(np.float32).view(U32)])


def _int_words():
    special = [0, 1, 2, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF, 31, 32, 33, 63, 64, 255, 256, 0xFFFF, 0x10000,
               0x8000, 0x7FFF, 0xFFFF8000, 0x80000001, 0xFFFFFFFE, 24, 8, 16, 0x01020304, 0xDEADBEEF]
    rng = np.random.default_rng(11)
    return np.concatenate([np.array(special, U32), rng.integers(0, 2 ** 32, LANES - len(special), dtype=np.uint64)
                           .astype(U32)])


WORDS = {"f32": _f32_words(), "i32": _int_words(), "u32": _int_words()}
LANE = np.arange(LANES)
# tags: the operands agree on every other lane's token and on every third lane's row
TAGS = [{"token": LANE, "row": LANE % 5},
        {"token": np.where(LANE % 2 == 0, LANE, LANE + 1000), "row": np.where(LANE % 3 == 0, LANE % 5, 9)},
        {"token": np.where(LANE % 4 == 0, LANE, LANE + 2000), "row": LANE % 5}]


def _operand(k, t):
    w = WORDS[t]
    if k:                                          # each operand meets every other kind of value
        w = np.roll(w, 7 * k)
    return w


def _buffers(n, t):
    return [Buffer("abc"[k], _operand(k, t).view(NP[t]).copy(), tags=TAGS[k])
            for k in range(n)]


def _result(out):
    p = out.prov.gather(np.arange(out.nbytes)[:, None], 1) if out.prov is not None else None
    ids = {} if p is None else {f: a[:, 0].tolist() for f, a in p.ids.items() if (a >= 0).any()}
    return out.array.view(U32).copy(), ids


# Python spellings of the operations ops.py maps to an instruction both front ends have
BINARY = {"add": lambda w, a, b: a + b, "sub": lambda w, a, b: a - b, "mul": lambda w, a, b: a * b,
          "max": lambda w, a, b: w.max(a, b), "min": lambda w, a, b: w.min(a, b), "and": lambda w, a, b: a & b,
          "or": lambda w, a, b: a | b, "xor": lambda w, a, b: a ^ b, "shl": lambda w, a, b: a << b,
          "shr": lambda w, a, b: a >> b}
UNARY = {"exp2": lambda w, a: w.exp2(a), "sqrt": lambda w, a: w.sqrt(a), "rcp": lambda w, a: w.rcp(a),
         "rndne": lambda w, a: w.rint(a), "abs": lambda w, a: abs(a)}
CMP = {"lt": "__lt__", "le": "__le__", "gt": "__gt__", "ge": "__ge__", "eq": "eq", "ne": "ne"}
# reached only with operands the Python front end has no way to spell alike (a bfe field, a perm
# selector and a mov are checked by the tests of their own below or in test_machine_routing)
ELSEWHERE = {"bfe", "perm", "mov", "cndmask", "fma"}


def _cases():
    out = []
    for (op, t), o in ops.VALU.items():
        if t not in ("f32", "i32", "u32") or o.pseudo or op in ELSEWHERE:
            continue
        e = isa.entry(o.mnemonic)
        if e.asm not in ("valu", "cmp"):
            continue
        out.append((op, t, o.mnemonic))
    return out


CASES = _cases()


def test_every_operation_both_front_ends_reach_has_a_python_spelling():
    assert CASES and all(op in BINARY or op in UNARY or op[4:] in CMP for op, _, _ in CASES)


def _asm_line(e, op, nsrc):
    srcs = ["v2", "v3", "v5"][:nsrc]
    if op == "abs":                                 # |x| is v_and_b32 of the sign bit
        return f"{e.mnemonic}_e64 v4, 0x7fffffff, v2"
    if e.result == "mask":
        return f"{e.mnemonic}_e64 s[12:13], v2, v3\n    v_cndmask_b32_e64 v4, 0, 1, s[12:13]"
    if e.reversed:
        srcs = srcs[::-1]
    return f"{e.mnemonic}_e64 v4, {', '.join(srcs)}"


def _asm(line, ins, out):
    args = [(b.name, "global_buffer", 8) for b in ins] + [("out", "global_buffer", 8)]
    loads = "\n    ".join(f"global_load_dword v{r}, v1, s[{4 + 2 * k}:{5 + 2 * k}]"
                          for k, r in enumerate((2, 3, 5)[:len(ins)]))
    pointers = "\n    ".join(f"s_load_dwordx2 s[{4 + 2 * k}:{5 + 2 * k}], s[0:1], {8 * k:#x}"
                             for k in range(len(ins) + 1))
    body = f"""
    {pointers}
    v_lshlrev_b32_e32 v1, 2, v0
    s_waitcnt lgkmcnt(0)
    {loads}
    s_waitcnt vmcnt(0)
    {line}
    global_store_dword v1, v4, s[{4 + 2 * len(ins)}:{5 + 2 * len(ins)}]
"""
    run_asm(kernel_from_text(body, args=args, arch=ARCH), args={b.name: b for b in ins + [out]}, arch=ARCH,
            trace=False)
    return _result(out)


def _python(spell, ins, t, out):
    def k(w):
        off = w.lane_id * 4
        vals = [w.global_load(b, off, 4, t) for b in ins]
        w.global_store(out, off, spell(w, *vals))
    launch(k, arch=ARCH, trace=False)
    return _result(out)


def _both(spell, line, n, t):
    py = _python(spell, _buffers(n, t), t, Buffer.empty("out", (LANES,), "u32"))
    asm = _asm(line, _buffers(n, t), Buffer.empty("out", (LANES,), "u32"))
    return py, asm


def _same(py, asm):
    np.testing.assert_array_equal(py[0], asm[0], err_msg="result bits")
    assert py[1] == asm[1], "provenance"


@pytest.mark.parametrize("op,t,mnemonic", CASES, ids=[f"{m}-{t}" for _, t, m in CASES])
def test_python_and_asm_give_equal_bits_and_provenance(op, t, mnemonic):
    e = isa.entry(mnemonic)
    if op in BINARY:
        spell, n = BINARY[op], 2
    elif op in UNARY:
        spell, n = UNARY[op], 1
    else:
        rel = CMP[op[4:]]
        spell, n = (lambda w, a, b: w.select(getattr(a, rel)(b), w.const(1, "u32"), w.const(0, "u32"))), 2
    _same(*_both(spell, _asm_line(e, op, n), n, t))


@pytest.mark.parametrize("t", ["i32", "u32"])
@pytest.mark.parametrize("amount", [0, 8, 13, 24, 32, 33, 40])
@pytest.mark.parametrize("op", ["shl", "shr"])
def test_shifts_by_a_literal_route_bytes_alike(op, amount, t):
    e = ops.valu(op, t).entry
    spell = (lambda w, a: a << amount) if op == "shl" else (lambda w, a: a >> amount)
    _same(*_both(spell, f"{e.mnemonic}_e64 v4, {amount}, v2", 1, t))


def test_fma_is_one_rounding_in_both():
    _same(*_both(lambda w, a, b, c: w.fma(a, b, c), "v_fma_f32 v4, v2, v3, v5", 3, "f32"))


@pytest.mark.parametrize("sel", [0x03020100, 0x07060504, 0x0C0D0804, 0x0B0A0908, 0x01050307])
def test_byte_permute_gives_equal_bits_and_provenance(sel):
    _same(*_both(lambda w, a, b: w.perm(a, b, sel), f"v_perm_b32 v4, v2, v3, {sel:#x}", 2, "u32"))


@pytest.mark.parametrize("t", ["f32", "u32"])
def test_select_gives_equal_bits_and_provenance(t):
    # lanes where a < b (as unsigned words) take b, others a: D = mask ? S1 : S0
    _same(*_both(lambda w, a, b, c: w.select(a.bitcast("u32") < b.bitcast("u32"), b, a),
                 "v_cmp_lt_u32_e64 s[12:13], v2, v3\n    v_cndmask_b32_e64 v4, v2, v3, s[12:13]", 3, t))


@pytest.mark.parametrize("src,dst", [("i32", "f32"), ("u32", "f32"), ("f32", "i32"), ("f32", "u32")])
def test_conversions_give_equal_bits_and_provenance(src, dst):
    e = ops.cvt(src, dst).entry
    _same(*_both(lambda w, a: a.to(dst), f"{e.mnemonic}_e32 v4, v2", 1, src))


def test_a_move_is_a_checked_conversion_in_python_and_moves_the_bits_in_asm():
    e = ops.cvt("i32", "u32").entry
    assert e.mnemonic == "v_mov_b32"
    x = np.array([[-1, 5]], np.int32)
    assert e.option("checked")(x, np.dtype(np.uint32)).tolist() == [[True, False]]
    assert e.convert(x, np.dtype(np.uint32)).tolist() == [[0xFFFFFFFF, 5]]       # the bits, as the hardware
    with pytest.raises(OverflowError, match="does not fit u32"):
        _python(lambda w, a: a.to("u32"), _buffers(1, "i32"), "i32", Buffer.empty("out", (LANES,), "u32"))
    bits, _ = _asm("v_mov_b32_e32 v4, v2", _buffers(1, "i32"), Buffer.empty("out", (LANES,), "u32"))
    np.testing.assert_array_equal(bits, WORDS["i32"])


def test_every_mnemonic_ops_names_is_an_entry_and_every_pseudo_op_lists_entries():
    for table in (ops.VALU, ops.CVT):
        for key, o in table.items():
            e = o.entry                               # raises for a mnemonic the ISA table lacks
            assert e.mnemonic == o.mnemonic and o.pseudo == e.pseudo, key
            if o.pseudo:
                assert o.expands == e.expands and o.expands, key
                assert all(x in isa.TABLE and not isa.entry(x).pseudo for x in o.expands), key


def test_every_asm_valu_row_and_compare_is_registered_from_the_table():
    rows = {n for n, f in OPS.items() if f.__qualname__ == "_valu.<locals>.run"}
    cmps = {n for n, f in OPS.items() if f.__qualname__ == "_cmp.<locals>.run"}
    assert rows == {e.mnemonic for e in isa.asm_entries("valu")}
    assert cmps == {e.mnemonic for e in isa.asm_entries("cmp")}
    assert vop.VALU == {e.mnemonic: (e.srcs, e.fn) for e in isa.asm_entries("valu")}
    assert all(e.mnemonic in OPS for e in isa.asm_entries("own"))
    assert set(vop.ROUTE) == {e.mnemonic for e in isa.asm_entries("valu") if e.rule.routes}
    assert set(vop.BYTE_EXTRACT) == {e.mnemonic for e in isa.asm_entries("valu") if e.rule.byte_extract}


def test_every_entry_states_a_rule_and_types_for_each_source():
    for e in isa.TABLE.values():
        assert e.rule in isa.RULES and callable(e.fn), e.mnemonic
        assert e.asm in isa.ASM_FORMS
        assert all(isinstance(t, str) for t in e.srcs) and e.srcs, e.mnemonic


# -- the 16-bit operations: entries of their own, the same numbers as the entry's function on the
# same typed arrays in the Python front end, and the same bits and provenance as the asm front
# end's 16-bit rows (global_load_ushort halves, the result's low half stored)
_H = [0, 1, 2, 0x7FFF, 0x8000, 0xFFFF, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0x0001, 0x03FF, 0x0400, 0x3C00, 0xBC00,
      0x3800, 0x3E00, 0x7BFF, 0xFBFF, 15, 16, 17, 31, 32, 0x00FF, 0x0100, 0x8001, 0xFFFE]
WORDS16 = np.concatenate([np.array(_H, np.uint16),
                          np.random.default_rng(5).integers(0, 2 ** 16, LANES - len(_H)).astype(np.uint16)])
NP16 = {"i16": np.int16, "f16": np.float16}      # the 16-bit register types (there is no u16)
SIXTEEN = [(op, t, o.mnemonic) for (op, t), o in ops.VALU.items()
           if t in NP16 and not o.pseudo and (op in BINARY or op[4:] in CMP)]


@pytest.mark.parametrize("op,t,mnemonic", SIXTEEN, ids=[f"{m}-{t}" for _, t, m in SIXTEEN])
def test_python_16_bit_operations_compute_through_their_entry(op, t, mnemonic):
    e = isa.entry(mnemonic)
    a, b = WORDS16.view(NP16[t]), np.roll(WORDS16, 5).view(NP16[t])
    if op in BINARY:
        spell, out = BINARY[op], Buffer.empty("out", (LANES,), t)
        want = (e.fn(b, a) if e.reversed else e.fn(a, b)).astype(NP16[t]).view(np.uint16)
    else:
        rel = CMP[op[4:]]
        spell, out = (lambda w, x, y: w.select(getattr(x, rel)(y), w.const(1, "u32"), w.const(0, "u32"))), \
            Buffer.empty("out", (LANES,), "u32")
        want = e.fn(a, b).astype(np.uint32)

    def k(w):
        off = w.lane_id * 2
        x, y = (w.global_load(Buffer(n, v.copy()), off, 2, t) for n, v in (("a", a), ("b", b)))
        w.global_store(out, off * out.array.itemsize // 2, spell(w, x, y))
    launch(k, arch=ARCH, trace=False)
    np.testing.assert_array_equal(out.array.view(want.dtype), want)


def test_a_deliberate_difference_is_a_named_option_of_one_entry():
    e = isa.entry("pseudo.div_i32")
    assert e.option("by_constant")(np.array([-9, 17], np.int32), 4).tolist() == [-3, 4]      # floor, by a shift
    with pytest.raises(KeyError, match="has no option 'checked'"):
        isa.entry("v_add_u32").option("checked")
    with pytest.raises(isa.UnknownInstruction):
        isa.entry("v_add_u33")


def _asm16(mnemonic, e, a, b, out):
    srcs = "v3, v2" if e.reversed else "v2, v3"
    line = (f"{mnemonic}_e64 s[12:13], {srcs}\n    v_cndmask_b32_e64 v4, 0, 1, s[12:13]\n"
            "    global_store_dword v6, v4, s[8:9]") if e.result == "mask" else \
        f"{mnemonic}_e32 v4, {srcs}\n    global_store_short v1, v4, s[8:9]"
    body = f"""
    s_load_dwordx2 s[4:5], s[0:1], 0x0
    s_load_dwordx2 s[6:7], s[0:1], 0x8
    s_load_dwordx2 s[8:9], s[0:1], 0x10
    v_lshlrev_b32_e32 v1, 1, v0
    v_lshlrev_b32_e32 v6, 2, v0
    s_waitcnt lgkmcnt(0)
    global_load_ushort v2, v1, s[4:5]
    global_load_ushort v3, v1, s[6:7]
    s_waitcnt vmcnt(0)
    {line}
"""
    args = [("a", "global_buffer", 8), ("b", "global_buffer", 8), ("out", "global_buffer", 8)]
    run_asm(kernel_from_text(body, args=args, arch=ARCH), args={"a": a, "b": b, "out": out}, arch=ARCH, trace=False)
    return _result(out)


@pytest.mark.parametrize("op,t,mnemonic", SIXTEEN, ids=[f"{m}-{t}" for _, t, m in SIXTEEN])
def test_16_bit_operations_give_equal_bits_and_provenance_in_both(op, t, mnemonic):
    e = isa.entry(mnemonic)
    a, b = WORDS16.view(NP16[t]), np.roll(WORDS16, 5).view(NP16[t])
    if op in BINARY:
        spell = BINARY[op]
        out = lambda: Buffer.empty("out", (LANES,), t)        # noqa: E731
    else:
        rel = CMP[op[4:]]
        spell = lambda w, x, y: w.select(getattr(x, rel)(y), w.const(1, "u32"), w.const(0, "u32"))  # noqa: E731
        out = lambda: Buffer.empty("out", (LANES,), "u32")    # noqa: E731

    def bufs():
        return [Buffer(n, v.copy(), tags=TAGS[k]) for k, (n, v) in enumerate((("a", a), ("b", b)))]

    def k(w):
        x, y = (w.global_load(buf, w.lane_id * 2, 2, t) for buf in ins)
        w.global_store(o, w.lane_id * o.array.itemsize, spell(w, x, y))
    ins, o = bufs(), out()
    launch(k, arch=ARCH, trace=False)
    py = _result(o)
    asm = _asm16(mnemonic, e, *bufs(), out())
    _same(py, asm)
