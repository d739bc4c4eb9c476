"""Inputs the harnesses cannot run on are refused with one line naming the array and entry."""
import numpy as np
import pytest

from gfxsim.cli import main
from kernels_py.reference.int8_cache import build_paged_cache
from kernels_py.workloads.inputs import InputError, validate_inputs


def inputs(block_ids):
    rng = np.random.default_rng(0)
    k = rng.standard_normal((1, 64, 1, 128)).astype(np.float32)
    return dict(q=rng.standard_normal((1, 8, 128)).astype(np.float32), k=k, v=k,
                block_tables=np.array([block_ids], np.int64))


def test_block_ids_near_1e9_are_refused_naming_the_entry_not_a_memory_error(tmp_path, capsys):
    path = tmp_path / "far.npz"
    np.savez(path, **inputs([999_999_990, 999_999_991, 999_999_992, 999_999_993]))
    assert main(["run", "pv_int8", "--inputs", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "sequence 0 entry 3 is block 999999993" in err[0] and "use 4 blocks" in err[0]


def test_the_cache_a_block_table_implies_is_checked_against_the_memory_given():
    d = inputs([0, 1, 2, 1000])
    with pytest.raises(ValueError, match=r"entry 3 is block 1000, so the cache would hold 1001 blocks"):
        build_paged_cache(d["k"], d["v"], [64], block_tables=d["block_tables"], available=1 << 20)
    cache = build_paged_cache(d["k"], d["v"], [64], block_tables=d["block_tables"], available=1 << 30)
    assert cache.k_cache.shape[0] == 1001


def test_block_ids_beyond_int32_are_refused():
    with pytest.raises(InputError, match=r"entry 1 is 4294967296.*\[0, 2\*\*31\)"):
        validate_inputs(inputs([0, 2 ** 32, 2, 3]))
