"""What the asm front end cannot run is named when the kernel is loaded, with what it is: an
instruction it has no semantics for (even one no wave reaches), another arch's code, arguments a
.s does not declare."""
import numpy as np
import pytest

from gfxsim import Buffer
from gfxsim.asm.launch import LaunchError
from gfxsim.asm.run import AsmError, run_asm
from gfxsim.asm.run import kernel_from_text


def test_an_unknown_opcode_no_wave_reaches_is_named_at_launch():
    k = kernel_from_text("s_branch .L2\nv_bogus_op v1, v2\nv_sin_f32_e32 v1, v2\n.L2:\ns_nop 0")
    with pytest.raises(AsmError, match=r"^snippet: 2 instruction\(s\) the asm front end cannot execute: "
                                       r"line \d+: v_bogus_op; line \d+: v_sin_f32_e32$"):
        run_asm(k, (1,), 64, args={}, arch="gfx942", trace=False)


def test_another_archs_code_is_refused_for_its_arch_not_an_operand():
    k = kernel_from_text("s_sendmsg sendmsg(MSG_DEALLOC_VGPRS)", arch="gfx1100")
    with pytest.raises(AsmError, match=r"snippet is compiled for gfx1100 \(amdgcn-amd-amdhsa--gfx1100\); the asm "
                                       r"front end executes wave64 CDNA code"):
        run_asm(k, (1,), 64, args={}, arch="gfx942")


@pytest.mark.parametrize("args, words", [
    ({"out": Buffer("out", np.zeros(64, np.float32))}, "has no argument out; its .s declares none"),
    ([Buffer("out", np.zeros(64, np.float32))], "takes no arguments, got 1; its .s declares none"),
])
def test_arguments_of_a_kernel_that_declares_none_say_so(args, words):
    with pytest.raises(LaunchError) as e:
        run_asm(kernel_from_text("s_nop 0"), (1,), 64, args=args, arch="gfx942")
    assert words in str(e.value) and "its arguments: " not in str(e.value)
