"""`require` checked on the device in debug builds (language v2 §3).

Each rank evaluates the protocol's `require` statements as the instantiation does, but
with every element unbounded, so that no comparison is decided at instantiation: each
comparison of a conjunct (`0 <= counts[p] <= cap` is two) becomes one `require` step,
a C condition over the elements the rank reads (codegen.rtexpr).  The steps run first
in the first kernel's block 0 of the rank; a condition that does not hold is reported
through the debug record (kind 4: the `require` line, the element's index or -1, its
value; ccogen.rt.debug) and traps.

Only conditions over the rank's own elements are checked there (another rank's buffer
cannot be read; its own check covers it), and, on a target whose kernels cannot load a
peer's element (`peers=False`: nccl-cft), only those over this rank's own windows and
buffers; comparisons between static numbers were decided when the protocol was checked.
"""

from __future__ import annotations

from collections.abc import Sequence

from ccogen.codegen.layout import HeapLayout
from ccogen.codegen.rtexpr import CExpr
from ccogen.codegen.steps import Step, StepKind
from ccogen.instantiate import preconditions
from ccogen.instantiate.findings import Findings
from ccogen.instantiate.runtime import Preconditions, SymbolicLoader
from ccogen.ir import nodes as ir
from ccogen.ir.evaluate import Compiler, EvalError
from ccogen.ir.instance import Instance
from ccogen.ir.runtime import Rt


class _DeviceChecks(Preconditions):
    """Collects, per rank, (line, C condition, element index, C value) of each comparison."""

    def __init__(self, instance: Instance, layout: HeapLayout, peers: bool = True) -> None:
        protocol = instance.protocol
        _, memories, bound = preconditions(protocol, instance.nranks, instance.param_dict)
        super().__init__(instance.nranks, bound, memories, Compiler(),
                         Findings(instance.nranks), SymbolicLoader({}, None))
        self.instance = instance
        self.layout = layout
        self.peers = peers
        self.steps: dict[int, list[Step]] = {r: [] for r in range(instance.nranks)}

    def _require(self, s: ir.Require) -> None:
        line = s.span.line if s.span is not None else 0
        for part in _conjuncts(s.cond):
            try:
                self._part(part, line)
            except EvalError:
                continue  # reported when the protocol was checked

    def _part(self, cond: ir.Expr, line: int) -> None:
        cx = CExpr(self.instance, self.layout, self.rank, cond.span)
        if not isinstance(cond, ir.Compare):
            value = self.compiler.value(cond)(self.env)
            if isinstance(value, Rt) and self._mine(value):
                self._add(line, f"{cx.value(value)} != 0", -1, cx.value(value))
            return
        values = [self.compiler.value(o)(self.env) for o in cond.operands]
        for op, a, b in zip(cond.ops, values, values[1:], strict=False):
            if not isinstance(a, Rt) and not isinstance(b, Rt):
                continue
            if not all(self._mine(v) for v in (a, b) if isinstance(v, Rt)):
                continue
            shown, index = (a, self._element(a)) if isinstance(a, Rt) else (b, self._element(b))
            self._add(line, f"{cx.value(a)} {op} {cx.value(b)}", index, cx.value(shown))

    def _add(self, line: int, cond: str, index: int, value: str) -> None:
        self.steps[self.rank].append(Step(
            StepKind.REQUIRE, text=f"({cond})", line=line, src=index,
            rt=(("value", f"static_cast<uint64_t>(static_cast<int64_t>({value}))"),)))

    def _mine(self, value: Rt) -> bool:
        """Every element `value` reads is on this rank (or in one of its windows)."""
        stack = [value]
        while stack:
            v = stack.pop()
            for atom in v.terms:
                if atom.tree is not None:
                    stack.extend(x for x in _forms(atom.tree))
                elif atom.read is None or (atom.read[1] != self.rank and (
                        not self.peers or self.instance.is_buffer(atom.read[0]))):
                    return False
        return True

    @staticmethod
    def _element(value: Rt) -> int:
        """The index of the one element `value` is, or -1."""
        if value.const == 0 and len(value.terms) == 1:
            (atom, k), = value.terms.items()
            if k == 1 and atom.tree is None and atom.read is not None:
                return atom.read[2]
        return -1


def _forms(tree: tuple[object, ...]) -> list[Rt]:
    out: list[Rt] = []
    for x in tree[1:]:
        if isinstance(x, Rt):
            out.append(x)
        elif isinstance(x, tuple):
            out.extend(f for f in x if isinstance(f, Rt))
    return out


def _conjuncts(cond: ir.Expr) -> Sequence[ir.Expr]:
    if isinstance(cond, ir.BoolOp) and cond.op == "and":
        return [c for v in cond.values for c in _conjuncts(v)]
    return [cond]


def require_steps(instance: Instance, layout: HeapLayout,
                  peers: bool = True) -> dict[int, list[Step]]:
    """Per rank, the steps that check `require` on the device (empty without one);
    `peers=False`: only conditions over this rank's own elements."""
    if not instance.protocol.require:
        return {}
    checks = _DeviceChecks(instance, layout, peers)
    checks.run(instance.protocol.require)
    return checks.steps


__all__ = ["require_steps"]
