"""One wave of the asm front end with registers set by hand: run instructions, read registers.

    sb = Sandbox()
    sb.v[1] = np.arange(64); sb.v[2] = 7
    sb.run("v_add_u32_e32 v3, v1, v2")
    sb.v[3]            # -> uint32[64]
"""
from __future__ import annotations

import numpy as np

from gfxsim.asm.launch import AddressSpace
from gfxsim.asm.run import Program, asm_source, kernel_from_text
from gfxsim.asm.state import WaveState
from gfxsim.machine.launch import Machine
from gfxsim.machine.wave import Wave
from gfxsim.machine.workgroup import Workgroup


class _Regs:
    def __init__(self, sb, f):
        self.sb, self.f = sb, f

    def __getitem__(self, r):
        return self.sb.st.regfile(self.f).words[r].copy()

    def __setitem__(self, r, values):
        st = self.sb.st
        saved = st.exec.copy()
        st.set_exec(np.ones(st.w.width, bool))
        vals = np.broadcast_to(np.asarray(values).astype(np.int64).astype(np.uint32), (st.w.width,))
        st.vwrite(self.f, r, vals[None, :].copy())
        st.set_exec(saved)

    def f32(self, r):
        return self[r].view(np.float32)


class Sandbox:
    def __init__(self, arch="gfx942", vgprs=64, agprs=16, lds=0, provenance=False):
        self.m = Machine(arch, "sandbox", trace=False, provenance=provenance, lds_bytes=lds or None)
        self.wg = Workgroup(self.m, (0, 0, 0), 1)
        self.w = Wave(self.m, self.wg, 0)
        self.kernel = kernel_from_text("s_nop 0", vgprs=vgprs, agprs=agprs, lds=lds)
        self.st = WaveState(self.w, self.kernel, vgprs, agprs, AddressSpace([]))
        self.w.source_hook = lambda: asm_source(self.st)     # findings and errors name the line
        if lds:
            self.st.lds = self.w.shared("lds", (lds,), "u8")
        self.v = _Regs(self, "v")
        self.a = _Regs(self, "a")

    @property
    def lanes(self):
        return self.st.lanes

    def sgpr(self, first, count=1):
        return self.st.sget(first, count)

    def set_sgpr(self, first, *words):
        self.st.sset(first, list(words))

    def set_exec(self, mask):
        self.st.set_exec(np.asarray(mask, bool))

    def vcc(self):
        return self.st.mask_of(106)

    def run(self, *lines: str, translated: bool = True):
        """Execute these instructions in order (no branches), then stop: each through its translated
        step where it has one (as a launch runs it), else (or ``translated=False``) its semantics
        function."""
        k = kernel_from_text("\n".join(lines))
        p = Program(k)
        self.st.kernel, self.st.pc = k, 0
        self.st.pcs[:], self.st.ended[:] = 0, False
        n = len(p.decoded) - 1                      # s_endpgm appended by kernel_from_text
        for i in range(n):
            d = p.decoded[i]
            self.st.current = d
            fn = p.fns[i]
            if fn is None:
                raise self.st.error(f"unsupported opcode {d.ins.mnemonic}")
            step = p.steps[i] if translated else None
            fn(self.st, d) if step is None else step(self.st)
        return self


def run_snippet(body, *, args=(), grid=(1,), block=64, arrays=None, **kw):
    """run_asm of kernel_from_text(body); returns (Run, arrays after)."""
    from gfxsim import Buffer
    from gfxsim.asm.run import run_asm
    k = kernel_from_text(body, args=args, **{x: kw.pop(x) for x in list(kw) if x in ("lds", "vgprs", "agprs",
                                                                                   "workgroup_ids", "workitem_ids")})
    bufs = {n: Buffer(n, a) if isinstance(a, np.ndarray) else a for n, a in (arrays or {}).items()}
    run = run_asm(k, grid=grid, block=block, args=bufs, **kw)
    return run, {n: b.array if hasattr(b, "array") else b for n, b in bufs.items()}
