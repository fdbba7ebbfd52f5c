"""The checks, as a visible ordered list.

Each check is one module with one class (see `base.Pass`); `PIPELINE` is the order
they run in.  `run_checks(instance, target)` runs them all on one instance and
returns every finding: checks report, they do not raise.
"""

from __future__ import annotations

from ccogen.diag import Diagnostic
from ccogen.ir.instance import Instance
from ccogen.limits import DEFAULT as DEFAULT_LIMITS
from ccogen.limits import Limits
from ccogen.passes.base import Pass, PassContext
from ccogen.passes.check_capabilities import CheckCapabilities
from ccogen.passes.check_completion import CheckCompletion
from ccogen.passes.check_deadlock import CheckDeadlock
from ccogen.passes.check_postcondition import CheckPostcondition
from ccogen.passes.check_queues import CheckQueues
from ccogen.passes.check_races import CheckRaces
from ccogen.passes.check_ranks import CheckRanks
from ccogen.passes.check_runtime_totals import CheckRuntimeTotals
from ccogen.passes.check_sdma_queues import CheckSdmaQueues
from ccogen.passes.check_signals import CheckSignals
from ccogen.passes.warn_aggregate_batch import WarnAggregateBatch
from ccogen.passes.warn_independent_mode import WarnIndependentMode
from ccogen.passes.warn_lanes_over_queues import WarnLanesOverQueues
from ccogen.passes.warn_shared_queue import WarnSharedQueue
from ccogen.passes.warn_signal_per_copy import WarnSignalPerCopy
from ccogen.passes.warn_small_copies import WarnSmallCopies
from ccogen.passes.warn_split_transfer import WarnSplitTransfer
from ccogen.passes.warn_summation_order import WarnSummationOrder
from ccogen.passes.warn_unused_queues import WarnUnusedQueues

PIPELINE: tuple[type[Pass], ...] = (
    # ranks, queues, issuers (E011-E014)
    CheckRanks,
    CheckQueues,
    # backend capabilities (E040-E042): only with a target
    CheckCapabilities,
    CheckSdmaQueues,  # E015, E029: amd-mori 1.2.4 queue and ring limits (mori-sdma only)
    # synchronisation, completion, ordering (E020-E033): the happens-before graph of
    # ccogen.analysis; the postcondition check last, it needs an instance free of the rest
    CheckCompletion,  # E020, E025
    CheckSignals,  # E021-E024, E026, E027
    CheckRuntimeTotals,  # E034: run-time `expected=` of `wait_count`
    CheckDeadlock,  # E030
    CheckRaces,  # E031, E032
    CheckPostcondition,  # E033
    # performance warnings (W100-W107): the target's figures, MORI SDMA's without one;
    # W108 (rank-dependent summation order) last
    WarnSmallCopies,
    WarnSplitTransfer,
    WarnSharedQueue,
    WarnLanesOverQueues,
    WarnSignalPerCopy,
    WarnAggregateBatch,
    WarnIndependentMode,
    WarnUnusedQueues,
    WarnSummationOrder,  # W108: symbolic, like the postcondition check
)


def run_checks(instance: Instance, target: str | None = None,
               limits: Limits = DEFAULT_LIMITS) -> list[Diagnostic]:
    """Every check on one instance; raises `LimitExceeded` when an analysis would need
    more memory than `limits` allow."""
    ctx = PassContext(instance=instance, target=target, limits=limits)
    for check in PIPELINE:
        check().run(ctx)
    return list(ctx.sink)


__all__ = ["PIPELINE", "Pass", "PassContext", "run_checks"]
