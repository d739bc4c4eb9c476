"""The gfxsim.commands entry points kept between processes (gfxsim.cli.entrypoints): the list read
from the cache equals importlib.metadata's, and any change to a distribution's entry points, a new
distribution or a removed one reads the metadata again."""
import importlib.metadata
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
    assert not (site.parent / "cache" / "entry_points.json").exists()


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
