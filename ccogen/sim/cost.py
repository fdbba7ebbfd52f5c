"""Step durations for traces, from the targets' cost figures (`ccogen.targets`).

Nothing here changes what a schedule computes; it only says how long each step
would take, so that a trace shows a plausible timeline.  The figures are the
target's `CostModel` (one place per backend, shared with the performance
warnings); this module only turns them into step durations:

* an engine transfer costs `op_time_us(bytes)` (bytes over the bandwidth for that
  op size, at least one packet), plus `dispatch_us` when its queue was idle
  (MORI: 64 x 4 KB back to back then costs 6 + 64 x 2 = 134 us, the seed says 138);
* each signal or counted add after it costs `signal_us` (else one packet);
* posting costs the trigger cycles for the lanes posting together, at an assumed
  2.4 GHz (MORI: "64 packets take 1.3 us to issue");
* a `copy` runs at `local_gather_gbps` (else the peak bandwidth).

Figures the tables do not have, all assumptions, named here: a wait or quiet
returns `flag_latency_us` after its condition holds, else 0.24 us (the MORI seed's
`waitSignal` at 8 B); issuing without trigger-cycle figures takes 0.1 us; a barrier
takes 1 us.  A target without figures (`nccl-cft`) borrows `mori-sdma`'s, and the
trace says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from ccogen.targets import DEFAULT_COST_TARGET, get_target
from ccogen.targets.base import CostModel

CLOCK_GHZ = 2.4  # assumed engine clock for MORI's trigger-cycle figures
POLL_US = 0.24  # MORI seed: waitSignal at 8 B
ISSUE_US = 0.1  # assumed when a target has no trigger-cycle figures
BARRIER_US = 1.0  # assumed


@dataclass(frozen=True, slots=True)
class StepCosts:
    """Durations of simulator steps for one target (see the module docstring)."""

    target: str
    figures: CostModel
    borrowed: str | None = None  # the target whose figures stand in

    @property
    def name(self) -> str:
        return self.target if self.borrowed is None else f"{self.target} ({self.borrowed} figures)"

    def engine_us(self, size: int) -> float:
        return self.figures.op_time_us(size) or 0.0

    @property
    def dispatch_us(self) -> float:
        return self.figures.dispatch_us or 0.0

    @property
    def atomic_us(self) -> float:
        f = self.figures
        return f.signal_us or f.flag_latency_us or f.per_packet_us or 0.0

    def issue_us(self, lanes: int) -> float:
        points = self.figures.trigger_cycles_same_queue
        if not points:
            return ISSUE_US
        below = [c for n, c in points if n <= max(1, lanes)]
        return (below[-1] if below else points[0][1]) / (CLOCK_GHZ * 1e3)

    def copy_us(self, size: int) -> float:
        gbps = self.figures.local_gather_gbps or self.figures.peak_gbps
        return size / (gbps * 1e3) if gbps else 0.0

    @property
    def poll_us(self) -> float:
        return self.figures.flag_latency_us or POLL_US

    @property
    def barrier_us(self) -> float:
        return BARRIER_US


def model_for(target: str | None) -> StepCosts:
    """The step costs of `target` (`mori-sdma` when none is given)."""
    name = target or DEFAULT_COST_TARGET
    figures = get_target(name).capabilities.cost
    if figures.op_time_us(1) is None:
        fallback = get_target(DEFAULT_COST_TARGET).capabilities.cost
        return StepCosts(name, fallback, DEFAULT_COST_TARGET)
    return StepCosts(name, figures)
