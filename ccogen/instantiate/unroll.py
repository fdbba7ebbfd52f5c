"""Unrolling kernels: every kernel body on every rank, into pending op instances.

Issuer blocks give each statement its issuer and auto-queue slot (`_Scope`); each op
kind evaluates its operands (`Unroller._ops`); program order is the frontier carried
through (fork and join at issuer blocks).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ccogen.instantiate.declarations import Decl, KernelHead
from ccogen.instantiate.evaluating import Evaluating, _reads, forget_assigned, unique_loads
from ccogen.instantiate.findings import Findings
from ccogen.instantiate.limits import WARP_SIZE
from ccogen.instantiate.sampling import Where, nodes_of
from ccogen.ir import nodes as ir
from ccogen.ir.dtype import DType
from ccogen.ir.evalerror import EvalError
from ccogen.ir.evaluate import Compiler, Env, expr_text
from ccogen.ir.instance import Issuer, LoadInst, RegionInst, RtPeer
from ccogen.ir.opkind import OpKind
from ccogen.ir.runtime import Rt


class Pending:
    """An op instance before queues `auto` and groups are resolved."""

    __slots__ = ("dst", "dtype", "expected", "expected_rt", "group", "issuer", "kernel", "kind",
                 "loads", "op", "outer_loads", "peer", "preds", "queue", "reduce_op", "rt_peer",
                 "slot", "src", "srcs", "wait_default", "weights", "weights_rt", "where")

    def __init__(self, kind: OpKind, op: ir.Op, kernel: int, issuer: Issuer) -> None:
        self.kind = kind
        self.op = op
        self.kernel = kernel
        self.issuer = issuer
        self.preds: tuple[int, ...] = ()
        self.peer: int | None = None
        self.queue: int | None = None
        self.slot: int | None = None  # queue=auto: the queue is slot % Q
        self.wait_default = False  # wait_signal without queue=
        self.dst: RegionInst | None = None
        self.src: RegionInst | None = None
        self.expected: int | None = None
        self.group: tuple[object, ...] | None = None  # lane posting-group key
        self.srcs: tuple[RegionInst, ...] = ()
        self.reduce_op: ir.ReduceOp | None = None
        self.weights: tuple[int | float, ...] = ()
        self.dtype: DType | None = None
        self.expected_rt: object = None  # a run-time `expected=` (`Rt`)
        self.weights_rt: tuple[object, ...] = ()  # run-time weights (`Rt`s and numbers)
        self.loads: tuple[LoadInst, ...] = ()  # run by its issuer just before it
        # in a sampled loop: how many of `loads` (the first) ran before the loop (a count
        # `n = load(...)` or the loop's own bound), not in its body (`sampling.sampled_loads`)
        self.outer_loads = 0
        self.where: Where | None = None  # in a loop checked on three iterations
        self.rt_peer: RtPeer | None = None  # one candidate of a run-time peer

    def candidate(self, peer: int, rt_peer: RtPeer, dst: RegionInst | None,
                  src: RegionInst | None) -> Pending:
        """A copy of this pending op toward candidate `peer` of its run-time peer."""
        out = Pending(self.kind, self.op, self.kernel, self.issuer)
        for name in Pending.__slots__:
            setattr(out, name, getattr(self, name))
        out.peer, out.rt_peer, out.dst, out.src = peer, rt_peer, dst, src
        return out


@dataclass(frozen=True, slots=True)
class _Scope:
    """Who runs the statements being unrolled, and inside what."""

    issuer: Issuer
    slot: int = 0  # auto-queue slot
    top: bool = True  # directly in the kernel body
    block_pos: int | None = None
    warp_pos: int | None = None
    lanes: bool = False
    outer: tuple[ir.IssuerBlock, ...] = ()

    def nested(self) -> _Scope:
        return replace(self, top=False) if self.top else self


_TOP = _Scope(Issuer(block=0))
_FINENESS = {ir.IssuerKind.LANES: 0, ir.IssuerKind.WARPS: 1, ir.IssuerKind.BLOCKS: 2}


def _child(kind: ir.IssuerKind, scope: _Scope, outer: tuple[ir.IssuerBlock, ...],
           pos: int, n: int) -> _Scope:
    block = scope.issuer.block
    if kind is ir.IssuerKind.BLOCKS:
        return _Scope(Issuer(block=pos), pos, False, pos, None, False, outer)
    if kind is ir.IssuerKind.WARPS:
        slot = pos if scope.block_pos is None else scope.block_pos * n + pos
        return _Scope(Issuer(block=block, warp=pos), slot, False, scope.block_pos, pos, False,
                      outer)
    if scope.warp_pos is not None:
        w = scope.warp_pos
        return _Scope(Issuer(block, w, w * WARP_SIZE + pos), scope.slot, False, scope.block_pos,
                      w, True, outer)
    warp = pos // WARP_SIZE
    per_block = -(-n // WARP_SIZE)
    slot = warp if scope.block_pos is None else scope.block_pos * per_block + warp
    return _Scope(Issuer(block=block, lane=pos), slot, False, scope.block_pos, None, True, outer)


class Unroller(Evaluating):
    """Runs every kernel body on every rank, recording `Pending` op instances."""

    records_loads = True

    def __init__(self, protocol: ir.Protocol, nranks: int, params: Mapping[str, int],
                 decl: Decl, compiler: Compiler, findings: Findings) -> None:
        super().__init__(nranks, params, decl.memories, compiler, findings)
        self.decl = decl
        self.ops: list[list[Pending]] = [[] for _ in range(nranks)]
        self.grid = [1] * len(decl.kernels)  # longest `blocks` range run, per kernel
        self._kernel = 0
        self._head = decl.kernels[0] if decl.kernels else None
        self._rank_ops: list[Pending] = []
        self._path: list[int] = []
        # loads an issuer ran that wait for its next op (their read event is its issue)
        self._held: dict[Issuer, list[LoadInst]] = {}
        self._fan: dict[int, list[Pending]] = {}  # a run-time peer's candidates, per op
        # per issuer, in the sampled loop being run: how many of its held loads were held
        # before the loop (the first op of the body takes them; `Pending.outer_loads`)
        self._pre_loop: dict[Issuer, int] = {}
        # loops that run to a run-time count (`_runtime_range`): the guard `t < n` of each
        # enclosing one's current iteration (an `Rt` 0/1, or a concrete bool)
        self._guards: list[object] = []
        # concrete instances: the names a loop bound uses, as `Rt`s (their `require` bounds
        # give the loop's capacity, the same in every draw)
        self._bound_names = _range_names(protocol)
        self._symbolic_vars: dict[str, Any] = {}
        self._stmts: dict[type, Callable[[Any, _Scope, tuple[int, ...]], tuple[int, ...]]] = {
            ir.For: self._for, ir.If: self._if, ir.IssuerBlock: self._issuers,
            ir.Check: self._misplaced_check, ir.Assign: self._assign_stmt,
        }
        self._ops: dict[OpKind, Callable[[Any, _Scope, Pending], None]] = {
            OpKind.PUT: self._put, OpKind.GET: self._get, OpKind.COPY: self._copy,
            OpKind.COMMIT: self._commit, OpKind.QUIET: self._quiet,
            OpKind.WAIT_SIGNAL: self._wait_signal, OpKind.WAIT_COUNT: self._wait_count,
            OpKind.RESET_COUNT: self._plain, OpKind.BARRIER: self._plain,
            OpKind.FENCE: self._plain, OpKind.REDUCE: self._reduce, OpKind.SIGNAL: self._signal,
        }  # how each op kind evaluates its operands

    def run(self) -> list[list[Pending]]:
        frontiers: list[tuple[int, ...]] = [()] * self.nranks
        for k, head in enumerate(self.decl.kernels):
            self._kernel, self._head = k, head
            for rank in range(self.nranks):
                self._bind_rank(rank)
                self._rank_ops = self.ops[rank]
                frontiers[rank] = self._body(head.kernel.body, _TOP, frontiers[rank])
                # a load no op of the kernel follows feeds nothing: the kernel ends
                self._held.clear()
                self.take_loads()
        return self.ops

    def _body(self, stmts: Sequence[ir.Stmt], scope: _Scope,
              frontier: tuple[int, ...]) -> tuple[int, ...]:
        for s in stmts:
            handler = self._stmts.get(type(s))
            if handler is None:
                frontier = self._op(s, scope, frontier)  # type: ignore[arg-type]
            else:
                frontier = handler(s, scope, frontier)
        forget_assigned(self.env, stmts)
        return frontier

    def _assign_stmt(self, s: ir.Assign, scope: _Scope,
                     frontier: tuple[int, ...]) -> tuple[int, ...]:
        self._assign(s)
        self._hold(scope.issuer)
        if s.var in self._bound_names:
            self._shadow(s)
        return frontier

    def _shadow(self, s: ir.Assign) -> None:
        """In a concrete instance, `s`'s value as the symbolic instance has it (an `Rt`
        bounded by `require`), for the capacity of a loop whose bound uses it."""
        symbolic = getattr(self.loader, "symbolic", None)
        if symbolic is None or s.var not in self.runtime_names:
            self._symbolic_vars.pop(s.var, None)
            return
        try:
            env = self._symbolic_env(symbolic)
            self._symbolic_vars[s.var] = self.compiler.value(s.value)(env)
        except EvalError:  # the concrete evaluation reported what failed
            self._symbolic_vars.pop(s.var, None)

    def _symbolic_env(self, symbolic: Any) -> Env:
        env = Env(self.nranks, self.rank, self.params)
        env.vars = {**self.env.vars, **self._symbolic_vars}
        env.loader = symbolic
        env.launch, env.moduli = self.env.launch, self.env.moduli
        return env

    def _hold(self, issuer: Issuer) -> None:
        """The loads just evaluated wait for `issuer`'s next op."""
        loaded = [x for x in self.take_loads() if not x.init]  # (E002 in a kernel)
        if loaded:
            self._held.setdefault(issuer, []).extend(loaded)

    # ------------------------------------------------------------------ control flow

    def _misplaced_check(self, s: ir.Check, scope: _Scope,
                         frontier: tuple[int, ...]) -> tuple[int, ...]:
        self._error("E002", "a postcondition is only allowed in `ensure`", s.span, "in a kernel")
        return frontier

    def _if(self, s: ir.If, scope: _Scope, frontier: tuple[int, ...]) -> tuple[int, ...]:
        cond = self._truth(s.cond, s.span)
        if cond is None:
            return frontier
        return self._body(s.body if cond else s.orelse, scope.nested(), frontier)

    def _for(self, s: ir.For, scope: _Scope, frontier: tuple[int, ...]) -> tuple[int, ...]:
        count: object = None
        if _runtime_range_arg(s) is not None and self._reads_runtime(s.iter):
            found = self._runtime_range(s, scope)
            if found is None:
                return frontier
            count, cap = found
            seq: tuple[int, ...] | None = tuple(range(cap))
        else:
            seq = self._seq(s.iter, "`for`", s.span)
        if seq is None:
            return frontier
        if count is not None:
            return self._guarded_for(s, scope, frontier, seq, count)
        iterations = self._iterations(s, len(seq))
        sampled = self._in_sample(s, len(seq))
        saved = self._enter(s, len(iterations))
        inner, env_vars, path = scope.nested(), self.env.vars, self._path
        depth = len(path)
        path.append(0)
        if sampled:
            self._mark_pre_loop(scope.issuer)
        for i in iterations:
            env_vars[s.var] = seq[i]
            path[depth] = i
            if sampled:
                self.where = (id(s), i, len(seq))
            frontier = self._body(s.body, inner, frontier)
        self.where = None
        self._pre_loop.pop(scope.issuer, None)
        path.pop()
        self._leave(s.var, saved)
        return frontier

    def _guarded_for(self, s: ir.For, scope: _Scope, frontier: tuple[int, ...],
                     seq: tuple[int, ...], count: object) -> tuple[int, ...]:
        """`for t in range(n)`, `n` a run-time count of capacity `len(seq)`: every
        iteration up to the capacity, each op guarded by `t < n` (language reference §14,
        "Loops to a run-time count"); the same ops at every count."""
        iterations = self._iterations(s, len(seq))
        sampled = self._in_sample(s, len(seq))
        saved = self._enter(s, len(iterations))
        inner, env_vars, path = scope.nested(), self.env.vars, self._path
        depth = len(path)
        path.append(0)
        self._guards.append(True)
        if sampled:  # the count's own loads (`range(load(...))`) are held by now
            self._mark_pre_loop(scope.issuer)
        for i in iterations:
            env_vars[s.var] = seq[i]
            path[depth] = i
            self._guards[-1] = seq[i] < count  # type: ignore[operator]
            if sampled:
                self.where = (id(s), i, len(seq))
            frontier = self._body(s.body, inner, frontier)
        self._guards.pop()
        self.where = None
        self._pre_loop.pop(scope.issuer, None)
        path.pop()
        self._leave(s.var, saved)
        return frontier

    def _mark_pre_loop(self, issuer: Issuer) -> None:
        """Entering a sampled loop: the loads `issuer` holds now ran before the loop (the
        first op of its body takes them at iteration 0, their read event being that op's
        issue, as unrolled); they are not the body's loads, which the sampler compares
        between iterations."""
        held = self._held.get(issuer)
        if held:
            self._pre_loop[issuer] = len(held)

    def _runtime_range(self, s: ir.For, scope: _Scope) -> tuple[object, int] | None:
        """(the count, the capacity) of `for t in range(n)` where `n` is read on the
        device: the capacity is the largest `n` that `require` allows."""
        arg = _runtime_range_arg(s)
        assert arg is not None
        span = arg.span or s.span
        count = self._int(arg, "the bound of a `for` loop", span, runtime=True)
        self._hold(scope.issuer)
        if count is None:
            return None
        bound = count
        if not isinstance(count, Rt):  # a concrete instance: the capacity is symbolic
            symbolic = getattr(self.loader, "symbolic", None)
            if symbolic is not None:
                try:
                    bound = self.compiler.integer(arg, "the bound of a `for` loop")(
                        self._symbolic_env(symbolic))
                except EvalError:  # the symbolic instance reports it
                    bound = count
        if isinstance(bound, Rt):
            if bound.hi is None:
                self._unbounded(bound, span, "the bound of a `for` loop", "<= CAPACITY")
                return None
            cap = bound.hi
        else:
            cap = bound  # type: ignore[assignment]
        assert isinstance(cap, int)
        return count, max(0, cap)

    def _issuers(self, blk: ir.IssuerBlock, scope: _Scope,
                 frontier: tuple[int, ...]) -> tuple[int, ...]:
        if not self._nesting_ok(blk, scope):
            return frontier
        seq = self._seq(blk.iter, f"`{blk.kind.value}`", blk.span)
        if seq is None or not self._fits(blk, scope, len(seq)):
            return frontier
        if blk.kind is ir.IssuerKind.BLOCKS:
            self.grid[self._kernel] = max(self.grid[self._kernel], len(seq))
        saved = self._enter(blk, len(seq))
        outer = (*scope.outer, blk)
        ends: list[int] = []
        for pos, value in enumerate(seq):
            self.env.vars[blk.var] = value
            before = len(self._rank_ops)
            child = _child(blk.kind, scope, outer, pos, len(seq))
            end = self._body(blk.body, child, frontier)
            if len(self._rank_ops) > before:
                ends.extend(end)
            left = self._held.pop(child.issuer, None)
            if left:  # loads after the issuer's last op: read before what follows the join
                self._held.setdefault(scope.issuer, []).extend(left)
        self._leave(blk.var, saved)
        return tuple(ends) if ends else frontier

    def _nesting_ok(self, blk: ir.IssuerBlock, scope: _Scope) -> bool:
        kind = blk.kind.value
        if blk.kind is ir.IssuerKind.BLOCKS and not scope.top:
            inner = scope.outer[-1] if scope.outer else None
            secondary = [(inner.span, f"inside this `{inner.kind.value}` block")] if inner else []
            self._error("E002", "`blocks` must be outermost", blk.span, "nested here",
                        secondary=secondary, help="put `blocks` directly in the kernel body, "
                        "around everything else")
            return False
        clash = next((o for o in scope.outer if _FINENESS[o.kind] <= _FINENESS[blk.kind]), None)
        if clash is not None:
            self._error("E002", f"`{kind}` cannot be nested inside `{clash.kind.value}`",
                        blk.span, "nested here",
                        secondary=[(clash.span, f"inside this `{clash.kind.value}` block")],
                        help="issuer blocks nest from coarse to fine: `blocks`, `warps`, `lanes`")
            return False
        return True

    def _fits(self, blk: ir.IssuerBlock, scope: _Scope, n: int) -> bool:
        head = self._head
        assert head is not None
        if blk.kind is ir.IssuerKind.BLOCKS:
            return self._fits_grid(blk, head, n)
        if head.threads is None:
            return True
        if blk.kind is ir.IssuerKind.WARPS:
            return self._fits_threads(blk, head, n * WARP_SIZE, f"{n} warps ({n * WARP_SIZE} "
                                      "threads)", head.threads)
        if scope.warp_pos is not None:
            if n <= WARP_SIZE:
                return True
            self._error("E005", f"`lanes` inside `warps` runs {n} lanes, but a warp has "
                        f"{WARP_SIZE}", blk.iter.span or blk.span, f"{n} lanes",
                        help="split the lanes over more warps, or move `lanes` out of `warps`")
            return False
        return self._fits_threads(blk, head, n, f"{n} lanes", head.threads)

    def _fits_threads(self, blk: ir.IssuerBlock, head: KernelHead, need: int, what: str,
                      threads: int) -> bool:
        if need <= threads:
            return True
        k = head.kernel
        self._error("E005", f"`{blk.kind.value}` runs {what}, but kernel `{k.name}` has "
                    f"`threads={threads}`", blk.iter.span or blk.span, what,
                    secondary=[(k.threads.span, "set here")], help=f"raise `threads=` to {need}")
        return False

    def _fits_grid(self, blk: ir.IssuerBlock, head: KernelHead, n: int) -> bool:
        if head.blocks is None or n <= head.blocks:
            return True
        k = head.kernel
        self._error("E005", f"`blocks` runs {n} blocks, but kernel `{k.name}` has "
                    f"`blocks={head.blocks}`", blk.iter.span or blk.span, f"{n} blocks",
                    secondary=[(k.blocks.span if k.blocks else None, "set here")],
                    help=f"raise `blocks=` to {n}, or drop it to size the grid from `blocks`")
        return False

    # ------------------------------------------------------------------ operations

    def _op(self, op: ir.Op, scope: _Scope, frontier: tuple[int, ...]) -> tuple[int, ...]:
        kind = ir.OP_KINDS[type(op)]
        self.failed = False
        self._hold(scope.issuer)
        pending = Pending(kind, op, self._kernel, scope.issuer)
        if self._guards and not self._guard_ok(op, kind):
            return frontier
        self._ops[kind](op, scope, pending)
        self._hold(scope.issuer)  # the op's own loads run before it too
        if self.failed:
            return frontier
        if self._guards:
            self._guard(pending)
        held = self._held.pop(scope.issuer, None)
        if held:
            pending.loads = tuple(unique_loads(held))
            pre = self._pre_loop.pop(scope.issuer, 0)
            if pre:  # unique_loads keeps first occurrences in order: those stay in front
                pending.outer_loads = len(unique_loads(held[:pre]))
        if scope.lanes:
            issuer = scope.issuer
            pending.group = (issuer.block, issuer.warp_of, id(op), tuple(self._path))
        if self.where is not None:
            loop, v, trips = self.where
            pending.where = Where(loop, v, trips,
                                  (self.rank, self._kernel, id(op), scope.issuer,
                                   tuple(self._path[:-1])))
        ops = self._rank_ops
        fan = self._fan.pop(id(pending), None)
        for one in fan or (pending,):  # a run-time peer: its candidates, in program order
            if fan is not None:  # each its own posting group and sampled site
                one.loads = pending.loads
                if pending.group is not None:
                    one.group = (*pending.group, one.peer)
                if pending.where is not None:
                    one.where = replace(pending.where, site=(*pending.where.site, one.peer))
            one.preds = frontier
            ops.append(one)
            self._count(op)
            frontier = (len(ops) - 1,)
        return frontier

    def _guard_ok(self, op: ir.Op, kind: OpKind) -> bool:
        """E038: an op whose count the receiver or the issuer must know at instantiation,
        inside a loop to a run-time count."""
        if kind in (OpKind.PUT, OpKind.GET, OpKind.COPY, OpKind.REDUCE):
            sync = getattr(op, "signal", ir.SignalKind.NONE) is not ir.SignalKind.NONE or \
                bool(getattr(op, "aggregate", False)) or getattr(op, "count", None) is not None \
                or bool(getattr(op, "signal_per_copy", False))
            if not sync:
                return True
            what = "a signalled, counted or aggregated transfer"
        else:
            what = f"`{kind.value}`"
        self._error("E038", f"{what} inside a loop that runs to a run-time count",
                    op.span, "would run a number of times known only on the device",
                    help="keep only data ops (`put`, `get`, `copy`, `reduce` without "
                         "`signal=`, `count=` or aggregation) in the loop, and synchronise "
                         "after it: a `signal(p)` per peer after the loop proves every "
                         "transfer before it on its queue")
        return False

    def _guard(self, p: Pending) -> None:
        """Guard the regions of `p` (and of its run-time peer's candidates) by the
        enclosing run-time loops' `t < n`: each moves nothing past the count."""
        hit: Any = True
        for g in self._guards:
            hit = hit * g if not isinstance(hit, bool) or not isinstance(g, bool) \
                else hit and g  # type: ignore[operator]
        if hit is True:
            return
        for one in self._fan.get(id(p)) or (p,):
            if one.dst is not None:
                one.dst = _guarded(one.dst, hit)
            if one.src is not None:
                one.src = _guarded(one.src, hit)
            if one.srcs:
                one.srcs = tuple(_guarded(r, hit) for r in one.srcs)

    def _peer(self, expr: ir.Expr, op: ir.Op) -> int | None:
        if self._reads_runtime(expr):
            self._runtime_sync(op, expr)
            return None
        return self._team_rank(expr, "peer", op.span, allow_me=False)

    def _on(self, region: ir.Region, rank: int | None, op: ir.Op) -> RegionInst | None:
        if region.rank is not None or region.init:
            self._error("E002", "`@` and `init(...)` are only allowed in `ensure`",
                        region.span or op.span, "in a kernel")
            return None
        return self._region(region, -1 if rank is None else rank, op.span)

    def _transfer(self, op: ir.Put | ir.Get | ir.Copy, p: Pending,
                  dst_rank: int | None, src_rank: int | None) -> None:
        p.dst = self._on(op.dst, dst_rank, op)
        p.src = self._on(op.src, src_rank, op)
        if not self._converts(op.dst, op.src):  # else E003 below says to `reduce` instead
            self._same_length("`dst` and `src`", p.dst, p.src,
                              (op.dst.span or op.span, op.src.span), ("`dst`", "`src`"))
        self._same_dtype(op.dst, op.src, op.span, u8_views=True)

    def _auto_queue(self, expr: ir.Expr | None, scope: _Scope, p: Pending, op: ir.Op) -> None:
        if expr is None:
            p.slot = scope.slot
        else:
            p.queue = self._int(expr, "the queue", op.span)

    def _put(self, op: ir.Put, scope: _Scope, p: Pending) -> None:
        value = self._transfer_peer(op)
        if value is None:
            return
        p.peer = value if isinstance(value, int) else self.rank
        self._transfer(op, p, p.peer, self.rank)
        self._local_only(op.dst, op, "the destination of a `put` (the peer's memory)")
        self._auto_queue(op.queue, scope, p, op)
        if not isinstance(value, int):
            self._fan_out(p, value[0], value[1])

    def _get(self, op: ir.Get, scope: _Scope, p: Pending) -> None:
        p.peer = self._peer(op.peer, op)  # a run-time one: E037 (`_runtime_sync`)
        self._transfer(op, p, self.rank, p.peer)
        self._local_only(op.src, op, "the source of a `get` (the peer's memory)")
        self._auto_queue(op.queue, scope, p, op)

    # ------------------------------------------------------------------ run-time peers

    def _transfer_peer(self, op: ir.Put) -> int | tuple[object, range] | None:
        """The peer of a put: a static rank, or (run-time value, candidates) when it
        is read on the device (language reference §14, "Run-time peers").  Every rank is
        a candidate, in the checker's instance as in a concrete one (the same ops at every
        draw); those the `require` bound excludes move nothing (`value == c` is False)."""
        if not self._reads_runtime(op.peer):
            return self._peer(op.peer, op)
        span = op.peer.span or op.span
        value = self._int(op.peer, "the peer", span, runtime=True)
        if value is None:
            return None
        if op.signal is not ir.SignalKind.NONE or op.aggregate or op.count is not None \
                or op.signal_per_copy:
            self._runtime_sync(op, op.peer)
            return None
        n = self.nranks
        if not isinstance(value, Rt):  # a concrete instance: the value this draw read
            if not 0 <= value < n:
                self._error("E010", f"the run-time peer `{expr_text(op.peer)}` is {value}, "
                            f"outside the team of {n} ranks", span, f"ranks are 0 to {n - 1}",
                            help="bound it in `require:`, e.g. `0 <= ELEMENT < nranks`")
                return None
            return value, range(n)
        if not value.bounded:
            self._unbounded(value, span, "a peer", "< nranks")
            return None
        assert value.lo is not None and value.hi is not None
        if value.lo < 0 or value.hi >= n:
            self._error("E010", f"`require` lets the run-time peer `{expr_text(op.peer)}` be "
                        f"{value.lo} to {value.hi}, outside the team of {n} ranks", span,
                        f"ranks are 0 to {n - 1}",
                        help="bound it in `require:` to the team, e.g. "
                             "`0 <= ELEMENT < nranks`")
            return None
        return value, range(n)  # outside the bound: of static length 0

    def _runtime_sync(self, op: ir.Op, peer: ir.Expr) -> None:
        """E037: a `get` from, or a signal, count, aggregation or completion toward, a
        run-time peer."""
        if isinstance(op, ir.Get):
            message = "a `get` cannot read from a run-time peer"
            hint = ("a `get` is waited for by its local signal, which each candidate peer "
                    "would raise here: have the rank that holds the data `put` it instead")
        else:
            message = ("a run-time peer cannot be signalled, counted to, committed, quieted "
                       "or waited for")
            hint = ("a receiver must know at instantiation how many credits or bytes to wait "
                    "for: send the data with plain `put`s to the run-time peer, then credit "
                    "every candidate peer on the same queue (`lanes p in peers(): signal(p, "
                    "queue=Q)`: each credit lands after the puts before it on that queue)")
        self._error("E037", message, peer.span or op.span,
                    f"`{expr_text(peer)}` is read on the device", help=hint)

    def _fan_out(self, p: Pending, value: object, candidates: range) -> None:
        """One pending op per candidate peer, each moving its regions only when the
        run-time peer is that candidate (a run-time length `len * (value == c)`)."""
        if p.dst is None or p.src is None:
            return
        fan = []
        hits = [(c, value == c) for c in candidates]
        remote = [c for c, hit in hits if c != self.rank and hit is not False]
        first = remote[0] if remote else self.rank
        for c, hit in hits:
            dst = replace(p.dst, rank=c)
            marker = RtPeer(value, c == first, dst, p.src)
            one = p.candidate(c, marker, _guarded(dst, hit), _guarded(p.src, hit))
            if c == self.rank:  # my own memory: a local copy, done when issued
                one.kind, one.peer, one.queue, one.slot = OpKind.COPY, None, None, None
            fan.append(one)
        self._fan[id(p)] = fan

    def _reads_runtime(self, expr: ir.Expr) -> bool:
        loads, names = self._reads_of(expr, expr)  # type: ignore[arg-type]
        return loads or not names.isdisjoint(self.runtime_names)

    def _reduce(self, op: ir.Reduce, scope: _Scope, p: Pending) -> None:
        p.dst = self._on(op.dst, self.rank, op)
        if p.dst is None:
            return
        dst = p.dst
        p.dtype = self._dtype(op.dst.window)
        p.reduce_op = op.op

        def source(r: ir.Region) -> RegionInst | None:
            rank: int | None = self.rank
            if r.rank is not None:
                rank = self._team_rank(r.rank, "rank of a source", r.span or op.span,
                                       allow_me=True)
                if rank is None:
                    return None
                if rank != self.rank:
                    self._local_only(r, op, "read on another rank")
            inst = self._region(r, self.rank if rank is None else rank, op.span)
            if self._converts(op.dst, r):  # f16/bf16/f32 mixed: widened, rounded once
                self._same_count(dst, inst, op.dst, r, op.span)
            else:
                self._same_length("`dst` and a source", dst, inst,
                                  (op.dst.span or op.span, r.span), ("`dst`", "the source"))
                self._same_dtype(op.dst, r, op.span, u8_views=False)
            return inst

        srcs = self._expand(op.srcs, source)
        if srcs is None:
            return
        if not srcs:
            self._error("E003", "`reduce` has no sources", op.span, "the list is empty",
                        help="list at least one source region")
            return
        p.srcs = tuple(srcs)
        if op.weights is not None:
            weights = self._expand(op.weights, lambda w: self._number(w, "a weight", op.span))
            if weights is None:
                return
            if len(weights) != len(srcs):
                self._error("E003", f"`reduce` has {len(srcs)} sources and {len(weights)} "
                            "weights", op.span, "one weight per source",
                            help="give `weights=` exactly one number per source")
                return
            if not self._weights_fit(weights, p.dtype, op.span):
                return
            p.weights = tuple(weights)
            if self.loader is not None:  # run-time weights: kept for code generation
                raw = self._expand(op.weights, self._weight_value)
                if raw is not None and any(isinstance(w, Rt) for w in raw):
                    p.weights_rt = tuple(raw)

    def _signal(self, op: ir.Signal, scope: _Scope, p: Pending) -> None:
        p.peer = self._peer(op.peer, op)
        self._auto_queue(op.queue, scope, p, op)

    def _copy(self, op: ir.Copy, scope: _Scope, p: Pending) -> None:
        self._transfer(op, p, self.rank, self.rank)

    def _commit(self, op: ir.Commit, scope: _Scope, p: Pending) -> None:
        p.peer = self._peer(op.peer, op)
        self._auto_queue(op.queue, scope, p, op)

    def _quiet(self, op: ir.Quiet, scope: _Scope, p: Pending) -> None:
        if op.peer is not None:
            p.peer = self._peer(op.peer, op)
        if op.queue is not None:
            p.queue = self._int(op.queue, "the queue", op.span)

    def _wait_signal(self, op: ir.WaitSignal, scope: _Scope, p: Pending) -> None:
        if self._reads_runtime(op.src):
            self._runtime_sync(op, op.src)
            return
        p.peer = self._team_rank(op.src, "source rank", op.span, allow_me=True)
        if op.queue is None:
            p.wait_default = True
        else:
            p.queue = self._int(op.queue, "the queue", op.span)
        if op.expected is not None:
            p.expected = self._int(op.expected, "`expected`", op.span)

    def _wait_count(self, op: ir.WaitCount, scope: _Scope, p: Pending) -> None:
        if op.expected is not None:
            value = self._int(op.expected, "`expected`", op.span, runtime=True)
            if isinstance(value, Rt):
                if not value.bounded:
                    self._unbounded(value, op.expected.span or op.span)
                    return
                p.expected_rt = value
            else:
                p.expected = value

    def _plain(self, op: ir.Op, scope: _Scope, p: Pending) -> None:
        return None


def _runtime_range_arg(s: ir.For) -> ir.Expr | None:
    """`n` of `for t in range(n)` (one argument): the form a run-time count may take."""
    it = s.iter
    if isinstance(it, ir.Call) and it.func == "range" and len(it.args) == 1:
        return it.args[0]
    return None


def _range_names(protocol: ir.Protocol) -> frozenset[str]:
    """The names the bounds of the kernels' `for t in range(n)` loops use."""
    names: set[str] = set()
    for node in nodes_of(protocol.kernels):
        if isinstance(node, ir.For) and (arg := _runtime_range_arg(node)) is not None:
            names |= _reads(arg)[1]
    return frozenset(names)


def _guarded(r: RegionInst, hit: object) -> RegionInst:
    """`r` moved only when `hit` (a run-time 0/1, or a concrete bool): its run-time
    length is `len * hit`, its footprint `r`'s."""
    if isinstance(hit, bool):  # concrete, or decided by the bound
        return r if hit else replace(r, stop=r.start, runtime=None)  # nothing, anywhere
    start, stop = r.runtime if r.runtime is not None else (r.start, r.stop)
    return replace(r, runtime=(start, start + hit * (stop - start)))  # type: ignore[operator]
