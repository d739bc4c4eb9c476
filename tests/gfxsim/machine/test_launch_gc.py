"""A launch of big batches collects each batch's garbage with the objects that were there before
it set aside (gc.freeze): the batches' cycles are still freed, and the process's gc is left as
it was found."""
import gc
import importlib
import weakref

import numpy as np

from gfxsim import Buffer, launch
from gfxsim.machine.launch import GC_BATCH


def _launch(seen):
    out = Buffer("out", np.zeros(4 * GC_BATCH * 64, np.float32))

    def kernel(w):
        seen.append((weakref.ref(w), gc.get_freeze_count()))
        w.global_store(out, (w.workgroup_id[0] * 64 + w.lane_id) * 4, w.lane_id.to("f32"))

    launch(kernel, grid=(4 * GC_BATCH,), batch=GC_BATCH, provenance=False, trace=False)
    return out


def test_batches_garbage_is_freed_during_the_launch_and_gc_given_back():
    seen = []
    out = _launch(seen)
    assert len(seen) == 4
    assert all(frozen > 0 for _, frozen in seen)            # the earlier objects were set aside
    assert seen[0][0]() is None                              # the first batch's wave: freed meanwhile
    assert gc.get_freeze_count() == 0                        # and given back at the end
    assert (out.array.reshape(-1, 64) == np.arange(64, dtype=np.float32)).all()


def test_a_process_that_froze_objects_keeps_them_frozen():
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        _launch([])
        assert gc.get_freeze_count() >= before > 0
    finally:
        gc.unfreeze()


def test_a_long_batch_gives_the_heap_back_after_it_and_a_short_one_does_not(monkeypatch):
    L = importlib.import_module("gfxsim.machine.launch")        # the module (gfxsim.machine.launch is the function)
    calls = []
    monkeypatch.setattr(L, "release_heap", lambda: calls.append(1))
    monkeypatch.setattr(L, "TRIM_AFTER_S", 0.0)              # every batch counts as long
    long_out = _launch([])
    assert len(calls) == 4
    monkeypatch.setattr(L, "TRIM_AFTER_S", 1e9)
    short_out = _launch([])
    assert len(calls) == 4
    assert np.array_equal(long_out.array, short_out.array)
    L._malloc_trim.cache_clear()
    monkeypatch.undo()
    L.release_heap()                                          # glibc's, or nothing: never an error
