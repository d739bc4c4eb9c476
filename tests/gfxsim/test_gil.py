"""gfxsim.gil: the short GIL switch interval, held by nested and overlapping holders."""
import sys
import threading

import pytest

from gfxsim import gil
from gfxsim.errors import GfxSimError


@pytest.fixture
def interval():
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.005)
    yield 0.005
    sys.setswitchinterval(before)


def test_the_last_holder_restores_the_interval_the_first_saved(interval):
    with gil.short_switch_interval():
        assert sys.getswitchinterval() == gil.SHORT_SWITCH_INTERVAL
        with gil.short_switch_interval():
            assert sys.getswitchinterval() == gil.SHORT_SWITCH_INTERVAL
        assert sys.getswitchinterval() == gil.SHORT_SWITCH_INTERVAL     # the outer one still holds it
    assert sys.getswitchinterval() == interval


def test_a_holder_on_another_thread_keeps_it_after_the_first_leaves(interval):
    gil.hold()                                   # as jit.prewarm: held here, released by its thread
    t = threading.Thread(target=gil.release)
    with gil.short_switch_interval():
        pass
    assert sys.getswitchinterval() == gil.SHORT_SWITCH_INTERVAL          # the thread's hold remains
    t.start()
    t.join()
    assert sys.getswitchinterval() == interval


def test_a_longer_interval_is_never_set_and_a_shorter_one_is_kept():
    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.0001)
        with gil.short_switch_interval():
            assert sys.getswitchinterval() == pytest.approx(0.0001)
        assert sys.getswitchinterval() == pytest.approx(0.0001)
    finally:
        sys.setswitchinterval(before)


def test_a_release_without_its_hold_is_a_gfxsim_error(interval):
    with pytest.raises(GfxSimError, match="not held"):
        gil.release()
    assert sys.getswitchinterval() == interval


def test_run_kernel_holds_it_while_it_runs_and_restores_it(interval, monkeypatch):
    from kernels_py.host import runners, runs
    seen = []
    qk = runners.KERNELS["qk_int8"]

    def spy(cfg, inputs, swap):
        seen.append(sys.getswitchinterval())
        return qk(cfg, inputs, swap)
    monkeypatch.setitem(runners.KERNELS, "qk_int8", spy)
    runs.run_kernel("qk_int8", context=64, heads=8, kv_heads=1, provenance=False)
    assert seen == [gil.SHORT_SWITCH_INTERVAL] and sys.getswitchinterval() == interval
