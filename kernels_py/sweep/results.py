"""The results of a sweep: one Parquet table (pyarrow), one row per point, written as points finish.

Every finished point rewrites the file whole: the table goes to ``RESULTS.tmp`` beside it, is
flushed to disk and renamed over ``RESULTS`` (atomic on one filesystem), so a sweep killed at any
moment leaves the table of every point finished before it, and never half a file. The rows are a
few hundred bytes each: rewriting 10,000 of them takes tens of milliseconds, nothing beside a
simulated point.

Resuming: a point whose id is in the table with status "ok" and the same files' fingerprint is
done and skipped; a failed point (status "error") or one whose kernel_fn / inputs files changed
is run again and its row replaced. Rows of points the spec no longer names are kept.

One sweep at a time per table: ``lock()`` holds ``RESULTS.lock`` (flock) while points run, and a
second sweep on the same RESULTS is an error instead of two writers overwriting each other.
"""
from __future__ import annotations

import contextlib
import os

from gfxsim.errors import GfxSimError

# the leading columns, in this order; the others (metrics, findings by kind, ...) follow in the
# order they first appear
LEADING = ("point_id", "status", "sweep", "entry", "kernel", "kernel_fn", "reduce_fn", "frontend", "inputs")
TRAILING = ("error", "traceback", "wall_s", "seconds_simulated", "peak_rss_bytes", "peak_rss_scope",
            "gfxsim_version", "host", "worker", "pid", "finished_at", "fingerprint")
MAGIC = b"gfxsim.sweep"                    # schema metadata key marking a gfxsim sweep table


class ResultsError(GfxSimError, ValueError):
    """A results file that cannot be read or written; the message names it."""


class ResultStore:
    """The rows of RESULTS by point id, loaded on creation (empty if the file does not exist)."""

    def __init__(self, path, sweep: str = ""):
        self.path = os.fspath(path)
        self.sweep = sweep
        self.rows: dict[str, dict] = {}
        self.reload()

    def reload(self) -> None:
        """The rows of the file as it is now (none if it does not exist)."""
        self.rows = {r["point_id"]: r for r in read_rows(self.path)} if os.path.exists(self.path) else {}

    @contextlib.contextmanager
    def lock(self):
        """Hold RESULTS.lock for the time of a sweep; ResultsError if another process holds it."""
        try:
            import fcntl
        except ImportError:                  # no flock (Windows): one writer is the user's to ensure
            yield
            return
        path = self.path + ".lock"
        self._check_directory()
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
                os.close(fd)
                raise ResultsError(f"{self.path}: another sweep is writing it (pid {holder or '?'}, lock "
                                   f"{path}); wait for it or give another -o") from None
            try:                             # the file locked is still the one at the path (not unlinked)
                if os.fstat(fd).st_ino == os.stat(path).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
            yield
        finally:
            os.unlink(path)
            os.close(fd)

    def _check_directory(self) -> None:
        """A missing directory is refused, not made (as every other output of gfxsim)."""
        parent = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(parent):
            raise ResultsError(f"{self.path}: directory {parent} does not exist")

    def done(self, point) -> bool:
        r = self.rows.get(point.point_id)
        return r is not None and r.get("status") == "ok" and (r.get("fingerprint") or "") == point.fingerprint

    def add(self, row: dict) -> None:
        """Record one finished point (replacing its earlier row) and write the table."""
        row = dict(row, sweep=self.sweep)
        self.rows[row["point_id"]] = row
        self.write()

    def write(self) -> None:
        import pyarrow.parquet as pq
        table = to_table(list(self.rows.values()), self.sweep)
        tmp = self.path + ".tmp"
        self._check_directory()
        with open(tmp, "wb") as f:
            pq.write_table(table, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def export_csv(self, path) -> None:
        import pyarrow.csv as pcsv
        table = to_table(list(self.rows.values()), self.sweep)
        tmp = os.fspath(path) + ".tmp"
        pcsv.write_csv(table, tmp)
        os.replace(tmp, path)


def columns(rows) -> list:
    seen = dict.fromkeys(LEADING)
    for r in rows:
        seen.update(dict.fromkeys(k for k in r if k not in TRAILING))
    seen.update(dict.fromkeys(TRAILING))
    return [k for k in seen if any(k in r for r in rows)] if rows else list(LEADING)


def to_table(rows, sweep: str = ""):
    """The rows as one pyarrow Table, columns in a stable order (a value a row lacks is null)."""
    import pyarrow as pa
    names = columns(rows)
    data = {k: [r.get(k) for r in rows] for k in names}
    try:
        table = pa.table(data)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise ResultsError(f"results: a column mixes types ({e})") from e
    return table.replace_schema_metadata({MAGIC: sweep.encode()})


def read_rows(path) -> list:
    """The rows of a results table; a file that is not one is an error naming it."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    try:
        # one open file: a sweep renaming a new table over ``path`` meanwhile cannot hand the reader
        # the footer of one file and the pages of the other (read by path, pyarrow opens it twice)
        with open(path, "rb") as f:
            table = pq.read_table(pa.BufferReader(f.read()))
    except (OSError, pa.ArrowInvalid) as e:
        raise ResultsError(f"{path}: not a readable Parquet file ({e}); give another -o or remove it") from e
    if "point_id" not in table.column_names or MAGIC not in (table.schema.metadata or {}):
        raise ResultsError(f"{path}: a Parquet table, but not the results of a gfxsim sweep (no point_id column); "
                           "give another -o")
    return table.to_pylist()
