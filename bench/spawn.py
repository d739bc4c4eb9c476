"""Runs one measured command and writes its wall seconds and rusage to a file: `python -S
bench/spawn.py RESULT LIMIT CMD...` (LIMIT: RLIMIT_AS bytes, 0 for none).

Why a process between the bench and the command: Linux folds the high-water RSS of the memory a
process execs away from into its ru_maxrss, and a child spawned from the bench starts from the
bench's own memory (fork copies it, vfork shares it). A command run straight from a bench that
once held 1.8 GiB (the prefill's generated inputs) reports at least 1.8 GiB whatever it used. This
launcher is a bare interpreter (no site, no numpy: ~10 MiB), so what it passes on is its own."""
import json
import os
import resource
import subprocess
import sys
import time


def main() -> int:
    result, limit, cmd = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

    def set_limit():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, preexec_fn=set_limit if limit else None)   # stdout/stderr: this one's
    _, status, ru = os.wait4(p.pid, 0)
    seconds = time.perf_counter() - t0
    with open(result, "w") as f:
        json.dump({"seconds": seconds, "status": status, "maxrss": ru.ru_maxrss}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
