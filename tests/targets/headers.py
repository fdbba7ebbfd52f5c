"""The vendor headers the checker's target facts rest on, read from the installed toolchains.

A test that relies on a fact of MORI, NCCL or NVSHMEM cites the header line that states
it: `cite(header, pattern)` finds the line (a regular expression, matched line by line
or across a few lines) and returns it with its number, so a header that changes the
fact fails the test instead of leaving the checker silently wrong.  A header that is not
installed skips the test with the toolchain to install.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Header:
    name: str  # how tests name it: "mori/cco/cco.hpp (amd-mori 1.2.4)"
    path: Path | None
    missing: str  # what to install when `path` is None

    def text(self) -> str:
        if self.path is None or not self.path.is_file():
            pytest.skip(f"{self.name} is not installed: {self.missing}")
        return self.path.read_text(encoding="utf-8", errors="replace")


@dataclass(frozen=True)
class Citation:
    header: Header
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.header.name}:{self.line}: {self.text.strip()}"


def cite(header: Header, pattern: str, *, span: int = 1) -> Citation:
    """The first line of `header` where `pattern` matches (across `span` lines)."""
    lines = header.text().splitlines()
    rx = re.compile(pattern)
    for i in range(len(lines)):
        chunk = "\n".join(lines[i:i + span])
        if rx.search(chunk):
            return Citation(header, i + 1, chunk)
    raise AssertionError(f"{header.name} no longer says /{pattern}/: the fact the checker "
                         "relies on has changed; re-read the header and update the target")


def mori(rel: str = "mori/cco/cco.hpp") -> Header:
    from ccogen.errors import ToolchainError
    from ccogen.toolchains.locate import MORI_VERSION, find_mori_include

    name = f"{rel} (amd-mori {MORI_VERSION})"
    try:
        return Header(name, find_mori_include() / rel, "")
    except ToolchainError as exc:
        return Header(name, None, str(exc))


def _package_include(module: str, pip: str, rel: str, what: str) -> Header:
    try:
        mod = __import__(module, fromlist=["__path__"])
        roots = [Path(p) for p in getattr(mod, "__path__", [])]
    except ImportError:
        roots = []
    for root in roots:
        path = root / "include" / rel
        if path.is_file():
            version = _version(root / "include", what)
            return Header(f"{rel} ({what} {version})", path, "")
    return Header(f"{rel} ({what})", None, f"pip install {pip} (the `toolchain` extra)")


def _version(include: Path, what: str) -> str:
    if what == "NCCL":
        text = (include / "nccl.h").read_text(encoding="utf-8", errors="replace")
        parts = [re.search(rf"#define NCCL_{k}\s+(\d+)", text) for k in ("MAJOR", "MINOR", "PATCH")]
    else:
        text = (include / "non_abi" / "nvshmem_version.h").read_text(encoding="utf-8",
                                                                     errors="replace")
        parts = [re.search(rf"#define NVSHMEM_VENDOR_{k}_VERSION\s+(\d+)", text)
                 for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m.group(1) for m in parts if m is not None)


def nccl(rel: str) -> Header:
    return _package_include("nvidia.nccl", "nvidia-nccl-cu13", rel, "NCCL")


def nvshmem(rel: str) -> Header:
    return _package_include("nvidia.nvshmem", "nvidia-nvshmem-cu13", rel, "NVSHMEM")


__all__ = ["Citation", "Header", "cite", "mori", "nccl", "nvshmem"]
