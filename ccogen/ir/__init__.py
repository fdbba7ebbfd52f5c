"""The IR: protocol nodes (`nodes`) and unrolled instances (`instance`)."""

from ccogen.ir.instance import CheckInst, Instance, Issuer, IssuerLevel, KernelInst, OpInst, RegionInst
from ccogen.ir.nodes import *  # noqa: F403
from ccogen.ir.nodes import OP_NAMES, Expr, Op, Protocol, Stmt

__all__ = [
    "OP_NAMES",
    "CheckInst",
    "Expr",
    "Instance",
    "Issuer",
    "IssuerLevel",
    "KernelInst",
    "Op",
    "OpInst",
    "Protocol",
    "RegionInst",
    "Stmt",
]
