"""The IR: op kinds (`opkind`), protocol nodes (`nodes`) and unrolled instances (`instance`).

Element values (`values`, numpy) are imported where they are used, not here."""

from ccogen.ir.instance import (
                                CheckInst,
                                Instance,
                                Issuer,
                                IssuerLevel,
                                KernelInst,
                                OpInst,
                                RegionInst,
)
from ccogen.ir.nodes import *  # noqa: F403
from ccogen.ir.nodes import OP_KINDS, Expr, Op, Protocol, Stmt
from ccogen.ir.opkind import TRAITS, OpKind, OpTraits

__all__ = [
    "OP_KINDS",
    "TRAITS",
    "CheckInst",
    "Expr",
    "Instance",
    "Issuer",
    "IssuerLevel",
    "KernelInst",
    "Op",
    "OpInst",
    "OpKind",
    "OpTraits",
    "Protocol",
    "RegionInst",
    "Stmt",
]
