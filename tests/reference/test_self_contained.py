"""A clone needs nothing beside it: no tracked file points outside the repository.

The specifications ccogen was written from lived in a directory next to the checkout
during development; users only have the clone, so no file may refer to that directory
(the reference in docs/reference/ replaces it).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
# Written so that this file does not match itself.
OUTSIDE = re.compile(rb"\.\./shared\b|\bshared/(?:spec|seeds|reference|design)\b|/work/[s]hared\b")
SKIP_DIRS = {".git", "build", ".hypothesis", ".pytest_cache", "__pycache__"}


def tracked_files() -> list[Path]:
    """`git ls-files`, or every file but build outputs where the tree is not a checkout."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return [p for p in ROOT.rglob("*") if p.is_file()
                and not SKIP_DIRS.intersection(p.relative_to(ROOT).parts)]
    return [ROOT / name.decode() for name in out.split(b"\0") if name]


def test_no_file_refers_to_a_directory_beside_the_checkout() -> None:
    files = tracked_files()
    assert len(files) > 100, "found too few files to believe the listing"
    offenders = []
    for path in files:
        if not path.is_file():  # deleted in the work tree, not yet committed
            continue
        for lineno, line in enumerate(path.read_bytes().splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{lineno}: "
                                 f"{line.decode(errors='replace').strip()[:120]}")
    assert not offenders, "\n".join(offenders)


def test_the_pattern_catches_what_it_should() -> None:
    dotdot = b"../" + b"shared"
    for text in (dotdot + b"/spec/language.md", b"see shared/" + b"seeds/x.md",
                 b"(shared/" + b"reference/nvshmem.md)", b"/work/" + b"shared" + b"/spec"):
        assert OUTSIDE.search(text), text
    for text in (b"__shared__ alignas(16)", b"shared memory", b"passes/_shared.py",
                 b"docs/reference/rules.md"):
        assert not OUTSIDE.search(text), text
