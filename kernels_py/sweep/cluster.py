"""The points of a sweep run as Dask tasks: a LocalCluster on this machine, or a running cluster.

``--workers N`` (default: the cores this process may use) worker processes of one thread each:
numba's and numpy's state is per process, and one point at a time per process makes its peak
memory its own. Dask's nanny sets OMP/MKL/OpenBLAS to one thread in every worker, so a reference's
sums are added in the same order on any worker. ``--scheduler ADDRESS`` connects to a cluster
already running (its workers need gfxsim installed, and the spec's kernel_fn and inputs files at
the same paths).

A worker that dies while running a point (killed, out of memory, a crash in native code) takes the
point with it: Dask runs the point again on another worker, and after ``ALLOWED_FAILURES`` + 1
deaths (the LocalCluster's setting; a running cluster uses its scheduler's) the point is recorded
as failed with Dask's KilledWorker error, and the sweep goes on. Every other point's row was
written when it finished, so nothing finished is lost. Only as many points are submitted as the
cluster has threads (one more as each finishes; Dask picks the worker): Dask counts a worker's
death against every task assigned to it, so none waits queued on a worker, and a death counts
against the point that was running only.
"""
from __future__ import annotations

import contextlib
import logging
import os
import uuid
from gfxsim.errors import ArgumentError

ALLOWED_FAILURES = 1          # a point may take down one worker and run again; the second death fails it


def default_workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


@contextlib.contextmanager
def open_client(scheduler: str | None = None, workers: int | None = None):
    """A dask.distributed Client: of a new LocalCluster (``workers`` processes, one thread each),
    or of the scheduler at ``scheduler``. Closed (and the LocalCluster shut down) on exit."""
    import dask
    from distributed import Client, LocalCluster
    if scheduler is not None:
        if workers is not None:
            raise ArgumentError("--workers sizes the LocalCluster; with --scheduler the cluster has its own workers")
        try:
            client = Client(scheduler, timeout="30s")
        except (OSError, TimeoutError) as e:
            raise ArgumentError(f"--scheduler {scheduler}: cannot connect ({e})") from e
        with client:
            yield client
        return
    n = default_workers() if workers is None else workers
    if n < 1:
        raise ArgumentError(f"--workers must be >= 1, got {n}")
    with dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES}):
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                               silence_logs=logging.ERROR)
    with cluster, Client(cluster) as client:
        yield client


def run_points(client, points, on_row) -> None:
    """Run every point as one task and call ``on_row(point, row)`` as each one finishes (in the
    order they finish). At most as many tasks are in flight as the cluster has threads (asked
    again at each refill, so workers that join are used). A task that returns no row (its worker
    died past the retries, it was cancelled) gets the row of a failed point naming why."""
    import itertools

    from distributed import as_completed

    from kernels_py.sweep.task import lost_point, run_point
    token = uuid.uuid4().hex[:8]
    pending = iter(points)
    running = {}
    done = as_completed()

    def refill():
        room = max(1, sum(client.nthreads().values())) - len(running)
        for p in itertools.islice(pending, max(room, 0)):
            fut = client.submit(run_point, p, key=f"gfxsim-point-{p.point_id}-{token}", pure=False)
            running[fut] = p
            done.add(fut)

    refill()
    for fut in done:
        p = running.pop(fut)
        try:
            row = fut.result()
        except Exception as e:                      # noqa: BLE001 -- the task's own errors are rows already
            text = str(e).strip().splitlines()[0].split(". ")[0] if str(e).strip() else ""
            why = "its worker died" if type(e).__name__ == "KilledWorker" else "the task returned no row"
            row = lost_point(p, f"{type(e).__name__}: {why}{' (' + text + ')' if text else ''}")
        fut.release()
        on_row(p, row)
        refill()


def run_sweep(sweep, store, *, scheduler: str | None = None, workers: int | None = None, quiet: bool = False,
              stream=None) -> tuple:
    """Run the points of ``sweep`` not done in ``store`` (a results.ResultStore), each row added to
    the store as it finishes, with the progress on ``stream`` (stderr). Returns (ran, skipped)."""
    import sys

    from kernels_py.sweep.progress import SweepProgress
    stream = sys.stderr if stream is None else stream
    with store.lock():
        store.reload()                      # what the table holds now that no one else writes it
        todo = [p for p in sweep.points if not store.done(p)]
        skipped = len(sweep.points) - len(todo)
        if skipped and not quiet:
            print(f"gfxsim sweep: {skipped} of {len(sweep.points)} points already in {store.path}", file=stream)
        if not todo:
            return 0, skipped
        with open_client(scheduler, workers) as client:
            if not quiet:
                where = (f"the cluster at {scheduler} (dashboard: {client.dashboard_link})" if scheduler else
                         f"a LocalCluster of {workers or default_workers()} worker processes (1 thread each)")
                print(f"gfxsim sweep: running {len(todo)} points of {sweep.name} on {where}", file=stream)
            with SweepProgress(len(todo), sweep.name, stream=stream, quiet=quiet) as progress:
                def on_row(point, row):
                    store.add(row)
                    progress.point_done(row["status"] == "ok")
                run_points(client, todo, on_row)
    return len(todo), skipped
