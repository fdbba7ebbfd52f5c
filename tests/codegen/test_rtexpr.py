"""Run-time values in generated code (codegen.rtexpr, codegen.plan, codegen.require),
checked on the model: the C expressions a step carries, evaluated with the contents the
simulator draws, give the offsets, lengths, counts and weights of the instance of those
contents (`instantiate(..., contents=)`), op by op.

The expressions are evaluated here by a small reader of the C the templates print
(`ccogen_ld<T>(c, peer, off)` reads the drawn element), so a change in how they are
printed shows up as a failure to parse, not as a silent pass.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from ccogen.codegen import Options, generate
from ccogen.codegen.backends import get_backend
from ccogen.codegen.backends.sm import SmBackend, expected_oracle
from ccogen.codegen.layout import plan_heap
from ccogen.codegen.model import LOCAL, BlockProgram, Step, buffer_peer
from ccogen.codegen.plan import _Builder
from ccogen.codegen.require import require_steps
from ccogen.codegen.steps import StepKind
from ccogen.instantiate import Contents, instantiate
from ccogen.instantiate.runtime import Writes
from ccogen.ir.dtype import DType
from ccogen.ir.instance import Instance
from ccogen.ir.opkind import OpKind
from ccogen.ir.values import decode
from ccogen.sim.runtime import draw
from ccogen.syntax import load_ir
from tests.helpers import library_params

# these read one rank's program in the text: per-rank functions (tests/codegen/conftest.py)
pytestmark = pytest.mark.usefixtures("per_rank")

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ("alltoallv", "moe_dispatch", "moe_combine", "moe_dispatch_ll")
_CTYPE = {"int32_t": DType.I32, "float": DType.F32, "uint32_t": DType.U32,
          "int64_t": DType.I64, "uint64_t": DType.U64, "uint8_t": DType.U8,
          "bf16": DType.BF16, "f16": DType.F16}
# integer casts: (bits, signed); `double` makes a float
_CASTS = {"int": (32, True), "int32_t": (32, True), "uint32_t": (32, False),
          "int64_t": (64, True), "uint64_t": (64, False)}
_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)(?:ULL|LL|U|L|f)?|(\w+)|"
                    r"(<=|>=|==|!=|&&|\|\||[-+*/%<>!?:(),]))")
# binary operators by C precedence, loosest first (the ternary `?:` is looser still)
_BINARY = [("||",), ("&&",), ("==", "!="), ("<", "<=", ">", ">="), ("+", "-"), ("*", "/", "%")]


_FUNCTIONS: dict[str, Callable[..., float]] = {
    "ccogen_rtmax": max, "ccogen_rtmin": min,
    "ccogen_floordiv": lambda a, k: a // k, "ccogen_floormod": lambda a, k: a % k}


def _wrap(value: int, bits: int, signed: bool) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if signed and value >> (bits - 1) else value


def _cdiv(a: float, b: float) -> float:
    """C's `/`: integers truncate toward zero."""
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q
    return a / b


class Reader:
    """Evaluates the C the templates print, reading elements from drawn contents.

    A recursive-descent reader of the expressions' C subset: integer and float
    literals (`ULL`, `LL` suffixes), `static_cast<T>(x)`, `ccogen_ld<T>(c, peer, off)` /
    `ccogen_ld_bf16(c, peer, off)` (the drawn element), `ccogen_rtmax`, `ccogen_rtmin`,
    `ccogen_floordiv`, `ccogen_floormod`, unary `-` and `!`, the binary operators of
    `_BINARY` and `cond ? x : y` (a guarded length, `codegen.spell.c._flag`).  `?:`, `&&`
    and `||` evaluate only the operand C evaluates: a guard that is 0 reads no element
    behind it, as on the device.  Anything else fails to parse."""

    def __init__(self, instance: Instance, contents: Contents, me: int) -> None:
        self.layout = plan_heap(instance, 1)
        self.contents = contents
        self.me = me
        self._tokens: list[str] = []
        self._at = 0
        # an element a static put/copy lands (moe_combine's `peer_ntok[p]`, the count p's
        # credit carries) holds its source by the time a load reads it (the checker
        # orders that load after the arrival): read the source
        self.writes = Writes(widths={n: d.size for n, d in instance.dtypes})
        for ops in instance.ranks:
            for op in ops:
                if op.kind in (OpKind.PUT, OpKind.COPY):
                    self.writes.add(op.dst, op.src)

    def element(self, ctype: str, peer: int, off: int) -> float | int:
        dtype = _CTYPE[ctype]
        if peer <= buffer_peer(0):
            name, rank, byte = self.layout.buffers[buffer_peer(0) - peer], self.me, off
        else:
            rank = self.me if peer == LOCAL else peer
            w = next(w for w in self.layout.windows if w.offset <= off < w.offset + w.size)
            name, byte = w.name, off - w.offset
            cell = self.writes.resolve((name, rank, byte // dtype.size))
            if cell is not None and cell[0] != name:
                name, rank, byte = cell[0], cell[1], cell[2] * dtype.size
        raw = self.contents.arrays[(rank, name)][byte:byte + dtype.size]
        assert len(raw) == dtype.size, f"{name}[{byte}] of rank {rank} read past its end"
        value = decode(raw, dtype)[0]
        return float(value) if dtype.is_float else int(value)

    def value(self, text: str) -> float:
        self._tokens, pos = [], 0
        while pos < len(text.rstrip()):
            m = _TOKEN.match(text, pos)
            assert m is not None and m.end() > pos, f"cannot read {text[pos:pos + 20]!r}"
            self._tokens.append(m[1] or m[2] or m[3])  # a number without its suffix
            pos = m.end()
        self._at = 0
        result = self._ternary(True)
        assert self._at == len(self._tokens), f"left over: {self._tokens[self._at:]}"
        return result

    # ------------------------------------------------------------------ the grammar
    # Each rule takes `live`: False while reading an operand C does not evaluate (it is
    # parsed, its elements are not read, and it yields 0).
    def _peek(self) -> str | None:
        return self._tokens[self._at] if self._at < len(self._tokens) else None

    def _take(self, expected: str | None = None) -> str:
        token = self._peek()
        assert token is not None and (expected is None or token == expected), (
            f"expected {expected!r}, got {token!r}")
        self._at += 1
        return token

    def _ternary(self, live: bool) -> float:
        cond = self._binary(0, live)
        if self._peek() != "?":
            return cond
        self._take("?")
        then = self._ternary(live and bool(cond))
        self._take(":")
        other = self._ternary(live and not cond)
        return then if cond else other

    def _binary(self, level: int, live: bool) -> float:
        if level == len(_BINARY):
            return self._unary(live)
        left = self._binary(level + 1, live)
        while self._peek() in _BINARY[level]:
            op = self._take()
            if op in ("&&", "||"):
                short = (not left) if op == "&&" else bool(left)
                right = self._binary(level + 1, live and not short)
                left = int(bool(left) and bool(right)) if op == "&&" else int(
                    bool(left) or bool(right))
                continue
            right = self._binary(level + 1, live)
            if not live:
                left = 0
            elif op in ("==", "!=", "<", "<=", ">", ">="):
                left = int({"==": left == right, "!=": left != right, "<": left < right,
                            "<=": left <= right, ">": left > right, ">=": left >= right}[op])
            elif op == "/":
                left = _cdiv(left, right)
            elif op == "%":
                assert isinstance(left, int) and isinstance(right, int), "% of a float"
                left = left - right * int(_cdiv(left, right))
            else:
                left = {"+": left + right, "-": left - right, "*": left * right}[op]
        return left

    def _unary(self, live: bool) -> float:
        token = self._peek()
        if token == "-":
            self._take()
            return -self._unary(live)
        if token == "!":
            self._take()
            return int(not self._unary(live))
        return self._primary(live)

    def _args(self, live: bool) -> list[float]:
        self._take("(")
        args = [self._ternary(live)]
        while self._peek() == ",":
            self._take(",")
            args.append(self._ternary(live))
        self._take(")")
        return args

    def _type_argument(self) -> str:
        self._take("<")
        name = self._take()
        self._take(">")
        return name

    def _primary(self, live: bool) -> float:
        token = self._take()
        if token == "(":
            inner = self._ternary(live)
            self._take(")")
            return inner
        if token[0].isdigit():
            return float(token) if "." in token or "e" in token.lower() else int(token)
        if token == "static_cast":
            ctype = self._type_argument()
            (x,) = self._args(live)
            if ctype == "double":
                return float(x)
            if ctype == "float":  # rounded to single precision
                return float(struct.unpack("f", struct.pack("f", x))[0])
            bits, signed = _CASTS[ctype]
            return _wrap(int(x), bits, signed)
        if token in ("ccogen_ld", "ccogen_ld_bf16", "ccogen_ld_f16"):
            ctype = self._type_argument() if token == "ccogen_ld" else token[len("ccogen_ld_"):]
            self._take("(")
            self._take("c")
            self._take(",")
            peer = self._ternary(live)
            self._take(",")
            off = self._ternary(live)
            self._take(")")
            return self.element(ctype, int(peer), int(off)) if live else 0
        assert token in _FUNCTIONS, f"unknown name {token!r}"
        args = self._args(live)
        return _FUNCTIONS[token](*args) if live else 0


def _instances(name: str, nranks: int, which: str, seed: int
               ) -> tuple[Instance, Instance, Contents]:
    protocol = load_ir(ROOT / "protocols" / f"{name}.cco")
    params = library_params(name) or {"cap": 8}
    symbolic, diags = instantiate(protocol, nranks, params)
    assert symbolic is not None, diags
    contents, label = draw(protocol, nranks, params, which, seed)
    assert contents is not None, label
    concrete, diags = instantiate(protocol, nranks, params, contents=contents)
    assert concrete is not None and not [d for d in diags if d.is_error], diags
    return symbolic, concrete, contents


def _builder(instance: Instance) -> _Builder:
    layout = plan_heap(instance, 1)
    return _Builder("group", layout, expected_oracle(instance), "p.cco", instance=instance)


@pytest.mark.parametrize("which", ["low", "high", "mixed-3", "interior-4"])
@pytest.mark.parametrize("nranks", [2, 3])
@pytest.mark.parametrize("name", RUNTIME)
def test_copy_expressions_give_the_drawn_regions(name: str, nranks: int, which: str) -> None:
    symbolic, concrete, contents = _instances(name, nranks, which, seed=5)
    b = _builder(symbolic)
    checked = 0
    for rank in range(nranks):
        reader = Reader(symbolic, contents, rank)
        ops = symbolic.ranks[rank]
        assert [o.kind for o in ops] == [o.kind for o in concrete.ranks[rank]]
        for sym, con in zip(ops, concrete.ranks[rank], strict=True):
            if not sym.kind.traits.transfer or sym.dst is None or sym.dst.runtime is None:
                continue
            step = b.copy(sym)
            let = {k: reader.value(v) for k, v in step.let}
            assert let["rt_n"] == con.dst.size  # type: ignore[union-attr]
            _, dst = b.layout.address(con.dst, rank)  # type: ignore[arg-type]
            _, src = b.layout.address(con.src, rank)  # type: ignore[arg-type]
            if con.dst.size:  # type: ignore[union-attr]
                assert (let["rt_dst"], let["rt_src"]) == (dst, src)
            assert dict(step.rt)["nbytes"] == "rt_n"
            if sym.rt_peer is not None and sym.kind is OpKind.PUT:  # a run-time peer
                assert dict(step.rt)["dst_peer"] == "static_cast<int>(rt_peer)"
                assert (let["rt_peer"] == con.peer) == bool(con.dst.size)  # type: ignore[union-attr]
            checked += 1
    assert checked


@pytest.mark.parametrize("which", ["mixed-1", "interior-2"])
def test_reduce_weights_are_the_drawn_weights(which: str) -> None:
    symbolic, concrete, contents = _instances("moe_combine", 2, which, seed=9)
    b = _builder(symbolic)
    seen = 0
    for rank in range(2):
        reader = Reader(symbolic, contents, rank)
        for sym, con in zip(symbolic.ranks[rank], concrete.ranks[rank], strict=True):
            if sym.kind is not OpKind.REDUCE:
                continue
            step = b.reduce(sym)
            assert step.reduction is not None
            got = [reader.value(w) for w in step.reduction.weights]
            assert got == pytest.approx([float(w) for w in con.weights], rel=1e-6)
            seen += 1
    assert seen == 2 * 8


def test_static_protocols_print_no_runtime_support() -> None:
    path = ROOT / "protocols" / "alltoall.cco"
    instance, _ = instantiate(load_ir(path), 2, {})
    assert instance is not None
    text = generate(instance, "nccl-lsa", source="alltoall.cco", options=Options()).files[
        "kernels.cu"]
    assert "ccogen_ld<" not in text and "run-time values" not in text


@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem"])
def test_runtime_protocol_prints_loads_and_support(target: str) -> None:
    path = ROOT / "protocols" / "alltoallv.cco"
    instance, _ = instantiate(load_ir(path), 2, {"cap": 64})
    assert instance is not None
    text = generate(instance, target, source="alltoallv.cco", options=Options()).files[
        "kernels.cu"]
    assert "ccogen_ld<int32_t>(c, -3, " in text  # counts, local buffer 1
    assert "const uint64_t rt_n = " in text
    assert "ccogen_require(c, (" not in text  # release build: no device check


def _counts(contents: Contents, rank: int, n: int) -> list[int]:
    raw = contents.arrays[(rank, "counts")]
    return [int(v) for v in decode(raw, DType.I32)[:n]]


def test_require_steps_hold_on_drawn_contents_and_catch_a_violation() -> None:
    symbolic, _, contents = _instances("alltoallv", 2, "mixed-2", seed=3)
    layout = plan_heap(symbolic, 1)
    steps = require_steps(symbolic, layout)
    assert set(steps) == {0, 1}
    for rank, checks in steps.items():
        reader = Reader(symbolic, contents, rank)
        assert len(checks) == 2 * 2  # 0 <= counts[p] and counts[p] <= cap, p in ranks()
        line = next(i for i, text in enumerate(
            (ROOT / "protocols" / "alltoallv.cco").read_text().splitlines(), 1)
            if "0 <= counts[p] <= cap" in text)
        assert all(s.kind is StepKind.REQUIRE and s.line == line for s in checks)
        assert all(reader.value(s.text) for s in checks)
    bad = Contents({k: v.copy() for k, v in contents.arrays.items()}, contents.dtypes)
    bad.set("counts", 1, 0, 9)  # cap is 8
    reader = Reader(symbolic, bad, 1)
    broken = [s for s in steps[1] if not reader.value(s.text)]
    assert [(s.src, reader.value(dict(s.rt)["value"])) for s in broken] == [(0, 9)]
    assert _counts(bad, 1, 2)[0] == 9


def test_debug_build_checks_require_first() -> None:
    path = ROOT / "protocols" / "moe_dispatch.cco"
    instance, _ = instantiate(load_ir(path), 2, library_params("moe_dispatch"))
    assert instance is not None
    for debug in (False, True):
        text = generate(instance, "nvshmem", source="moe_dispatch.cco",
                        options=Options(debug=debug)).files["kernels.cu"]
        first = text.index("_r0_b0(const ccogen_ctx& c) {")
        body = text[first:text.index("\n}\n", first)]
        assert ("ccogen_require(c, (" in body) is debug
        if debug:  # every check before anything else: the first op (its credit's signal,
            # moe_dispatch has no barrier: issue 30), the first transfer
            last = body.rindex("ccogen_require(c, (")
            first_op = body.index("  // moe_dispatch.cco:")
            assert last < first_op < body.index("ccogen_signal_group")
            assert last < body.index("ccogen_copy_group")


def test_a_runtime_counted_wait_consumes_its_bytes() -> None:
    """`wait_count(C, expected=<run-time>)`: an `rtwait` on the counter, its total
    computed on the device from the header the waiter holds (docs/reference example)."""
    text = (ROOT / "docs" / "reference" / "language.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S)
                 if "protocol counted_rows(" in b)
    from ccogen.syntax import parse_ir

    instance, _ = instantiate(parse_ir(block, "counted_rows.cco"), 2, {})
    assert instance is not None
    b = _builder(instance)
    (wait,) = [o for o in instance.ranks[1] if o.kind is OpKind.WAIT_COUNT]
    step = b.wait(wait)
    assert step.kind is StepKind.RTWAIT and step.c_value == "rt_expected"
    (name, expr), = step.let
    assert name == "rt_expected"
    header = b.layout.window("header").offset
    assert f"ccogen_ld<int32_t>(c, -1, {header}ULL)" in expr  # read where the waiter is
    assert f"ccogen_ld<int32_t>(c, -1, {header + 4}ULL)" in expr
    assert "16LL" in expr


def _programs(instance: Instance, target: str) -> list[BlockProgram]:
    backend = get_backend(target)
    assert isinstance(backend, SmBackend)
    model, _ = backend.model(instance, "p.cco", Options())
    return [p for k in model.kernels for p in k.programs]


def test_counts_are_exchanged_once_with_no_host_round_trip() -> None:
    instance, _ = instantiate(load_ir(ROOT / "protocols" / "alltoallv.cco"), 2, {"cap": 64})
    assert instance is not None
    for p in _programs(instance, "nccl-lsa"):
        steps = [s for seg in p.segments for s in (*seg.steps, *(t for br in seg.branches
                                                                for t in br.steps))]
        counted: list[Step] = [s for s in steps if s.kind in (StepKind.COPY, StepKind.PUTSIG)
                               and s.dst_peer >= 0 and not s.rt]
        assert len(counted) == 1 and counted[0].nbytes == 4  # got[me] on the one peer
        assert not [s for s in steps if s.kind is StepKind.RTWAIT]


@pytest.mark.parametrize("which", ["low", "high", "mixed-2"])
@pytest.mark.parametrize("name", RUNTIME)
def test_every_require_step_holds_on_drawn_contents(name: str, which: str) -> None:
    symbolic, _, contents = _instances(name, 2, which, seed=8)
    steps = require_steps(symbolic, plan_heap(symbolic, 1))
    assert all(steps.values())
    for rank, checks in steps.items():
        reader = Reader(symbolic, contents, rank)
        assert all(reader.value(s.text) for s in checks), [s.text for s in checks
                                                            if not reader.value(s.text)][:1]


COUNTED_RT = """\
protocol counted_rt(rows: int = 64, row_bytes: int = 16):
    team lsa(2)
    queues 2
    counter landed
    window header: i32[1]
    window inbox: u8[rows * row_bytes]
    window data: u8[rows * row_bytes]
    buffer n: i32[1]

    require:
        0 <= n[0] <= rows

    kernel send(threads=64):
        barrier()
        if me == 0:
            put(1, dst=header[0:1], src=n[0:1], queue=0, signal="remote")
            size = load(n[0]) * row_bytes
            put(1, dst=inbox[0 : size], src=data[0 : size], queue=1, count=landed)
            quiet()
        else:
            wait_signal(0, queue=0)
            wait_count(landed, expected=load(header[0]) * row_bytes)

    ensure:
        if me == 1:
            inbox[0 : header[0] * row_bytes] == init(data@0)[0 : header[0] * row_bytes]
"""


@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem"])
def test_a_counted_put_of_run_time_length_adds_its_run_time_bytes(target: str) -> None:
    from ccogen.compiler import compile_protocol
    from ccogen.syntax import parse_ir

    text = compile_protocol(parse_ir(COUNTED_RT, "c.cco"), target, source="c.cco",
                            ranks=2).files["kernels.cu"]
    # nvshmem fuses the put and its count (put-with-signal); nccl-lsa adds after the copy
    fused = re.search(r"ccogen_putsig_group\(c, 1, rt_dst, rt_src, rt_n, \d+ULL, rt_n\);", text)
    added = re.search(r"ccogen_signal_group\(c, 1, \d+ULL, rt_n\);", text)
    assert (fused if target == "nvshmem" else added) is not None
    assert re.search(r"ccogen_rtwait_group\(c, \d+ULL, rt_expected, 22, 0\);", text)
