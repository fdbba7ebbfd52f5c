"""The numpy references of the run-time protocols (ccogen/reference), on cases small
enough to work out by hand."""

from __future__ import annotations

import numpy as np

from ccogen.reference import moe
from ccogen.reference.alltoallv import alltoallv


def test_a_token_counts_once_per_distinct_rank() -> None:
    table = np.array([[0, 0], [1, 0], [1, 1]], dtype=np.int32)  # 3 tokens, top-2, 2 ranks
    assert list(moe.rank_counts(table, 2)) == [2, 2]
    assert moe.routed(table, 3).tolist() == [[True, False, False], [True, True, False],
                                              [False, True, False]]


def test_dispatch_rows_and_counts() -> None:
    x = [np.arange(6, dtype=np.float32).reshape(3, 2),
         -np.arange(6, dtype=np.float32).reshape(3, 2)]
    tables = [np.array([[0, 0], [1, 1], [1, 0]], dtype=np.int32),
              np.array([[1, 1], [1, 1], [1, 1]], dtype=np.int32)]
    rows, masks, got = moe.dispatch(x, tables)
    assert masks[0].tolist() == [[True, False, True], [False, False, False]]
    assert masks[1].tolist() == [[False, True, True], [True, True, True]]
    assert got[0].tolist() == [2, 0] and got[1].tolist() == [2, 3]
    assert rows[1][0, 1].tolist() == [2.0, 3.0]


def test_combine_sums_the_weights_of_one_rank() -> None:
    tables = [np.array([[0, 1], [1, 1]], dtype=np.int32),
              np.array([[0, 0], [0, 1]], dtype=np.int32)]
    weights = [np.array([[0.25, 0.75], [0.5, 0.5]], dtype=np.float32),
               np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)]
    expert = [np.full((2, 2, 1), 10.0, dtype=np.float32),
              np.full((2, 2, 1), 100.0, dtype=np.float32)]
    ys = moe.combine(expert, tables, weights)
    assert ys[0][:, 0].tolist() == [0.25 * 10 + 0.75 * 100, 1.0 * 100]
    assert ys[1][:, 0].tolist() == [3.0 * 10, 3.0 * 10 + 4.0 * 100]


def test_skewed_routing_leaves_one_rank_idle() -> None:
    table = moe.skewed_routing(np.random.default_rng(0), 64, 4, 4)
    counts = moe.rank_counts(table, 4)
    assert counts[3] == 0 and counts[0] == max(counts)


def test_alltoallv_moves_counts_elements() -> None:
    send = [np.arange(8, dtype=np.float32), 10 + np.arange(8, dtype=np.float32)]
    counts = [np.array([1, 3]), np.array([0, 2])]
    recv, got = alltoallv(send, counts, 4)
    assert got[0].tolist() == [1, 0] and got[1].tolist() == [3, 2]
    assert recv[1][:3].tolist() == [4.0, 5.0, 6.0] and recv[1][4:6].tolist() == [14.0, 15.0]
