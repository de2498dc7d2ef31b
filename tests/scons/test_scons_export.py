"""The SCons `export` alias: the archive of `swbuild export`, from the sources SCons generated
(byte for byte the same as the command's), up to date on the next run."""
import tarfile

from scons_project import make_project, run_scons
from swbuild import cli


def test_export_alias(tmp_path):
    p = make_project(tmp_path / "proj", fake=False)
    r = run_scons(p, "-Q", "target=sunway-emu", "model=tiny", "export")
    assert r.returncode == 0, r.stdout + r.stderr
    tar = p / "build" / "sunway-emu" / "tiny" / "tiny-sunway-emu.tar"
    assert "EXPORT " in r.stdout and tar.is_file()
    assert not list(tar.parent.glob("*.o"))               # exporting compiles nothing
    with tarfile.open(tar) as t:
        names = t.getnames()
    assert "tiny/Makefile" in names and "tiny/metadata.json" in names and "tiny/runtime/include/athread.h" in names
    # the command writes the same bytes from the same recipe
    assert cli.main(["export", "--recipe", str(p / "recipes" / "tiny.yaml"), "--target", "sunway-emu",
                     "-o", str(tmp_path / "cli.tar")]) == 0
    assert (tmp_path / "cli.tar").read_bytes() == tar.read_bytes()
    r = run_scons(p, "-q", "target=sunway-emu", "model=tiny", "export")
    assert r.returncode == 0, r.stdout + r.stderr         # up to date
