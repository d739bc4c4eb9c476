"""LaunchOptions (gfxsim/machine/options.py): a frozen keyword-only record, each field documented with
its default, each rejected value named in one sentence; launch() builds it from its keywords or
takes it whole; and the Run's public surface that reports, pictures and sweeps read."""
import ast
import dataclasses
import inspect

import numpy as np
import pytest

from gfxsim import Buffer, launch
from gfxsim.machine import options as options_module
from gfxsim.machine.options import BatchBounded, LaunchOptions


def test_every_field_says_its_default():
    tree = ast.parse(inspect.getsource(options_module))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "LaunchOptions")
    documented = {}
    for stmt, doc in zip(cls.body, cls.body[1:]):
        if isinstance(stmt, ast.AnnAssign) and isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant):
            documented[stmt.target.id] = doc.value.value
    assert set(documented) == {f.name for f in dataclasses.fields(LaunchOptions)}
    for name, doc in documented.items():
        assert "Default: " in doc, name


def test_frozen_and_keyword_only():
    o = LaunchOptions()
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.trace = False
    with pytest.raises(TypeError):
        LaunchOptions(False)
    assert o.replace(batch=4).batch == 4 and o.batch == 1


@pytest.mark.parametrize("bad, message", [
    (dict(trace=1), "trace must be True or False, got 1"),
    (dict(provenance="yes"), "provenance must be True or False"),
    (dict(check_races=None), "check_races must be True or False"),
    (dict(fold="on"), "fold must be True, False or None"),
    (dict(lds_bytes=0), "lds_bytes must be a positive number of bytes or None, got 0"),
    (dict(batch=0), "batch must be >= 1, got 0"),
    (dict(batch=2.0), "batch must be >= 1, got 2.0"),
    (dict(provenance_batch=0), "provenance_batch must be >= 1 or None, got 0"),
    (dict(unfolded_batch=0), "unfolded_batch must be >= 1 or None, got 0"),
    (dict(batch_order=(0, 0, 1)), "batch_order must be a tuple ordering the grid axes"),
    (dict(fold_apart=(3,)), "fold_apart must be a tuple of grid axes"),
    (dict(fold_apart=[0]), "fold_apart must be a tuple of grid axes"),
    (dict(progress=3), "progress must be a function progress"),
    (dict(max_steps=0), "max_steps must be >= 1, got 0"),
])
def test_a_rejected_value_is_named(bad, message):
    with pytest.raises(ValueError, match=message):
        LaunchOptions(**bad)
    with pytest.raises(ValueError, match=message):
        LaunchOptions().replace(**bad)


def test_the_batch_bound_and_folding(monkeypatch):
    assert LaunchOptions(batch=8, provenance_batch=3).side_by_side == 3
    assert LaunchOptions(batch=8, provenance_batch=3, provenance=False).side_by_side == 8
    assert LaunchOptions(batch=2, provenance_batch=3).side_by_side == 2
    monkeypatch.setenv("GFXSIM_FOLD", "0")
    assert not LaunchOptions().folding and LaunchOptions(fold=True).folding
    monkeypatch.setenv("GFXSIM_FOLD", "1")
    assert LaunchOptions().folding and not LaunchOptions(fold=False).folding
    assert not LaunchOptions(fold=True, provenance=False).folding
    # the unfolded bound applies where the batch keeps every member's provenance from the start
    assert LaunchOptions(batch=8, unfolded_batch=3).side_by_side == 8
    assert LaunchOptions(batch=8, unfolded_batch=3, fold=False).side_by_side == 3
    assert LaunchOptions(batch=8, unfolded_batch=3, fold=False, provenance=False).side_by_side == 8

    class Bounded:
        provenance_batch = 4

        def __call__(self, w):
            pass
    assert isinstance(Bounded(), BatchBounded) and not isinstance(lambda w: None, BatchBounded)


def _store_ids(w, out):
    """out[workgroup x][lane] = its lane id (every member of a batch: its own row)."""
    w.global_store(out, (w.lane_id + w.workgroup_id[0] * w.lanes) * 4, w.lane_id)


def test_launch_takes_its_keywords_or_one_options_record():
    seen = []

    def kernel(w, out):
        seen.append(w.members)
        _store_ids(w, out)
    outs = []
    for kw in (dict(batch=2, trace=False), dict(options=LaunchOptions(batch=2, trace=False))):
        out = Buffer.empty("out", (4 * 64,), np.int32)
        run = launch(kernel, grid=(4,), args=(out,), **kw)
        outs.append(out.array.copy())
        assert not run.trace.enabled
    assert seen == [2, 2, 2, 2] and np.array_equal(outs[0], outs[1])
    seen.clear()
    launch(kernel, grid=(4,), args=(Buffer.empty("out", (4 * 64,), np.int32),),
           options=LaunchOptions(batch=4, provenance_batch=3))
    assert seen == [3, 1]                                  # bounded with provenance
    with pytest.raises(ValueError, match="options= and batch=: give each setting once"):
        launch(kernel, grid=(4,), args=(Buffer.empty("out", (4 * 64,), np.int32),), batch=2,
               options=LaunchOptions())
    with pytest.raises(TypeError, match="options must be a LaunchOptions"):
        launch(kernel, args=(Buffer.empty("out", (64,), np.int32),), options=dict(batch=2))


def test_the_runs_public_surface():
    run = launch(lambda w, out: _store_ids(w, out), args=(Buffer.empty("out", (64,), np.int32),),
                 provenance=False)
    assert run.records is run.machine.mma_log.records
    assert run.provenance is False and run.checks_not_run_why == ["provenance off"]
    assert run.lane_instructions is None                   # a Python kernel has no instruction stream
    assert run.folds == [{"first": (0, 0, 0), "members": 1, "classes": None, "attempts": 0, "unfolded": None}]


def test_batches_walk_the_grid_in_batch_order():
    """(1, 0, 2): the workgroups of one x side by side (a kernel whose loops follow blockIdx.x)."""
    seen = []

    def kernel(w):
        seen.append(list(w.wg.ids))
    launch(kernel, grid=(2, 3), options=LaunchOptions(batch=3, batch_order=(1, 0, 2), trace=False))
    assert seen == [[(0, 0, 0), (0, 1, 0), (0, 2, 0)], [(1, 0, 0), (1, 1, 0), (1, 2, 0)]]
    seen.clear()
    launch(kernel, grid=(2, 3), options=LaunchOptions(batch=3, trace=False))
    assert seen == [[(0, 0, 0), (1, 0, 0), (0, 1, 0)], [(1, 1, 0), (0, 2, 0), (1, 2, 0)]]
