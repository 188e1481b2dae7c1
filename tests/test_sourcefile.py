"""Tests for dali_migrate.sourcefile: reading, atomic writing and discovery of files."""

from __future__ import annotations

import codecs
import os
import pickle
import re
import stat
from pathlib import Path

import pytest

from dali_migrate import sourcefile
from dali_migrate.sourcefile import (
    DEFAULT_EXCLUDES,
    SourceError,
    SourceFile,
    iter_python_files,
    mentions_dali,
    read_source,
    write_source,
)

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
needs_symlinks = pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks")


def _leftover_temps(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]


def _assert_one_line(err: SourceError, path: Path) -> None:
    msg = str(err)
    assert "\n" not in msg and "\r" not in msg
    assert len(msg.splitlines()) == 1
    assert msg.startswith(f"{path}: ")
    assert err.path == str(path)
    assert msg == f"{err.path}: {err.reason}"


# --------------------------------------------------------------------------- read / write


def test_utf8_round_trip(tmp_path: Path) -> None:
    p = tmp_path / "m.py"
    p.write_bytes("x = 'héllo ✓'\n".encode())
    sf = read_source(p)
    assert sf.text == "x = 'héllo ✓'\n"
    assert sf.encoding == "utf-8"
    assert sf.raw == p.read_bytes()
    assert sf.path == p
    write_source(sf, sf.text.replace("héllo", "wörld"))
    assert p.read_bytes() == "x = 'wörld ✓'\n".encode()
    assert _leftover_temps(tmp_path) == []


def test_crlf_kept(tmp_path: Path) -> None:
    p = tmp_path / "crlf.py"
    p.write_bytes(b"import a\r\nimport b\r\nmixed = 1\n")
    sf = read_source(p)
    assert sf.text == "import a\r\nimport b\r\nmixed = 1\n"
    write_source(sf, sf.text.replace("import b", "import c"))
    assert p.read_bytes() == b"import a\r\nimport c\r\nmixed = 1\n"


def test_utf8_bom_survives(tmp_path: Path) -> None:
    p = tmp_path / "bom.py"
    p.write_bytes(codecs.BOM_UTF8 + "s = 'é'\n".encode())
    sf = read_source(p)
    assert sf.encoding == "utf-8-sig"
    assert sf.text == "s = 'é'\n"  # BOM not part of the text
    write_source(sf, "s = 'è'\n")
    assert p.read_bytes() == codecs.BOM_UTF8 + "s = 'è'\n".encode()


def test_latin1_cookie_round_trip(tmp_path: Path) -> None:
    p = tmp_path / "latin.py"
    raw = b"# -*- coding: latin-1 -*-\ns = '\xe9t\xe9'\n"
    p.write_bytes(raw)
    sf = read_source(p)
    assert codecs.lookup(sf.encoding).name == codecs.lookup("latin-1").name
    assert sf.text == "# -*- coding: latin-1 -*-\ns = 'été'\n"
    write_source(sf, sf.text + "t = 'ü'\n")
    assert p.read_bytes() == raw + b"t = '\xfc'\n"


def test_invalid_utf8_without_cookie(tmp_path: Path) -> None:
    p = tmp_path / "bad.py"
    p.write_bytes(b"a = 1\nb = 2\ns = '\xff'\n")
    with pytest.raises(SourceError) as ei:
        read_source(p)
    _assert_one_line(ei.value, p)
    assert "not valid UTF-8" in ei.value.reason
    assert "line 3" in ei.value.reason


def test_invalid_utf8_on_first_line(tmp_path: Path) -> None:
    # tokenize.detect_encoding itself chokes here; still a clean SourceError.
    p = tmp_path / "bad1.py"
    p.write_bytes(b"s = '\xe9'\n")
    with pytest.raises(SourceError) as ei:
        read_source(p)
    _assert_one_line(ei.value, p)
    assert "not valid UTF-8" in ei.value.reason


def test_cannot_decode_in_cookie_encoding(tmp_path: Path) -> None:
    p = tmp_path / "ascii.py"
    p.write_bytes(b"# coding: ascii\ns = 1\nt = '\xe9'\n")
    with pytest.raises(SourceError) as ei:
        read_source(p)
    _assert_one_line(ei.value, p)
    assert "cannot decode as ascii" in ei.value.reason


def test_unknown_encoding_cookie(tmp_path: Path) -> None:
    p = tmp_path / "unk.py"
    p.write_bytes(b"# -*- coding: no-such-codec -*-\nx = 1\n")
    with pytest.raises(SourceError) as ei:
        read_source(p)
    _assert_one_line(ei.value, p)
    assert "unknown encoding" in ei.value.reason


@pytest.mark.parametrize(
    "cookie, reason",
    [
        ("undefined", "cannot decode as undefined"),
        ("punycode", "cannot decode as punycode"),
        ("unicode_escape", "does not give back the bytes it decoded"),
        ("utf-16", "cannot decode as utf-16|does not give back the bytes it decoded"),
        ("utf-32", "cannot decode as utf-32"),
    ],
)
def test_cookie_of_a_codec_that_cannot_round_trip_is_one_short_line(
    tmp_path: Path, cookie, reason
) -> None:
    """CPython accepts these cookies; reading such a file either fails inside the codec or
    gives text that is not written back as the same bytes (unicode_escape wrote the whole
    file as one physical line with literal backslash-n)."""
    p = tmp_path / "odd.py"
    body = "from nvidia.dali import fn\nX = fn.flip(1)\n\n"
    p.write_bytes(f"# -*- coding: {cookie} -*-\n{body}".encode())
    with pytest.raises(SourceError) as ei:
        read_source(p)
    _assert_one_line(ei.value, p)
    assert re.search(reason, ei.value.reason), ei.value.reason
    assert len(str(ei.value)) < len(str(p)) + 160


def test_write_in_a_codec_that_fails_its_own_way_is_one_line(tmp_path: Path) -> None:
    """idna reads plain ASCII back, but cannot write a line longer than 63 characters."""
    p = tmp_path / "idna.py"
    p.write_bytes(b"# -*- coding: idna -*-\nx = 1\n")
    sf = read_source(p)
    with pytest.raises(SourceError) as ei:
        write_source(sf, sf.text + "y = " + "1" * 80 + "\n")
    _assert_one_line(ei.value, p)
    assert ei.value.reason.startswith("cannot encode as idna (")
    assert p.read_bytes() == b"# -*- coding: idna -*-\nx = 1\n"


def _lossy_codec(name: str):
    """A codec that writes text upper-cased and reads it as it is."""
    if name != "dmtest_lossy":
        return None
    utf8 = codecs.lookup("utf-8")
    return codecs.CodecInfo(
        lambda text, errors="strict": utf8.encode(text.upper(), errors),
        utf8.decode,
        name="dmtest-lossy",
    )


def test_write_refuses_text_its_codec_would_not_read_back(tmp_path: Path) -> None:
    codecs.register(_lossy_codec)
    try:
        p = tmp_path / "ok.py"
        p.write_bytes(b"X = 1\n")
        sf = SourceFile(path=p, text="X = 1\n", encoding="dmtest_lossy", raw=b"X = 1\n")
        with pytest.raises(SourceError) as ei:
            write_source(sf, "x = 2\n")
        assert "would not read back" in ei.value.reason
        assert p.read_bytes() == b"X = 1\n"
    finally:
        codecs.unregister(_lossy_codec)


def test_binary_file(tmp_path: Path) -> None:
    p = tmp_path / "bin.py"
    p.write_bytes(b"\x7fELF\x00\x01\x02")
    with pytest.raises(SourceError) as ei:
        read_source(p)
    _assert_one_line(ei.value, p)
    assert "binary file" in ei.value.reason


@pytest.mark.skipif(IS_ROOT, reason="root bypasses file permission checks")
def test_unreadable_file(tmp_path: Path) -> None:
    p = tmp_path / "secret.py"
    p.write_text("x = 1\n")
    p.chmod(0)
    try:
        with pytest.raises(SourceError) as ei:
            read_source(p)
        _assert_one_line(ei.value, p)
        assert "permission denied" in ei.value.reason
    finally:
        p.chmod(0o644)


@needs_symlinks
def test_dangling_symlink(tmp_path: Path) -> None:
    link = tmp_path / "link.py"
    link.symlink_to(tmp_path / "missing.py")
    with pytest.raises(SourceError) as ei:
        read_source(link)
    _assert_one_line(ei.value, link)
    assert ei.value.reason == "dangling symlink"


def test_vanished_file(tmp_path: Path) -> None:
    p = tmp_path / "gone.py"
    with pytest.raises(SourceError) as ei:
        read_source(p)
    _assert_one_line(ei.value, p)
    assert ei.value.reason == "file vanished"


def test_directory_is_an_error(tmp_path: Path) -> None:
    d = tmp_path / "pkg.py"
    d.mkdir()
    with pytest.raises(SourceError) as ei:
        read_source(d)
    _assert_one_line(ei.value, d)
    assert "directory" in ei.value.reason


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_fifo_is_an_error_and_does_not_hang(tmp_path: Path) -> None:
    f = tmp_path / "pipe.py"
    os.mkfifo(f)
    with pytest.raises(SourceError) as ei:
        read_source(f)
    assert "not a regular file" in ei.value.reason


def test_error_message_is_one_line_even_with_newlines() -> None:
    err = SourceError("we\nird.py", "bad\r\nthing")
    assert len(str(err).splitlines()) == 1
    assert err.path == "we\nird.py" and err.reason == "bad\r\nthing"
    again = pickle.loads(pickle.dumps(err))
    assert (again.path, again.reason) == (err.path, err.reason)


def test_write_keeps_mode_bits(tmp_path: Path) -> None:
    p = tmp_path / "script.py"
    p.write_text("#!/usr/bin/env python\nx = 1\n")
    p.chmod(0o755)
    sf = read_source(p)
    write_source(sf, sf.text.replace("1", "2"))
    assert stat.S_IMODE(p.stat().st_mode) == 0o755
    assert p.read_text() == "#!/usr/bin/env python\nx = 2\n"


def test_write_is_atomic_on_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "m.py"
    original = b"import nvidia.dali as dali\n"
    p.write_bytes(original)
    sf = read_source(p)

    def boom(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(SourceError) as ei:
        write_source(sf, "completely different\n")
    _assert_one_line(ei.value, p)
    assert p.read_bytes() == original
    assert sorted(x.name for x in tmp_path.iterdir()) == ["m.py"]


def test_write_failure_mid_write_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = tmp_path / "m.py"
    p.write_bytes(b"x = 1\n")
    sf = read_source(p)

    def boom(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(SourceError):
        write_source(sf, "x = 2\n")
    assert p.read_bytes() == b"x = 1\n"
    assert _leftover_temps(tmp_path) == []


def test_write_interrupted_leaves_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "m.py"
    p.write_bytes(b"x = 1\n")
    sf = read_source(p)

    def interrupt(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupt)
    with pytest.raises(KeyboardInterrupt):
        write_source(sf, "x = 2\n")
    assert p.read_bytes() == b"x = 1\n"
    assert _leftover_temps(tmp_path) == []


def test_temp_file_is_in_same_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "m.py"
    p.write_bytes(b"x = 1\n")
    sf = read_source(p)
    seen: list[tuple[str, str]] = []
    real_replace = os.replace

    def spy(src: str, dst: str) -> None:
        seen.append((os.fspath(src), os.fspath(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    write_source(sf, "x = 2\n")
    ((src, dst),) = seen
    assert Path(src).parent == tmp_path
    assert Path(src).name.startswith(".m.py.") and src.endswith(".tmp")
    assert Path(dst) == p


@needs_symlinks
def test_write_through_symlink_keeps_link(tmp_path: Path) -> None:
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    target = real_dir / "target.py"
    target.write_text("x = 1\n")
    target.chmod(0o640)
    link = tmp_path / "link.py"
    link.symlink_to(target)
    sf = read_source(link)
    write_source(sf, "x = 2\n")
    assert link.is_symlink()
    assert os.readlink(link) == str(target)
    assert target.read_text() == "x = 2\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert _leftover_temps(tmp_path) == [] and _leftover_temps(real_dir) == []


def test_encoding_failure_leaves_file_untouched(tmp_path: Path) -> None:
    p = tmp_path / "latin.py"
    raw = b"# -*- coding: latin-1 -*-\ns = '\xe9'\n"
    p.write_bytes(raw)
    sf = read_source(p)
    with pytest.raises(SourceError) as ei:
        write_source(sf, sf.text + "t = '\u2713'\n")
    _assert_one_line(ei.value, p)
    assert "U+2713" in ei.value.reason and "line 3" in ei.value.reason
    assert p.read_bytes() == raw
    assert _leftover_temps(tmp_path) == []


def test_write_refuses_file_changed_on_disk(tmp_path: Path) -> None:
    p = tmp_path / "m.py"
    p.write_text("x = 1\n")
    sf = read_source(p)
    p.write_text("x = 1  # edited by the user meanwhile\n")
    with pytest.raises(SourceError) as ei:
        write_source(sf, "x = 2\n")
    _assert_one_line(ei.value, p)
    assert p.read_text() == "x = 1  # edited by the user meanwhile\n"


def test_write_vanished_file(tmp_path: Path) -> None:
    p = tmp_path / "m.py"
    p.write_text("x = 1\n")
    sf = read_source(p)
    p.unlink()
    with pytest.raises(SourceError) as ei:
        write_source(sf, "x = 2\n")
    assert ei.value.reason == "file vanished"
    assert not p.exists()


def test_write_unchanged_is_a_no_op(tmp_path: Path) -> None:
    p = tmp_path / "m.py"
    p.write_text("x = 1\n")
    os.utime(p, (1_000_000, 1_000_000))
    sf = read_source(p)
    write_source(sf, sf.text)
    assert p.stat().st_mtime == 1_000_000


def test_sourcefile_is_a_dataclass() -> None:
    sf = SourceFile(path=Path("a.py"), text="x", encoding="utf-8", raw=b"x")
    assert sf == SourceFile(Path("a.py"), "x", "utf-8", b"x")


# --------------------------------------------------------------------------- prefilter


@pytest.mark.parametrize(
    "raw",
    [
        b"import nvidia.dali as dali\n",
        b"from nvidia import dali\n",
        b"from nvidia.dali import pipeline_def, fn\n",
        b"import nvidia.dali.fn as fn",
    ],
)
def test_mentions_dali_true(raw: bytes) -> None:
    assert mentions_dali(raw) is True


@pytest.mark.parametrize("raw", [b"", b"import torch\n", b"print('hello')\n"])
def test_mentions_dali_false(raw: bytes) -> None:
    assert mentions_dali(raw) is False


# --------------------------------------------------------------------------- discovery


def _touch(root: Path, *rels: str) -> None:
    for rel in rels:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("x = 1\n")


def _rel(paths: list[Path], root: Path) -> list[str]:
    return [p.relative_to(root).as_posix() for p in paths]


def test_iter_recursive_sorted(tmp_path: Path) -> None:
    _touch(tmp_path, "b.py", "a.py", "pkg/z.py", "pkg/sub/y.py", "pkg/m.py", "c.txt", "stub.pyi")
    found = list(iter_python_files([tmp_path]))
    assert _rel(found, tmp_path) == ["a.py", "b.py", "pkg/m.py", "pkg/sub/y.py", "pkg/z.py"]
    assert all(p.is_relative_to(tmp_path) for p in found)


def test_iter_relative_root_yields_relative_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _touch(tmp_path, "src/a.py")
    monkeypatch.chdir(tmp_path)
    assert list(iter_python_files(["src"])) == [Path("src/a.py")]


def test_iter_skips_default_excludes_hidden_and_venvs(tmp_path: Path) -> None:
    _touch(
        tmp_path,
        "keep.py",
        ".git/hooks/h.py",
        ".venv/lib/v.py",
        "myenv/lib/site.py",
        "__pycache__/c.py",
        ".hidden/h.py",
        "node_modules/pkg/n.py",
        ".tox/t.py",
        "build/lib/b.py",
        "dist/d.py",
        "lib/python3.11/site-packages/s.py",
        "pkg.egg-info/e.py",
        "pkg/keep2.py",
    )
    (tmp_path / "myenv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert _rel(list(iter_python_files([tmp_path])), tmp_path) == ["keep.py", "pkg/keep2.py"]
    for name in (".git", "__pycache__", "node_modules", "site-packages", "build", "dist"):
        assert name in DEFAULT_EXCLUDES


def test_iter_hidden_file_is_still_a_file(tmp_path: Path) -> None:
    _touch(tmp_path, ".config.py")
    assert _rel(list(iter_python_files([tmp_path])), tmp_path) == [".config.py"]


def test_iter_exclude_globs(tmp_path: Path) -> None:
    _touch(
        tmp_path,
        "main.py",
        "tests/test_a.py",
        "tests/deep/test_b.py",
        "proto/msg_pb2.py",
        "proto/msg.py",
        "legacy/old.py",
        "pkg/legacy/old2.py",
    )
    found = iter_python_files([tmp_path], exclude=["tests/*", "*_pb2.py", "legacy"])
    assert _rel(list(found), tmp_path) == ["main.py", "proto/msg.py"]


def test_iter_exclude_trailing_slash_and_dot_prefix(tmp_path: Path) -> None:
    _touch(tmp_path, "a.py", "gen/x.py", "other/y.py")
    found = iter_python_files([tmp_path], exclude=["gen/", "./other"])
    assert _rel(list(found), tmp_path) == ["a.py"]


def test_iter_explicit_file_yielded_as_given(tmp_path: Path) -> None:
    _touch(tmp_path, "script", "stub.pyi", "m.py")
    given = [tmp_path / "script", tmp_path / "stub.pyi", str(tmp_path / "m.py")]
    assert list(iter_python_files(given)) == [
        tmp_path / "script",
        tmp_path / "stub.pyi",
        tmp_path / "m.py",
    ]


def test_iter_explicit_file_not_subject_to_excludes(tmp_path: Path) -> None:
    _touch(tmp_path, "gen_pb2.py")
    assert list(iter_python_files([tmp_path / "gen_pb2.py"], exclude=["*_pb2.py"])) == [
        tmp_path / "gen_pb2.py"
    ]


def test_iter_missing_path_raises(tmp_path: Path) -> None:
    _touch(tmp_path, "a.py")
    with pytest.raises(FileNotFoundError):
        list(iter_python_files([tmp_path / "a.py", tmp_path / "nope"]))


def test_iter_overlapping_paths_yield_once(tmp_path: Path) -> None:
    _touch(tmp_path, "a.py", "pkg/b.py")
    found = list(
        iter_python_files([tmp_path, tmp_path / "pkg", tmp_path / "pkg" / "b.py", tmp_path])
    )
    assert _rel(found, tmp_path) == ["a.py", "pkg/b.py"]


@needs_symlinks
def test_iter_does_not_follow_symlinked_dirs(tmp_path: Path) -> None:
    _touch(tmp_path, "pkg/a.py")
    (tmp_path / "pkg" / "loop").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "alias").symlink_to(tmp_path / "pkg", target_is_directory=True)
    assert _rel(list(iter_python_files([tmp_path])), tmp_path) == ["pkg/a.py"]


@needs_symlinks
def test_iter_yields_symlinked_files_including_dangling(tmp_path: Path) -> None:
    _touch(tmp_path, "outside/real.py")
    root = tmp_path / "root"
    root.mkdir()
    (root / "link.py").symlink_to(tmp_path / "outside" / "real.py")
    (root / "dangling.py").symlink_to(tmp_path / "nowhere.py")
    found = list(iter_python_files([root]))
    assert _rel(found, root) == ["dangling.py", "link.py"]
    with pytest.raises(SourceError, match="dangling symlink"):
        read_source(root / "dangling.py")


@needs_symlinks
def test_iter_explicit_symlinked_root_is_walked(tmp_path: Path) -> None:
    _touch(tmp_path, "real/a.py")
    (tmp_path / "alias").symlink_to(tmp_path / "real", target_is_directory=True)
    assert list(iter_python_files([tmp_path / "alias"])) == [tmp_path / "alias" / "a.py"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_iter_skips_fifos(tmp_path: Path) -> None:
    _touch(tmp_path, "a.py")
    os.mkfifo(tmp_path / "pipe.py")
    assert _rel(list(iter_python_files([tmp_path])), tmp_path) == ["a.py"]


def test_iter_handles_deep_trees(tmp_path: Path) -> None:
    deep = tmp_path
    for _ in range(60):
        deep = deep / "d"
    _touch(deep, "x.py")
    assert list(iter_python_files([tmp_path])) == [deep / "x.py"]


def test_module_exports() -> None:
    assert set(sourcefile.__all__) >= {
        "SourceError",
        "SourceFile",
        "read_source",
        "write_source",
        "mentions_dali",
        "DEFAULT_EXCLUDES",
        "iter_python_files",
    }


@pytest.mark.skipif(not IS_ROOT, reason="only root can give a file to another owner")
def test_write_keeps_owner_when_root_rewrites(tmp_path: Path) -> None:
    p = tmp_path / "theirs.py"
    p.write_text("x = 1\n")
    os.chown(p, 65534, 65534)
    sf = read_source(p)
    write_source(sf, "x = 2\n")
    assert (p.stat().st_uid, p.stat().st_gid) == (65534, 65534)
    assert p.read_text() == "x = 2\n"


def test_read_only_file_is_not_written(tmp_path: Path) -> None:
    """Mode 0444: refused as editors and formatters refuse it (root included), though the
    directory would allow the rename."""
    p = tmp_path / "ro.py"
    p.write_text("x = 1\n")
    p.chmod(0o444)
    sf = read_source(p)
    with pytest.raises(SourceError) as ei:
        write_source(sf, "x = 2\n")
    assert str(ei.value) == f"{p}: read-only file (not written)"
    assert p.read_text() == "x = 1\n" and stat.S_IMODE(p.stat().st_mode) == 0o444
    assert _leftover_temps(tmp_path) == []


@pytest.mark.skipif(not hasattr(os, "chown"), reason="no file owners on this platform")
def test_file_whose_owner_cannot_be_kept_is_not_written(tmp_path: Path, monkeypatch) -> None:
    """Another user's file in a directory we may write: the rename would hand it to us."""
    p = tmp_path / "theirs.py"
    p.write_text("x = 1\n")
    p.chmod(0o666)
    owner = (p.stat().st_uid + 1, p.stat().st_gid + 1)
    real_stat = os.stat

    def their_file(name, *args, **kwargs):  # the file is someone else's; our temp file is ours
        st = real_stat(name, *args, **kwargs)
        if Path(name) == p:
            fields = (st.st_mode, st.st_ino, st.st_dev, st.st_nlink, *owner, *st[6:10])
            return os.stat_result(fields)
        return st

    def no_privilege(name, uid, gid):
        raise PermissionError(1, "Operation not permitted")

    sf = read_source(p)
    monkeypatch.setattr(sourcefile.os, "stat", their_file)
    monkeypatch.setattr(sourcefile.os, "chown", no_privilege)
    with pytest.raises(SourceError) as ei:
        write_source(sf, "x = 2\n")
    assert ei.value.reason == (
        "owned by another user: replacing it would change its owner (not written)"
    )
    monkeypatch.undo()
    assert p.read_text() == "x = 1\n"
    assert _leftover_temps(tmp_path) == []


def test_edit_saved_while_the_temp_file_is_written_is_not_lost(tmp_path: Path, monkeypatch) -> None:
    """An editor saving between the first "changed on disk" check and the rename: the file is
    looked at again right before ``os.replace``. The save happens at a fixed point (when the
    temporary file is synced), not at a random moment."""
    p = tmp_path / "m.py"
    p.write_text("x = 1\n")
    sf = read_source(p)
    real_fsync = os.fsync
    saved = []

    def editor_saves(fd: int) -> None:
        real_fsync(fd)
        if not saved:
            saved.append(True)
            p.write_text("x = 1  # saved by the user\n")

    monkeypatch.setattr(sourcefile.os, "fsync", editor_saves)
    with pytest.raises(SourceError) as ei:
        write_source(sf, "x = 2\n")
    monkeypatch.undo()
    assert saved and ei.value.reason == "file changed on disk since it was read; not overwritten"
    assert p.read_text() == "x = 1  # saved by the user\n"
    assert _leftover_temps(tmp_path) == []


def test_edit_keeping_size_and_content_but_not_the_inode_is_seen(
    tmp_path: Path, monkeypatch
) -> None:
    """An editor that saves by rename (a new inode) the very same bytes: still a save."""
    p = tmp_path / "m.py"
    p.write_text("x = 1\n")
    sf = read_source(p)
    real_fsync = os.fsync

    def editor_saves(fd: int) -> None:
        real_fsync(fd)
        if not (tmp_path / "swap").exists():
            (tmp_path / "swap").write_text("x = 1\n")
            os.replace(tmp_path / "swap", p)

    monkeypatch.setattr(sourcefile.os, "fsync", editor_saves)
    with pytest.raises(SourceError):
        write_source(sf, "x = 2\n")
    monkeypatch.undo()
    assert p.read_text() == "x = 1\n"


def test_prefilter_sees_dali_imported_through_a_wrapper() -> None:
    """``dali = try_import_dali()`` names neither ``nvidia`` nor an import statement: the file
    still reaches the rules (DM206 marks it)."""
    from dali_migrate.sourcefile import mentions_dali

    assert mentions_dali(b"from .utils import try_import_dali\ndali = try_import_dali()\n")
    assert mentions_dali(b"import nvidia.dali.fn as fn\n")
    assert not mentions_dali(b"modality = load_dalilike()\n")
