"""One sweep point run as a task in a Dask worker: run_kernel, then the point's row of the results.

The row holds what `gfxsim run --report json` reports, flattened: every metric (``vs_bf16.max_abs``
...), the findings counted by kind (a column for every kind of the registry), the first finding's
message and the checks that did not run; then how the point ran: wall time of the whole
run_kernel call (data, simulation, references), peak resident memory, the gfxsim version, host,
worker and process. A point that raises records its error and traceback instead; it never raises.

Peak memory: a worker runs many points one after another, so before each point the process's
high-water mark is reset (``/proc/self/clear_refs`` "5", Linux) and VmHWM is read after it: the
peak RSS of the worker process while this point ran, from what it already held when the point
started (imports, numba's compiled code, memory kept from earlier points). ``peak_rss_scope`` says
"task" then; where the reset is not possible it is the
process's peak since it started ("process"), and with several threads per worker also the other
points' ("process, N threads").
"""
from __future__ import annotations

import datetime
import os
import socket
import time
import traceback

from gfxsim.procmem import peak_rss_bytes, reset_peak_rss
from gfxsim.errors import ArgumentError, located


def _worker():
    """(address, threads) of the Dask worker running this task, (None, 1) outside one."""
    try:
        from distributed import get_worker
        w = get_worker()
        return w.address, w.state.nthreads
    except (ImportError, ValueError, AttributeError):
        return None, 1


def where_columns() -> dict:
    from gfxsim import __version__
    address, _ = _worker()
    return dict(gfxsim_version=__version__, host=socket.gethostname(), worker=address, pid=os.getpid(),
                finished_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))


def finding_columns(findings, checks) -> dict:
    """Findings counted by kind (every kind of the registry, 0 when none), the first one's message,
    and the checks that did not run (so that 0 findings does not claim more than was checked)."""
    from gfxsim.machine.findings import REGISTRY
    counts = dict.fromkeys(REGISTRY, 0)
    for f in findings:
        counts[f.kind] += 1
    out = {"findings": len(findings),
           "correctness_findings": sum(n for k, n in counts.items() if not REGISTRY[k].performance)}
    out.update({f"findings.{k}": n for k, n in counts.items()})
    out["first_finding"] = str(findings[0]) if findings else None
    out["checks_not_run"] = ", ".join(checks["not_run"]) or None
    out["checks_not_run_reason"] = checks["reason"]
    return out


def metric_columns(metrics: dict) -> dict:
    """{"vs_bf16": {"max_abs": x, ...}, ...} as {"vs_bf16.max_abs": x, ...}."""
    return {f"{ref}.{stat}": float(v) for ref, m in metrics.items() for stat, v in m.items()}


def check_files(point) -> None:
    """The point's files must be the bytes the spec was checked with (changed since, or another
    file at that path on this worker: an error rather than a result of something else)."""
    from kernels_py.sweep.spec import fingerprint
    if not point.files:
        return
    for what, p in point.files:
        path = p.rsplit(":", 1)[0] if what != "inputs" else p
        if not os.path.isfile(path):
            raise located(FileNotFoundError, f"{what} {path}: no such file on host {socket.gethostname()} (a sweep on a "
                                    "cluster needs the spec's files at the same paths on every worker)")
    if fingerprint(point.files) != point.fingerprint:
        raise ArgumentError(f"{', '.join(p for _, p in point.files)}: changed since the sweep started (or differs on "
                         f"host {socket.gethostname()}); rerun the sweep to run this point on the new files")


def run_point(point) -> dict:
    """The results row of ``point`` (a spec.Point): status "ok" with its metrics and findings, or
    "error" with the exception; never raises."""
    import numpy as np
    row = point.columns()
    row["fingerprint"] = point.fingerprint
    _, threads = _worker()
    scope = "task" if reset_peak_rss() else "process"
    if threads > 1:
        scope = f"process, {threads} threads"
    t0 = time.perf_counter()
    try:
        check_files(point)
        from kernels_py.host.runs import run_kernel
        params = dict(point.params)
        formula, provenance = params.pop("formula"), params.pop("provenance")
        inputs = None
        if point.inputs is not None:
            from kernels_py.workloads.inputs import load_inputs
            inputs = load_inputs(point.path("inputs"), block_size=params["block_size"])
        with np.errstate(invalid="ignore", divide="ignore"):       # as `gfxsim run`: e.g. cos_sim 0/0 -> nan
            kr = run_kernel(point.kernel, inputs=inputs, formula=formula, provenance=provenance,
                            kernel_fn=point.path("kernel_fn"), reduce_fn=point.path("reduce_fn"),
                            frontend=point.frontend, **params)
            row.update(metric_columns(kr.metrics()))
            row.update(finding_columns(kr.findings, kr.checks()))
        row["seconds_simulated"] = round(sum(r.seconds for r in kr.runs), 3)
        row["status"], row["error"], row["traceback"] = "ok", None, None
    except (Exception, SystemExit) as e:              # noqa: BLE001 -- the point's error is its result
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        row["status"] = "error"
        row["error"] = f"{type(e).__name__}{': ' + first if first else ''}"
        row["traceback"] = "".join(traceback.format_exception(e)[-12:])
    row["wall_s"] = round(time.perf_counter() - t0, 3)
    row["peak_rss_bytes"] = peak_rss_bytes()
    row["peak_rss_scope"] = scope
    row.update(where_columns())
    return row


def lost_point(point, error: str) -> dict:
    """The row of a point whose task produced no row (its worker died, the task was cancelled)."""
    row = point.columns()
    row["fingerprint"] = point.fingerprint
    row.update(status="error", error=error, traceback=None, wall_s=None, peak_rss_bytes=None, peak_rss_scope=None)
    row.update(where_columns())
    row.update(host=None, worker=None, pid=None)
    return row
