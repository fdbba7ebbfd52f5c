"""The on-disk build cache: cubins and engine shims, keyed by what determines their bytes.

Layout: `<cache>/<kind>/<key>/<file>` plus `build.json` (the command lines and inputs, and
the file's SHA-256) beside it.  `<cache>` is `$CCOGEN_CACHE_DIR`, else
`$XDG_CACHE_HOME/ccogen`, else `~/.cache/ccogen`.  The key hashes the source text, the
flags, the compiler (path, `--version`, the environment it reads: `toolchain_inputs`),
the library version and location and ccogen's own build code, so a second build with the
same inputs runs no compiler.  Builds take a per-entry file lock (several ranks of a
`torchrun` job may build at once) and publish the result with an atomic rename, so a
reader never sees a partial file.

What is served is code this process loads (a cubin launched, a shim `dlopen()`ed), so the
cache trusts nothing it did not write itself (docs/reliability.md, "Security model"):

* the cache directory and every directory under it are private: real directories (not
  links), owned by this user, writable by no one else.  A root only readable by others
  (the 0755 an older ccogen made) is tightened to 0700; one that another user owns, a
  link, or one others can write is refused (`CacheError`, saying how to fix it), checked
  on every use;
* an entry is served only when its file and its `build.json` are regular files (not
  links, opened with O_NOFOLLOW), owned by this user, and the file's SHA-256 equals the
  one recorded when it was written; otherwise the entry is rebuilt (one of ours) or
  refused (another user's);
* `build.json` and the file are written in a private build directory inside the entry
  (`<entry>/.build`, removed on every exit) and renamed into place: a link planted at
  either name is replaced, never written through.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from ccogen.errors import RunError

RECORD = "build.json"
_HASH_FIELD = "sha256"


class CacheError(RunError):
    """The build cache is not a private directory of this user (or an entry is another's)."""


def cache_dir() -> Path:
    explicit = os.environ.get("CCOGEN_CACHE_DIR", "").strip()
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "ccogen"


def cache_key(*parts: str | bytes) -> str:
    """A stable hex digest of the parts (length-prefixed, so boundaries matter)."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8") if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()[:40]


_FIX = ("the build cache holds code ccogen loads into your processes, so it must be a "
        "private directory of yours; set CCOGEN_CACHE_DIR to a directory of your own "
        "(ccogen creates it with mode 0700)")


def _private_dir(path: Path, *, root: bool) -> Path:
    """Create `path` (mode 0700) or check it: a real directory of this user that no one
    else can write; a root only others can read is tightened to 0700."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except FileNotFoundError:
        if not root:
            raise
        path.parent.mkdir(parents=True, exist_ok=True)
        return _private_dir(path, root=root)
    except OSError as exc:
        raise CacheError(f"cannot create the build cache directory {path}: {exc}") from None
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        what = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a directory"
        raise CacheError(f"{path} is {what}, not a directory of the build cache: {_FIX}")
    if info.st_uid != os.getuid():
        raise CacheError(f"{path} belongs to user id {info.st_uid}, not to you "
                         f"({os.getuid()}): {_FIX}")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o022:
        raise CacheError(f"{path} is writable by others (mode {mode:04o}): anyone who can "
                         f"write it can plant code; {_FIX}, or `chmod 700 {path}` after "
                         "removing what you did not build")
    if mode & 0o077:
        os.chmod(path, 0o700)
    return path


def _kind_dir(kind: str) -> Path:
    root = _private_dir(cache_dir(), root=True)
    return _private_dir(root / kind, root=False)


def file_sha256(path: Path) -> str | None:
    """The SHA-256 of a regular file of this user, opened without following a link; None
    when `path` is missing, a link, not a regular file or another user's."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            return None
        h = hashlib.sha256()
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            h.update(chunk)
        return h.hexdigest()


def _read_record(entry: Path) -> dict[str, object] | None:
    try:
        fd = os.open(entry / RECORD, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    with os.fdopen(fd, "r", encoding="utf-8") as handle:
        if os.fstat(handle.fileno()).st_uid != os.getuid():
            return None
        try:
            data = json.load(handle)
        except (ValueError, UnicodeDecodeError):
            return None
    return data if isinstance(data, dict) else None


def _verified(entry: Path, filename: str) -> bool:
    """Whether the entry holds `filename` with the hash its record gives (module docstring)."""
    record = _read_record(entry)
    if record is None:
        return False
    hashes = record.get(_HASH_FIELD)
    expected = hashes.get(filename) if isinstance(hashes, dict) else None
    return isinstance(expected, str) and file_sha256(entry / filename) == expected


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                     0o600)
    except OSError as exc:  # a link planted at the lock's name: ELOOP
        raise CacheError(f"cannot lock {path}: {exc}: {_FIX}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _discard(entry: Path, filename: str) -> None:
    """Remove an entry that failed verification (one of ours: the directory checks passed)."""
    for name in (filename, RECORD):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(entry / name)


BUILD_DIR = ".build"


@contextlib.contextmanager
def _build_dir(entry: Path) -> Iterator[Path]:
    """The entry's build directory, `<entry>/.build`: private, made empty, and removed on
    every exit (an exception, KeyboardInterrupt; one a killed build left is removed by the
    next).  Its name is the same for every build of the key (under the entry's lock), so
    what a compiler records of its working directory (nvcc's line info does) is too, and
    two builds of one input in one cache are byte-identical."""
    path = entry / BUILD_DIR
    shutil.rmtree(path, ignore_errors=True)
    os.mkdir(path, 0o700)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def cached_build(kind: str, key: str, filename: str, build: Callable[[Path], dict[str, object]]
                 ) -> Path:
    """Path of `<cache>/<kind>/<key>/<filename>`, running `build(tmpdir)` when absent or
    when the entry does not verify (module docstring).

    `build` writes `filename` into the private build directory it is given (`_build_dir`)
    and returns what to record in build.json.  Exceptions from `build` propagate and leave
    no entry (and no build directory) behind.
    """
    kind_dir = _kind_dir(kind)
    entry = kind_dir / key
    target = entry / filename
    if entry.is_dir() and _private_dir(entry, root=False) and _verified(entry, filename):
        return target
    with _locked(kind_dir / f"{key}.lock"):
        _private_dir(entry, root=False)
        if _verified(entry, filename):
            return target
        _discard(entry, filename)
        with _build_dir(entry) as tmp:
            record = build(tmp)
            produced = tmp / filename
            digest = file_sha256(produced)
            if digest is None:
                raise FileNotFoundError(f"the build did not produce {filename}")
            (tmp / RECORD).write_text(
                json.dumps({**record, _HASH_FIELD: {filename: digest}}, indent=2,
                           default=str) + "\n", encoding="utf-8")
            os.replace(produced, target)  # the file first: a record never names a missing one
            os.replace(tmp / RECORD, entry / RECORD)
    return target


def clear(kind: str | None = None) -> None:
    """Remove the cache (or one kind of entry)."""
    path = cache_dir() / kind if kind else cache_dir()
    shutil.rmtree(path, ignore_errors=True)


__all__ = ["RECORD", "CacheError", "cache_dir", "cache_key", "cached_build", "clear",
           "file_sha256"]
