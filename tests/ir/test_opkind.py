"""Op kinds: the trait table agrees with the ops' definitions, and every kind has
every piece an op needs (node, signature, builder method, printer, simulation,
code generation, fuzzing).  Adding an `OpKind` member without one of them fails here.
"""

from __future__ import annotations

import dataclasses
import re
import typing

import pytest
from hypothesis import strategies as st

from ccogen import builder
from ccogen.codegen import generate
from ccogen.driver import check_protocol
from ccogen.instantiate import instantiate
from ccogen.ir import nodes as ir
from ccogen.ir.opkind import TRAITS, OpKind, OpTraits, kinds_where
from ccogen.ir.signatures import OP_CLASSES, SIGNATURES
from ccogen.sim import simulate
from ccogen.sim.ops import IMPLS
from ccogen.syntax import parse_ir, to_source
from tests.strategies import op_strategies

KINDS = list(OpKind)


def _params(kind: OpKind) -> dict[str, str]:
    """Parameter name -> argument kind of the op's signature."""
    return {p.name: p.kind for p in SIGNATURES[kind]}


# ----------------------------------------------------------------------------- the table


def test_every_kind_has_one_trait_row() -> None:
    assert set(TRAITS) == set(OpKind)
    assert all(isinstance(t, OpTraits) for t in TRAITS.values())
    assert OpKind.PUT.traits is TRAITS[OpKind.PUT]


def test_kinds_are_their_names() -> None:
    assert [k.value for k in OpKind] == [k.name.lower() for k in OpKind]
    shown = f"`{OpKind.WAIT_SIGNAL}` {OpKind.PUT!s}"
    assert shown == "`wait_signal` put"
    assert OpKind("reset_count") is OpKind.RESET_COUNT


@pytest.mark.parametrize("kind", KINDS)
def test_traits_imply_each_other(kind: OpKind) -> None:
    t = kind.traits
    if t.queued:
        assert t.rings and t.signals
    if t.reduces:
        assert not (t.transfer or t.queued or t.blocking)
    if t.reads_remote:
        assert t.queued
    if t.waits:
        assert t.synchronises
    if t.synchronises:
        assert t.blocking


@pytest.mark.parametrize("kind", KINDS)
def test_traits_agree_with_the_signature(kind: OpKind) -> None:
    t, params = kind.traits, _params(kind)
    assert t.transfer == (params.get("dst") == params.get("src") == "region")
    assert t.reduces == (params.get("dst") == "region" and params.get("srcs") == "regions")
    data = "aggregate" in params  # a queued op with data; `signal` carries none
    assert t.queued == ("peer" in params and "queue" in params and (data or kind is OpKind.SIGNAL))
    assert t.queued and not t.transfer if kind is OpKind.SIGNAL else True
    assert t.signals == ("signal" in params or kind is OpKind.SIGNAL)
    assert t.waits == ("expected" in params)
    if t.rings:
        assert params.get("peer") == "rank" and params.get("queue") == "queue"


def test_the_trait_sets() -> None:
    """The sets the code used to spell out, now derived from the table."""
    assert kinds_where(queued=True) == {OpKind.PUT, OpKind.GET, OpKind.SIGNAL}
    assert kinds_where(queued=True, transfer=True) == {OpKind.PUT, OpKind.GET}
    assert kinds_where(transfer=True) == {OpKind.PUT, OpKind.GET, OpKind.COPY}
    assert kinds_where(reduces=True) == {OpKind.REDUCE}
    assert kinds_where(rings=True) == {OpKind.PUT, OpKind.GET, OpKind.COMMIT, OpKind.SIGNAL}
    assert kinds_where(blocking=True) == {OpKind.QUIET, OpKind.WAIT_SIGNAL, OpKind.WAIT_COUNT,
                                          OpKind.BARRIER}
    assert kinds_where(synchronises=True) == {OpKind.WAIT_SIGNAL, OpKind.WAIT_COUNT,
                                              OpKind.BARRIER}
    assert kinds_where(waits=True) == {OpKind.WAIT_SIGNAL, OpKind.WAIT_COUNT}
    assert kinds_where(orders_memory=True) == {OpKind.BARRIER, OpKind.FENCE}
    assert kinds_where(transfer=True, reads_remote=False) == {OpKind.PUT, OpKind.COPY}
    with pytest.raises(TypeError, match="no trait 'remote'"):
        kinds_where(remote=True)


# ----------------------------------------------------------------------------- every piece


def test_every_kind_has_a_node_class_and_a_signature() -> None:
    assert set(ir.OP_KINDS.values()) == set(OpKind)
    assert set(ir.OP_KINDS) == set(typing.get_args(ir.Op))
    for cls, kind in ir.OP_KINDS.items():  # `WaitSignal` is `wait_signal`
        assert cls.__name__ == kind.name.title().replace("_", ""), kind
        assert OP_CLASSES[kind] is cls
    assert list(SIGNATURES) == KINDS  # the order help texts list them in
    for kind, cls in OP_CLASSES.items():
        fields = {f.name for f in dataclasses.fields(cls)}
        assert set(_params(kind)) <= fields, kind


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_has_a_builder_method(kind: OpKind) -> None:
    method = getattr(builder.Kernel, kind.value, None)
    assert callable(method), f"the builder has no `k.{kind}(...)`"


def test_every_kind_has_a_simulation() -> None:
    assert set(IMPLS) == set(OpKind)


def test_every_kind_is_fuzzed() -> None:
    e = st.just(ir.Const(value=0))
    assert set(op_strategies(("w",), ("c",), e)) == set(OpKind)


EVERY_OP = '''\
# Every op of the language once.
protocol every_op(size: bytes = 4 KiB):
    team lsa(2)
    queues 1
    window a: size
    window b: size
    window c: size
    window d: size
    window e: size
    window f: size
    counter landed

    kernel k(threads=32):
        if me == 1:
            reset_count(landed)
        barrier()
        if me == 0:
            copy(dst=b, src=a)
            put(1, dst=c, src=b, queue=0, count=landed, aggregate=True)
            commit(1, queue=0)
            fence()
            put(1, dst=d, src=a, queue=0, signal="remote")
            quiet()
            wait_signal(1, queue=0)
        else:
            wait_count(landed)
            wait_signal(0, queue=0)
            get(0, dst=e, src=a, queue=0, signal="local")
            wait_signal(1, queue=0)
            reduce(dst=f, srcs=[e, a@0], op="max")
            signal(0, queue=0)

    ensure:
        if me == 1:
            c == init(a@0)
            d == init(a@0)
            e == init(a@0)
            f == max([init(a@0), init(a@0)])
'''

EVERY_OP_V1 = '''\
# Every op of language v1 once (what code generation covers so far).
protocol every_op(size: bytes = 4 KiB):
    team lsa(2)
    queues 1
    window a: size
    window b: size
    window c: size
    window d: size
    window e: size
    counter landed

    kernel k(threads=32):
        if me == 1:
            reset_count(landed)
        barrier()
        if me == 0:
            copy(dst=b, src=a)
            put(1, dst=c, src=b, queue=0, count=landed, aggregate=True)
            commit(1, queue=0)
            fence()
            put(1, dst=d, src=a, queue=0, signal="remote")
            quiet()
        else:
            wait_count(landed)
            wait_signal(0, queue=0)
            get(0, dst=e, src=a, queue=0, signal="local")
            wait_signal(1, queue=0)
        barrier()

    ensure:
        if me == 1:
            c == init(a@0)
            d == init(a@0)
            e == init(a@0)
'''


@pytest.fixture(scope="module")
def every_op() -> ir.Protocol:
    return parse_ir(EVERY_OP, "every_op.cco")


def test_the_every_op_protocol_uses_every_kind(every_op: ir.Protocol) -> None:
    instance, diags = instantiate(every_op, 2, {})
    assert instance is not None, diags
    assert {op.kind for ops in instance.ranks for op in ops} == set(OpKind)


def test_every_kind_prints_and_parses_back(every_op: ir.Protocol) -> None:
    assert parse_ir(to_source(every_op), "every_op.cco") == every_op


def test_every_kind_is_checked_and_simulated(every_op: ir.Protocol) -> None:
    result = check_protocol(every_op)
    assert not result.has_errors, [d.message for d in result.diagnostics]
    report = simulate(every_op, seeds=4)
    assert report.passed, report.summary()


@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem"])
def test_every_kind_generates_code(every_op: ir.Protocol, target: str) -> None:
    v1 = parse_ir(EVERY_OP_V1, "every_op.cco")
    instance, _ = instantiate(v1, 2, {})
    assert instance is not None
    code = generate(instance, target, source="every_op.cco").files["kernels.cu"]
    lowered = set(re.findall(r"// every_op\.cco:\d+: (\w+)", code))
    assert lowered == {k.value for k in OpKind} - {OpKind.REDUCE, OpKind.SIGNAL}  # v1 source


@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem"])
def test_every_v2_kind_generates_code(every_op: ir.Protocol, target: str) -> None:
    instance, _ = instantiate(every_op, 2, {})
    assert instance is not None
    code = generate(instance, target, source="every_op.cco").files["kernels.cu"]
    lowered = set(re.findall(r"// every_op\.cco:\d+: (\w+)", code))
    assert lowered == {k.value for k in OpKind}
