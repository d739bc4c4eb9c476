"""Parsed and decoded assembly kept by content on disk: a new process (the memory cache empty)
neither parses nor decodes an unchanged .s again, and a changed one is parsed afresh."""
import shutil

import pytest
from support import need_toolchain, repo_project

from gfxsim.asm import cache
from gfxsim.asm import run as asm_run


def _decoded(kernel):
    return [(d.mnemonic, d.enc, d.ops, d.dpp) for d in kernel.program.decoded]


def test_a_new_process_reads_the_parse_and_the_decode_back(tmp_path, monkeypatch):
    need_toolchain("gfx942")
    from gfxsim.hip.build import asm_path
    monkeypatch.setenv("GFXSIM_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "qk.s"
    shutil.copy(asm_path("qk_int8", "gfx942", project=repo_project()), src)
    parsed = []
    real = cache.parse
    monkeypatch.setattr(cache, "parse", lambda *a, **k: parsed.append(a[1]) or real(*a, **k))
    cache.clear()
    first = cache.parse_cached(src).kernel("qk_int8")
    want = _decoded(first)
    assert len(parsed) == 1

    cache.clear()                                   # what a new process finds: the disk only
    monkeypatch.setattr(asm_run, "decode", lambda *a: pytest.fail("decoded again"))
    again = cache.parse_cached(src).kernel("qk_int8")
    assert len(parsed) == 1 and again is not first
    assert again.instructions == first.instructions and dict(again.descriptor) == dict(first.descriptor)
    assert _decoded(again) == want
    assert all(d.ins is i for d, i in zip(again.program.decoded, again.instructions))

    cache.clear()
    src.write_text(src.read_text() + "\n; changed\n")
    cache.parse_cached(src)
    assert len(parsed) == 2


def test_an_unwritable_cache_folder_only_costs_a_parse(tmp_path, monkeypatch):
    need_toolchain("gfx942")
    from gfxsim.hip.build import asm_path
    blocked = tmp_path / "file"
    blocked.write_text("")                          # the cache folder's place is a file
    monkeypatch.setenv("GFXSIM_CACHE_DIR", str(blocked))
    cache.clear()
    k = cache.parse_cached(asm_path("qk_int8", "gfx942", project=repo_project())).kernel("qk_int8")
    assert k.program.decoded
