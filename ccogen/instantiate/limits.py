"""The limits of instantiation: default team sizes, device launch limits, unrolling caps."""

from __future__ import annotations

DEFAULT_TEAM_SIZES: tuple[int, ...] = (2, 3, 4, 8)
MAX_OP_INSTANCES = 1_000_000
MAX_ITERATIONS = 4_000_000
MAX_THREADS = 1024
MAX_BLOCKS = 2**31 - 1
MAX_AUTO_QUEUES = 8
WARP_SIZE = 32
