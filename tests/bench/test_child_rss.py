"""A measured command's peak RSS is its own: Linux gives a child spawned from a process the high-water
RSS of the memory it execs away from, so a bench that once held a lot (the prefill's generated
inputs) would report at least that for every later command (bench/spawn.py)."""
import sys

import numpy as np

from bench.common import run_child


def test_a_child_reports_its_own_peak_not_the_bench_s():
    held = np.ones(300 * 2 ** 20 // 8)                   # this process: +300 MiB of high water
    r = run_child([sys.executable, "-c", "pass"], timeout=60)
    assert r["rc"] == 0 and not r["timed_out"]
    assert r["rss_bytes"] < 100 * 2 ** 20, r["rss_bytes"]
    big = run_child([sys.executable, "-c", "import numpy as np; a = np.ones(200 * 2 ** 20 // 8)"], timeout=60)
    assert big["rss_bytes"] > 200 * 2 ** 20              # and a child's own use is still seen
    del held


def test_a_child_past_its_time_is_killed_with_its_launcher():
    r = run_child([sys.executable, "-c", "import time; time.sleep(30)"], timeout=1)
    assert r["timed_out"] and r["seconds"] == 1.0


def test_exit_status_output_and_memory_limit_pass_through():
    r = run_child([sys.executable, "-c", "import sys; print('out'); sys.exit(3)"], timeout=60)
    assert r["rc"] == 3 and r["stdout"] == "out\n"
    r = run_child([sys.executable, "-c", "import numpy as np; np.ones(2 ** 30 // 8)"], timeout=60,
                  mem_limit_bytes=512 * 2 ** 20)
    assert r["rc"] != 0 and ("MemoryError" in r["stderr_tail"] or "allocate" in r["stderr_tail"])
