"""Adversarial wave schedules (gfxsim.machine.schedule): the waves of a workgroup run in another legal
order between barriers, so a missing barrier shows in the numbers as well as in the lds-race finding.
The pair is tests/defective/stage_scales.py and .hip: wave 0 stages the scales every wave reads,
without (defective) and with (fixed) the barrier between."""
import json

import numpy as np
import pytest

from gfxsim import Buffer, launch
from gfxsim.cli import main
from gfxsim.errors import ArgumentError
from gfxsim.machine.options import LaunchOptions
from gfxsim.machine.schedule import Schedule, parse_schedule, scheduled
from support import DEFECTIVE, need_toolchain

from defective.stage_scales import WAVES, stage_scales, stage_scales_fixed

SEEDS = range(16)
X = np.arange(64 * WAVES, dtype=np.float32) - 100
SCALE = np.linspace(0.5, 2.0, 64, dtype=np.float32)
RIGHT = X * np.tile(SCALE, WAVES)


def run_py(fn, schedule=None, grid=1, batch=1):
    x = Buffer("x", np.tile(X, grid))
    s = Buffer("scale", SCALE)
    out = Buffer("out", np.zeros(64 * WAVES * grid, np.float32))
    r = launch(fn, grid=grid, waves_per_group=WAVES, arch="gfx942", args=(x, s, out),
               options=LaunchOptions(schedule=schedule, batch=batch))
    return out.array, r


def kinds(run):
    return sorted({f.kind for f in run.findings})


def test_a_schedule_is_read_from_its_name_and_a_bad_one_is_named():
    assert parse_schedule("in-order") == Schedule() and str(parse_schedule("Reverse")) == "reverse"
    assert parse_schedule("random:42") == Schedule("random", 42)
    for bad in ("random", "random:-1", "backwards", "random:x", 3):
        with pytest.raises(ArgumentError, match="schedule must be one of in-order, reverse, random:SEED"):
            parse_schedule(bad)
    with pytest.raises(ArgumentError, match="schedule"):
        LaunchOptions(schedule="sideways")


def test_orders_are_permutations_fixed_by_seed_and_epoch():
    waves = [0, 1, 2, 3]
    assert Schedule().order(5, waves) == waves
    assert Schedule("reverse").order(0, waves) == [3, 2, 1, 0]
    r = Schedule("random", 7)
    seen = set()
    for epoch in range(8):
        o = r.order(epoch, waves)
        assert sorted(o) == waves and o == Schedule("random", 7).order(epoch, waves)      # reproducible
        seen.add(tuple(o))
    assert len(seen) > 1                         # epochs differ: every barrier round is shuffled anew
    assert r.order(0, [2]) == [2]


def test_the_environment_and_a_scope_give_the_default(monkeypatch):
    monkeypatch.setenv("GFXSIM_SCHEDULE", "reverse")
    assert LaunchOptions().wave_order == Schedule("reverse")
    with scheduled("random:3"):
        assert LaunchOptions().wave_order == Schedule("random", 3)
        assert LaunchOptions(schedule="in-order").wave_order == Schedule()        # an explicit one wins
    assert LaunchOptions().wave_order == Schedule("reverse")


def test_a_missing_barrier_shows_in_the_numbers_under_another_order():
    out, r = run_py(stage_scales)                           # in order: right numbers, the race finding only
    assert np.array_equal(out, RIGHT) and kinds(r) == ["lds-race"] and r.schedule == "in-order"
    out, r = run_py(stage_scales, "reverse")                # waves 3..1 read before wave 0 staged
    assert not np.array_equal(out, RIGHT) and np.array_equal(out[:64], RIGHT[:64])
    assert kinds(r) == ["lds-race", "uninitialized-read"] and r.schedule == "reverse"
    read = [f for f in r.findings if f.kind == "uninitialized-read"]
    lds = [f for f in read if f.details["what"] == "lds"]
    assert len(lds) == 1 and lds[0].details["count"] == WAVES - 1       # one finding, each later wave's read


def test_a_sweep_over_seeds_breaks_the_defective_kernel_and_never_the_fixed_one():
    wrong = []
    for seed in SEEDS:
        out, r = run_py(stage_scales, f"random:{seed}")
        first = Schedule("random", seed).order(0, list(range(WAVES)))[0]
        assert np.array_equal(out, RIGHT) == (first == 0), seed       # right exactly when wave 0 went first
        assert "lds-race" in kinds(r)
        wrong.append(first != 0)
        fixed, rf = run_py(stage_scales_fixed, f"random:{seed}")
        assert np.array_equal(fixed, RIGHT) and rf.findings == [], seed
    assert any(wrong) and not all(wrong)


def test_a_batch_is_ordered_as_each_workgroup_alone():
    alone, r1 = run_py(stage_scales, "random:2", grid=4, batch=1)
    together, r4 = run_py(stage_scales, "random:2", grid=4, batch=4)
    assert np.array_equal(alone, together, equal_nan=True)
    assert kinds(r1) == kinds(r4)


def test_the_compiled_pair_through_the_hip_door(capsys, tmp_path, monkeypatch):
    """`gfxsim hip run ... --schedule`: the same pair compiled by clang, the same verdicts."""
    need_toolchain("gfx942")
    monkeypatch.chdir(tmp_path)
    np.save("x.npy", X)
    np.save("s.npy", SCALE)
    np.save("out.npy", np.zeros(64 * WAVES, np.float32))

    def hip_run(kernel, schedule):
        assert main(["hip", "run", str(DEFECTIVE / "stage_scales.hip"), "--kernel", kernel, "--grid", "1",
                     "--block", str(64 * WAVES), "--arg", "x=x.npy", "--arg", "scale=s.npy", "--arg", "out=out.npy",
                     "--schedule", schedule, "--report", "json", "-o", "result"]) == 0
        return np.load("result/out.npy"), json.loads(capsys.readouterr().out)

    out, rep = hip_run("stage_scales", "in-order")
    assert np.array_equal(out, RIGHT) and {f["kind"] for f in rep["findings"]} == {"lds-race"}
    out, rep = hip_run("stage_scales", "reverse")
    assert rep["schedule"] == "reverse" and not np.array_equal(out, RIGHT)
    assert {f["kind"] for f in rep["findings"]} == {"lds-race", "uninitialized-read"}
    for schedule in ("reverse", "random:1", "random:2"):
        out, rep = hip_run("stage_scales_fixed", schedule)
        assert np.array_equal(out, RIGHT) and rep["findings"] == []


@pytest.mark.parametrize("kernel", ["qk_int8", "pv_int8", "paged_attention_decode"])
def test_the_project_kernels_give_the_same_answer_in_every_order(capsys, kernel):
    """Their barriers are where they must be: another order changes no number and no finding."""
    def ran(schedule):
        assert main(["run", kernel, "--context", "300", "--schedule", schedule, "--report", "json", "--quiet"]) == 0
        return json.loads(capsys.readouterr().out)
    base = ran("in-order")
    assert base["findings"] == []
    for schedule in ("reverse", "random:11"):
        other = ran(schedule)
        assert other["params"]["schedule"] == schedule
        assert other["metrics"] == base["metrics"] and other["findings"] == []


def test_the_cli_names_a_bad_schedule(capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "qk_int8", "--schedule", "sideways"])
    assert e.value.code == 2 and "--schedule" in capsys.readouterr().err
