"""compiler.write_outputs: all files or none, each file's sha256 for the lock, and a file that
already holds the same bytes is left as it is (an unchanged weights blob is not rewritten)."""
import hashlib
import os

import numpy as np
import pytest

from swbuild.backends.blob import WeightsBlob
from swbuild.driver.compiler import write_outputs


def blob(values):
    b = WeightsBlob(64)
    b.add(np.asarray(values, np.float32).reshape(2, -1).T, "float32")     # strided: copied as written
    b.add(np.arange(5, dtype=np.int64), "int32")
    return b


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_digests_are_the_files_and_unchanged_files_stay(tmp_path):
    files = {"a.c": b"int a;\n", "w.bin": blob(range(8))}
    digests = write_outputs(tmp_path, files)
    assert digests == {n: sha(tmp_path / n) for n in files}
    assert (tmp_path / "w.bin").read_bytes() == bytes(files["w.bin"])
    before = {n: os.stat(tmp_path / n) for n in files}
    again = write_outputs(tmp_path, {"a.c": b"int b;\n", "w.bin": blob(range(8))})    # same size, other bytes
    after = {n: os.stat(tmp_path / n) for n in files}
    assert (tmp_path / "a.c").read_bytes() == b"int b;\n" and after["a.c"].st_ino != before["a.c"].st_ino
    assert after["w.bin"].st_ino == before["w.bin"].st_ino                                # not rewritten
    assert after["w.bin"].st_mtime_ns == before["w.bin"].st_mtime_ns
    assert again == {n: sha(tmp_path / n) for n in files}
    third = write_outputs(tmp_path, {"a.c": b"int b;\n", "w.bin": blob(range(1, 9))})   # the blob changed
    assert (tmp_path / "w.bin").read_bytes() == bytes(blob(range(1, 9)))
    assert third["w.bin"] == sha(tmp_path / "w.bin") != again["w.bin"]
    assert sorted(os.listdir(tmp_path)) == ["a.c", "w.bin"]                              # no stage left


def test_a_symlink_in_the_way_is_replaced(tmp_path):
    (tmp_path / "real.c").write_bytes(b"int a;\n")
    (tmp_path / "a.c").symlink_to(tmp_path / "real.c")
    write_outputs(tmp_path, {"a.c": b"int a;\n"})
    assert not (tmp_path / "a.c").is_symlink() and (tmp_path / "a.c").read_bytes() == b"int a;\n"


def test_nothing_is_replaced_when_a_file_fails(tmp_path):
    class Broken:
        def __len__(self):
            return 4

        def write_to(self, f):
            f.write(b"ab")
            raise OSError("disk full")
    (tmp_path / "a.c").write_bytes(b"old\n")
    with pytest.raises(OSError):
        write_outputs(tmp_path, {"a.c": b"new\n", "w.bin": Broken()})
    assert (tmp_path / "a.c").read_bytes() == b"old\n"
    assert sorted(os.listdir(tmp_path)) == ["a.c"]
