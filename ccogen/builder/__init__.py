"""The Python builder API: build a protocol in Python, get the IR the text would give.

Everything the `.cco` text can say, the builder can build, and the result is the
*same* frozen `ccogen.ir.nodes.Protocol` that parsing the equivalent text yields
(spans aside, which equality ignores).  `parse(p.to_source()) == p` holds.

```python
import ccogen as cg

p = cg.Protocol("alltoall", team=cg.lsa(), doc="every rank sends one block to every peer")
block = p.param("block", cg.bytes, default=cg.MiB)
send = p.window("send", p.nranks * block)
recv = p.window("recv", p.nranks * block)
with p.kernel("exchange", threads=64) as k:
    with k.lanes(k.peers()) as peer:
        k.put(peer, dst=recv[k.me * block:(k.me + 1) * block],
              src=send[peer * block:(peer + 1) * block], queue=0, signal="remote")
        k.quiet(peer)
        k.wait_signal(peer, queue=0)
with p.ensure() as e:
    with e.for_(e.peers()) as q:
        e.check(recv[q * block:(q + 1) * block]
                == cg.init(send @ q)[e.me * block:(e.me + 1) * block])
```

Protocol and declarations (text form on the right)
---------------------------------------------------
- `Protocol(name, *, team=None, doc=None)`          `protocol NAME(...):` + docstring
- `p.team = cg.lsa(4)`, also `team=` above          `team lsa(4)`; default `team lsa`.
  `cg.lsa()`, `cg.lsa(n)`, `cg.world()`, `cg.world(n)`.
- `p.param(name, cg.bytes | cg.int_, default=E)`    `name: bytes = E`; returns a `Value`.
  The type may also be `"bytes"`/`"int"` or Python's `bytes`/`int`; `ccogen.builder.int`
  is `int_` (served by a module `__getattr__` so that `int` stays the builtin here).
- `p.queues(n)` / `p.queues("auto")`                `queues n` / `queues auto` (default 1)
- `p.between_launches("host_sync")`                 `between_launches: host_sync`
- `p.window(name, size, align=None)`                `window name: size, align=A`; a `Window`
- `p.counter(name)`                                  `counter name`; a `Counter`
- `p.kernel(name, threads=T, blocks=None)`          `kernel name(threads=T, blocks=B):`
- `p.ensure()`                                       `ensure:`
- `p.nranks`                                         `nranks` (for window sizes)
- `p.params`, `p.windows`, `p.counters`: read-only name -> handle mappings (also for a
  protocol from `Protocol.from_ir`).
- `p.ir` (the frozen IR), `p.to_source()` (canonical text), `p == q` (compares IR; `q`
  may be a builder `Protocol` or an `ir.Protocol`), `Protocol.from_ir(ir_protocol)`.

Names are Python identifiers that are neither keywords nor built-in names (`me`,
`nranks`, `init`, the built-in functions and the op names).  Parameters, windows and
counters share one namespace; kernels have their own.  Declarations must not be made
inside a `with` block, and each kind keeps its source order in the IR.

Kernels and ensure
------------------
`with p.kernel(...) as k:` and `with p.ensure() as e:` open a scope; a scope has

- `k.me`, `k.nranks`, `k.peers()`, `k.ranks()`, `k.range(stop)` / `k.range(start, stop[,
  step])`, `k.len(x)` (the built-ins; all return `Value`s);
- `with k.for_(iterable, name=None) as i:`          `for i in iterable:`
- `with k.if_(c):` / `with k.elif_(c):` / `with k.else_():`; `elif_`/`else_` must directly
  follow an `if_`/`elif_` block of the same body and become `If(..., orelse=(If(...),))`;
- `k.pass_()`                                        `pass`
- kernels only: `with k.lanes(it) as x:`, `k.warps(it)`, `k.blocks(it)` (issuer blocks;
  `blocks` only at the top level of a kernel, `warps` not inside `lanes` or `warps`,
  `lanes` not inside `lanes`), and the operations, with the signatures of the text:
  `k.put(peer, dst=, src=, queue=, signal=, aggregate=, signal_per_copy=, mode=, count=)`,
  `k.get(peer, dst=, src=, queue=, signal=, aggregate=, mode=)`, `k.copy(dst=, src=)`,
  `k.commit(peer, queue=)`, `k.quiet()`, `k.quiet(peer)`, `k.quiet(peer, queue=)`,
  `k.wait_signal(src, queue=, expected=)`, `k.wait_count(counter, expected=)`,
  `k.reset_count(counter)`, `k.barrier()`, `k.fence()`.  `queue` is an integer or `"auto"`
  (the default); `signal`/`mode` are the strings of the text (or `ir.SignalKind`/`ir.Mode`);
  `aggregate`/`signal_per_copy` are Python bools; `count`/`counter` a `Counter` or the name
  of a declared one; regions are a `Window` (the whole window) or a slice of one.
- ensure only: `e.check(region == region)` / `e.check(region != region)`.

`pass` lowers to nothing, as in the text: an empty body is an empty tuple (the printer
writes `pass` for it), and `k.pass_()` only exists for symmetry.

Loop variables: `with k.lanes(k.peers()) as peer:` names the variable `peer`, read from
the `with ... as NAME` target.  `name="p"` overrides it.  Where no usable target exists
(no `as`, an attribute target, a name that is taken or reserved) the builder picks `i0`, `i1`...
(deterministic per protocol, skipping taken names).  A given `name=` that shadows a
parameter, window, counter or an enclosing loop variable is an error.

Values
------
`Value` wraps an IR `Expr`.  `+ - * // % **`, unary `-`/`+` and `abs()` build `BinOp`,
`UnaryOp` and `Call`; `== != < <= > >=` build `Compare` and return a `Value` (so `Value`
is unhashable).  Python ints and bools become `Const` (a negative int too, as the text's
`-1` does), lists and tuples `ListExpr`, Python `range(...)` objects `range(...)` calls.
`cg.and_(a, b, ...)`, `cg.or_(...)`, `cg.not_(a)`, `cg.where(cond, then, orelse)` (`then
if cond else orelse`), `cg.min(...)`, `cg.max(...)`, `cg.abs(x)` build the rest.  A Python
`if`, `and`, `or`, `not`, chained comparison, `min`/`max` or `range` on a `Value` needs a
concrete value and raises E004 at that line; `/`, `&`, `|`, `~`, `^`, `<<`, `>>` are E002.
Reflected operators keep Python's order: `0 == k.me` builds `me == 0`.

Regions: `w[a:b]` (either bound may be omitted) is a `Region`; `w.at(r)` or `w @ r` is
rank r's window and `cg.init(x)` its contents before the first kernel (both only in
`ensure`); `region == region` / `region != region` is a `Condition` for `e.check`.

Sizes: `cg.KiB`, `cg.MiB`, `cg.GiB` are the plain integers 2**10, 2**20, 2**30.

Language v2 (typed data, reductions, credits)
---------------------------------------------
- Element types `cg.u8 cg.i32 cg.u32 cg.i64 cg.u64 cg.f16 cg.bf16 cg.f32`; `cg.bf16[n]`
  is `bf16[n]`.  `T = p.param("T", cg.dtype, default=cg.bf16)` is `T: dtype = bf16`;
  `T[n]` works as for a dtype.
- `p.window("x", T[n])` is `window x: T[n]`; `p.buffer("out", T[n])` is
  `buffer out: T[n]` (a `Window` handle too; `p.buffers` lists them).
- `k.reduce(dst=, srcs=[...], op="sum", weights=None)`; a source may be a peer's
  region (`x @ p`, `(x @ p)[a:b]`); `k.each(iterable, lambda p: x @ p)` is the
  comprehension `[x@p for p in iterable]` (the variable is named after the lambda's
  parameter, or `name=`; `cond=lambda p: ...` adds `if ...`).  Weights are Python
  numbers or integer `Value`s (a list, or a `k.each(...)`).
- `k.signal(peer, queue=)`.
- `right = k.let((k.me + 1) % k.nranks)` is `right = (me + 1) % nranks` (the name is
  read from the assignment target, or `name=`); it is bound until the enclosing
  `with` block ends.  Also in `ensure`.
- In `ensure`: `e.check(out == cg.sum(e.each(e.ranks(), lambda p: cg.init(x @ p))))`,
  `cg.sum([a, b], weights=[1, 2])`, `cg.max(...)`/`cg.min(...)` of regions.

Run-time values (language v2 §3, §4)
-----------------------------------
- `cg.load(x, i)` is `load(x[i])`, `cg.load(x @ p, i)` is `load(x@p[i])`: a run-time
  value.  In `require` it reads the initial contents (the text writes `x[i]`); in
  `ensure` the final ones (`x[i]`), or `cg.load(cg.init(x @ p), i)` the initial ones
  (`init(x@p)[i]`).
- `with p.require() as r:` is `require:`; `r.check(cond)` adds a precondition, e.g.
  `r.check(cg.chain(0, "<=", cg.load(counts, q), "<=", cap))` (`0 <= counts[q] <= cap`).
- `cg.sum(k.each(k.peers(), lambda p: cg.load(got, p)))` is `sum(load(got[p]) for p in
  peers())`; `cg.max`/`cg.min` of an `each` of numbers likewise.
- In `ensure`, `got[p]` (an index, not a slice) is the one-element region `got[p]`.

Errors and spans
----------------
Every node records the span of the user's call (Python >= 3.11 instruction positions:
line, end line, start and end column), so diagnostics point at the user's file.  Every
mistake raises `DiagnosticError` at once, at the faulty call, with coded diagnostics
(E002 names and arguments, E003 regions, E004 truth values).  Every public function and
method takes `src_loc_at=0`: a wrapper passes `src_loc_at=1` to blame its own caller.

Modules: `protocol` (`Protocol`), `scopes` (`Kernel`, `Ensure` and their blocks),
`values` (expressions, teams, regions, counters), `names`, `spans`.
"""

from __future__ import annotations

from typing import Final

from ccogen.builder.protocol import Protocol
from ccogen.builder.scopes import Ensure, Kernel, Require
from ccogen.builder.values import (
    Condition,
    Counter,
    Each,
    ElementType,
    Reduction,
    Region,
    Shape,
    Value,
    Window,
    abs,
    and_,
    bf16,
    chain,
    f16,
    f32,
    i32,
    i64,
    init,
    load,
    lsa,
    max,
    min,
    not_,
    or_,
    sum,
    u8,
    u32,
    u64,
    where,
    world,
)
from ccogen.ir import nodes

KiB: Final = 1 << 10
MiB: Final = 1 << 20
GiB: Final = 1 << 30

bytes = nodes.ParamType.BYTES
int_: Final = nodes.ParamType.INT  # `cg.int` is served by `__getattr__` below
dtype: Final = nodes.ParamType.DTYPE


def __getattr__(name: str) -> object:
    """`ccogen.builder.int` is `int_` (a module attribute would shadow `int` in this file)."""
    if name == "int":
        return int_
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Condition",
    "Counter",
    "Each",
    "ElementType",
    "Ensure",
    "GiB",
    "Kernel",
    "KiB",
    "MiB",
    "Protocol",
    "Reduction",
    "Region",
    "Require",
    "Shape",
    "Value",
    "Window",
    "abs",
    "and_",
    "bf16",
    "bytes",
    "chain",
    "dtype",
    "f16",
    "f32",
    "i32",
    "i64",
    "init",
    "int_",
    "load",
    "lsa",
    "max",
    "min",
    "not_",
    "or_",
    "sum",
    "u8",
    "u32",
    "u64",
    "where",
    "world",
]
