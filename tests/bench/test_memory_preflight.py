"""`gfxsim run`'s memory pre-flight: its constants are the calibration's, and --force runs a refused run."""
import json
import os
import subprocess
import sys

from support import ROOT


def run(*argv, available):
    env = dict(os.environ, GFXSIM_MEM_AVAILABLE=str(available), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "gfxsim", "run", *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)


def test_force_runs_what_the_preflight_refuses():
    refused = run("--context", "64", "--quiet", "--no-provenance", available=1 << 20)
    assert refused.returncode != 0 and "--force runs it anyway" in refused.stderr
    forced = run("--context", "64", "--quiet", "--no-provenance", "--force", available=1 << 20)
    assert forced.returncode == 0, forced.stderr[-2000:]
    assert "paged_attention_decode on gfx936, context 64" in forced.stdout


def test_the_constants_are_the_calibrations():
    from kernels_py.cli import MEMORY_BASE, MEMORY_PER_ELEMENT, MEMORY_PER_ELEMENT_DEFAULT, memory_estimate
    cal = json.loads((ROOT / "bench" / "memory_calibration.json").read_text())
    assert MEMORY_PER_ELEMENT == cal["memory_per_element"]
    assert MEMORY_PER_ELEMENT_DEFAULT == cal["memory_per_element_default"]
    assert MEMORY_BASE == cal["memory_base_bytes"]
    for p in cal["points"]:                             # every measured peak under its estimate
        est = memory_estimate(p["context"], 8, 128, provenance=p["mode"] != "numbers", trace=p["mode"] == "trace",
                              kernel=p["kernel"])
        assert p["peak_rss_bytes"] <= est, p
