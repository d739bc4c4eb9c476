"""gfxsim.progress: the stderr progress of `gfxsim run` / `gfxsim plot run`."""
import io
import json

import pytest

from gfxsim.progress import Progress, launch_kwargs


class Clock:
    def __init__(self, t=100.0):
        self.t = t

    def __call__(self):
        return self.t


class TTY(io.StringIO):
    def isatty(self):
        return True


def decode_like(p, clock, steps=10, seconds=1.0):
    """Two launches as run_decode makes them: 64 workgroups in `steps` batches, then 8 in one."""
    p.start_launch("paged_attention_decode", launches=2)
    p.update(0, 64)
    for i in range(1, steps + 1):
        clock.t += seconds
        p.update(i * 64 // steps, 64)
    p.start_launch("paged_attention_reduce", launches=2)
    p.update(0, 8)
    clock.t += seconds
    p.update(8, 8)
    p.finish()


def test_bar_on_a_terminal_redraws_in_place_and_ends_with_a_newline():
    clock, tty = Clock(), TTY()
    p = Progress(stream=tty, clock=clock, width=200)
    assert p.tty
    p.start_launch("paged_attention_decode", launches=2)
    p.update(0, 64)
    clock.t += 4
    p.update(16, 64)
    frames = tty.getvalue().split("\r")[1:]
    assert frames[-1].startswith("[####............] 1/2 launches 16/64 workgroups 0:04 elapsed ETA 0:12")
    assert "paged_attention_decode" in frames[-1]
    assert "\n" not in tty.getvalue()                     # one line, redrawn with \r
    p.start_launch("paged_attention_reduce")
    p.update(0, 8)
    clock.t += 1
    p.update(8, 8)
    p.finish()
    out = tty.getvalue()
    assert out.endswith("\n") and out.count("\n") == 1
    last = out.rstrip("\n").split("\r")[-1]
    assert last.startswith("[################] 2/2 launches 8/8 workgroups 0:05 elapsed done")
    p.finish()                                            # idempotent
    assert tty.getvalue() == out


def test_bar_redraws_at_most_ten_times_a_second_and_pads_shorter_frames():
    clock, tty = Clock(), TTY()
    p = Progress(stream=tty, clock=clock, width=200)
    p.start_launch("k", launches=1)
    p.update(0, 1000)
    n0 = tty.getvalue().count("\r")
    for i in range(1, 1001):                             # 1000 batches in 1 s
        clock.t += 0.001
        p.update(i, 1000)
    redraws = tty.getvalue().count("\r") - n0
    assert 9 <= redraws <= 11


def test_a_shorter_frame_blanks_the_rest_of_the_longer_one():
    clock, tty = Clock(), TTY()
    p = Progress(stream=tty, clock=clock, width=200)
    p.start_launch("paged_attention_decode", launches=2)
    p.update(0, 64)
    clock.t += 1
    p.start_launch("qk", launches=2)
    long, short = tty.getvalue().split("\r")[-2:]
    assert len(short) == len(long) and short.endswith("  qk" + " " * (len(long) - len(short.rstrip())))


def test_bar_never_wraps_a_narrow_terminal():
    clock, tty = Clock(), TTY()
    p = Progress(stream=tty, clock=clock, width=40)
    p.start_launch("paged_attention_decode", launches=2)
    p.update(0, 64)
    assert all(len(f) <= 39 for f in tty.getvalue().split("\r"))


def test_error_ends_the_bar_without_drawing_it_full():
    clock, tty = Clock(), TTY()
    with pytest.raises(RuntimeError):
        with Progress(stream=tty, clock=clock, width=200) as p:
            p.start_launch("k", launches=2)
            p.update(0, 4)
            raise RuntimeError("boom")
    assert tty.getvalue().endswith("\n") and "done" not in tty.getvalue()


def test_plain_lines_every_five_seconds_when_not_a_terminal():
    clock, log = Clock(), io.StringIO()
    p = Progress(stream=log, clock=clock)
    assert not p.tty
    decode_like(p, clock, steps=12, seconds=1.0)          # 13 s in all
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue()
    assert lines == [
        "gfxsim: paged_attention_decode: 1/2 launches, 26/64 workgroups, 0:05 elapsed, ETA 0:07",
        "gfxsim: paged_attention_decode: 1/2 launches, 53/64 workgroups, 0:10 elapsed, ETA 0:02",
        "gfxsim: paged_attention_reduce: 2/2 launches, 8/8 workgroups, 0:13 elapsed, done",
    ]


def test_plain_lines_name_the_context_label():
    clock, log = Clock(), io.StringIO()
    p = Progress(stream=log, clock=clock, label="context 4096")
    p.start_launch("paged_attention_decode", launches=2)
    clock.t += 6
    p.update(1, 4)
    assert log.getvalue().startswith("gfxsim: paged_attention_decode (context 4096): 1/2 launches, 1/4 workgroups")


def test_work_shorter_than_the_interval_prints_nothing_when_not_a_terminal():
    clock, log = Clock(), io.StringIO()
    decode_like(Progress(stream=log, clock=clock), clock, steps=4, seconds=0.9)   # 4.5 s
    assert log.getvalue() == ""


@pytest.mark.parametrize("stream", [TTY(), io.StringIO()], ids=["tty", "not-a-tty"])
def test_quiet_prints_nothing(stream):
    clock = Clock()
    decode_like(Progress(stream=stream, clock=clock, quiet=True), clock, steps=30, seconds=1.0)
    assert stream.getvalue() == ""


def test_progress_goes_to_stderr_never_stdout(capsys):
    clock = Clock()
    decode_like(Progress(clock=clock), clock, steps=20, seconds=1.0)   # default stream: sys.stderr
    cap = capsys.readouterr()
    assert cap.out == "" and "gfxsim: paged_attention_decode: 1/2 launches" in cap.err


def test_unknown_launch_count_and_no_workgroups():
    clock, tty = Clock(), TTY()
    p = Progress(stream=tty, clock=clock, width=200)
    p.start_launch("k")
    assert tty.getvalue().split("\r")[-1].startswith("[????????????????] launch 1 0:00 elapsed  k")
    assert p.eta() is None


def test_launch_kwargs_passes_the_callback_only_to_a_launch_that_takes_it():
    def old_launch(kernel, grid=(1,), *, arch="gfx936", trace=True):
        pass

    def new_launch(kernel, grid=(1,), *, arch="gfx936", trace=True, progress=None):
        pass
    p = Progress(stream=io.StringIO(), clock=Clock())
    assert launch_kwargs(None, new_launch, "k") == {}
    assert launch_kwargs(p, old_launch, "a", launches=2) == {}
    kw = launch_kwargs(p, new_launch, "b", launches=2)
    assert kw["progress"] == p.update and (p.launch, p.total_launches, p.name) == (2, 2, "b")


def _cli_report(capsys, monkeypatch, *extra):
    """`gfxsim run` of a small qk_int8 with a clock that moves 3 s per reading (so a non-terminal
    stderr gets its periodic lines), and a launch that reports workgroups: (report, stderr)."""
    import gfxsim.progress as gp
    import kernels_py.host.buffers as host
    from gfxsim.cli import main
    clock = Clock()

    def ticking():
        clock.t += 3
        return clock.t
    monkeypatch.setattr(gp, "_monotonic", ticking)
    real = host.launch
    calls = []

    def launch(kernel, grid=(1,), *a, progress=None, **kw):
        if kw.get("options") is not None:        # a harness passes its LaunchOptions whole
            progress, kw["options"] = kw["options"].progress, kw["options"].replace(progress=None)
        calls.append(progress)
        if progress is not None:
            progress(0, 1)
        run = real(kernel, grid, *a, **kw)
        if progress is not None:
            progress(1, 1)
        return run
    monkeypatch.setattr(host, "launch", launch)
    assert main(["run", "qk_int8", "--context", "64", "--head-dim", "64", "--no-provenance", "--report", "json",
                 *extra]) == 0
    cap = capsys.readouterr()
    rep = json.loads(cap.out)
    rep.pop("seconds")
    return rep, cap.err, calls


def test_cli_quiet_writes_nothing_to_stderr_and_progress_leaves_stdout_alone(capsys, monkeypatch):
    quiet, err_quiet, calls = _cli_report(capsys, monkeypatch, "--quiet")
    assert err_quiet == ""
    assert len(calls) == 1 and calls[0] is not None                 # the callback reached launch()
    loud, err, _ = _cli_report(capsys, monkeypatch)
    assert loud == quiet                                             # stdout: the same report
    assert "gfxsim: qk_int8 (context 64): 1/1 launches" in err and "\r" not in err


def test_cli_run_and_plot_run_take_quiet():
    from gfxsim.cli import build_parser
    p = build_parser()
    assert p.parse_args(["run", "--quiet"]).quiet
    assert p.parse_args(["plot", "run", "--what", "errors", "-o", "x.png", "--quiet"]).quiet
    assert not p.parse_args(["run"]).quiet


def test_ticker_keeps_elapsed_moving_between_callbacks_and_stops_at_finish():
    import time
    log = io.StringIO()
    p = Progress(stream=log, interval=0.05)                  # the real clock: the ticker thread runs
    p.start_launch("paged_attention_decode", launches=2)
    p.update(0, 64)                                           # then nothing until the batch ends
    time.sleep(0.4)
    p.finish()
    n = log.getvalue().count("\n")
    assert n >= 3 and log.getvalue().endswith("done\n")
    time.sleep(0.2)
    assert log.getvalue().count("\n") == n
