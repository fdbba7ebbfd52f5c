"""Protocol → cached generated files (no torch, no GPU): a hit runs no compiler."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import ccogen
import ccogen.rt.api as api
from ccogen._resources import protocols_dir
from ccogen.torch import loader


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[Any] = []
    real = api.generate_for_run

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append((args, kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(api, "generate_for_run", counting)
    return calls


def test_second_generate_runs_no_compiler(compiles: list[Any]) -> None:
    first = loader.generate("alltoall.cco", "nvshmem", 2, {"block": 768})
    assert len(compiles) == 1 and compiles[0][1]["epoch_from_heap"] is True
    again = loader.generate("alltoall.cco", "nvshmem", 2, {"block": 768})
    assert len(compiles) == 1
    assert again.directory == first.directory and again.outputs == ("recv",)
    assert {p.name for p in first.directory.iterdir()} >= {"manifest.json", "kernels.cu",
                                                             "binding.json"}
    assert first.manifest.nranks == 2 and first.manifest.window("send").size == 1536


@pytest.mark.parametrize("change", [
    {"params": {"block": 1024}}, {"nranks": 4}, {"debug": True}, {"target": "nccl-lsa"},
    {"force": True}])
def test_every_input_is_in_the_key(compiles: list[Any], change: dict[str, Any]) -> None:
    base: dict[str, Any] = {"protocol": "alltoall.cco", "target": "nvshmem", "nranks": 2,
                            "params": {"block": 512}}
    a = loader.generate(base.pop("protocol"), **base)
    before = len(compiles)
    args = {**base, **change}
    b = loader.generate("alltoall.cco", args.pop("target"), args.pop("nranks"),
                        args.pop("params"), **args)
    assert a.key != b.key and len(compiles) == before + 1


def test_text_path_and_protocol_forms(tmp_path: Path) -> None:
    text = (protocols_dir() / "pingpong.cco").read_text()
    local = tmp_path / "mine.cco"
    local.write_text(text)
    by_name = loader.generate("pingpong.cco", "nvshmem", 2, {})  # the library's copy
    by_path = loader.generate(local, "nvshmem", 2, {})
    by_text = loader.generate(text, "nvshmem", 2, {})
    by_object = loader.generate(ccogen.parse(text, "pingpong.cco"), "nvshmem", 2, {})
    assert by_name.manifest.protocol == by_object.manifest.protocol == "pingpong"
    assert by_name.key != by_path.key  # the file name is reported: it is part of the key
    assert by_text.manifest.source == "<string>" and by_path.manifest.source == "mine.cco"


def test_refused_protocol_and_missing_file() -> None:
    from ccogen.errors import DiagnosticError, RunError

    with pytest.raises(DiagnosticError):
        loader.generate("pingpong.cco", "nvshmem", 3, {})  # team lsa(2)
    hang = Path(__file__).parent.parent / "runtime" / "data" / "hang_generated.cco"
    with pytest.raises(DiagnosticError):
        loader.generate(hang, "nvshmem", 2, {}, debug=True)
    forced = loader.generate(hang, "nvshmem", 2, {}, debug=True, force=True)
    assert forced.manifest.debug
    with pytest.raises(RunError, match=r"cannot read nowhere/x\.cco"):
        loader.generate("nowhere/x.cco", "nvshmem", 2, {})


def test_fingerprint_is_stable() -> None:
    assert loader.generator_fingerprint() == loader.generator_fingerprint()
    assert len(loader.generator_fingerprint()) == 40


def test_a_dtype_parameter_takes_its_name() -> None:
    f32 = loader.generate("allreduce_oneshot.cco", "nvshmem", 2, {"n": 256, "T": "f32"})
    bf16 = loader.generate("allreduce_oneshot.cco", "nvshmem", 2, {"n": 256})  # default bf16
    assert f32.key != bf16.key
    assert f32.manifest.window("x").dtype == "f32" and f32.manifest.window("x").size == 1024
    assert bf16.manifest.window("x").dtype == "bf16"
    assert [(b.name, b.dtype) for b in f32.manifest.buffers] == [("out", "f32")]


def test_a_dtype_parameter_takes_a_torch_dtype() -> None:
    torch = pytest.importorskip("torch", reason="torch dtypes need torch")
    from ccogen.torch.errors import ArgumentError

    by_dtype = loader.generate("allreduce_oneshot.cco", "nvshmem", 2,
                               {"n": 256, "T": torch.float32})
    by_name = loader.generate("allreduce_oneshot.cco", "nvshmem", 2, {"n": 256, "T": "f32"})
    assert by_dtype.key == by_name.key
    with pytest.raises(ArgumentError, match="integer or an element type"):
        loader.generate("allreduce_oneshot.cco", "nvshmem", 2, {"n": 256, "T": torch.float64})


@pytest.mark.parametrize(("name", "outputs"), [
    ("alltoall", ["recv"]),             # not `credit`: the protocol's own (issue 30)
    ("pingpong", ["ping", "pong"]),     # not `credit`
    ("reduce_scatter_ring", ["x"]),     # not its landing `slot`
    ("ring_allgather", ["data"]),       # the one window: input and output
    ("alltoall_rotating", ["land"]),    # results in buffers only: the windows written
])
def test_a_call_returns_the_windows_ensure_reads_that_the_protocol_writes(
        name: str, outputs: list[str]) -> None:
    from ccogen.instantiate import instantiate
    from ccogen.syntax import load_ir

    instance, _ = instantiate(load_ir(protocols_dir() / f"{name}.cco"), 2, {})
    assert instance is not None
    assert loader.output_windows(instance) == outputs


@pytest.mark.parametrize("name", ["moe_dispatch", "moe_combine", "moe_dispatch_ll"])
def test_the_outputs_of_a_sampled_loop_are_those_of_every_iteration(
        name: str, monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> None:
    """The binding reads its outputs off the checked instance (its token loop on three
    iterations, never unrolled): the same windows as the instance with every iteration."""
    from ccogen.instantiate import instantiate
    from ccogen.syntax import load_ir

    params = {"tokens": 16, "hidden": 8, "k": 2}
    made: list[Any] = []
    real = api.generate_for_run

    def watching(*args: Any, **kwargs: Any) -> Any:
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(api, "generate_for_run", watching)
    got = loader.generate(f"{name}.cco", "nvshmem", 4, params)
    monkeypatch.setenv("CCOGEN_EXACT_LOOPS", "1")
    every, _ = instantiate(load_ir(protocols_dir() / f"{name}.cco"), 4, params)
    assert every is not None and not any(note.sampled for note in every.loops)
    assert got.outputs == tuple(loader.output_windows(every))
    written = {op.dst.window for ops in every.ranks for op in ops if op.dst is not None}
    assert set(got.outputs) <= written
    # generated once (a fresh cache) from the sampled loop, and never unrolled (the
    # unrolled `instance` is a cached_property: computed, it stands in the object's dict)
    assert len(made) == 1 and any(note.sampled for note in made[0].checked.loops)
    assert "instance" not in vars(made[0])
