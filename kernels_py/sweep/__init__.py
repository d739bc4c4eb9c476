"""`gfxsim sweep`: a matrix of kernel runs (kernels x archs x shapes x seeds x inputs files) run as
independent tasks on Dask distributed, with one Parquet table of results.

  spec.py      the TOML spec, checked and expanded into points before anything runs
  task.py      one point in a worker: run_kernel, its metrics, findings, wall time, peak memory
  cluster.py   the LocalCluster or a running cluster, and the points submitted as tasks
  results.py   the Parquet table, written as points finish; resuming; CSV export
  summary.py   the summary (stdout) and the data of its picture (visualize/sweep.py)
  progress.py  the progress line on stderr
  cli.py       the sub-command
"""
