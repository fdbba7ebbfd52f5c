"""The build cache trusts only what it wrote (issue #29 items 2, 3 and 8): a private
directory, entries verified by the hash recorded at write time, no links followed, a key
covering the compiler's environment, and no temporary directory left by a failed build.
No toolchain: `cached_build` is driven with builds written in Python."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ccogen.toolchains import cache
from ccogen.toolchains.cache import CacheError, cached_build


def _writer(content: bytes, calls: list[int]):  # type: ignore[no-untyped-def]
    def build(tmp: Path) -> dict[str, object]:
        calls.append(1)
        (tmp / "kernels.cubin").write_bytes(content)
        return {"what": "test"}
    return build


def _entry(root: Path, kind: str = "cubin", key: str = "k" * 40) -> Path:
    return root / kind / key


def test_entries_are_written_privately_and_served_once(cache_dir: Path) -> None:
    calls: list[int] = []
    path = cached_build("cubin", "k" * 40, "kernels.cubin", _writer(b"ELF1", calls))
    assert path.read_bytes() == b"ELF1"
    assert cached_build("cubin", "k" * 40, "kernels.cubin", _writer(b"ELF2", calls)) == path
    assert calls == [1] and path.read_bytes() == b"ELF1"
    for d in (cache_dir, cache_dir / "cubin", path.parent):
        assert os.stat(d).st_mode & 0o777 == 0o700
    record = json.loads((path.parent / "build.json").read_text())
    assert record["what"] == "test" and len(record["sha256"]["kernels.cubin"]) == 64


def test_a_tampered_or_planted_cubin_is_rebuilt_not_served(cache_dir: Path) -> None:
    calls: list[int] = []
    path = cached_build("cubin", "k" * 40, "kernels.cubin", _writer(b"GOOD", calls))
    path.write_bytes(b"EVIL")  # tampered after it was recorded
    again = cached_build("cubin", "k" * 40, "kernels.cubin", _writer(b"GOOD", calls))
    assert again.read_bytes() == b"GOOD" and calls == [1, 1]
    # planted without a record (or with one an older ccogen wrote, without a hash)
    entry = _entry(cache_dir, key="p" * 40)
    entry.mkdir(mode=0o700)
    (entry / "kernels.cubin").write_bytes(b"EVIL")
    (entry / "build.json").write_text("{}")
    served = cached_build("cubin", "p" * 40, "kernels.cubin", _writer(b"GOOD", calls))
    assert served.read_bytes() == b"GOOD"


def test_a_planted_shim_symlink_is_not_loaded(cache_dir: Path, tmp_path: Path) -> None:
    calls: list[int] = []
    shim = cached_build("engine", "e" * 40, "libccogen_engine.so", _so(b"REAL", calls))
    evil = tmp_path / "evil.so"
    evil.write_bytes(b"REAL")  # even the same bytes: a link is never served
    shim.unlink()
    shim.symlink_to(evil)
    again = cached_build("engine", "e" * 40, "libccogen_engine.so", _so(b"REAL", calls))
    assert not again.is_symlink() and calls == [1, 1]
    assert evil.read_bytes() == b"REAL"


def _so(content: bytes, calls: list[int]):  # type: ignore[no-untyped-def]
    def build(tmp: Path) -> dict[str, object]:
        calls.append(1)
        (tmp / "libccogen_engine.so").write_bytes(content)
        return {}
    return build


def test_a_symlinked_build_json_is_replaced_not_written_through(cache_dir: Path,
                                                               tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    entry = _entry(cache_dir)
    entry.parent.mkdir(mode=0o700, parents=True)
    entry.mkdir(mode=0o700)
    (entry / "build.json").symlink_to(victim)
    path = cached_build("cubin", "k" * 40, "kernels.cubin", _writer(b"ELF", []))
    assert victim.read_text() == "precious"
    assert not (path.parent / "build.json").is_symlink()


def test_a_symlinked_lock_is_refused(cache_dir: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    (cache_dir / "cubin").mkdir(mode=0o700, parents=True)
    (cache_dir / "cubin" / f"{'k' * 40}.lock").symlink_to(victim)
    with pytest.raises(CacheError, match="cannot lock"):
        cached_build("cubin", "k" * 40, "kernels.cubin", _writer(b"ELF", []))
    assert not victim.exists()


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o722])
def test_a_cache_others_can_write_is_refused(cache_dir: Path, mode: int) -> None:
    cache_dir.mkdir(mode=0o700)
    os.chmod(cache_dir, mode)
    with pytest.raises(CacheError, match="writable by others") as caught:
        cached_build("cubin", "k" * 40, "kernels.cubin", _writer(b"ELF", []))
    assert "CCOGEN_CACHE_DIR" in str(caught.value)


def test_a_readable_cache_is_tightened(cache_dir: Path) -> None:
    cache_dir.mkdir()
    os.chmod(cache_dir, 0o755)  # what an older ccogen made under umask 022
    cached_build("cubin", "k" * 40, "kernels.cubin", _writer(b"ELF", []))
    assert os.stat(cache_dir).st_mode & 0o777 == 0o700


def test_a_cache_that_is_a_link_or_a_kind_dir_that_is_a_link_is_refused(
        cache_dir: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    cache_dir.mkdir(mode=0o700)
    (cache_dir / "cubin").symlink_to(elsewhere)
    with pytest.raises(CacheError, match="symbolic link"):
        cached_build("cubin", "k" * 40, "kernels.cubin", _writer(b"ELF", []))
    assert not list(elsewhere.iterdir())


def test_a_cache_of_another_user_is_refused(cache_dir: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    cache_dir.mkdir(mode=0o700)
    monkeypatch.setattr(cache.os, "getuid", lambda: os.stat(cache_dir).st_uid + 1)
    with pytest.raises(CacheError, match="not to you"):
        cached_build("cubin", "k" * 40, "kernels.cubin", _writer(b"ELF", []))


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_a_build_stopped_midway_leaves_no_temporary_directory(cache_dir: Path,
                                                              error: type[BaseException]
                                                              ) -> None:
    def build(tmp: Path) -> dict[str, object]:
        (tmp / "kernels.o").write_bytes(b"half")
        raise error("stopped mid-compile")

    with pytest.raises(error):
        cached_build("cubin", "k" * 40, "kernels.cubin", build)
    entry = _entry(cache_dir)
    assert [p.name for p in entry.iterdir()] == []


def test_the_key_covers_the_compilers_environment(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    from ccogen.toolchains import libraries as toolchain

    nvcc = tmp_path / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0'\n")
    nvcc.chmod(0o755)
    for name in toolchain.COMPILER_ENV:
        monkeypatch.delenv(name, raising=False)
    base = toolchain.toolchain_inputs(nvcc)
    assert base == toolchain.toolchain_inputs(nvcc)
    seen = {base}
    for name, value in (("NVCC_APPEND_FLAGS", "-DEVIL=1"), ("NVCC_PREPEND_FLAGS", "-G"),
                        ("NVCC_CCBIN", "/usr/bin/cc"), ("CPATH", str(tmp_path))):
        monkeypatch.setenv(name, value)
        inputs = toolchain.toolchain_inputs(nvcc)
        assert inputs not in seen, name
        seen.add(inputs)
        monkeypatch.delenv(name)
    other = tmp_path / "other" / "nvcc"  # the same tool at another path: another key
    other.parent.mkdir()
    other.write_text(nvcc.read_text() + "\n")
    other.chmod(0o755)
    assert toolchain.toolchain_inputs(other) != base
