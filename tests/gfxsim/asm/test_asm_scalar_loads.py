"""s_load_dword*: members at one address written as one block of SGPRs, without provenance the
identity check skipped (semantics/mem.LEAN_SLOAD), give what each SGPR through WaveState.swrite
and the check gave: the same registers, findings, events and origin marks, with and without
provenance, members at one address or at several, all of them loading or some."""
import numpy as np
import pytest

from gfxsim import Buffer
from gfxsim.asm.run import kernel_from_text, run_asm
from gfxsim.asm.semantics import mem

ARGS = [("x", "global_buffer", 8), ("y", "global_buffer", 8)]
PROLOG = "s_load_dwordx4 s[4:7], s[0:1], 0x0\ns_waitcnt lgkmcnt(0)\ns_lshl_b32 s12, s2, 2\n"
SUM = "v_mov_b32_e32 v2, s8\nv_add_u32_e32 v2, s9, v2\nv_add_u32_e32 v2, s10, v2\nv_add_u32_e32 v2, s11, v2\n"
EPILOG = "v_lshlrev_b32_e32 v1, 2, v0\nv_mov_b32_e32 v3, s12\nv_lshl_add_u32 v1, v3, 6, v1\n" \
         "global_store_dword v1, v2, s[6:7]\n"
LOADS = {
    "uniform": "s_load_dwordx4 s[8:11], s[4:5], 0x10\ns_waitcnt lgkmcnt(0)\n",
    "per member": "s_load_dwordx4 s[8:11], s[4:5], s12\ns_waitcnt lgkmcnt(0)\n",
    "one dword": "s_mov_b64 s[8:9], 0\ns_mov_b64 s[10:11], 0\ns_load_dword s9, s[4:5], 0x8\ns_waitcnt lgkmcnt(0)\n",
    "no wait": "s_mov_b64 s[8:9], 0\ns_mov_b64 s[10:11], 0\ns_load_dwordx2 s[8:9], s[4:5], 0x8\n",
    "some members": "s_mov_b64 s[8:9], 0\ns_mov_b64 s[10:11], 0\ns_cmp_eq_u32 s2, 0\ns_cbranch_scc0 .Lskip\n"
                    "s_load_dwordx2 s[8:9], s[4:5], s12\n.Lskip:\ns_waitcnt lgkmcnt(0)\n",
}


def _run(body, grid, batch, provenance):
    """y, the findings, the events, and each wave's SGPRs, their written marks and origin marks at its end."""
    from gfxsim.asm import run as asm_run
    execute, states = asm_run.execute, []

    def kept(st, program):
        execute(st, program)
        states.append((st.s.tolist(), st.s_written.tolist(), st.s_unknown.tolist()))
    asm_run.execute = kept
    x = Buffer("x", np.arange(16, dtype=np.uint32) * 0x01000193 + 7)
    y = Buffer("y", np.zeros(64 * grid, np.uint32))
    k = kernel_from_text(PROLOG + body + SUM + EPILOG, "test_scalar_loads", args=ARGS)
    try:
        r = run_asm(k, grid, 64, args=dict(x=x, y=y), batch=batch, provenance=provenance, trace=False)
    finally:
        asm_run.execute = execute
    return y.array.tolist(), [(f.kind, f.message, f.workgroup) for f in r.findings], r.trace.n_events, states


@pytest.mark.parametrize("load", list(LOADS))
@pytest.mark.parametrize("grid,batch", [(1, 1), (3, 3), (3, 1)])
@pytest.mark.parametrize("provenance", [False, True])
def test_a_scalar_load_in_brief_is_the_general_one(load, grid, batch, provenance, monkeypatch):
    got = _run(LOADS[load], grid, batch, provenance)
    monkeypatch.setattr(mem, "LEAN_SLOAD", False)
    want = _run(LOADS[load], grid, batch, provenance)
    assert got == want
    if load == "uniform":
        assert got[0][:64] == [sum(int(v) for v in np.arange(4, 8) * 0x01000193 + 7) & 0xFFFFFFFF] * 64
