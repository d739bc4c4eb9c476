"""No input runs forever or takes the machine's memory: a wave past max_steps instructions, or a
trace past max_trace_bytes, stops the launch with an error naming the bound (both front ends)."""
import numpy as np
import pytest

from gfxsim import launch
from gfxsim.machine import LaunchOptions
from gfxsim.asm.run import kernel_from_text, run_asm
from gfxsim.machine.errors import GfxSimError, StepLimit


def spin(w):
    x = w.zeros("i32")
    while True:                 # a kernel that never ends: every statement is an instruction
        x = x + 1


def test_a_python_kernel_that_never_ends_stops_at_max_steps():
    with pytest.raises(StepLimit, match=r"more than 1,000 instructions executed by one wave.*max_steps") as e:
        launch(spin, grid=1, options=LaunchOptions(max_steps=1000, trace=False))
    assert isinstance(e.value, GfxSimError) and e.value.coords["wave"] == 0


def test_a_python_trace_stops_at_max_trace_bytes():
    with pytest.raises(StepLimit, match="over its bound max_trace_bytes = 0.00 GiB"):
        launch(spin, grid=1, options=LaunchOptions(max_trace_bytes=1 << 20))


LOOP = ".L1:\ns_branch .L1"


def test_an_asm_loop_with_the_trace_on_stops_at_max_trace_bytes():
    with pytest.raises(StepLimit, match="max_trace_bytes"):
        run_asm(kernel_from_text(LOOP), (1,), 64, args={}, arch="gfx942",
                options=LaunchOptions(max_trace_bytes=1 << 20))


def test_an_asm_loop_with_the_trace_off_stops_at_max_steps():
    with pytest.raises(GfxSimError, match="more than 10,000 instructions executed by one wave"):
        run_asm(kernel_from_text(LOOP), (1,), 64, args={}, arch="gfx942",
                options=LaunchOptions(max_steps=10_000, trace=False))


def test_the_bounds_are_validated():
    with pytest.raises(ValueError, match="max_trace_bytes must be a positive number"):
        LaunchOptions(max_trace_bytes=0)
    with pytest.raises(ValueError, match="max_steps must be >= 1"):
        LaunchOptions(max_steps=0)
    assert LaunchOptions(max_trace_bytes=None).max_trace_bytes is None
    run = launch(lambda w: w.zeros("i32") + 1, grid=1)                  # the defaults let a kernel run
    assert run.trace.n_events == 2 and np.isfinite(run.seconds)
