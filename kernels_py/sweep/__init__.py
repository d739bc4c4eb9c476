"""`gfxsim sweep`: a matrix of kernel runs (kernels x archs x shapes x seeds x inputs files) run as
independent tasks on Dask distributed, with one Parquet table of results.

  spec.py      the TOML spec, checked and expanded into points before anything runs
  task.py      one point in a worker: run_kernel, its metrics, findings, wall time, peak memory
  cluster.py   the LocalCluster or a running cluster, and the points submitted as tasks
  results.py   the Parquet table, written as points finish; resuming; CSV export
  summary.py   the summary (stdout) and the data of its picture (visualize/sweep.py)
  progress.py  the progress line on stderr
  cli.py       the sub-command

``sweep(spec, results)`` below is the same from Python (a notebook, a script).
"""


def sweep(spec, results, *, scheduler=None, workers=None, quiet=False):
    """Run (or resume) the sweep of the spec file ``spec`` into the Parquet table ``results``, as
    `gfxsim sweep` does without its picture; returns the summary.SweepSummary (``.rows``: the rows)."""
    from kernels_py.sweep.cluster import run_sweep
    from kernels_py.sweep.results import ResultStore
    from kernels_py.sweep.spec import load_spec
    from kernels_py.sweep.summary import summarize
    sw = load_spec(spec)
    store = ResultStore(results, sw.name)
    ran, skipped = run_sweep(sw, store, scheduler=scheduler, workers=workers, quiet=quiet)
    return summarize(sw, store.rows, ran=ran, skipped=skipped)
