"""What a harness's kernel left in its outputs is reported as it is: an output the kernel never
stored into is a finding (not "findings: none" beside NaN metrics), a store narrower than the
output's elements is "partly written", not "never written"."""
import numpy as np

from gfxsim.machine.consumed import check_unwritten
from kernels_py.host.twins import pv_buffers
from kernels_py.pv_int8 import pv_int8


def pv_setup(context=64):
    from kernels_py.reference.int8_cache import build_paged_cache
    rng = np.random.default_rng(0)
    k = rng.standard_normal((1, context, 1, 128)).astype(np.float32)
    cache = build_paged_cache(k, k, [context])
    return pv_buffers(np.abs(rng.standard_normal((16, context))).astype(np.float32), cache)


def test_an_output_the_kernel_never_stores_into_is_a_finding():
    def writes_nothing(w, *args, **kwargs):
        pass
    run = pv_setup().launch(writes_nothing, trace=False)
    (f,) = run.findings_of("token-coverage")
    assert f.details["buffer"] == "out" and f.details["element_count"] == 16 * 128
    assert "never written: 64 tokens never consumed {0-63}" in f.message


def test_a_buffer_stored_into_is_not_checked_twice_and_without_provenance_nothing_is_claimed():
    setup = pv_setup()
    run = setup.launch(pv_int8, trace=False)
    check_unwritten(run.machine, setup.buffers["out"])       # stored into: check_outputs covered it
    assert not run.findings
    off = pv_setup().launch(lambda w, *a, **k: None, trace=False, provenance=False)
    assert not off.findings and "token-coverage" in off.checks_not_run


def test_a_store_narrower_than_the_element_is_partly_written_not_never_written():
    def stores_i8(w, p, v_cache, v_scale, block_table, out, **kwargs):
        out = w.view(out)
        (out + w.lane_id).store(w.zeros("i8", 1)[0])
    run = pv_setup().launch(stores_i8, trace=False)
    messages = [f.message for f in run.findings_of("token-coverage")]
    assert any("partly written (1 of each element's 4 bytes: a store narrower than its f32 element)" in m
               for m in messages), messages
