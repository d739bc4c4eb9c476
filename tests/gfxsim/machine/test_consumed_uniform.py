"""consumed._uniform (whether a matrix record's K sets hold one set per row) as one compiled pass
(summaries.rows_uniform), held to its numpy twin: random masks uniform and not, a difference in
base, wide or one bit word only, at the first or last element, empty axes, strided views; and
the real launches' answers (sage_attention's row sums) the same with the switch off."""
import contextlib
import io
import json

import numpy as np
import pytest

from gfxsim.machine import consumed
from gfxsim.machine.provenance import WORDS, Mask


def _masks(rng):
    for rows, L in ((1, 16), (1, 8), (3, 16), (2, 1), (0, 4), (2, 0), (4, 64)):
        base = np.repeat(rng.integers(-1, 3, (rows, 1)) * 64, L, 1).astype(np.int64)
        bits = np.repeat(rng.integers(0, 2 ** 63, (rows, 1, WORDS), dtype=np.uint64), L, 1)
        wide = np.repeat(rng.integers(0, 3, (rows, 1)), L, 1).astype(np.uint32)
        yield Mask(base, bits, wide)                                   # uniform
        if rows == 0 or L < 2:
            continue
        for what in ("base", "wide", "bits"):
            for at in ((rows - 1, L - 1), (0, 1), (rows // 2, L // 2 or 1)):
                m = Mask(base.copy(), bits.copy(), wide.copy())
                if what == "bits":
                    m.bits[at + (int(rng.integers(WORDS)),)] ^= np.uint64(1) << np.uint64(rng.integers(64))
                else:
                    getattr(m, what)[at] += 1
                yield m
        wider = Mask(np.repeat(base, 2, 1), np.repeat(bits, 2, 1), np.repeat(wide, 2, 1))
        yield wider.map(lambda x: x[:, ::2])                           # a strided view, uniform
        yield wider.map(lambda x: x[:, 1:])


@pytest.mark.parametrize("seed", range(4))
def test_compiled_uniform_is_the_numpy_twin(seed):
    got = [(consumed._uniform(m), consumed._uniform_numpy(m)) for m in _masks(np.random.default_rng(seed))]
    assert [a for a, _ in got] == [b for _, b in got]
    assert {b for _, b in got} == {True, False}          # both answers are exercised


def test_sage_row_sums_the_same_with_the_switch_off(monkeypatch):
    """The real launch: every record's answer (on and off) and the run's findings and token sets."""
    from gfxsim.cli import main

    def run():
        seen = []
        real = consumed._uniform

        def spy(ks):
            seen.append(real(ks))
            return seen[-1]
        monkeypatch.setattr(consumed, "_uniform", spy)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            main(["run", "sage_attention", "--arch", "sm_90", "--heads", "2", "--kv-heads", "1",
                  "--context", "256", "--report", "json", "--quiet"])
        monkeypatch.setattr(consumed, "_uniform", real)
        rep = json.loads(out.getvalue())
        rep.pop("seconds", None)
        return seen, rep
    on = run()
    monkeypatch.setattr(consumed, "UNIFORM_COMPILED", False)
    off = run()
    assert on[0] and on[0] == off[0]
    assert on[1] == off[1]
