"""Run-time batch sizes without torch: which buffer is the count and which buffers it
batches (ccogen.torch.batch, on parsed protocols), the numbers of an instance (from its
manifest), and the binder's count inference and its coded errors on tensor-like objects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ccogen.errors import ManifestError
from ccogen.syntax import parse_ir
from ccogen.torch.args import BufferBinder
from ccogen.torch.batch import Batch, BatchShape, RowBuffer, batch_shape
from ccogen.torch.errors import ArgumentError
from ccogen.torch.spec import OpSpec

from .test_args import Device, Tensor
from .test_spec import _write, buffered_data

FIXTURE = Path(__file__).resolve().parent / "protocols" / "gather_rows.cco"
LIBRARY = Path(__file__).resolve().parent.parent.parent / "protocols"

_PROTOCOL = '''\
protocol p(tokens: int = 8, hidden: int = 4, k: int = 2):
    team lsa
    window recv: f32[nranks * tokens * hidden]
    buffer x: f32[tokens * hidden]
    buffer topk: i32[tokens * k]
    buffer w: f32[tokens]
    buffer wide: f32[nranks * tokens * hidden]
    buffer zeros: f32[hidden]
    buffer ntok: i32[1]

    require:
        {require}

    kernel k(threads=32):
        n = load(ntok[0])
        copy(dst=recv[0 : (0 < n) * hidden], src=x[0 : (0 < n) * hidden])
'''


def _shape(require: str) -> BatchShape | None:
    return batch_shape(parse_ir(_PROTOCOL.format(require=require), "p.cco"))


@pytest.mark.parametrize("require", ["0 <= ntok[0] <= tokens", "ntok[0] <= tokens",
                                     "tokens >= ntok[0]"])
def test_the_count_is_the_buffer_require_bounds_by_a_parameter(require: str) -> None:
    # rows: sizes whose product starts with the capacity; not `nranks * tokens * hidden`
    # (its leading dimension is the rank), not `hidden`, not the count itself
    assert _shape(require) == BatchShape("ntok", "tokens", ("x", "topk", "w"))


@pytest.mark.parametrize("require", [
    "0 <= ntok[0] < tokens",        # a strict bound is not the capacity
    "ntok[0] <= 8",                 # a number, not a parameter
    "0 <= ntok[0]",                 # no upper bound
    "ntok[0] <= tokens + 1",        # not the parameter itself
])
def test_no_count_without_a_parameter_bound(require: str) -> None:
    assert _shape(require) is None


def test_the_fixture_and_the_library() -> None:
    fixture = batch_shape(parse_ir(FIXTURE.read_text(), FIXTURE.name))
    assert fixture == BatchShape("ntok", "tokens", ("x",))
    # the fixed-count library protocols have no count (until they declare `ntok`)
    assert batch_shape(parse_ir((LIBRARY / "alltoallv.cco").read_text(), "alltoallv.cco")) is None
    # the combine takes its count too: its weights and `y` are batched in rows (the routing
    # table is a window: whole)
    combine = batch_shape(parse_ir((LIBRARY / "moe_combine.cco").read_text(), "moe_combine.cco"))
    assert combine == BatchShape("ntok", "tokens", ("topk_weight", "y"))
    # the dispatch reads its count on the device (`for t in range(n)`): x and the routing
    # table are batched in rows by it
    dispatch = batch_shape(parse_ir((LIBRARY / "moe_dispatch.cco").read_text(), "moe_dispatch.cco"))
    assert dispatch == BatchShape("ntok", "tokens", ("x", "topk_rank"))


def test_json_round_trip() -> None:
    shape = BatchShape("ntok", "tokens", ("x", "topk"))
    assert BatchShape.from_json(shape.to_json()) == shape


# -- an instance's numbers, from its manifest ------------------------------------------------
def batched_data(access: str = "read") -> dict[str, Any]:
    """buffered_data's manifest with a count `ntok` and `tokens=4`: `x` bf16[32] is 4 rows
    of 8, `counts` i32[2] is not row-batched."""
    data = buffered_data()
    data["buffers"].append({"name": "ntok", "dtype": "i32", "shape": [1], "access": access})
    data["kernels"][0]["params"].insert(1, "buffer:ntok")
    return data


SHAPE = BatchShape("ntok", "tokens", ("x",))


def test_resolve_reads_the_capacity_and_rows(tmp_path: Path) -> None:
    spec = OpSpec.from_manifest(_write(tmp_path, batched_data()), None, SHAPE)
    assert spec.batch == Batch("ntok", "tokens", 4, (RowBuffer("x", 8),))


def test_a_count_the_kernels_write_is_no_count(tmp_path: Path) -> None:
    assert OpSpec.from_manifest(_write(tmp_path, batched_data("readwrite")), None,
                                SHAPE).batch is None


def test_a_row_buffer_that_is_not_whole_rows_is_a_manifest_error(tmp_path: Path) -> None:
    data = batched_data()
    data["params"]["tokens"] = 5
    with pytest.raises(ManifestError, match="buffer `x` has 32 elements, not a multiple of "
                       "tokens=5"):
        OpSpec.from_manifest(_write(tmp_path, data), None, SHAPE)


# -- the binder ------------------------------------------------------------------------------
COUNT = Tensor("int32", (1,), ptr=0xC000)


def _binder(tmp_path: Path, rows: tuple[str, ...] = ("x",)) -> BufferBinder:
    spec = OpSpec.from_manifest(_write(tmp_path, batched_data()), None,
                                BatchShape("ntok", "tokens", rows))
    # the op's table of counts: row n at 0xD000 + 16 n
    return BufferBinder(spec, "cuda", 0, lambda n: Tensor("int32", (4,), ptr=0xD000 + 16 * n))


def _fails(binder: BufferBinder, given: dict[str, Any], code: str, message: str) -> None:
    with pytest.raises(ArgumentError, match=message) as info:
        binder.bind(given)
    assert info.value.code == code
    assert f": [{code}] " in str(info.value) and str(info.value).endswith(
        "; nothing was launched")


@pytest.mark.parametrize("n", [0, 1, 3, 4])
def test_the_count_is_the_rows_given(tmp_path: Path, n: int) -> None:
    binder = _binder(tmp_path)
    assert binder.names == ("x", "counts")  # the count is optional
    x = Tensor("bfloat16", (n, 8), ptr=0xA000)
    counts = Tensor("int32", (2,), ptr=0xB000)
    tensors, pointers, _ = binder.bind({"x": x, "counts": counts})
    # protocol order (x, counts, ntok); ntok is row n of the table
    assert tensors[:2] == (x, counts) and pointers == (0xA000, 0xB000, 0xD000 + 16 * n)
    flat = Tensor("bfloat16", (n * 8,), ptr=0xA000)  # a flat x: rows of 8 elements
    assert binder.bind({"x": flat, "counts": counts})[1][2] == 0xD000 + 16 * n


def test_more_rows_than_the_capacity(tmp_path: Path) -> None:
    _fails(_binder(tmp_path), {"x": Tensor("bfloat16", (5, 8)), "counts": Tensor("int32", (2,))},
           "TB002", "buffer `x` has 5 rows, more than the capacity tokens=4 it was loaded "
           "with; load with a larger `tokens`")


def test_rows_that_disagree(tmp_path: Path) -> None:
    data = batched_data()  # and a second row-batched buffer, `w` f32[4]: rows of 1
    data["buffers"].append({"name": "w", "dtype": "f32", "shape": [4], "access": "read"})
    data["kernels"][0]["params"].append("buffer:w")
    spec = OpSpec.from_manifest(_write(tmp_path, data), None,
                                BatchShape("ntok", "tokens", ("x", "w")))
    binder = BufferBinder(spec, "cuda", 0, lambda n: Tensor("int32", (4,), ptr=0xD000))
    _fails(binder, {"x": Tensor("bfloat16", (3, 8)), "counts": Tensor("int32", (2,)),
                    "w": Tensor("float32", (2,))},
           "TB001", "row-batched buffers disagree on the count: `x` has 3 rows, `w` has 2; "
           "pass the same number of rows \\(tokens\\) of every one of `x`, `w`")


def test_part_of_a_row(tmp_path: Path) -> None:
    _fails(_binder(tmp_path), {"x": Tensor("bfloat16", (12,)), "counts": Tensor("int32", (2,))},
           "TB006", "buffer `x` has 12 elements \\(shape \\[12\\]\\), not a whole number of "
           "rows of 8 \\(bf16\\[32\\]: tokens rows of 8\\); pass its first n rows, `x\\[:n\\]`")


def test_the_count_given_as_a_device_tensor(tmp_path: Path) -> None:
    binder = _binder(tmp_path)
    x = Tensor("bfloat16", (4, 8), ptr=0xA000)
    counts = Tensor("int32", (2,), ptr=0xB000)
    _, pointers, _ = binder.bind({"x": x, "counts": counts, "ntok": COUNT})
    assert pointers == (0xA000, 0xB000, 0xC000)  # the caller's count, read on the device
    _, pointers, _ = binder.bind({"x": x, "counts": counts, "ntok": 2})
    assert pointers[2] == 0xD000 + 32  # an int: the table's row


def test_the_count_given_with_sliced_tensors(tmp_path: Path) -> None:
    _fails(_binder(tmp_path), {"x": Tensor("bfloat16", (2, 8)), "counts": Tensor("int32", (2,)),
                               "ntok": COUNT},
           "TB003", "buffer `x` has 2 rows, but the count `ntok` is given: with `ntok=` every "
           "row-batched buffer is passed whole \\(tokens=4 rows\\)")


@pytest.mark.parametrize(("count", "code", "message"), [
    (5, "TB002", "the count `ntok=5` is outside 0...tokens=4"),
    (-1, "TB002", "the count `ntok=-1` is outside"),
    (Tensor("int64", (1,)), "TB005", "the count `ntok` is an int or a one-element contiguous "
     "int32 tensor on cuda:0 \\(the kernels read it on the device\\), not int64\\[1\\]"),
    (Tensor("int32", (2,)), "TB005", "not int32\\[2\\]"),
    (Tensor("int32", (1,), Device("cpu", None)), "TB005",
     "not int32\\[1\\] on cpu"),
    (2.0, "TB005", "not float"),
])
def test_a_bad_count(tmp_path: Path, count: Any, code: str, message: str) -> None:
    _fails(_binder(tmp_path), {"x": Tensor("bfloat16", (4, 8)), "counts": Tensor("int32", (2,)),
                               "ntok": count}, code, message)


def test_no_rows_to_count(tmp_path: Path) -> None:
    binder = _binder(tmp_path, rows=())
    _fails(binder, {"x": Tensor("bfloat16", (4, 8)), "counts": Tensor("int32", (2,))},
           "TB004", "has no row-batched buffer to take the count from: pass `ntok=`")
    assert binder.bind({"x": Tensor("bfloat16", (4, 8)), "counts": Tensor("int32", (2,)),
                        "ntok": 3})[1][2] == 0xD000 + 48


def test_an_unbatched_protocol_still_wants_whole_buffers(tmp_path: Path) -> None:
    binder = BufferBinder(OpSpec.from_manifest(_write(tmp_path, buffered_data())), "cuda", 0)
    with pytest.raises(ArgumentError, match="has 16 elements") as info:
        binder.bind({"x": Tensor("bfloat16", (2, 8)), "counts": Tensor("int32", (2,))})
    assert info.value.code is None
