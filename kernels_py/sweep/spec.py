"""A sweep spec (TOML) read and checked into the list of points it names, before anything runs.

    [sweep]
    name = "decode"                       # optional (default: the file's stem); description optional
    [[kernel]]
    name = "paged_attention_decode"       # a kernel of kernels_py.host.runners.KERNELS
    kernel_fn = "my_decode.py:decode"     # optional: your function with that kernel's signature
    frontend = "python"                   # or "asm"; every key below may be a value or a list
    arch = ["gfx936", "gfx942"]
    grouping = ["fragment", "contiguous"]
    context = [256, 1024]
    seed = [0, 1]
    inputs = ["captured/a.npz"]           # optional: --inputs files (the shapes then come from them)

Each [[kernel]] entry is the Cartesian product of its list values (scalars stay fixed), in the order
the keys are written. Paths are relative to the spec's folder. Every point is checked here as
`gfxsim run` checks its options (RunConfig, the swap-in function loaded, each inputs file read and
validated), and any error names the file, the entry and the value.
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import tomllib
import typing
from dataclasses import dataclass
from pathlib import Path

from gfxsim.errors import ArgumentError, GfxSimError
from kernels_py.host.config import Frontend, RunConfig
from kernels_py.host.hip_twins import ASM_ENTRIES
from kernels_py.host.runners import KERNELS, REDUCE_KERNELS
from kernels_py.host.runs import load_kernel_fn

FRONTENDS = typing.get_args(Frontend)
# keys of an entry that are not RunConfig fields (RunConfig.names() leaves formula and provenance out)
RUN_KEYS = ("formula", "provenance")
ENTRY_KEYS = ("name", "kernel_fn", "reduce_fn", "frontend", "inputs")
SWEEP_KEYS = ("name", "description")
# what an --inputs file gives (gfxsim run refuses these flags beside --inputs)
SHAPE_KEYS = ("context", "heads", "kv_heads", "head_dim")
# a RunConfig field's TOML type, from the type of its default
_TYPE_NAMES = {bool: "a boolean", int: "an integer", str: "a string"}
MAX_ERRORS = 20                # a spec error lists at most this many problems


class SpecError(GfxSimError, ValueError):
    """A spec that cannot run; the message names the file, the entry and what was wrong."""


@dataclass(frozen=True)
class Point:
    """One run of a sweep: everything run_kernel is given, as the spec wrote it (paths relative to
    the spec) and resolved (``files``: the absolute paths the task reads)."""
    entry: int                      # 1-based index of its [[kernel]] entry
    kernel: str
    kernel_fn: str | None           # "FILE.py:FN" as written
    reduce_fn: str | None
    frontend: str
    inputs: str | None              # .npz path as written
    params: tuple                   # ((name, value), ...): every RunConfig field, formula and provenance
    files: tuple                    # ((what, absolute path), ...) of kernel_fn / reduce_fn / inputs
    fingerprint: str                # sha256 of those files' bytes ("" when none): a changed file is rerun
    shape: tuple = ()               # ((name, value), ...) an inputs file sets (num_seqs, heads, ...)

    @property
    def point_id(self) -> str:
        """Stable id of what the point runs: its kernel and parameters (not the files' bytes)."""
        key = dict(kernel=self.kernel, kernel_fn=self.kernel_fn, reduce_fn=self.reduce_fn, frontend=self.frontend,
                   inputs=self.inputs, **dict(self.params))
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]

    def param(self, name):
        return dict(self.params)[name]

    def columns(self) -> dict:
        """The point's columns of the results table: id, kernel and every parameter."""
        out = dict(point_id=self.point_id, entry=self.entry, kernel=self.kernel, kernel_fn=self.kernel_fn,
                   reduce_fn=self.reduce_fn, frontend=self.frontend, inputs=self.inputs)
        out.update(self.params)
        out.update(self.shape)
        return out

    def path(self, what: str) -> str | None:
        return dict(self.files).get(what)


@dataclass(frozen=True)
class Sweep:
    name: str
    description: str
    path: str                       # the spec file
    points: tuple                   # Point, in spec order

    def varied(self) -> list:
        """The point columns that take more than one value over the sweep (for the summary's tables)."""
        cols = [p.columns() for p in self.points]
        names = [k for k in cols[0] if k not in ("point_id", "entry")] if cols else []
        for c in cols[1:]:
            names += [k for k in c if k not in names and k not in ("point_id", "entry")]
        return [k for k in names if len({json.dumps(c.get(k)) for c in cols}) > 1]


def load_spec(path) -> Sweep:
    """Read, check and expand the spec at ``path``; SpecError naming every problem found."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise SpecError(f"{path}: no such file" if not os.path.isdir(path) else f"{path}: is a directory")
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{path}: not valid TOML: {e}") from e
    return parse_spec(doc, path)


def parse_spec(doc: dict, path: str) -> Sweep:
    errors = []
    unknown = sorted(set(doc) - {"sweep", "kernel"})
    if unknown:
        errors.append(f"unknown table(s) {', '.join(unknown)}; a spec has [sweep] and [[kernel]] entries")
    head = doc.get("sweep", {})
    if not isinstance(head, dict):
        errors.append("[sweep] must be a table")
        head = {}
    bad = sorted(set(head) - set(SWEEP_KEYS))
    if bad:
        errors.append(f"[sweep]: unknown key(s) {', '.join(bad)}; known: {', '.join(SWEEP_KEYS)}")
    for k in SWEEP_KEYS:
        if k in head and not isinstance(head[k], str):
            errors.append(f"[sweep]: {k} must be a string, got {head[k]!r}")
    entries = doc.get("kernel")
    if entries is None:
        errors.append("no [[kernel]] entry: nothing to run")
        entries = []
    elif not isinstance(entries, list):
        errors.append("kernel must be an array of tables, written [[kernel]]")
        entries = []
    base = Path(path).resolve().parent
    points, hashes = [], {}
    for i, entry in enumerate(entries, 1):
        points += _entry_points(i, entry, base, errors, hashes)
    seen = {}
    for p in points:
        pid = p.point_id
        if pid in seen:
            errors.append(f"[[kernel]] #{p.entry}: point {_describe(p)} is also a point of [[kernel]] "
                          f"#{seen[pid].entry}; each point must be named once")
        else:
            seen[pid] = p
    if errors:
        errors = list(dict.fromkeys(errors))
        shown = [f"{path}: {e}" for e in errors[:MAX_ERRORS]]
        if len(errors) > MAX_ERRORS:
            shown.append(f"{path}: ... and {len(errors) - MAX_ERRORS} more errors")
        raise SpecError("\n".join(shown))
    name = head.get("name") or Path(path).stem
    return Sweep(name, head.get("description", ""), path, tuple(points))


def _describe(p: Point) -> str:
    shown = {k: v for k, v in p.columns().items() if k not in ("point_id", "entry") and v is not None}
    return ", ".join(f"{k}={v}" for k, v in shown.items())


def _entry_points(i: int, entry, base: Path, errors: list, hashes: dict) -> list:
    if not isinstance(entry, dict):
        errors.append(f"[[kernel]] #{i}: must be a table")
        return []
    kernel = entry.get("name")
    where = f"[[kernel]] #{i}" + (f" ({kernel})" if isinstance(kernel, str) else "")
    n_before = len(errors)

    def err(msg):
        errors.append(f"{where}: {msg}")

    if kernel is None:
        err(f"no name; name one of: {', '.join(sorted(KERNELS))}")
    elif kernel not in KERNELS:
        err(f"unknown kernel {kernel!r}; kernels: {', '.join(sorted(KERNELS))}")
    fields = {f.name: f for f in dataclasses.fields(RunConfig)}
    params_known = (*RunConfig.names(), *RUN_KEYS)
    unknown = [k for k in entry if k not in ENTRY_KEYS and k not in params_known]
    for k in unknown:
        err(f"unknown parameter {k!r}; known: {', '.join(sorted(params_known + ENTRY_KEYS))}")
    axes = {}                                    # key -> list of values, in the order written
    for k, v in entry.items():
        if k == "name" or k in unknown:
            continue
        values = v if isinstance(v, list) else [v]
        if not values:
            err(f"{k} = []: an empty list gives no points")
            continue
        if k in params_known:
            want = type(fields[k].default)
        else:
            want = str
        for x in values:
            if type(x) is not want:
                err(f"{k}: expected {_TYPE_NAMES[want]} or a list of them, got {x!r}")
        if len(values) != len(set(map(repr, values))):
            err(f"{k} = {v!r}: a value is listed twice")
        axes[k] = values
    for x in axes.get("frontend", []):
        if x not in FRONTENDS:
            err(f"frontend {x!r}: must be one of {', '.join(FRONTENDS)}")
    if "inputs" in axes:
        for k in SHAPE_KEYS:
            if k in axes:
                err(f"{k} cannot be given with inputs: the shapes come from the inputs files; drop {k}")
    if len(errors) > n_before:
        return []
    # the swap-in functions and the inputs files: found, loaded, validated once per file
    files_ok = True
    for k in ("kernel_fn", "reduce_fn"):
        for spec in axes.get(k, []):
            resolved = _resolve_fn(spec, base)
            try:
                load_kernel_fn(resolved, k)
            except ValueError as e:
                err(str(e))
                files_ok = False
    if "reduce_fn" in axes and kernel not in REDUCE_KERNELS:
        err(f"reduce_fn: {kernel} has no second kernel to swap (only "
            f"{', '.join(f'{k} ({v})' for k, v in REDUCE_KERNELS.items())})")
    if "asm" in axes.get("frontend", []):
        if kernel not in ASM_ENTRIES:
            err(f"frontend asm runs {', '.join(sorted(ASM_ENTRIES))}; {kernel} is not wired to the asm front end")
        if "kernel_fn" in axes or "reduce_fn" in axes:
            err("frontend asm runs the compiled twin: it does not take kernel_fn or reduce_fn")
    shapes = {}
    for f in axes.get("inputs", []):
        for bs in axes.get("block_size", [RunConfig().block_size]):
            try:
                shapes[f, bs] = _inputs_shape(base / f, bs)
            except ValueError as e:
                err(f"inputs {f!r}: {e}")
                files_ok = False
    if not files_ok or len(errors) > n_before:
        return []
    keys = list(axes)
    points = []
    for combo in itertools.product(*(axes[k] for k in keys)):
        chosen = dict(zip(keys, combo))
        run = {k: chosen[k] for k in params_known if k in chosen}
        try:
            cfg = RunConfig(**run)
            check = KERNEL_CHECKS.get(kernel)
            if check is not None:
                check(cfg, "inputs" in chosen)
        except (ValueError, KeyError, TypeError) as e:
            at = ", ".join(f"{k}={chosen[k]!r}" for k in keys if len(axes[k]) > 1 and k in run)   # the point
            msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
            err(f"{msg}" + (f" (at {at})" if at else ""))
            continue
        params = tuple((k, getattr(cfg, k)) for k in params_known)
        files = []
        for k in ("kernel_fn", "reduce_fn"):
            if chosen.get(k):
                files.append((k, _resolve_fn(chosen[k], base)))
        if chosen.get("inputs"):
            files.append(("inputs", str(base / chosen["inputs"])))
        shape = ()
        if chosen.get("inputs"):
            shape = tuple(shapes[chosen["inputs"], cfg.block_size].items())
            params = tuple((k, v) for k, v in params if k not in SHAPE_KEYS)
        points.append(Point(entry=i, kernel=kernel, kernel_fn=chosen.get("kernel_fn"),
                            reduce_fn=chosen.get("reduce_fn"), frontend=chosen.get("frontend", "python"),
                            inputs=chosen.get("inputs"), params=params, files=tuple(files),
                            fingerprint=fingerprint(files, hashes), shape=shape))
    return points


def _check_sage(cfg, has_inputs: bool) -> None:
    """What the sage_attention runner refuses before it runs, refused before the sweep starts."""
    from gfxsim.arch import get_arch
    from kernels_py.fp8.sage_layout import BLKK
    from kernels_py.host.runners import ARCHS
    if get_arch(cfg.arch).name not in ARCHS:
        raise ArgumentError(f"sage_attention runs on the NVIDIA warp32 profiles {', '.join(ARCHS)}, not {cfg.arch}")
    if not has_inputs and cfg.context % BLKK:
        raise ArgumentError(f"sage_attention needs a context that is a multiple of {BLKK}, got {cfg.context}")


# per kernel: the checks its runner makes on the configuration before running (RunConfig has the rest)
KERNEL_CHECKS = {"sage_attention": _check_sage}


def _resolve_fn(spec: str, base: Path) -> str:
    """"FILE.py:FN" with FILE made absolute against the spec's folder (left as is without a ':')."""
    if ":" not in spec:
        return spec
    path, fn = spec.rsplit(":", 1)
    return f"{base / path}:{fn}"


def _inputs_shape(path: Path, block_size: int) -> dict:
    """The shape columns an inputs file sets, read and validated as `gfxsim run --inputs` does."""
    from kernels_py.workloads.inputs import load_inputs
    d = load_inputs(path, block_size=block_size)
    q, k = d["q"], d["k"]
    return dict(context=int(d["context_lens"].max()), heads=int(q.shape[-2]), kv_heads=int(k.shape[2]),
                head_dim=int(q.shape[-1]), num_seqs=int(q.shape[0]))


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fingerprint(files, cache: dict | None = None) -> str:
    """sha256 over the bytes of a point's files (kernel_fn, reduce_fn, inputs), "" when it has none."""
    if not files:
        return ""
    cache = {} if cache is None else cache
    h = hashlib.sha256()
    for what, p in files:
        path = p.rsplit(":", 1)[0] if what != "inputs" else p
        if path not in cache:
            cache[path] = file_sha256(path)
        h.update(f"{what}={cache[path]};".encode())
    return h.hexdigest()[:16]
