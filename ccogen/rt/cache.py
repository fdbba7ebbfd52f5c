"""The on-disk build cache: cubins and engine shims, keyed by what determines their bytes.

Layout: `<cache>/<kind>/<key>/<file>` plus `build.json` (the command lines and inputs)
beside it.  `<cache>` is `$CCOGEN_CACHE_DIR`, else `$XDG_CACHE_HOME/ccogen`, else
`~/.cache/ccogen`.  The key hashes the source text, the flags, `nvcc --version` and the
library version and location, so a second build with the same inputs runs no compiler.
Builds take a per-entry file lock (several ranks of a `torchrun` job may build at once)
and publish the result with an atomic rename, so a reader never sees a partial file.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path


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


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def cached_build(kind: str, key: str, filename: str, build: Callable[[Path], dict[str, object]]
                 ) -> Path:
    """Path of `<cache>/<kind>/<key>/<filename>`, running `build(tmpdir)` when absent.

    `build` writes `filename` into the temporary directory it is given and returns what to
    record in build.json.  Exceptions from `build` propagate and leave no entry behind.
    """
    entry = cache_dir() / kind / key
    target = entry / filename
    if target.is_file():
        return target
    with _locked(cache_dir() / kind / f"{key}.lock"):
        if target.is_file():
            return target
        entry.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f".{filename}.", dir=entry) as tmp:
            record = build(Path(tmp))
            produced = Path(tmp) / filename
            if not produced.is_file():
                raise FileNotFoundError(f"the build did not produce {filename}")
            (entry / "build.json").write_text(json.dumps(record, indent=2, default=str) + "\n",
                                              encoding="utf-8")
            os.replace(produced, target)
    return target


def clear(kind: str | None = None) -> None:
    """Remove the cache (or one kind of entry)."""
    path = cache_dir() / kind if kind else cache_dir()
    shutil.rmtree(path, ignore_errors=True)


__all__ = ["cache_dir", "cache_key", "cached_build", "clear"]
