"""Reading, writing and discovering the Python files dali-migrate rewrites.

The one rule of this module: a user's file is never corrupted or lost. Reads keep the bytes,
the encoding (PEP 263 cookie, UTF-8 BOM) and the newlines exactly; writes are atomic (temp file
in the same directory, fsync, ``os.replace``), keep the mode bits and owner, write through
symlinks, and refuse to clobber a file that changed on disk since it was read. Every problem
with one file is a :class:`SourceError` whose message is a single ``'<path>: <reason>'`` line.
"""

from __future__ import annotations

import codecs
import errno
import fnmatch
import io
import os
import re
import stat
import tempfile
import threading
import tokenize
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DEFAULT_EXCLUDES",
    "SourceError",
    "SourceFile",
    "iter_python_files",
    "mentions_dali",
    "read_bytes",
    "read_source",
    "write_source",
]

# Every character str.splitlines() breaks on, escaped so that a message stays on one line.
_LINE_BREAKS = {ord(c): repr(c)[1:-1] for c in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"}


def _one_line(text: str) -> str:
    return text.translate(_LINE_BREAKS)


class SourceError(Exception):
    """A file that cannot be processed. str(e) is ONE line: '<path>: <reason>'."""

    path: str
    reason: str

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        self.path = os.fspath(path)
        self.reason = reason
        super().__init__(self.path, reason)

    def __str__(self) -> str:
        return _one_line(f"{self.path}: {self.reason}")


@dataclass
class SourceFile:
    """A decoded source file, with what is needed to write it back byte-faithfully."""

    path: Path
    text: str
    encoding: str
    raw: bytes


def _os_reason(exc: OSError) -> str:
    """A short lower-case reason for an OSError, without the path (the caller adds it)."""
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, IsADirectoryError):
        return "is a directory"
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    return (exc.strerror or str(exc) or type(exc).__name__).lower()


def _missing_reason(path: Path) -> str:
    return "dangling symlink" if os.path.islink(path) else "file vanished"


def _position(data: bytes | str, index: int) -> str:
    nl: bytes | str = b"\n" if isinstance(data, bytes) else "\n"
    line = data.count(nl, 0, index) + 1  # type: ignore[arg-type]
    column = index - (data.rfind(nl, 0, index) + 1) + 1  # type: ignore[arg-type]
    return f"line {line}, column {column}"


def _decode_reason(raw: bytes, encoding: str, exc: UnicodeDecodeError) -> str:
    bad = raw[exc.start : exc.start + 1]
    where = _position(raw, exc.start)
    if codecs.lookup(encoding).name in ("utf-8", "utf-8-sig"):
        return f"not valid UTF-8 (invalid byte 0x{bad.hex()} at {where})"
    return f"cannot decode as {encoding} (invalid byte 0x{bad.hex()} at {where})"


def read_bytes(path: Path) -> bytes:
    """The bytes of ``path``, a regular file; :class:`SourceError` for anything else (a FIFO,
    a device or a directory is never opened for reading: that could block)."""
    path = Path(path)
    try:
        # O_NONBLOCK: opening a FIFO named *.py must not hang; no effect on regular files.
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        flags |= getattr(os, "O_BINARY", 0)
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise SourceError(path, _missing_reason(path)) from None
    except NotADirectoryError:
        raise SourceError(path, "file vanished (a parent is not a directory)") from None
    except OSError as exc:
        raise SourceError(path, _os_reason(exc)) from None
    try:
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if stat.S_ISDIR(st.st_mode):
                raise SourceError(path, "is a directory")
            if not stat.S_ISREG(st.st_mode):
                raise SourceError(path, "not a regular file")
            raw = fh.read()
    except OSError as exc:
        raise SourceError(path, _os_reason(exc)) from None
    return raw


def read_source(path: Path) -> SourceFile:
    """Read and decode ``path``; raise :class:`SourceError` if it cannot be processed."""
    path = Path(path)
    raw = read_bytes(path)
    if b"\0" in raw:
        raise SourceError(path, "binary file (contains NUL bytes)")

    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        msg = str(exc.msg if getattr(exc, "msg", None) else exc)
        if "unknown encoding" in msg:
            raise SourceError(path, f"unknown encoding cookie ({msg})") from None
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as dexc:
            raise SourceError(path, _decode_reason(raw, "utf-8", dexc)) from None
        raise SourceError(path, f"bad encoding declaration ({msg})") from None

    try:
        text = raw.decode(encoding)  # bytes.decode keeps CRLF / CR exactly
    except UnicodeDecodeError as exc:
        raise SourceError(path, _decode_reason(raw, encoding, exc)) from None
    except LookupError as exc:  # e.g. a cookie naming a non-text codec such as rot13
        raise SourceError(path, f"unknown encoding cookie ({exc})") from None
    except Exception as exc:
        raise SourceError(path, f"cannot decode as {encoding} ({_short(exc)})") from None
    if not _round_trips(text, encoding, raw):
        # unicode_escape, punycode, idna, utf-16 under an ASCII cookie...: what would be written
        # back is not what was read
        reason = f"the {encoding} codec does not give back the bytes it decoded (not processed)"
        raise SourceError(path, reason)
    return SourceFile(path=path, text=text, encoding=encoding, raw=raw)


def _round_trips_back(data: bytes, encoding: str, text: str) -> bool:
    try:
        return data.decode(encoding) == text
    except Exception:
        return False


def _round_trips(text: str, encoding: str, raw: bytes) -> bool:
    try:
        return text.encode(encoding) == raw
    except Exception:
        return False


def _short(exc: BaseException, limit: int = 120) -> str:
    """An exception's message for a one-line reason (a codec can quote a whole garbled line)."""
    text = _one_line(str(exc) or type(exc).__name__)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fsync_dir(directory: Path) -> None:
    """Best effort: make the rename itself durable."""
    try:
        dfd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


#: held from the creation of a temporary file to its rename: a process that must end at once
#: (a worker whose parent died) takes it first, so that no write is left half done
WRITE_LOCK = threading.Lock()


def write_source(sf: SourceFile, new_text: str) -> None:
    """Atomically replace ``sf.path`` with ``new_text`` encoded as ``sf.encoding``.

    Raises :class:`SourceError` (leaving the file untouched) if the text cannot be encoded,
    the file vanished or changed on disk since it was read, or any step of the write fails.
    """
    path = Path(sf.path)
    try:
        data = new_text.encode(sf.encoding)  # 'utf-8-sig' re-adds the BOM
    except UnicodeEncodeError as exc:
        char = new_text[exc.start]
        raise SourceError(
            path,
            f"cannot encode as {sf.encoding}: character U+{ord(char):04X} "
            f"at {_position(new_text, exc.start)}",
        ) from None
    except LookupError as exc:
        raise SourceError(path, f"unknown encoding ({exc})") from None
    except Exception as exc:
        raise SourceError(path, f"cannot encode as {sf.encoding} ({_short(exc)})") from None
    if not _round_trips_back(data, sf.encoding, new_text):
        reason = f"the {sf.encoding} codec would not read back what it wrote (not written)"
        raise SourceError(path, reason)

    # Write through a symlink to its target, so the link stays a link.
    target = path
    if os.path.islink(path):
        try:
            target = path.resolve(strict=True)
        except FileNotFoundError:
            raise SourceError(path, "dangling symlink") from None
        except (OSError, RuntimeError):
            raise SourceError(path, "symlink loop") from None

    try:
        st = os.stat(target)
        if not stat.S_ISREG(st.st_mode):
            raise SourceError(path, "not a regular file")
        with open(target, "rb") as fh:
            current = fh.read()
    except FileNotFoundError:
        raise SourceError(path, _missing_reason(path)) from None
    except OSError as exc:
        raise SourceError(path, _os_reason(exc)) from None
    if current != sf.raw:
        raise SourceError(path, _CHANGED)
    if data == current:
        return  # nothing to do; leave the file (and its mtime) alone
    if _read_only(target, st):
        raise SourceError(path, "read-only file (not written)")  # as editors and formatters do

    with WRITE_LOCK:
        _replace(path, target, st, sf.raw, data)


def _replace(path: Path, target: Path, st: os.stat_result, raw: bytes, data: bytes) -> None:
    """Write ``data`` to a temporary file next to ``target`` and rename it over ``target``."""
    directory = target.parent
    try:
        fd, tmp_name = tempfile.mkstemp(
            dir=directory, prefix="." + target.name + ".", suffix=".tmp"
        )
    except OSError as exc:
        raise SourceError(
            path, f"cannot create a temporary file in {directory}: {_os_reason(exc)}"
        ) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if hasattr(os, "chown") and (st.st_uid, st.st_gid) != _owner(tmp_name):
            try:  # keep the owner when e.g. root rewrites a user's file
                os.chown(tmp_name, st.st_uid, st.st_gid)
            except OSError:
                pass
            if (st.st_uid, st.st_gid) != _owner(tmp_name):
                raise SourceError(path, _NOT_OURS)
        os.chmod(tmp_name, stat.S_IMODE(st.st_mode))  # after chown, which may clear set-id bits
        _check_unchanged(path, target, st, raw)  # an editor may have saved in the meantime
        os.replace(tmp_name, target)
    except BaseException as exc:
        try:
            os.unlink(tmp_name)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise SourceError(path, f"write failed: {_os_reason(exc)}") from exc
        raise
    _fsync_dir(directory)


_CHANGED = "file changed on disk since it was read; not overwritten"
_NOT_OURS = "owned by another user: replacing it would change its owner (not written)"


def _read_only(target: Path, st: os.stat_result) -> bool:
    """No write permission for anyone (root included, who passes every access check), or
    none for this user."""
    return not st.st_mode & 0o222 or not os.access(target, os.W_OK)


def _check_unchanged(path: Path, target: Path, st: os.stat_result, raw: bytes) -> None:
    """The last look before the rename: the same file (inode, size, mtime) with the bytes
    that were read, or :class:`SourceError`."""
    try:
        now = os.stat(target)
        with open(target, "rb") as fh:
            current = fh.read()
    except OSError as exc:
        raise SourceError(path, f"{_os_reason(exc)} (not written)") from None

    def key(s: os.stat_result) -> tuple[int, int, int, int]:
        return s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns

    same = key(now) == key(st)
    if not same or current != raw:
        raise SourceError(path, _CHANGED)


def _owner(name: str) -> tuple[int, int]:
    st = os.stat(name)
    return st.st_uid, st.st_gid


def mentions_dali(raw: bytes) -> bool:
    """Cheap prefilter: could these bytes contain DALI code? Every import of DALI names both
    ``nvidia`` and ``dali`` (two substring checks keep words like "modality" out); a wrapper
    that imports it (``dali = try_import_dali()``) names ``import`` and ``dali`` in one word."""
    if b"dali" not in raw:
        return False
    return b"nvidia" in raw or _WRAPPER.search(raw) is not None


_WRAPPER = re.compile(rb"(?i)\w*(?:import\w*dali|dali\w*import)\w*\s*\(")


DEFAULT_EXCLUDES: tuple[str, ...] = (
    ".git",
    ".hg",
    ".svn",
    ".bzr",
    "_darcs",
    "__pycache__",
    "node_modules",
    ".tox",
    ".nox",
    ".eggs",
    "*.egg-info",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".ipynb_checkpoints",
    ".venv",
    "venv",
    "site-packages",
    "build",
    "dist",
)
"""Directory names (fnmatch patterns) never walked into. Hidden directories and virtual
environments (a directory holding ``pyvenv.cfg`` or ``conda-meta``) are skipped as well."""


def _normalize_patterns(exclude: Sequence[str]) -> list[str]:
    out = []
    for pat in exclude:
        pat = pat.replace(os.sep, "/").rstrip("/")
        while pat.startswith("./"):
            pat = pat[2:]
        if pat:
            out.append(pat)
    return out


def _excluded(rel: str, name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(rel, pat) or fnmatch.fnmatchcase(name, pat) for pat in patterns)


def _skip_dir(entry: os.DirEntry[str], rel: str, patterns: Sequence[str]) -> bool:
    name = entry.name
    if name.startswith("."):
        return True
    if any(fnmatch.fnmatchcase(name, pat) for pat in DEFAULT_EXCLUDES):
        return True
    if _excluded(rel, name, patterns):
        return True
    return os.path.exists(os.path.join(entry.path, "pyvenv.cfg")) or os.path.isdir(
        os.path.join(entry.path, "conda-meta")
    )


def _sorted_entries(directory: str) -> list[os.DirEntry[str]]:
    with os.scandir(directory) as it:
        return sorted(it, key=lambda e: e.name)


def _walk(root: Path, patterns: Sequence[str]) -> Iterator[Path]:
    """Yield *.py files under ``root`` in sorted pre-order, without following dir symlinks."""
    # An explicit stack of (relative dir, entries) instead of recursion: no depth limit.
    stack: list[tuple[str, Iterator[os.DirEntry[str]]]] = [
        ("", iter(_sorted_entries(os.fspath(root))))
    ]
    while stack:
        rel_dir, entries = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            continue
        rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
        try:
            is_link = entry.is_symlink()
            if entry.is_dir(follow_symlinks=False):
                if _skip_dir(entry, rel, patterns):
                    continue
                try:
                    children = _sorted_entries(entry.path)
                except OSError:  # unreadable or vanished sub-directory
                    continue
                stack.append((rel, iter(children)))
                continue
            if not entry.name.endswith(".py"):
                continue
            if is_link:
                if entry.is_dir():  # a symlink to a directory named *.py: not a file
                    continue
            elif not entry.is_file(follow_symlinks=False):
                continue  # FIFO, socket, device...
        except OSError:
            continue
        if _excluded(rel, entry.name, patterns):
            continue
        yield root / rel


def iter_python_files(
    paths: Sequence[str | os.PathLike[str]], exclude: Sequence[str] = ()
) -> Iterator[Path]:
    """Yield the Python files named by ``paths``, each once, in a deterministic order.

    Files given explicitly are yielded as given (whatever their suffix); directories are walked
    for ``*.py`` files, skipping :data:`DEFAULT_EXCLUDES`, hidden directories, virtual
    environments, symlinked directories and anything matching an ``exclude`` glob (matched
    against the path relative to the given directory and against the basename).
    Raises :class:`FileNotFoundError` for a given path that does not exist.
    """
    roots = [Path(p) for p in paths]
    for root in roots:  # fail fast, before yielding anything
        if not os.path.lexists(root):
            raise FileNotFoundError(errno.ENOENT, "no such file or directory", os.fspath(root))
    patterns = _normalize_patterns(exclude)
    seen: set[str] = set()
    for root in roots:
        found = _walk(root, patterns) if os.path.isdir(root) else iter((root,))
        for file in found:
            key = os.path.normcase(os.path.realpath(file))
            if key in seen:
                continue
            seen.add(key)
            yield file
