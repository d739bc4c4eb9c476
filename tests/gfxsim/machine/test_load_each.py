"""Wave.global_load_each (one load per element of an address value, checked and gathered at once
where it can: vmem.LOADS_TOGETHER) gives what loading element by element gives: the values' bits,
types and registers, the events and steps, the findings, the fault and the provenance; for every
width, 4-byte and other types, special floats, an address out of bounds or misaligned in any of
the loads, a partial EXEC, never-written bytes, a trace and provenance."""
import numpy as np
import pytest

from gfxsim import Buffer
from gfxsim.machine import vmem
from gfxsim.machine.launch import Machine
from gfxsim.machine.wave import Wave
from gfxsim.machine.workgroup import Workgroup

_SPECIAL = np.array([0x7FC00001, 0xFFC12345, 0x7F800000, 0xFF800000, 0x80000000, 0x00000001, 0x7F7FFFFF,
                     0x7FA00000], np.uint32)                # quiet/signalling NaNs with payloads, infs, -0, tiny


def _data(rng, n_words):
    words = rng.integers(0, 2 ** 32, n_words, dtype=np.uint64).astype(np.uint32)
    words[rng.integers(0, n_words, 16)] = rng.choice(_SPECIAL, 16)
    return words


def _run(together, case, monkeypatch):
    monkeypatch.setattr(vmem, "LOADS_TOGETHER", together)
    rng = np.random.default_rng(case["seed"])
    m = Machine("gfx942", "t", trace=case.get("trace", False), provenance=case.get("provenance", False))
    w = Wave(m, Workgroup(m, (0, 0, 0), 1), 0)
    words = _data(rng, 256)
    buf = Buffer("b", words.view(case.get("buf_dtype", np.float32)),
                 tags={"token": np.arange(256)} if case.get("provenance") else None)
    if case.get("written") is not None:
        buf.written = np.zeros(buf.nbytes, bool)
        buf.written[case["written"]] = True
    nbytes, loads = case["nbytes"], case["loads"]
    addr = rng.integers(0, (buf.nbytes - nbytes) // 4 + 1, (loads, w.width)) * 4
    for load, lane, bad in case.get("bad", []):
        addr[load, lane] = bad
    off = w.from_lanes(addr, case.get("addr_type", "i32"))
    if case.get("exec") is not None:
        w.set_exec(case["exec"](w.width))
    try:
        got = w.global_load_each(buf, off, nbytes, case.get("dtype")) if together else \
            [w.global_load(buf, off[i], nbytes, case.get("dtype")) for i in range(off.n)]
        vals = [(v.dtype, v.regs, v.val.dtype.str, v.val.shape, v.val.tobytes(),
                 None if v.valid is None else v.valid.tobytes(),
                 None if v.prov is None else sorted((f, a.tobytes()) for f, a in v.prov.per_byte().ids.items()))
                for v in got]
    except Exception as e:                      # noqa: BLE001 - compared below
        vals = (type(e).__name__, str(e).split(" in t at ")[0])    # not the line of this file that called
    return (vals, m.trace.n_events, w.steps, w._next_reg, [(f.kind, f.message, f.lane) for f in m.findings],
            len(m.trace.events) if m.trace.enabled else None)


_CASES = [dict(seed=s, nbytes=n, loads=l) for s, (n, l) in enumerate([(4, 1), (4, 8), (8, 5), (12, 3), (16, 64),
                                                                       (16, 2)])]
_CASES += [
    dict(seed=10, nbytes=16, loads=6, dtype="i32"),
    dict(seed=11, nbytes=8, loads=4, dtype="u32", addr_type="u32"),
    dict(seed=12, nbytes=16, loads=4, addr_type="i64"),
    dict(seed=13, nbytes=16, loads=4, dtype="u8", buf_dtype=np.uint8),             # not a dword type: one by one
    dict(seed=14, nbytes=8, loads=3, dtype="f16", buf_dtype=np.float16),
    dict(seed=15, nbytes=16, loads=5, bad=[(3, 17, 1024 - 8)]),                      # past the end in load 3
    dict(seed=26, nbytes=16, loads=3, bad=[(1, 9, 1024 - 12)]),                      # one dword past the end
    dict(seed=27, nbytes=16, loads=3, bad=[(1, 9, 1024 - 16)]),                      # the last in bounds
    dict(seed=16, nbytes=16, loads=5, bad=[(2, 40, -16)]),                           # negative
    dict(seed=17, nbytes=8, loads=5, bad=[(4, 63, 6)]),                              # misaligned in the last
    dict(seed=18, nbytes=16, loads=5, bad=[(0, 0, 2 ** 31 - 4)]),
    dict(seed=19, nbytes=16, loads=4, exec=lambda n: np.arange(n) % 3 != 0),          # a partial EXEC
    dict(seed=20, nbytes=16, loads=4, exec=lambda n: np.arange(n) % 3 != 0, bad=[(1, 3, 1 << 20)]),  # inactive
    dict(seed=21, nbytes=16, loads=4, written=slice(0, 512)),                        # never-written bytes
    dict(seed=22, nbytes=16, loads=4, written=slice(0, 1024)),
    dict(seed=23, nbytes=16, loads=4, trace=True),
    dict(seed=24, nbytes=16, loads=4, provenance=True),
]


@pytest.mark.parametrize("case", _CASES, ids=lambda c: str(c["seed"]))
def test_loads_at_once_are_loads_one_by_one(case, monkeypatch):
    at_once, one_by_one = _run(True, case, monkeypatch), _run(False, case, monkeypatch)
    assert at_once == one_by_one
    if case["seed"] < 13:                           # the path taken at once loaded something
        assert isinstance(at_once[0], list) and len(at_once[0]) == case["loads"]


def test_the_fast_path_is_taken(monkeypatch):
    """In bounds, full EXEC, no provenance: global_load itself is never called."""
    calls = []
    monkeypatch.setattr(Wave, "global_load", lambda *a, **k: calls.append(a))
    m = Machine("gfx942", "t", trace=False, provenance=False)
    w = Wave(m, Workgroup(m, (0, 0, 0), 1), 0)
    buf = Buffer("b", np.arange(256, dtype=np.float32))
    got = w.global_load_each(buf, w.from_lanes(np.arange(3 * w.width).reshape(3, -1) % 250 * 4, "i32"), 8, "f32")
    assert not calls and [v.val[0, 5] for v in got] == [5, (w.width + 5) % 250, (2 * w.width + 5) % 250]
