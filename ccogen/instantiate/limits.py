"""The limits of instantiation: default team sizes, device launch limits, unrolling caps.

The unrolling caps are the defaults of `ccogen.limits.Limits` (raised with `--limit`);
the limits an instantiation applies are `Findings.limits`.
"""

from __future__ import annotations

from ccogen.limits import DEFAULT as DEFAULT_LIMITS

DEFAULT_TEAM_SIZES: tuple[int, ...] = (2, 3, 4, 8)
MAX_OP_INSTANCES = DEFAULT_LIMITS.op_instances
MAX_ITERATIONS = DEFAULT_LIMITS.iterations
MAX_THREADS = 1024
MAX_BLOCKS = 2**31 - 1
MAX_AUTO_QUEUES = 8
WARP_SIZE = 32
