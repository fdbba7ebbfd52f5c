"""CPU references (numpy) of library protocols, for the tests and the simulator's checks.

Each function computes what a protocol's `ensure` states, from the same inputs, without
the protocol's ops: `moe` (dispatch and combine), `alltoallv`.
"""
