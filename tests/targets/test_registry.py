"""The `Target` registry: one object per target, and every piece it names exists.

A target's code generator, build recipe, engine library and engine rules are fields of
its `Target`; these tests check each field resolves to what the compiler, the builder and
the runtime need, and that no build/run code names a target in a comparison instead.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import ccogen
from ccogen.codegen.backends import Backend, get_backend
from ccogen.manifest import PARAM_KINDS
from ccogen.rt.engines import engines_dir
from ccogen.targets import TARGETS, UnknownTarget, get_target, runnable_targets
from ccogen.targets.libraries import NCCL, NCCL_CFT, NVSHMEM
from ccogen.targets.target import HeapRule, Target, resolve

PACKAGE = Path(ccogen.__file__).parent
MiB = 1 << 20


@pytest.mark.parametrize("name", list(TARGETS))
def test_a_target_is_frozen_data(name: str) -> None:
    target = get_target(name)
    assert isinstance(target, Target) and target.name == name
    with pytest.raises(dataclasses.FrozenInstanceError):
        target.codegen = "x:y"  # type: ignore[misc]
    hash(target)


@pytest.mark.parametrize("name", list(TARGETS))
def test_codegen_names_the_targets_backend(name: str) -> None:
    target = get_target(name)
    backend = get_backend(name)
    assert isinstance(backend, Backend)
    assert backend.name == name
    assert backend.language == target.capabilities.language.value


def test_an_unknown_backend_is_an_unknown_target() -> None:
    with pytest.raises(UnknownTarget, match="known targets: mori-sdma, nccl-cft"):
        get_backend("nccl-gin")


@pytest.mark.parametrize("name", list(TARGETS))
def test_the_build_recipe_is_a_toolchains_function(name: str) -> None:
    builder = get_target(name).toolchain.builder
    assert builder.startswith("ccogen.toolchains.")
    assert callable(resolve(builder))


def test_engine_libraries() -> None:
    libraries = {name: t.toolchain.library for name, t in TARGETS.items()}
    assert libraries == {"mori-sdma": None, "nccl-cft": NCCL_CFT, "nvshmem": NVSHMEM,
                         "nccl-lsa": NCCL}
    assert NCCL_CFT.minimum == (2, 31, 0) and NCCL.minimum == (2, 28, 0)
    assert NVSHMEM.device_archive == "libnvshmem_device.a" and NCCL.device_archive is None


def test_runnable_targets_have_an_engine_shim() -> None:
    assert runnable_targets() == ["nvshmem", "nccl-lsa"]
    for name in runnable_targets():
        engine = get_target(name).engine
        assert engine is not None
        assert (engines_dir() / engine.shim).is_file()
        assert engine.kernel_params <= set(PARAM_KINDS)
        # kernels take a device communicator exactly where the engine makes one
        assert ("devcomm" in engine.kernel_params) == engine.devcomm
    assert not get_target("mori-sdma").runnable and not get_target("nccl-cft").runnable


def test_module_registration_and_heap_rule_are_nvshmems() -> None:
    nvshmem, lsa = get_target("nvshmem").engine, get_target("nccl-lsa").engine
    assert nvshmem is not None and lsa is not None
    assert nvshmem.registers_modules and not lsa.registers_modules
    assert lsa.heap.environment(4 << 30) == {}
    assert nvshmem.heap.environment(900 * MiB) == {}  # NVSHMEM's default reserve suffices
    assert nvshmem.heap.environment(1 << 30) == {"NVSHMEM_SYMMETRIC_SIZE": str(1280 * MiB)}
    # rounded down to whole MiB after the headroom
    assert nvshmem.heap.environment(1000 * MiB + 5) == {"NVSHMEM_SYMMETRIC_SIZE":
                                                         str(1256 * MiB)}


def test_heap_rule_without_a_variable() -> None:
    assert HeapRule().environment(1 << 40) == {}


@pytest.mark.parametrize(("header", "loaded", "ok"), [
    (22809, 22809, True),   # 2.28.9 lays out ncclDevComm its own way: the same release only
    (22809, 22810, False),
    (22809, 22900, False),
    (22900, 23203, True),   # from 2.29 on a newer library keeps the device ABI
    (23100, 22900, False),
])
def test_nccl_version_rule(header: int, loaded: int, ok: bool) -> None:
    assert NCCL.loads(header, loaded) is ok


@pytest.mark.parametrize(("header", "loaded", "ok"), [
    (30405, 30405, True), (30405, 30500, True), (30405, 30404, False), (30405, 40000, False),
])
def test_nvshmem_version_rule(header: int, loaded: int, ok: bool) -> None:
    assert NVSHMEM.loads(header, loaded) is ok


def _name_comparisons(path: Path, root: Path = PACKAGE) -> list[str]:
    """`x == "nccl-lsa"`, `x in ("nccl-lsa", ...)` and the like in one source file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Compare):
            continue
        for side in [node.left, *node.comparators]:
            elements = side.elts if isinstance(side, ast.Tuple | ast.List | ast.Set) else [side]
            names = [e.value for e in elements
                     if isinstance(e, ast.Constant) and e.value in TARGETS]
            if names:
                found.append(f"{path.relative_to(root)}:{node.lineno}: {', '.join(names)}")
    return found


def test_no_code_compares_target_names() -> None:
    """Build, run, bench and compile code read `Target` fields; only the target tables
    (ccogen/targets) spell the names out."""
    found = [hit for path in sorted(PACKAGE.rglob("*.py"))
             if "targets" not in path.relative_to(PACKAGE).parts
             for hit in _name_comparisons(path)]
    assert found == []


def test_the_scan_finds_comparisons(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('if target == "nvshmem" or t in ("nccl-lsa", "x"):\n    pass\n')
    assert _name_comparisons(probe, tmp_path) == ["probe.py:1: nvshmem", "probe.py:1: nccl-lsa"]
