"""The zoo's model cache: a hit gives the same model, a damaged entry is a miss."""
import numpy as np

from swbuild import zoo
from swbuild.zoo import cache


def test_hit_gives_the_generated_model_and_maps_its_weights(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV, str(tmp_path))
    want = zoo.build("dcgan", batch=2, seed=7).SerializeToString()
    first = zoo.build_model("dcgan", batch=2, seed=7)           # generated, then stored
    assert first.to_proto().SerializeToString() == want
    [entry] = [p for p in tmp_path.iterdir() if not p.name.startswith(".")]
    assert sorted(p.name for p in entry.iterdir()) == ["index.json", "model.onnx", "weights.bin"]
    hit = cache.load("dcgan", 2, 7)
    assert hit is not None and list(hit.arrays) == list(first.arrays)
    assert all(isinstance(a, np.memmap) for a in hit.arrays.values() if a.size)
    assert zoo.build_model("dcgan", batch=2, seed=7).to_proto().SerializeToString() == want
    assert cache.load("dcgan", 1, 7) is None and cache.load("dcgan", 2, 8) is None


def test_truncated_or_foreign_entry_is_a_miss_and_rewritten(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV, str(tmp_path))
    want = zoo.build("dcgan").SerializeToString()
    zoo.build_model("dcgan")
    [entry] = list(tmp_path.iterdir())
    w = entry / "weights.bin"
    w.write_bytes(w.read_bytes()[:-4])
    assert cache.load("dcgan", 1, 0) is None
    assert zoo.build_model("dcgan").to_proto().SerializeToString() == want    # regenerated
    assert cache.load("dcgan", 1, 0) is not None
    (entry / "index.json").write_text('{"key": "other"}')
    assert cache.load("dcgan", 1, 0) is None


def test_off_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV, "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    zoo.build_model("dcgan")
    assert not any(tmp_path.iterdir())


def test_unset_is_off_so_zoo_weights_are_not_kept_twice(tmp_path, monkeypatch):
    """A build keeps its own weights file: the cache is a second copy only when asked for."""
    monkeypatch.delenv(cache.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() is None
    zoo.build_model("dcgan")
    assert not any(tmp_path.iterdir())
    monkeypatch.setenv(cache.ENV, "on")
    assert cache.cache_dir() == tmp_path / "swbuild" / "zoo"
    zoo.build_model("dcgan")
    assert cache.load("dcgan", 1, 0) is not None
