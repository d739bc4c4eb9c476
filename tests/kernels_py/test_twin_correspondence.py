"""The twins read line for line: every device helper of kernels_hip/int8_attention.h and the .hip
files has a Python twin of the same name with the same parameters in the same order (and every
public function of the Python twins is a HIP helper or kernel), every named constant has the same
value, and the kernels take the same arguments. Everything HIP-side is parsed from the sources.

Python helpers add ``w`` first, the HIP template parameters lower-cased after the HIP ones, and
``cfg`` / ``label`` (int8_attention.PYTHON_ONLY_PARAMETERS); Python kernels take the HIP kernels'
buffers positionally in the same order and their by-value arguments as keywords, plus the declared
launch options (int8_attention.LAUNCH_OPTIONS).
"""
from __future__ import annotations

import importlib
import inspect
import pathlib
import re

import numpy as np
import pytest

from kernels_py import int8_attention as IA
from support import ROOT

HIP = ROOT / "kernels_hip"
HEADER = "int8_attention"
SHIM = "gfxsim_hip"
KERNEL_SUFFIXES = ("_fragment", "_contiguous")          # Grouping in the entry point's name


# ---- the HIP side, parsed ---------------------------------------------------------------------
def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _macros(text: str) -> dict:
    """#define NAME body (continuation lines joined); function-like macros are left out."""
    text = text.replace("\\\n", " ")
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^#define\s+(\w+)(?!\()\s*([^\n]*)$", text, re.M)}


def _balanced(text: str, start: int) -> int:
    """Index just past the ')' that closes the '(' at ``start``."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i + 1
    raise ValueError(f"unbalanced parentheses from {text[start:start + 60]!r}")


def _split_top(s: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in s:
        depth += {"(": 1, "[": 1, "<": 1, ")": -1, "]": -1, ">": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [p.strip() for p in out + [cur] if p.strip()]


def _param_name(p: str) -> str:
    m = re.search(r"\(\s*&\s*(\w+)\s*\)", p)                    # float (&s)[TLOOP][4]
    if m:
        return m.group(1)
    return re.findall(r"\w+", re.sub(r"/\*.*?\*/", "", p))[-1]


def functions(path: pathlib.Path):
    """{name: (template parameter names, parameter names, parameter texts, is_kernel)}."""
    raw = re.sub(r"/\*\s*(\w+)\s*\*/", r" \1", path.read_text())   # int /*rowid*/: the parameter's name
    macros = _macros(raw)
    text = re.sub(r"__launch_bounds__\s*\([^)]*\)", "", _strip_comments(raw))
    out = {}
    for m in re.finditer(r"(?:template\s*<([^>]*)>\s*)?(__device__\s+__forceinline__|extern\s+\"C\"\s+__global__)"
                         r"[^;{(]*?\b(\w+)\s*\(", text):
        tparams = [re.findall(r"\w+", t)[-1] for t in _split_top(m.group(1) or "")]
        open_ = m.end() - 1
        body = text[open_ + 1:_balanced(text, open_) - 1].strip()
        if re.fullmatch(r"\w+", body) and body in macros:          # DECODE_ARGS
            body = macros[body]
        params = _split_top(body)
        out[m.group(3)] = (tparams, [_param_name(p) for p in params], params, "__global__" in m.group(2))
    return out


def _c_eval(expr: str, env: dict, integer: bool):
    e = re.sub(r"(\d+\.\d*(?:e[+-]?\d+)?)f\b", r"\1", expr)         # 127.0f -> 127.0
    e = e.replace("true", "True").replace("false", "False")
    if integer:
        e = re.sub(r"(?<![/])/(?![/])", "//", e)
    while True:                                                    # (c ? a : b) innermost first
        e, n = re.subn(r"\(([^()?]*)\?([^():]*):([^()]*)\)", r"((\2) if (\1) else (\3))", e)
        if not n:
            break
    t = re.fullmatch(r"(.+?)\?(.+):(.+)", e)                       # a top-level c ? a : b
    if t:
        e = f"(({t.group(2)}) if ({t.group(1)}) else ({t.group(3)}))"
    return eval(e, {}, dict(env))


def constants(path: pathlib.Path, head_dim: int, jump: int, env=None) -> dict:
    """Every ``constexpr T NAME = expr;`` of the file, evaluated for one configuration."""
    env = dict(env or {}, GFXSIM_HEAD_DIM=head_dim, GFXSIM_BLOCK_SIZE=16, GFXSIM_JUMP_LAYOUT=jump)
    out = {}
    for m in re.finditer(r"^constexpr\s+(int|float|bool)\s+(\w+)\s*=\s*([^;]+);", _strip_comments(path.read_text()),
                         re.M):
        kind, name, expr = m.groups()
        out[name] = env[name] = {"int": int, "float": float, "bool": bool}[kind](_c_eval(expr, env, kind == "int"))
    return out


def hip_files():
    return [HIP / f"{HEADER}.h", *sorted(HIP.glob("*.hip"))]


def python_module(path: pathlib.Path):
    return importlib.import_module(f"kernels_py.{path.stem}")


def kernel_names(path):
    fns = functions(path)
    return {_base(n) for n, f in fns.items() if f[3]}


def _base(entry: str) -> str:
    for s in KERNEL_SUFFIXES:
        if entry.endswith(s):
            return entry[:-len(s)]
    return entry


def python_functions(mod):
    return {n: f for n, f in inspect.getmembers(mod, inspect.isfunction)
            if f.__module__ == mod.__name__ and not n.startswith("_")}


def expected_python(tparams, params):
    return params + [t.lower() for t in tparams]


def python_params(fn):
    return [n for n in inspect.signature(fn).parameters if n not in IA.PYTHON_ONLY_PARAMETERS]


# ---- helpers ----------------------------------------------------------------------------------
def test_the_parser_sees_the_helpers_it_must():
    fns = functions(HIP / f"{HEADER}.h")
    assert {"quantize_q_row", "qk_tile", "qk_chunk", "quantize_w", "pv_chunk", "sum_waves"} <= set(fns)
    assert fns["qk_chunk"][0] == ["TAIL"] and fns["qk_chunk"][1][:3] == ["s", "qa", "sq"]
    assert fns["max_over_lanes"][0] == ["MASKS"]
    dec = functions(HIP / "paged_attention_decode.hip")
    assert dec["paged_attention_decode_fragment"][1][-4:] == ["num_heads", "num_kv_heads", "max_blocks",
                                                              "max_partitions"]           # DECODE_ARGS expanded


@pytest.mark.parametrize("path", hip_files(), ids=lambda p: p.name)
def test_every_hip_helper_has_a_python_twin_with_its_parameters(path):
    mod = python_module(path)
    kernels = kernel_names(path) | {n for p in HIP.glob("*.hip") for n in kernel_names(p)}
    for name, (tparams, params, _, is_kernel) in functions(path).items():
        if is_kernel or name in kernels:          # kernels (and their templated bodies): below
            continue
        fn = getattr(mod, name, None)
        assert fn is not None and inspect.isfunction(fn), f"{path.name}: {name} has no twin in {mod.__name__}"
        assert fn.__module__ == mod.__name__, f"{name} is defined in {fn.__module__}, not {mod.__name__}"
        assert python_params(fn) == expected_python(tparams, params), \
            f"{name}: HIP ({', '.join(params)}) template <{', '.join(tparams)}>, Python {python_params(fn)}"


@pytest.mark.parametrize("path", hip_files(), ids=lambda p: p.name)
def test_every_python_function_is_a_hip_helper_or_kernel(path):
    mod = python_module(path)
    hip = set(functions(path)) | kernel_names(path)
    if path.stem == HEADER:
        hip |= set(functions(HIP / f"{SHIM}.h"))         # d_row, d_col, d_row_leader
    extra = sorted(set(python_functions(mod)) - hip)
    assert not extra, f"{mod.__name__} has public functions without a HIP twin: {extra}"


def test_the_d_layout_functions_of_the_shim_have_twins():
    for name, (tparams, params, _, _) in functions(HIP / f"{SHIM}.h").items():
        if hasattr(IA, name):
            assert python_params(getattr(IA, name)) == expected_python(tparams, params), name
    assert {"d_row", "d_col", "d_row_leader"} <= {n for n in functions(HIP / f"{SHIM}.h") if hasattr(IA, n)}


# ---- constants --------------------------------------------------------------------------------
def _config(arch, head_dim):
    """The Python twins' compile-time record, as a kernel of ``arch`` builds it."""
    from gfxsim.machine.launch import launch
    got = []
    launch(lambda w: got.append(IA.Config(w, head_dim, 16)), grid=(1,), arch=arch, trace=False, provenance=False)
    return got[0]


@pytest.mark.parametrize("arch,jump", [("gfx936", 1), ("gfx942", 0)])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_every_named_constant_has_the_same_value(arch, jump, head_dim):
    cfg = _config(arch, head_dim)
    header = constants(HIP / f"{HEADER}.h", head_dim, jump)
    assert {"TOKENS_PER_CHUNK", "TLOOP", "QKHELOOP", "DTILES", "Q_STRIDE", "W_STRIDE", "O_STRIDE"} <= set(header)
    files = [(HIP / f"{HEADER}.h", header)] + [(p, constants(p, head_dim, jump, header)) for p in HIP.glob("*.hip")]
    for path, consts in files:
        mod = python_module(path)
        own = consts if path.stem == HEADER else {k: v for k, v in consts.items() if k not in header}
        for name, value in own.items():
            py = getattr(mod, name, getattr(cfg, name, None))
            assert py is not None, f"{path.name}: {name} = {value} has no Python twin"
            if isinstance(value, float):
                assert np.float32(py) == np.float32(value), f"{name}: HIP {value}, Python {py}"
            else:
                assert py == value and type(py) is type(value), f"{name}: HIP {value!r}, Python {py!r}"
    # the reverse: every scalar constant of the shared module is one of the header's
    scalars = {n for n, v in vars(IA).items() if n.isupper() and isinstance(v, (int, float, np.floating))
               and not isinstance(v, bool)}
    assert scalars <= set(header), f"int8_attention.py: constants without a HIP twin: {sorted(scalars - set(header))}"


@pytest.mark.parametrize("arch,jump", [("gfx936", 1), ("gfx942", 0)])
def test_the_lanes_sharing_a_row_are_the_macros(arch, jump):
    text = (HIP / f"{SHIM}.h").read_text()
    branches = re.split(r"^#else\b", text.split("#if GFXSIM_JUMP_LAYOUT\n", 1)[1], maxsplit=1, flags=re.M)
    cfg = _config(arch, 128)
    for name in ("D_SAME_ROW_LANES", "D_SAME_ROW_HALF_LANES"):
        macro = re.search(rf"#define {name} ([\d, ]+)", branches[0 if jump else 1]).group(1)
        assert getattr(cfg, name) == tuple(int(x) for x in macro.split(",")), name
    # the other half of a row: register i^2 of the lane (gfx936), register i of lane ^ 8 (CDNA3)
    other = re.search(r"other_half\(const float \(&v\)\[4\], int i\) \{ return ([^;]+);", branches[0 if jump else 1])
    assert cfg._other_half == (("reg", [2, 3, 0, 1]) if other.group(1) == "v[i ^ 2]" else ("lane", 8))
    assert other.group(1) == ("v[i ^ 2]" if jump else "__shfl_xor(v[i], 8)")


# ---- kernels ----------------------------------------------------------------------------------
@pytest.mark.parametrize("path", sorted(HIP.glob("*.hip")), ids=lambda p: p.name)
def test_the_kernels_take_the_same_arguments(path):
    mod = python_module(path)
    for entry, (_, params, texts, is_kernel) in functions(path).items():
        if not is_kernel:
            continue
        base = _base(entry)
        fn = getattr(mod, base, None)
        assert fn is not None, f"{entry}: no Python kernel {base} in {mod.__name__}"
        sig = inspect.signature(fn).parameters
        positional = [n for n, p in sig.items() if p.kind is p.POSITIONAL_OR_KEYWORD][1:]     # after w
        keywords = [n for n, p in sig.items() if p.kind is p.KEYWORD_ONLY]
        buffers = [n for n, t in zip(params, texts) if "*" in t]
        scalars = [n for n, t in zip(params, texts) if "*" not in t]
        assert positional == buffers, f"{entry}: HIP buffers {buffers}, Python {positional}"
        assert set(scalars) <= set(keywords), f"{entry}: HIP scalars {scalars}, Python keywords {keywords}"
        extra = [k for k in keywords if k not in scalars and k not in IA.LAUNCH_OPTIONS]
        assert not extra, f"{base}: Python-only arguments {extra} are not launch options"
        if base != entry:
            assert "grouping" in keywords, f"{entry}: the Python kernel has no grouping"


# ---- LDS: the same __shared__ arrays, so the bank model sees the HIP twin's layout ------------------
def hip_shared(path: pathlib.Path, consts: dict) -> dict:
    """{name: (shape, element bytes)} of every ``__shared__ T name[..]..;`` in the file."""
    size = {"int8_t": 1, "uint8_t": 1, "uint16_t": 2, "float": 4, "int32_t": 4, "int": 4}
    out = {}
    for m in re.finditer(r"__shared__\s+(\w+)\s+(\w+)((?:\[[^\]]+\])+);", _strip_comments(path.read_text())):
        dims = tuple(_c_eval(d, consts, True) for d in re.findall(r"\[([^\]]+)\]", m.group(3)))
        out[m.group(2)] = (dims, size[m.group(1)])
    return out


def _python_shared(stem, arch):
    """{name: (shape, element bytes)} of the LDS regions the Python twin declares, from one small run."""
    import functools

    from kernels_py.workloads.data import make_attention_inputs
    from kernels_py.host.buffers import make_cache, run_decode
    from kernels_py.host.twins import query_rows, run_prefill, run_pv, run_qk_int8, softmax_rows
    seen = {}

    def spy(kernel):
        @functools.wraps(kernel)
        def k(w, *a, **kw):
            kernel(w, *a, **kw)
            seen.update({n: (r.shape, r.dtype.itemsize) for n, r in w.wg.lds.regions.items()})
        return k

    d = make_attention_inputs(seed=0, num_heads=2, num_kv_heads=1, head_dim=128, context_lens=[100], num_queries=16)
    cache = make_cache(d["k"], d["v"], d["context_lens"], block_size=16)
    rows = query_rows(d["q"], 1)
    run = dict(trace=False, provenance=False, arch=arch)
    if stem == "qk_int8":
        run_qk_int8(rows, cache, kernel=spy(IA_kernel("qk_int8")), **run)
    elif stem in ("pv_int8", "pv_bf16"):
        run_pv(spy(IA_kernel(stem)), softmax_rows(rows, cache), cache, **run)
    elif stem == "paged_attention_decode":
        run_decode(d["q"][:, -1], cache, kernel=spy(IA_kernel(stem)), **run)
    elif stem == "prefix_prefill":
        run_prefill(d["q"], cache, kernel=spy(IA_kernel(stem)), **run)
    return seen


def IA_kernel(stem):
    return getattr(importlib.import_module(f"kernels_py.{stem}"), stem)


@pytest.mark.parametrize("arch,jump", [("gfx936", 1), ("gfx942", 0)])
@pytest.mark.parametrize("stem", ["qk_int8", "pv_int8", "pv_bf16", "paged_attention_decode", "prefix_prefill"])
def test_the_lds_arrays_are_the_hip_twins(stem, arch, jump):
    header = constants(HIP / f"{HEADER}.h", 128, jump)
    consts = {**header, **constants(HIP / f"{stem}.hip", 128, jump, header), "WARP_SIZE": 64}
    hip = hip_shared(HIP / f"{stem}.hip", consts)
    assert hip, f"{stem}.hip declares no __shared__ arrays"
    assert _python_shared(stem, arch) == hip
