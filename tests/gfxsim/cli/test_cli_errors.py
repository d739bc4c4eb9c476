"""How a command ends on an error, one case per error class, through gfxsim.cli.main.

gfxsim's own errors (a GfxSimError, or a builtin error gfxsim's code raised to name an option) are one
line with their coordinates and exit status 2; an exception raised by the user's own code (a
--kernel-fn file) keeps its type, message, file and line and the user's frames, gfxsim's left out,
exit status 1; --traceback (before or after the command) prints the whole stack instead.
"""
import operator
import pickle
import re
import shutil

import pytest

from gfxsim.errors import GfxSimError, located
from support import ROOT
from support.cli import cli

USER_KERNELS = '''\
def oob(w, p, v_cache, v_scale, block_table, out, **kw):
    out = w.view(out)
    (out + 100000).store(w.zeros("f32", 1)[0])


def unknown_op(w, *a, **kw):
    x = w.zeros("f32", 1)[0]
    return x & x


def not_a_number(w, *a, **kw):
    return w.const("abc", "f32")


def key_error(w, *a, **kw):
    table = {}
    return table["missing"]


def value_error(w, *a, **kw):
    raise ValueError("my own bad value")


def index_error(w, *a, **kw):
    return helper([])


def helper(rows):
    return rows[3]


def attribute_error(w, *a, **kw):
    return w.no_such_method()


def zero_division(w, *a, **kw):
    return 1 / 0
'''


def line_of(text, needle):
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.fixture
def mine(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(USER_KERNELS)
    return path


def one_line(capsys, *argv, names=()):
    rc, out, err = cli(capsys, *argv)
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2, (rc, err)
    assert len(lines) == 1 and "Traceback" not in err, err
    for n in names:
        assert str(n) in lines[0], (n, lines[0])
    return lines[0]


def whole_stack(capsys, *argv, rc=2, last=None):
    """The same command with --traceback before it and after it: the stack, the same exit status."""
    for args in (("--traceback", *argv), (*argv, "--traceback")):
        code, out, err = cli(capsys, *args)
        assert code == rc, (code, err)
        assert err.startswith("Traceback (most recent call last):"), err
        assert 'gfxsim/cli/__init__.py", line' in err          # gfxsim's frames are shown
        if last is not None:
            assert re.search(last, err.strip().splitlines()[-1]), err.strip().splitlines()[-1]
    return err


RUN = ("run", "pv_int8", "--context", 64, "--quiet")


# -- gfxsim's errors: one line with coordinates, exit 2 -----------------------------------------

def test_memory_fault_in_a_kernel_fn_is_one_line_with_its_coordinates(capsys, mine):
    one_line(capsys, *RUN, "--kernel-fn", f"{mine}:oob",
             names=("gfxsim run: error: global_store to 'out'", "outside [0, 8192)", "workgroup (0, 0, 0)", "wave 0",
                    "lane 0", "address 400000", "in oob", f"mine.py:{line_of(USER_KERNELS, '100000')}"))
    whole_stack(capsys, *RUN, "--kernel-fn", f"{mine}:oob", last=r"^gfxsim\.machine\.errors\.MemoryFault: .*lane 0")


def test_unknown_operation_is_one_line_with_its_coordinates(capsys, mine):
    one_line(capsys, *RUN, "--kernel-fn", f"{mine}:unknown_op",
             names=("no instruction performs and on f32 values", "wave 0", "in unknown_op",
                    f"mine.py:{line_of(USER_KERNELS, 'x & x')}"))
    whole_stack(capsys, *RUN, "--kernel-fn", f"{mine}:unknown_op", last=r"UnknownOperation: no instruction")


def test_a_bad_argument_is_one_line(capsys):
    one_line(capsys, "run", "--seed", -1, "--quiet", names=("gfxsim run: error:", "--seed", "-1"))
    whole_stack(capsys, "run", "--seed", -1, "--quiet", last=r"ArgumentError: .*--seed")
    one_line(capsys, "layout", "gfx999", "x", names=("gfxsim layout: error: unknown arch 'gfx999'",))


def test_a_builtin_error_gfxsim_raises_under_the_users_call_names_the_call(capsys, mine):
    one_line(capsys, *RUN, "--kernel-fn", f"{mine}:not_a_number",
             names=("gfxsim run: error: could not convert string to float",
                    f"called from {mine}:{line_of(USER_KERNELS, 'w.const(')} in not_a_number"))


def test_a_kernel_fn_file_that_fails_to_import_names_its_line(capsys, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("x = 1\nimport no_such_mod\n")
    one_line(capsys, *RUN, "--kernel-fn", f"{broken}:f",
             names=(f"--kernel-fn: {broken} failed to import: ModuleNotFoundError", f"at {broken}:2"))
    syntax = tmp_path / "syntax.py"
    syntax.write_text("\n\ndef f(w:\n")
    one_line(capsys, *RUN, "--kernel-fn", f"{syntax}:f", names=("failed to import: SyntaxError", f"at {syntax}:3"))


@pytest.mark.parametrize("name,content,what", [
    ("truncated.s", "\t.amdgcn_target \"amdgcn-amd-amdhsa--gfx942\"\n\t.amdgpu_metadata\n---\namdhsa.kernels:\n",
     "truncated: .amdgpu_metadata has no .end_amdgpu_metadata"),
    ("garbage.s", "hello world\n", "no kernel entry point"),
])
def test_unreadable_assembly_is_one_line(capsys, tmp_path, name, content, what):
    path = tmp_path / name
    path.write_text(content)
    one_line(capsys, "hip", "inspect", path, names=(f"gfxsim hip: error: {path}", what))
    whole_stack(capsys, "hip", "inspect", path, last=r"^gfxsim\.asm\.parse\.AsmFileError: ")


def test_a_missing_clang_is_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GFXSIM_CLANG", str(tmp_path / "no-clang"))
    argv = ("hip", "build", "pv_int8", "--build-dir", tmp_path / "build")
    one_line(capsys, *argv, names=("gfxsim hip: error:", f"{tmp_path / 'no-clang'}: cannot run --version"))
    whole_stack(capsys, *argv, last=r"^gfxsim\.hip\.toolchain\.ToolchainError: ")


@pytest.fixture
def compiled_pv(tmp_path, monkeypatch):
    """pv_int8 built into a project of its own, which --frontend asm runs; returns its .s to edit."""
    from gfxsim.hip import build as hipbuild
    from gfxsim.hip.project import Project
    from gfxsim.hip.toolchain import ToolchainError
    import kernels_py.host.hip_twins as hip_twins
    src = tmp_path / "src"
    src.mkdir()
    for p in [ROOT / "kernels_hip" / "pv_int8.hip", *(ROOT / "kernels_hip").glob("*.h")]:
        shutil.copy(p, src)
    project = Project(src, tmp_path / "build")
    try:
        (b,) = hipbuild.build(["pv_int8"], "gfx942", project=project)
    except ToolchainError as e:
        pytest.skip(str(e))
    monkeypatch.setattr(hip_twins, "hip_project", lambda: project)
    return b.asm


def _edit(asm, old, new, after=None):
    lines = asm.read_text().splitlines()
    start = 0 if after is None else next(i for i, line in enumerate(lines) if line.startswith(after))
    i = next(i for i in range(start, len(lines)) if lines[i].strip() == old)
    lines[i] = new
    asm.write_text("\n".join(lines) + "\n")
    return i + 1


def test_asm_error_names_kernel_and_the_assembly_line(capsys, compiled_pv):
    """An instruction the asm front end cannot execute is named when the kernel is loaded."""
    line = _edit(compiled_pv, "; %bb.0:", "\tv_sin_f32_e32 v1, v2", after="pv_int8_fragment:")
    argv = (*RUN, "--arch", "gfx942", "--frontend", "asm", "--no-provenance")
    one_line(capsys, *argv, names=("gfxsim run: error: pv_int8_fragment: 1 instruction(s) the asm front end "
                                   f"cannot execute: line {line}: v_sin_f32_e32",))
    whole_stack(capsys, *argv, last=r"^gfxsim\.asm\.state\.AsmError: ")


def test_launch_error_is_one_line(capsys, compiled_pv):
    _edit(compiled_pv, ".amdhsa_ieee_mode 1", "\t\t.amdhsa_ieee_mode 0", after="\t.amdhsa_kernel pv_int8_fragment")
    argv = (*RUN, "--arch", "gfx942", "--frontend", "asm", "--no-provenance")
    one_line(capsys, *argv, names=("gfxsim run: error: pv_int8_fragment: .amdhsa_ieee_mode 0 is not modelled",))
    whole_stack(capsys, *argv, last=r"^gfxsim\.asm\.launch\.LaunchError: ")


# -- the user's exceptions: type, message, file, line and the user's frames, exit 1 --------------

@pytest.mark.parametrize("fn,what,needle", [
    ("key_error", "KeyError: 'missing'", 'table["missing"]'),
    ("value_error", "ValueError: my own bad value", 'raise ValueError("my own bad value")'),
    ("index_error", "IndexError: list index out of range", "return rows[3]"),
    ("attribute_error", "AttributeError: 'Wave' object has no attribute 'no_such_method'", "w.no_such_method()"),
    ("zero_division", "ZeroDivisionError: division by zero", "return 1 / 0"),
])
@pytest.mark.parametrize("command", [RUN, ("plot", "run", "pv_int8", "--context", 64, "--what", "errors",
                                           "--quiet", "-o", "x.png")])
def test_an_exception_in_the_users_kernel_keeps_its_type_file_line_and_frames(capsys, mine, fn, what, needle,
                                                                               command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)                 # plot's -o x.png
    argv = (*command, "--kernel-fn", f"{mine}:{fn}")
    rc, out, err = cli(capsys, *argv)
    assert rc == 1, (rc, err)
    lines = err.strip().splitlines()
    where = f"{mine}:{line_of(USER_KERNELS, needle)}"
    assert lines[0] == f"gfxsim {command[0]}: {what} in your code at {where} (kernel {fn}, workgroup (0, 0, 0), wave 0)"
    assert f"  {where} in " in err and needle in err                    # the user's frame with its source line
    assert "Traceback" not in err and "gfxsim/" not in err and "kernels_py/" not in err     # gfxsim's left out
    if fn == "index_error":                                              # every user frame, outermost first
        assert lines[1] == f"  {mine}:{line_of(USER_KERNELS, 'helper([])')} in index_error: return helper([])"
        assert lines[2] == f"  {where} in helper: return rows[3]"
    stack = whole_stack(capsys, *argv, rc=1, last=r"^" + re.escape(what))
    assert f'File "{mine}", line {line_of(USER_KERNELS, needle)}' in stack


@pytest.mark.parametrize("name,bug,what", [("run", operator.attrgetter("no_such_option"), "AttributeError"),
                                           ("get_arch", {}.__getitem__, "KeyError")])   # a lookup, not a raise
def test_an_exception_inside_gfxsim_is_a_bug_with_its_stack(capsys, monkeypatch, name, bug, what):
    import gfxsim.cli.layout_cmd as layout_cmd
    monkeypatch.setattr(layout_cmd, name, bug)          # builtins: no frame of the test's, gfxsim's innermost
    rc, out, err = cli(capsys, "layout", "gfx942", "--list")
    assert rc == 3
    assert err.startswith("Traceback (most recent call last):") and what in err
    assert err.strip().splitlines()[-1].startswith(f"gfxsim layout: internal error: {what}:")


# -- the classes ---------------------------------------------------------------------------------

def test_every_gfxsim_error_class_is_a_gfxsim_error_and_keeps_its_builtin_class():
    from gfxsim.asm.launch import LaunchError
    from gfxsim.asm.operands import AsmSyntaxError
    from gfxsim.asm.parse import AsmFileError
    from gfxsim.asm.state import AsmError
    from gfxsim.errors import UsageError
    from gfxsim.hip.build import BuildError
    from gfxsim.hip.harness import NoRocmGpu
    from gfxsim.hip.toolchain import ToolchainError
    from gfxsim.machine.errors import MemoryFault
    from gfxsim.machine.ops import UnknownOperation
    from gfxsim.testing import NoTraceError
    from kernels_py.sweep.results import ResultsError
    from kernels_py.sweep.spec import SpecError
    from kernels_py.workloads.inputs import InputError
    builtin = {LaunchError: ValueError, AsmSyntaxError: ValueError, AsmFileError: ValueError, BuildError: ValueError,
               NoRocmGpu: RuntimeError, ToolchainError: FileNotFoundError, UnknownOperation: TypeError,
               NoTraceError: ValueError, ResultsError: ValueError, SpecError: ValueError, InputError: ValueError,
               UsageError: ValueError, AsmError: None, MemoryFault: None}
    for cls, base in builtin.items():
        assert issubclass(cls, GfxSimError), cls
        assert base is None or issubclass(cls, base), (cls, base)
        e = cls("what went wrong", kernel="k", wave=1, lane=2, source="k.s:7")
        assert str(e) == "what went wrong (wave 1, lane 2) in k at k.s:7"
        again = pickle.loads(pickle.dumps(e))                              # a sweep worker's error reaches the client
        assert type(again) is cls and again.coords == e.coords and str(again) == str(e)


def test_located_builtin_errors_keep_their_class_and_coordinates():
    e = located(KeyError, "no kernel 'x'", kernel="k", instruction=3)
    assert isinstance(e, KeyError) and isinstance(e, GfxSimError)
    assert str(e) == "no kernel 'x' (instruction 3) in k"                   # no quotes of KeyError's str()
    again = pickle.loads(pickle.dumps(e))
    assert isinstance(again, KeyError) and again.coords["instruction"] == 3


def test_the_help_gives_the_exit_statuses(capsys):
    for argv in (["--help"], ["run", "--help"], ["hip", "build", "--help"]):
        rc, out, _ = cli(capsys, *argv)
        text = " ".join(out.split())
        assert rc == 0 and "--traceback" in text, argv
        assert "exit status: 0 done; 1 an exception raised by your own code" in text, argv
        assert "2 a gfxsim error or bad usage" in text and "3 an unexpected exception inside gfxsim" in text


def test_python_m_sweep_ends_as_gfxsim_does(capsys, tmp_path):
    from kernels_py.sweep.cli import main as sweep_main
    missing = tmp_path / "missing.toml"
    assert sweep_main([str(missing), "-o", str(tmp_path / "r.parquet")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"gfxsim sweep: error: {missing}: no such file", err
    assert sweep_main([str(missing), "-o", str(tmp_path / "r.parquet"), "--traceback"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and "SpecError" in err
