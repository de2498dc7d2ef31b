"""The persistent schedule cache (schedule/cache.py): same bytes with and without it, hits skip
the search, corrupt entries are ignored and rewritten, `off` writes nothing."""
import json

import pytest
from onnx import helper

from opt_models import make, rand, sunway

from swbuild.backends.sunway.schedule import cache, ldm, split
from swbuild.driver.compiler import compile_to


def two_layer_model():
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["y1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["y1"], ["z1"]),
             helper.make_node("Conv", ["z1", "w2", "b2"], ["y2"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["y2"], ["z2"]),
             helper.make_node("Conv", ["z2", "w3", "b3"], ["y3"])]
    return make(nodes, [("x", [1, 8, 16, 16])], [("y3", [1, 4, 16, 16])],
                [("w1", rand(16, 8, 3, 3, seed=1, scale=0.3)), ("b1", rand(16, seed=2)),
                 ("w2", rand(16, 16, 3, 3, seed=3, scale=0.3)), ("b2", rand(16, seed=4)),
                 ("w3", rand(4, 16, 1, 1, seed=5, scale=0.3)), ("b3", rand(4, seed=6))])


def _compile(tmp_path, monkeypatch, setting, tag):
    monkeypatch.setenv(cache.ENV, str(setting))
    monkeypatch.setattr(ldm, "_MEMO", {})          # a fresh process: only the disk cache remembers
    monkeypatch.setattr(split, "_DECISIONS", {})
    _, files = compile_to(two_layer_model(), sunway(), tmp_path / tag, "m")
    return files


def _entries(d):
    return sorted(p for p in d.glob("*.json"))


def test_same_bytes_with_and_without_the_cache_and_hits_skip_the_search(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    off = _compile(tmp_path, monkeypatch, "off", "off")
    cold = _compile(tmp_path, monkeypatch, d, "cold")
    assert cold == off
    entries = _entries(d)
    assert len(entries) >= 3           # one per distinct kernel search (three convolutions at least)
    for p in entries:
        doc = json.loads(p.read_text())
        assert doc["key"].startswith(f"{cache.FORMAT}|") and sunway().sha256 in doc["key"]

    def no_search(s):
        raise AssertionError(f"searched {s.k.name} despite a cache entry")
    monkeypatch.setattr(ldm, "_search_tiles", no_search)
    warm = _compile(tmp_path, monkeypatch, d, "warm")
    assert warm == off
    assert _entries(d) == entries


def test_corrupt_entries_are_ignored_and_rewritten(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    off = _compile(tmp_path, monkeypatch, "off", "off")
    _compile(tmp_path, monkeypatch, d, "cold")
    good = {p: p.read_text() for p in _entries(d)}
    bad = ["{not json", json.dumps({"key": "another kernel", "tiles": [["i", 4]]}), json.dumps({"key": 1})]
    for i, p in enumerate(good):
        p.write_text(bad[i % len(bad)])
    again = _compile(tmp_path, monkeypatch, d, "again")
    assert again == off
    assert {p: p.read_text() for p in _entries(d)} == good


def test_off_writes_nothing_and_default_is_the_user_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv(cache.ENV)
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "swbuild" / "schedules"
    monkeypatch.setenv(cache.ENV, "off")
    assert cache.cache_dir() is None
    cache.store("k", [("i", 2)])
    assert cache.load("k") is None
    assert not (tmp_path / "home").exists()


@pytest.mark.parametrize("text", ["", "[]", '{"key": "k", "tiles": [["i", "x"]]}'])
def test_unreadable_entry_is_a_miss(tmp_path, monkeypatch, text):
    monkeypatch.setenv(cache.ENV, str(tmp_path))
    cache.store("k", [("i", 2), ("j", 8)])
    assert cache.load("k") == [("i", 2), ("j", 8)]
    cache._path(tmp_path, "k").write_text(text)
    assert cache.load("k") is None


def test_a_changed_search_misses(tmp_path, monkeypatch):
    """A development checkout changes the search between releases of one version: the key holds
    a hash of the search's source, so a changed search schedules afresh instead of reading
    tiles the old one chose."""
    d = tmp_path / "cache"
    _compile(tmp_path, monkeypatch, d, "cold")
    for p in _entries(d):
        assert f"|{cache.source_hash()}|" in json.loads(p.read_text())["key"]
    searched = []
    real = ldm._search_tiles
    monkeypatch.setattr(ldm, "_search_tiles", lambda s: searched.append(s.k.name) or real(s))
    monkeypatch.setattr(cache, "_SOURCE", ["0" * 64])       # as if ldm.py had been edited
    _compile(tmp_path, monkeypatch, d, "edited")
    assert len(searched) >= 3
