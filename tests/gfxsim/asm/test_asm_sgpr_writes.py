"""WaveState's SGPR writes of every member with no origin marks (the common case, written in
fewer passes) leave what the general per-word path leaves: the words, the written flags, EXEC
and the reads back, for one SGPR, a pair, VCC and EXEC, and in a batch of members."""
from __future__ import annotations

import numpy as np
import pytest
from support.asm_sandbox import Sandbox

from gfxsim.asm.state import EXEC, U64, VCC


def _state(st):
    return st.s.copy(), st.s_written.copy(), st.exec.copy()


@pytest.mark.parametrize("first", [4, 10, VCC, 124, EXEC])
def test_a_pair_write_is_the_two_word_write(first):
    rng = np.random.default_rng(first)
    for _ in range(20):
        value = U64(int(rng.integers(0, 2**63)) * 2 + int(rng.integers(0, 2)))
        a, b = Sandbox(), Sandbox()
        a.st.swrite64(first, value)                                             # the brief path
        b.st.swrite(first, value & U64(0xFFFFFFFF), value >> U64(32))           # the general one
        for x, y in zip(_state(a.st), _state(b.st)):
            np.testing.assert_array_equal(x, y)
        assert int(a.st.sread64(first)[0]) == int(value) == int(b.st.sread64(first)[0])


@pytest.mark.parametrize("first", [0, 7, 105, 124])
def test_a_one_word_write_is_the_general_write(first):
    for value in (0, 1, 0xFFFFFFFF, 0x1_0000_0005, -1, -7):
        a, b = Sandbox(), Sandbox()
        a.st.swrite(first, np.asarray([value], np.int64))
        b.st.act = np.ones(1, bool)                     # an act set: the general loop
        b.st.swrite(first, np.asarray([value], np.int64))
        for x, y in zip(_state(a.st), _state(b.st)):
            np.testing.assert_array_equal(x, y)
        assert int(a.st.sread(first)[0]) == value & 0xFFFFFFFF


def test_members_part_or_carry_marks_take_the_general_path():
    a = Sandbox()
    st = a.st
    st.act = np.zeros(1, bool)                                  # no member executing: nothing written
    st.swrite64(8, U64(5))
    st.swrite(9, 3)
    st.act = None
    assert int(st.sread64(8)[0]) == 0


def test_a_pair_read_is_a_copy_not_a_view_of_the_sgprs():
    """A source read, then its registers written (s_and_saveexec_b64 s[4:5], s[4:5]): the read keeps its value."""
    st = Sandbox().st
    st.swrite64(4, U64(0x1234_5678_9ABC_DEF0))
    got = st.sread64(4)
    st.swrite64(4, U64(7))
    assert int(got[0]) == 0x1234_5678_9ABC_DEF0
