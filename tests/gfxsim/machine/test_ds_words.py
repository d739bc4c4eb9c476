"""ds_words' compiled bank-conflict question is whether banks.bank_conflicts_rows gives some
member a degree above 1, on random access patterns (both rules, every access size, partial EXEC,
lanes sharing dwords)."""
import numpy as np
import pytest

from gfxsim.machine import ds_words
from gfxsim.machine.banks import bank_conflicts_rows, phases


@pytest.mark.parametrize("rule", ["gfx9", "nvidia"])
@pytest.mark.parametrize("nbytes", [1, 2, 4, 8, 12, 16])
def test_a_conflict_is_a_degree_above_one(rule, nbytes):
    rng = np.random.default_rng(nbytes)
    members, lanes = 4, 64
    ph = phases(nbytes, lanes, rule)
    align = 16 if nbytes == 12 else nbytes
    seen = set()
    for trial in range(300):
        span = int(rng.choice([64, 512, 4096]))
        stride = int(rng.choice([0, 1, 2, 4, 8, 32]))
        base = rng.integers(0, span, (members, 1)) + stride * np.arange(lanes)[None, :]
        addr = (np.where(rng.random((members, lanes)) < 0.3, rng.integers(0, span, (members, lanes)), base)
                // align * align).astype(np.int64)
        act = rng.random((members, lanes)) < (1.0 if trial % 3 == 0 else 0.7)
        deg, _, _ = bank_conflicts_rows(addr, act, nbytes, 32, 4, rule)
        got = ds_words._conflicts(np.ascontiguousarray(addr.reshape(-1)), np.ascontiguousarray(act.reshape(-1)),
                                       lanes, nbytes, ph, int(ph.max()) + 1, 32, 4)
        assert got == (int(deg.max()) > 1), (trial, nbytes, rule)
        seen.add(got)
    assert seen == {True, False}


def test_the_phases_an_access_passes_are_banks_phases():
    """DsOps._phases (kept per lanes, size and rule) gives each access banks.phases and their
    number, whatever order the sizes and rules are asked in."""
    from types import SimpleNamespace
    from gfxsim.machine.ds import DsOps
    rng = np.random.default_rng(0)
    asks = [(lanes, nbytes, rule) for lanes in (32, 64) for nbytes in (1, 2, 4, 8, 12, 16) for rule in ("gfx9", "nvidia")]
    for k in rng.permutation(len(asks)).tolist() * 2:
        lanes, nbytes, rule = asks[k]
        ph, n_phase = DsOps._phases(SimpleNamespace(lanes=lanes, arch=SimpleNamespace(lds_rule=rule)), nbytes)
        want = phases(nbytes, lanes, rule)
        assert np.array_equal(ph, want) and n_phase == int(want.max()) + 1, (lanes, nbytes, rule)
