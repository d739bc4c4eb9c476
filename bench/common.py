"""Timing helpers: subprocesses timed with their own peak RSS (os.wait4), the machine."""
from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gfxsim.procmem import MEM_AVAILABLE_ENV

ROOT = Path(__file__).resolve().parent.parent


def child_env(extra=None) -> dict:
    """The environment of a measured child: this checkout first on sys.path (an installed gfxsim
    may be an editable install of another checkout), and Python's default bytecode cache (a
    sandbox's PYTHONDONTWRITEBYTECODE would make every run recompile gfxsim's sources, ~0.15 s a
    command that no installed gfxsim pays; the first of the repeated runs writes the cache)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra or {})
    return env


def gfxsim_cmd() -> list[str]:
    """How the `gfxsim` command is run: the console script's entry point, `python -m gfxsim`, on
    this checkout (the same code path as the installed script, without a pyenv shim in front)."""
    return [sys.executable, "-m", "gfxsim"]


class ChildResult(dict):
    """seconds (wall, spawn to exit), rss_bytes (the child's peak RSS), rc, stdout, stderr_tail, timed_out."""


SPAWN = Path(__file__).resolve().parent / "spawn.py"


def run_child(cmd, *, timeout: float, env=None, mem_limit_bytes: int = 0, keep_stdout=True) -> ChildResult:
    """Run cmd from the repository root; time it from spawn to exit and take its peak RSS from
    os.wait4's rusage (ru_maxrss of that child alone), both taken by a bare launcher
    (bench/spawn.py: a child spawned from this process would report this process's high-water RSS
    as its own where that is higher). Stdout goes to a temporary file (reports can be megabytes).
    On timeout the launcher and the command are killed (their process group) and timed_out is True."""
    env = dict(env or child_env())
    if mem_limit_bytes:         # the child's memory check sees the budget it runs under, not the moment's MemAvailable
        env[MEM_AVAILABLE_ENV] = str(mem_limit_bytes)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.TemporaryDirectory() as tmp:
        result = os.path.join(tmp, "rusage.json")
        p = subprocess.Popen([sys.executable, "-S", str(SPAWN), result, str(int(mem_limit_bytes)), *cmd],
                             cwd=ROOT, env=env, stdout=out, stderr=err, start_new_session=True)
        try:
            p.wait(timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            p.wait()
            timed_out = True
        try:
            with open(result) as f:
                got = json.load(f)
        except (OSError, ValueError):
            got = None
        if got is None and not timed_out:
            raise RuntimeError(f"bench/spawn.py left no result for {' '.join(map(str, cmd))} "
                               f"(launcher exit {p.returncode})")
        if got is None:           # killed: the time it was given, its RSS unknown
            seconds, rc, rss = float(timeout), -9, 0
        else:
            seconds, rc = got["seconds"], os.waitstatus_to_exitcode(got["status"])
            rss = got["maxrss"] * (1 if sys.platform == "darwin" else 1024)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace") if keep_stdout else ""
        stderr = err.read().decode(errors="replace")
    return ChildResult(seconds=seconds, rss_bytes=rss, rc=rc, stdout=stdout,
                       stderr_tail=stderr[-2000:], timed_out=timed_out)


def lane_rate_runs(cmd, repeat: int, timeout: float, mem_limit_bytes: int):
    """``repeat`` runs of a ``--report json`` command of the asm front end: (wall seconds, peak
    RSS, lane-instructions per simulated second, simulated seconds of each run, error text or
    None, the last run's lane-instructions); a failed run ends them with its error."""
    runs, rss, rates, sims, err, lanes = [], [], [], [], None, None
    for _ in range(repeat):
        r = run_child(cmd, timeout=timeout, mem_limit_bytes=mem_limit_bytes)
        if r["rc"] != 0 or r["timed_out"]:
            err = failure_text(r, timeout)
            break
        try:
            rep = json.loads(r["stdout"])
        except ValueError:
            err = "the command's stdout is not JSON"
            break
        lanes = rep.get("lane_instructions")
        if not lanes or not rep.get("seconds"):
            err = "the report has no lane_instructions / seconds"
            break
        runs.append(r["seconds"])
        rss.append(r["rss_bytes"])
        sims.append(rep["seconds"])
        rates.append(lanes / rep["seconds"])
    return runs, rss, rates, sims, err, lanes


def run_worker(module: str, args: list[str], *, timeout: float, env_extra=None) -> tuple[dict | None, ChildResult]:
    """Run `python -m bench.<module> ARGS` (which prints one JSON object last on stdout)."""
    r = run_child([sys.executable, "-m", f"bench.{module}", *args], timeout=timeout, env=child_env(env_extra))
    data = None
    if r["rc"] == 0 and not r["timed_out"]:
        try:
            data = json.loads(r["stdout"].strip().splitlines()[-1])
        except (ValueError, IndexError):
            data = None
    return data, r


def repeat_child(cmd, repeat: int, timeout: float, env=None):
    """Run cmd ``repeat`` times: (seconds of each run, peak RSS of each, error text or None, the
    last ChildResult). Stops at the first run that fails or times out."""
    runs, rss, r = [], [], None
    for _ in range(repeat):
        r = run_child(cmd, timeout=timeout, env=env)
        if r["rc"] != 0 or r["timed_out"]:
            return runs, rss, failure_text(r, timeout), r
        runs.append(r["seconds"])
        rss.append(r["rss_bytes"])
    return runs, rss, None, r


def failure_text(r: ChildResult, timeout: float) -> str:
    if r["timed_out"]:
        return f"timed out after {timeout:.0f} s"
    tail = [ln for ln in r["stderr_tail"].strip().splitlines() if ln.strip()]
    return f"exit {r['rc']}: {tail[-1][:160] if tail else 'no stderr'}"


# -- the machine -----------------------------------------------------------------------------

def machine_info() -> dict:
    info = {"os": platform.platform(), "python": platform.python_version(), "cores": os.cpu_count()}
    try:
        info["cores_usable"] = len(os.sched_getaffinity(0))
    except AttributeError:
        pass
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        info["cpu"] = platform.processor()
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                info["memory_bytes"] = int(line.split()[1]) * 1024
                info["memory_gib"] = round(info["memory_bytes"] / 2**30, 1)
    except OSError:
        pass
    for mod in ("numpy", "numba", "ml_dtypes"):
        try:
            from importlib.metadata import version
            info[mod] = version(mod)
        except Exception:                                   # noqa: BLE001  (not installed)
            info[mod] = None
    info["first_touch"] = first_touch()
    try:
        info["gfxsim_commit"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                                               text=True, timeout=10).stdout.strip() or None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        info["gfxsim_worktree_modified"] = bool(dirty)
    except (OSError, subprocess.SubprocessError):
        info["gfxsim_commit"] = None
    return info


_TOUCH = ("import numpy as np, resource, time; a = np.empty({n}, np.uint8); t = time.perf_counter(); "
          "a.fill(1); r = resource.getrusage(resource.RUSAGE_SELF); print(time.perf_counter() - t, r.ru_stime)")


def first_touch(mib: int = 256) -> dict | None:
    """What writing ``mib`` MiB of fresh memory costs a new process here (seconds, and per GiB):
    the page faults every figure pays for its peak RSS. On an ordinary Linux host ~0.1 s/GiB; in a
    VM that hands unused memory back to its host (free page reporting) several times that. Two
    children, 3 s apart (the host has taken freed pages back by then) and back to back."""
    runs = []
    for pause in (3.0, 0.0):
        time.sleep(pause)
        try:
            out = subprocess.run([sys.executable, "-c", _TOUCH.format(n=mib << 20)], capture_output=True, text=True,
                                 timeout=60, env=child_env()).stdout.split()
            runs.append((float(out[0]), float(out[1])))
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            return None
    per_gib = lambda s: round(s * 1024 / mib, 3)
    return {"mib": mib, "after_a_pause_seconds": round(runs[0][0], 3), "after_a_pause_per_gib": per_gib(runs[0][0]),
            "back_to_back_seconds": round(runs[1][0], 3), "back_to_back_per_gib": per_gib(runs[1][0]),
            "system_seconds": [round(r[1], 3) for r in runs]}


def median(xs):
    return statistics.median(xs) if xs else None
