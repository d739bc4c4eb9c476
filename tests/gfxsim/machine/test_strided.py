"""An index array as strides (gfxsim/machine/strided.py): a form, where one is found, reads exactly
the elements np.take reads, for every matrix instruction's operand plans and D's inverse."""
import numpy as np
import pytest

from gfxsim.arch import get_arch
from gfxsim.errors import ArgumentError
from gfxsim.machine import strided
from gfxsim.machine.plans import d_inverse, flat_form, flat_plan, inverse_form

ARCHES = ("gfx936", "gfx90a", "gfx942", "sm_90")


def _insns():
    for arch in ARCHES:
        prof = get_arch(arch)
        for m, insn in prof.instructions.items():
            yield pytest.param(insn, prof.wave_size, id=f"{arch}-{m}")


@pytest.mark.parametrize("members", [1, 3])
@pytest.mark.parametrize("insn,lanes", list(_insns()))
def test_plans_as_views_read_what_take_reads(insn, lanes, members):
    cache = {}
    rng = np.random.default_rng(len(insn.mnemonic) + members)
    for op in "ABCD":
        plan = flat_plan(cache, insn, op, members, lanes)
        regs = int(plan.max()) // (members * lanes) + 1
        val = rng.integers(-128, 128, (regs, members * lanes)).astype(np.int8)
        form = flat_form(cache, insn, op, members, lanes)
        want = np.take(val, plan).astype(np.float32)
        got = strided.take(val, plan, form, np.float32)
        assert got.shape == want.shape and got.flags.c_contiguous
        assert np.array_equal(got, want)
        assert np.array_equal(strided.take(val, plan, form), np.take(val, plan))
    inv = d_inverse(cache, insn, members, lanes)
    if inv is not None:
        td = flat_plan(cache, insn, "D", members, lanes)
        si = rng.integers(-2 ** 31, 2 ** 31, td.shape).astype(np.int32)
        want = np.empty((insn.elems("D"), members * lanes), np.int32)
        want.reshape(-1)[td] = si
        got = np.full_like(want, 7)
        strided.take_into(got, si, inv, inverse_form(cache, insn, members, lanes))
        assert np.array_equal(got, want)


def test_the_int8_operands_of_a_batch_are_views():
    insn = get_arch("gfx936").instruction("v_mmac_i32_16x16x32_i8")
    cache = {}
    for op in "AB":
        assert flat_form(cache, insn, op, 512, 64) is not None
    assert inverse_form(cache, insn, 512, 64) is not None


def test_forms():
    x = np.arange(24).reshape(2, 3, 4).transpose(2, 0, 1)        # a transposed arange: a view
    shape, strides, off = strided.strided_form(x)
    assert off == 0 and np.array_equal(strided.view(np.arange(24), (shape, strides, off)).reshape(-1), x.reshape(-1))
    assert strided.strided_form(x + 5)[2] == 5
    assert strided.strided_form(np.array([0, 1, 3])) is None                 # not affine
    assert strided.strided_form(np.array([3, 2, 1, 0])) is None              # a negative stride
    assert strided.strided_form(np.array([-2, -1])) is None                  # a take counts these from the end
    assert strided.strided_form(np.random.default_rng(0).permutation(64)) is None
    assert strided.strided_form(np.array([], np.int64)) is None
    assert strided.strided_form(np.array([2, 2, 2])) == ((3,), (0,), 2)     # one element, repeated


def test_an_index_past_the_array_still_raises():
    index = np.arange(16).reshape(4, 4)
    form = strided.strided_form(index)
    assert strided.view(np.zeros(15), form) is None
    with pytest.raises(IndexError):
        strided.take(np.zeros(15), index, form)
    a = np.zeros((4, 4))[:, ::2]                                              # not contiguous: a take
    assert np.array_equal(strided.take(a, np.arange(8) % 8, strided.strided_form(np.arange(8))), np.take(a, np.arange(8)))


def test_take_into_needs_a_contiguous_out():
    index = np.arange(8)
    with pytest.raises(ArgumentError, match="C-contiguous"):
        strided.take_into(np.zeros((4, 4))[:, ::2], np.arange(8.0), index, strided.strided_form(index))
