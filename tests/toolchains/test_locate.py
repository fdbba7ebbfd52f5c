"""`toolchains.locate.find_build_library`: where `ccogen build` takes NCCL / NVSHMEM
headers from, in order: `$CCOGEN_*_HOME`, the toolchains prefix, the Python package.

The prefix comes before the package because torch pins older wheels (torch 2.14.1:
`nvidia-nccl-cu13==2.30.7`, `nvidia-nvshmem-cu13==3.4.5`), below what nccl-cft needs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ccogen.errors import LibraryVersionError
from ccogen.toolchains import locate
from tests.helpers import REPO_ROOT


def _nccl(root: Path, version: tuple[int, int, int]) -> Path:
    include = root / "include"
    include.mkdir(parents=True)
    major, minor, patch = version
    (include / "nccl.h").write_text(f"#define NCCL_MAJOR {major}\n#define NCCL_MINOR {minor}\n"
                                    f"#define NCCL_PATCH {patch}\n")
    (root / "lib").mkdir()
    return root


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A toolchains prefix and a site-packages whose `nvidia.nccl` torch pinned to 2.30.7."""
    prefix = tmp_path / "toolchains"
    site = tmp_path / "site"
    monkeypatch.setenv("CCOGEN_TOOLCHAINS", str(prefix))
    monkeypatch.delenv("CCOGEN_NCCL_HOME", raising=False)
    package = _nccl(site / "nvidia" / "nccl", (2, 30, 7))
    monkeypatch.setattr("ccogen.toolchains.libraries._package_roots", lambda module: [package])
    return {"prefix": prefix, "package": package, "tmp": tmp_path}


def test_the_prefix_comes_before_the_package(places: dict[str, Path]) -> None:
    root = locate.prefix_library_root("NCCL")
    assert root == places["prefix"] / "nccl-2.32.3" / "nvidia" / "nccl"
    _nccl(root, (2, 32, 3))
    found = locate.find_build_library("nccl-cft")
    assert found.root == root.resolve() and found.version == (2, 32, 3)


def test_an_explicit_home_comes_before_the_prefix(places: dict[str, Path],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _nccl(locate.prefix_library_root("NCCL"), (2, 32, 3))  # type: ignore[arg-type]
    home = _nccl(places["tmp"] / "home", (2, 33, 0))
    monkeypatch.setenv("CCOGEN_NCCL_HOME", str(home))
    assert locate.find_build_library("nccl-cft").version == (2, 33, 0)


def test_without_the_prefix_a_pinned_package_is_refused_with_the_way_out(
        places: dict[str, Path]) -> None:
    with pytest.raises(LibraryVersionError) as info:
        locate.find_build_library("nccl-cft")
    assert "2.30.7" in str(info.value) and "too old" in str(info.value)
    assert locate.INSTALL in str(info.value) and "torch" in str(info.value)
    # nccl-lsa needs only 2.28: the package serves
    assert locate.find_build_library("nccl-lsa").version == (2, 30, 7)


def test_install_toolchains_installs_what_locate_looks_for() -> None:
    script = (REPO_ROOT / "scripts" / "install-toolchains.sh").read_text(encoding="utf-8")
    versions = dict(re.findall(r"^(NCCL|NVSHMEM)_VERSION=(\S+)", script, re.M))
    for name, (directory, package) in locate.ENGINE_WHEELS.items():
        assert directory == f"{name.lower()}-{versions[name]}"
        assert f'"{name.lower()}-${name}_VERSION"' in script
        assert package in script
