"""Start-up: `gfxsim --help` and every `gfxsim layout` query import no heavy module
and no other sub-command; a sub-command's module is imported only when it is named.

Each case runs in a fresh interpreter, calls gfxsim.cli.main and then inspects sys.modules.
No test here asserts a timing.
"""
import json
import math
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

HEAVY = ("numba", "ml_dtypes", "matplotlib", "kernels_py", "visualize", "gfxsim.machine", "gfxsim.hip")

MN = ["gfx942", "v_mfma_i32_16x16x32_i8"]
LAYOUT_FORMS = {
    "help": ["--help"],
    "no-args": [],
    "version": ["--version"],
    "unknown-command": ["bogus"],
    "layout-help": ["layout", "--help"],
    "tour": ["layout"],
    "list": ["layout", "gfx942", "--list"],
    "list-by-default": ["layout", "gfx90a"],
    "detail": ["layout", *MN, "--detail"],
    "matrix": ["layout", *MN],
    "matrix-one-operand": ["layout", *MN, "--operand", "B"],
    "register-view": ["layout", "gfx936", "v_mmac_i32_16x16x32_i8", "--view", "register", "-o", "D"],
    "get-register": ["layout", *MN, "--operand", "B", "--get-register", "13", "2"],
    "get-register-block": ["layout", "gfx942", "v_mfma_f32_4x4x4_16b_f16", "-o", "D", "-g", "1", "2", "-b", "3"],
    "get-element": ["layout", *MN, "--operand", "B", "--get-element", "17", "1"],
    "token-sets": ["layout", "gfx936", "v_mmac_i32_16x16x32_i8", "--token-sets", "16"],
    "compare": ["layout", "--compare", "gfx936", "v_mmac_i32_16x16x32_i8", *MN],
    "error-unknown-arch": ["layout", "gfx999", "x"],
    "error-out-of-range": ["layout", *MN, "-o", "A", "-g", "16", "0"],
}
FORMATS = ("text", "markdown", "csv", "json")
FORMAT_FORMS = ["tour", "list", "detail", "matrix-one-operand", "register-view", "get-register", "get-element",
                "token-sets", "compare"]

PROBE = """
import contextlib, io, json, sys
from gfxsim.cli import main
out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
        rc = main(json.loads(sys.argv[1]))
    except SystemExit as e:
        rc = e.code
heavy = json.loads(sys.argv[2])
loaded = sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in heavy))
print(json.dumps({"rc": rc, "loaded": loaded, "out": out.getvalue(), "err": err.getvalue()}))
"""


def probe(argv, heavy=HEAVY):
    r = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv), json.dumps(list(heavy))],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def cases():
    for name, argv in LAYOUT_FORMS.items():
        yield pytest.param(argv, id=name)
    for name in FORMAT_FORMS:
        for fmt in FORMATS:
            if fmt != "text":
                yield pytest.param([*LAYOUT_FORMS[name], "--format", fmt], id=f"{name}-{fmt}")


@pytest.mark.parametrize("argv", cases())
def test_help_and_layout_queries_import_nothing_heavy(argv):
    r = probe(argv)
    assert r["loaded"] == [], f"gfxsim {' '.join(argv)} imported {r['loaded']}"
    assert r["out"] or r["err"]                       # it did answer


def test_the_answers_are_still_right():
    assert probe(LAYOUT_FORMS["get-register"])["out"] == "B[13][2] = v1{18}.[15:8]\n"
    assert probe(LAYOUT_FORMS["get-element"])["out"].splitlines()[1] == "v1{17}.[15:8] = B[13][1]"
    r = probe(LAYOUT_FORMS["error-out-of-range"])
    assert r["rc"] == 2 and "A: row 16 out of range [0, 16)" in r["err"]


def test_help_lists_every_command_without_importing_them():
    r = probe(["--help"])
    listed = [line.split()[0] for line in r["out"].splitlines() if line.startswith("    ")]
    assert listed[:2] == ["layout", "hip"] and {"plot", "run"} <= set(listed)
    assert "run a kernel on the simulator" in r["out"] and "draw pictures" in r["out"]
    assert r["loaded"] == []


def test_version():
    from gfxsim import __version__
    r = probe(["--version"])
    assert r["rc"] == 0 and r["out"].strip() == f"gfxsim {__version__}"


@pytest.mark.parametrize("argv, module, not_loaded", [
    (["run", "--help"], "kernels_py.cli", ["visualize.cli", "gfxsim.hip", "gfxsim.cli.layout_cmd"]),
    (["plot", "--help"], "visualize.cli", ["gfxsim.hip", "gfxsim.cli.layout_cmd"]),   # plot run reuses run's options
    (["hip", "--help"], "gfxsim.hip", ["kernels_py.cli", "visualize.cli", "gfxsim.cli.layout_cmd"])])
def test_a_named_command_imports_its_module(argv, module, not_loaded):
    r = probe(argv, heavy=("kernels_py.cli", "visualize.cli", "gfxsim.hip", "gfxsim.cli.layout_cmd"))
    assert r["rc"] == 0 and r["out"].startswith(f"usage: gfxsim {argv[0]}")
    assert module in r["loaded"]
    assert not set(not_loaded) & set(r["loaded"])


def test_run_builds_and_parses_its_options_without_the_machine():
    """`gfxsim run`'s options (--schedule's included) load no machine module: its inputs begin as soon
    as its arguments are parsed, and the machine imports beside them."""
    r = probe(["run", "--help"], heavy=("gfxsim.machine",))
    assert r["rc"] == 0 and "--schedule" in r["out"] and r["loaded"] == []


def test_schedule_option_names_the_machines_schedules():
    """launched.py names the schedules without loading the machine: the same names, and its
    default passed through as parse_schedule writes it (RunConfig's default too)."""
    from gfxsim.cli.launched import DEFAULT_SCHEDULE, SCHEDULE_NAMES
    from gfxsim.machine.schedule import NAMES, parse_schedule
    from kernels_py.host.config import RunConfig
    assert SCHEDULE_NAMES == NAMES
    assert str(parse_schedule(DEFAULT_SCHEDULE)) == DEFAULT_SCHEDULE == RunConfig().schedule


def test_import_gfxsim_is_cheap_and_still_exports_the_machine():
    code = ("import sys, gfxsim; assert 'gfxsim.machine' not in sys.modules and 'numba' not in sys.modules; "
            "from gfxsim import Buffer, launch, GfxSimError, MemoryFault; "
            "import gfxsim.machine as m; assert launch is m.launch and Buffer is m.Buffer; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "ok"


def test_builtin_help_lines_match_the_sub_parsers():
    """The command table's help lines (shown by `gfxsim --help`) are the ones the modules register."""
    import importlib
    import argparse
    from gfxsim.cli import BUILTIN, help_line, plugin_commands
    for cmd in [*BUILTIN, *plugin_commands()]:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(cmd.module).add_parser(sub)
        registered = {a.dest: a.help for a in sub._choices_actions}
        assert registered[cmd.name] == help_line(cmd), cmd.name


def test_elem_types_resolve_their_numpy_types_on_use():
    import ml_dtypes
    import numpy as np
    from gfxsim.arch import ELEM_TYPES, get_instruction
    assert ELEM_TYPES["bf16"].numpy is ml_dtypes.bfloat16 and ELEM_TYPES["i8"].numpy is np.int8
    assert ELEM_TYPES["fp8"].numpy is ml_dtypes.float8_e4m3fnuz
    assert get_instruction("gfx942", "v_mfma_f32_16x16x32_fp8_fp8").a.numpy is ml_dtypes.float8_e4m3fnuz


def test_records_pass_the_point_by_point_proof_too():
    from gfxsim.arch import ARCHS
    for arch in ARCHS.values():
        for insn in arch.instructions.values():
            for op in "ABCD":
                lay = insn.operand(op)
                lay._build_and_prove()
                t = lay.table()
                for e in t[:: max(1, len(t) // 97)]:
                    want = (int(e["row"]), int(e["col"]), int(e["block"]))
                    assert lay.element_of(e["lane"], e["reg"], e["elem"]) == want
                    assert lay.register_of(*want) == (int(e["lane"]), int(e["reg"]), int(e["elem"]))


def _unproved(rows, cols, lane, reg):
    """An OperandLayout with its digits set but no proof run (bypasses __post_init__)."""
    from gfxsim.arch.layout import OperandLayout, _digits
    lay = object.__new__(OperandLayout)
    for k, v in dict(operand="D", rows=rows, cols=cols, blocks=1, elem_bits=32, lane=_digits(lane),
                     reg=_digits(reg), elem=(), wave_size=64, _tables=None).items():
        object.__setattr__(lay, k, v)
    return lay


LANE_EXTENTS = [(64,), (16, 4), (4, 16), (8, 8), (4, 4, 4), (2, 8, 4), (2, 2, 2, 8), (32, 2), (2,) * 6]


@st.composite
def digit_layouts(draw):
    axis, stride = st.sampled_from(["row", "col"]), st.sampled_from([1, 2, 4, 8, 16, 32])
    lane = [(e, draw(axis), draw(stride)) for e in draw(st.sampled_from(LANE_EXTENTS))]
    reg = [(draw(st.sampled_from([2, 4])), draw(axis), draw(stride)) for _ in range(draw(st.integers(0, 2)))]
    return lane, reg, 4 * math.prod(d[0] for d in reg)


@st.composite
def near_bijections(draw):
    """A bijection of 2-digits in a random order (16 rows, 4-16 columns), perhaps with one digit changed."""
    n_reg = draw(st.integers(0, 2))
    bits = [("row", 1 << i) for i in range(4)] + [("col", 1 << i) for i in range(2 + n_reg)]
    digits = [(2, a, s) for a, s in draw(st.permutations(bits))]
    if draw(st.booleans()):
        i = draw(st.integers(0, len(digits) - 1))
        _, a, s = digits[i]
        digits[i] = draw(st.sampled_from([(2, a, 2 * s), (2, a, max(s // 2, 1)), (4, a, s),
                                          (2, "col" if a == "row" else "row", s)]))
    return digits[:6], digits[6:], 1 << (2 + n_reg)


@settings(max_examples=500, deadline=None)
@given(st.one_of(digit_layouts(), near_bijections()))
def test_digit_proof_agrees_with_the_point_by_point_proof(layout):
    """Construction proves the bijection from the digits; the tables check every point: same verdict."""
    from gfxsim.arch.layout import OperandLayout
    lane, reg, cols = layout
    rows = 16
    if math.prod(d[0] for d in lane) != 64:
        return                            # rejected before any proof runs
    try:
        OperandLayout("D", rows, cols, 1, 32, lane=lane, reg=reg, elem=[])
        digit_verdict = None
    except ValueError as e:
        digit_verdict = str(e)
    try:
        _unproved(rows, cols, lane, reg)._build_and_prove()
        point_verdict = None
    except ValueError as e:
        point_verdict = str(e)
    assert digit_verdict == point_verdict


def test_digit_proof_accepts_a_mixed_radix_layout_in_any_digit_order():
    from gfxsim.arch.layout import OperandLayout
    lay = OperandLayout("D", 16, 16, 1, 32, lane=[(4, "col", 4), (4, "row", 1), (4, "row", 4)],
                        reg=[(4, "col", 1)], elem=[])
    assert lay.table().size == 256


@pytest.mark.parametrize("kernel", ["paged_attention_decode", "pv_int8", "qk_int8"])
def test_a_run_without_provenance_never_starts_numba(kernel):
    """numba costs ~0.7 s to import and start: the provenance-off path (INT8 matrix instructions as
    an exact float GEMM, bank conflicts and races of a batch that agrees in numpy) must not need it.
    Nor numpy.ma (~10 ms), which np.unique imports on its first call (numpy 2): the cache build and
    the bank-conflict model find distinct values by sorting."""
    r = probe(["run", kernel, "--context", "300", "--no-provenance", "--quiet", "--report", "json"],
              heavy=("numba", "numpy.ma"))
    assert r["rc"] == 0, r["err"]
    assert r["loaded"] == []
    with_prov = probe(["run", kernel, "--context", "300", "--quiet", "--report", "json"], heavy=("numba",))
    assert with_prov["rc"] == 0 and "numba" in with_prov["loaded"]          # the probe can see numba


@pytest.mark.parametrize("kernel", ["paged_attention_decode", "pv_int8", "qk_int8"])
def test_an_int8_run_never_imports_ml_dtypes(kernel):
    """ml_dtypes costs ~0.6 s to import: the INT8 kernels' runs and their BF16 references (bf16
    rounding on the float32 bits) must not need it, with provenance or without."""
    for extra in (["--no-provenance"], []):
        r = probe(["run", kernel, "--context", "300", "--quiet", "--report", "json", *extra], heavy=("ml_dtypes",))
        assert r["rc"] == 0, r["err"]
        assert r["loaded"] == []
    bf16 = probe(["run", "pv_bf16", "--context", "100", "--quiet", "--report", "json"], heavy=("ml_dtypes",))
    assert bf16["rc"] == 0 and "ml_dtypes" in bf16["loaded"]                # the probe can see ml_dtypes


def test_prewarm_shortens_the_gil_switch_interval_while_numba_starts():
    """jit.prewarm: numba's start holds the GIL; the caller's numpy work gets it back after a short
    switch interval meanwhile (PREWARM_SWITCH_INTERVAL), and the interval is restored after."""
    code = ("import sys; from gfxsim.machine import jit; before = sys.getswitchinterval(); t = jit.prewarm(); "
            "during = sys.getswitchinterval(); t.join(); "
            "print(before, during, sys.getswitchinterval(), jit.prewarm() is None, jit.loaded())")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    before, during, after, again, loaded = r.stdout.split()
    assert float(during) == 0.0005 and float(after) == float(before) == 0.005 and again == "True", r.stderr
    assert loaded == "True"


def test_numba_starts_without_scipy_linalg_and_numba_linear_algebra_still_works():
    """jit._without_scipy: numba's CPU target loads without importing scipy.linalg (~0.3 s of GIL
    at every provenance run's start); gfxsim's compiled functions run, and a compiled np.dot made
    afterwards imports scipy itself and computes. Where scipy is not installed, the same holds."""
    pytest.importorskip("scipy")
    code = ("import sys, numpy as np; from gfxsim.machine import jit, provenance; jit.prewarm().join(); "
            "import numba; print('scipy.linalg' in sys.modules); "
            "m = provenance.Mask.of_values(np.array([[3, 300]])); "
            "print(bool(m.subset_of(m, provenance.WideSets()).all())); "
            "f = numba.njit(lambda a, b: np.dot(a, b)); print(f(np.arange(3.0), np.ones(3)))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    linalg_at_start, compiled_ok, dot = r.stdout.split()
    assert linalg_at_start == "False" and compiled_ok == "True" and float(dot) == 3.0


def test_without_scipy_leaves_an_imported_scipy_linalg_alone():
    """A process that already imported scipy.linalg (a notebook) gets no import hook at all."""
    pytest.importorskip("scipy")
    code = ("import sys, scipy.linalg; from gfxsim.machine import jit; n = len(sys.meta_path); "
            "cm = jit._without_scipy(); cm.__enter__(); print(len(sys.meta_path) == n); cm.__exit__(None, None, None)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.split() == ["True"], r.stderr


def test_the_console_script_collects_cycles_less_often_and_a_library_import_does_not():
    """collect_less sets procmem.COLLECT_THRESHOLDS for the console script's command and returns
    the thresholds before; importing gfxsim (a library user) leaves the collector as it was."""
    from gfxsim.procmem import COLLECT_THRESHOLDS
    code = ("import gc, sys, atexit; start = gc.get_threshold(); import gfxsim.cli as c, gfxsim.machine; "
            "atexit.register(lambda: print('thresholds', start, after_import, gc.get_threshold())); "
            "after_import = gc.get_threshold(); sys.argv = ['gfxsim', '--version']; c.script()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("thresholds"))
    import gc
    default = gc.get_threshold()
    assert line == f"thresholds {default} {default} {COLLECT_THRESHOLDS}"
    assert COLLECT_THRESHOLDS[0] > default[0]


def test_the_console_script_keeps_freed_memory_for_reuse(monkeypatch):
    """keep_freed_pages sets glibc's one arena, no trimming and a 32 MiB mmap threshold, and changes
    nothing (False) where there is no glibc; the console script calls it before the command."""
    import ctypes

    from gfxsim.procmem import keep_freed_pages
    calls = []

    class Libc:
        def mallopt(self, param, value):
            calls.append((param, value))
            return 1
    monkeypatch.setattr(ctypes, "CDLL", lambda name: Libc())
    assert keep_freed_pages() is True
    assert calls == [(-8, 1), (-1, 1 << 30), (-3, 32 << 20)]     # M_ARENA_MAX, M_TRIM_THRESHOLD, M_MMAP_THRESHOLD

    def no_libc(name):
        raise OSError(f"{name}: cannot open shared object file")
    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    assert keep_freed_pages() is False
    code = ("import gfxsim.procmem as p, sys; seen = []; f = p.keep_freed_pages; "
            "p.keep_freed_pages = lambda: seen.append(f()); sys.argv = ['gfxsim', '--version']; "
            "import atexit; atexit.register(lambda: print('kept', seen)); import gfxsim.cli as c; c.script()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert ("kept [True]" if sys.platform.startswith("linux") else "kept [") in out


HUGE = """
def huge():      # numpy's MADV_HUGEPAGE setting now (the setter returns the one before)
    import numpy as np
    m = np._core.multiarray if hasattr(np, "_core") else np.core.multiarray
    print("huge", m._set_madvise_hugepage(True))
"""


@pytest.mark.parametrize("numpy_first", [False, True])
def test_the_console_script_maps_numpy_arrays_in_small_pages(numpy_first):
    """small_pages turns numpy's MADV_HUGEPAGE off for the console script's command, whether numpy
    is imported after it (through NUMPY_MADVISE_HUGEPAGE) or before (numpy's setter); a value the
    user gave that variable decides; importing gfxsim (a library user) leaves numpy's default."""
    import os
    script = HUGE + ("import numpy\n" if numpy_first else "") + (
        "import sys, atexit\natexit.register(huge)\nsys.argv = ['gfxsim', '--version']\n"
        "import gfxsim.cli as c\nc.script()\n")
    library = HUGE + "import gfxsim.cli, gfxsim.machine\nhuge()\n"
    env = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}

    def huge(code, env):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
        return next(x for x in out.splitlines() if x.startswith("huge"))
    assert huge(script, env) == "huge False"
    assert huge(script, {**env, "NUMPY_MADVISE_HUGEPAGE": "1"}) == "huge True"
    assert huge(library, env) == "huge True"          # numpy's default (Linux 4.6+, and elsewhere)
