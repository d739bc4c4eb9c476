"""The gfxsim.commands entry points kept between processes (gfxsim.cli.entrypoints): the list read
from the cache equals importlib.metadata's, any change to a distribution's entry points, a new
distribution or a removed one reads the metadata again, and checkouts that take turns each keep
their own list."""
import importlib.metadata
import os
import shutil
import sys

import pytest

from gfxsim.cli import entrypoints as E

GROUP = "gfxsim.commands"


def _dist(site, name, body):
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n{body}\n")
    return info


def _metadata_entries():
    return [(ep.name, ep.value) for ep in importlib.metadata.entry_points(group=GROUP)]


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.setenv("GFXSIM_CACHE_DIR", str(tmp_path / "cache"))
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    return site


def _from_cache_only(monkeypatch):
    """importlib.metadata refused: what group_entries returns now came from the cache."""
    def refuse(**_):
        raise AssertionError("the metadata was read again")
    monkeypatch.setattr(importlib.metadata, "entry_points", refuse)


def test_the_cached_list_is_the_metadata_list_and_is_read_from_the_cache(site, monkeypatch):
    _dist(site, "fakeplug", "fakecmd = fake.module")
    first = E.group_entries(GROUP)
    assert first == _metadata_entries()
    assert ("fakecmd", "fake.module") in first
    with monkeypatch.context() as m:
        _from_cache_only(m)
        assert E.group_entries(GROUP) == first


def test_a_changed_new_or_removed_distribution_reads_the_metadata_again(site):
    info = _dist(site, "fakeplug", "fakecmd = fake.module")
    assert ("fakecmd", "fake.module") in E.group_entries(GROUP)
    (info / "entry_points.txt").write_text(f"[{GROUP}]\nothercmd = other.module\n")     # edited in place
    got = E.group_entries(GROUP)
    assert ("othercmd", "other.module") in got and ("fakecmd", "fake.module") not in got
    _dist(site, "secondplug", "second = second.module")
    assert ("second", "second.module") in E.group_entries(GROUP)
    shutil.rmtree(info)
    got = E.group_entries(GROUP)
    assert got == _metadata_entries()
    assert ("othercmd", "other.module") not in got and ("second", "second.module") in got


def test_another_finder_that_lists_distributions_reads_the_metadata_every_time(site, monkeypatch):
    _dist(site, "fakeplug", "fakecmd = fake.module")

    class Finder:
        def find_spec(self, *a, **k):
            return None

        def find_distributions(self, *a, **k):
            return iter(())

    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, Finder()])
    assert E._fingerprint(GROUP) is None
    assert E.group_entries(GROUP) == _metadata_entries()
    assert not (site.parent / "cache" / "entry_points").exists()


def test_plugin_commands_come_from_the_group(site):
    from gfxsim.cli import BUILTIN, plugin_commands
    _dist(site, "fakeplug", "fakecmd = fake.module\nlayout = shadow.module")
    names = {c.name: c.module for c in plugin_commands()}
    assert names["fakecmd"] == "fake.module"
    assert not {c.name for c in BUILTIN} & set(names)          # a built-in name wins


def test_a_removed_working_folder_reads_the_metadata(site, monkeypatch):
    _dist(site, "fakeplug", "fakecmd = fake.module")
    monkeypatch.setattr(sys, "path", ["", *sys.path])

    def gone():
        raise FileNotFoundError("the working folder was removed")
    monkeypatch.setattr(E.os, "getcwd", gone)
    assert E._fingerprint(GROUP) is None
    assert ("fakecmd", "fake.module") in E.group_entries(GROUP)


def test_checkouts_that_take_turns_each_read_their_own_list(site, tmp_path, monkeypatch):
    """Two checkouts run from their own folders (each first on sys.path, as ``python -m gfxsim``
    puts it) alternate: each one's list stays cached, where one shared file made every turn read the
    metadata again; each list is the one its own sys.path gives."""
    _dist(site, "fakeplug", "fakecmd = fake.module")
    trees = [tmp_path / "tree_a", tmp_path / "tree_b"]
    _dist(trees[1], "treeplug", "treecmd = tree.module")        # only tree b holds a distribution
    base = list(sys.path)
    got = {}
    for tree in trees:
        monkeypatch.setattr(sys, "path", [str(tree), *base])
        got[tree] = E.group_entries(GROUP)
        assert got[tree] == _metadata_entries()
    assert ("treecmd", "tree.module") in got[trees[1]] and ("treecmd", "tree.module") not in got[trees[0]]
    with monkeypatch.context() as m:
        _from_cache_only(m)
        for tree in [*trees, *trees]:
            m.setattr(sys, "path", [str(tree), *base])
            assert E.group_entries(GROUP) == got[tree]
    assert len(list((site.parent / "cache" / "entry_points").iterdir())) == 2


def test_the_cache_keeps_the_most_recently_written_lists(site, tmp_path, monkeypatch):
    monkeypatch.setattr(E, "KEEP", 3)
    base = list(sys.path)
    folder = site.parent / "cache" / "entry_points"
    for i in range(5):
        tree = tmp_path / f"tree{i}"
        tree.mkdir()
        monkeypatch.setattr(sys, "path", [str(tree), *base])
        E.group_entries(GROUP)
        for j, f in enumerate(sorted(folder.iterdir(), key=lambda f: f.stat().st_mtime_ns)):
            os.utime(f, ns=(j, j))                   # distinct times, in the order written
    assert len(list(folder.iterdir())) == 3
    with monkeypatch.context() as m:                 # the last three are kept
        _from_cache_only(m)
        for i in (2, 3, 4):
            m.setattr(sys, "path", [str(tmp_path / f"tree{i}"), *base])
            E.group_entries(GROUP)
