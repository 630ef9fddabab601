"""Guided self-scheduling and the in-process (threads) work queue."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from gpubalance.balance import ThreadWorkQueue, guided_bounds
from gpubalance.errors import UserInputError


def test_guided_chunks_hand_case() -> None:
    # remaining 100 -> ceil(100/4)=25; 75 -> 19; 56 -> 14; 42 -> 11; 31 -> 8; 23 -> 6;
    # 17 -> 5; 12 -> 3; 9 -> 3; 6 -> 2; 4 -> 1; 3 -> 1; 2 -> 1; 1 -> 1
    sizes = np.diff(guided_bounds(100, 4)).tolist()
    assert sizes == [25, 19, 14, 11, 8, 6, 5, 3, 3, 2, 1, 1, 1, 1]


def test_guided_min_chunk_and_factor() -> None:
    # factor 2, 2 workers: ceil(r / 4), never below 10, last chunk = what is left
    sizes = np.diff(guided_bounds(60, 2, factor=2.0, min_chunk=10)).tolist()
    assert sizes == [15, 12, 10, 10, 10, 3]
    assert guided_bounds(0, 3).tolist() == [0]
    with pytest.raises(UserInputError, match="workers"):
        guided_bounds(10, 0)


def test_threads_process_every_item_exactly_once() -> None:
    costs = np.random.default_rng(0).lognormal(0, 1, size=5000)
    order = np.argsort(-costs, kind="stable")
    queue = ThreadWorkQueue(5000, 8, items=order, min_chunk=4)
    seen: list[list[int]] = [[] for _ in range(8)]

    def work(w: int) -> None:
        for chunk in queue:
            seen[w].extend(chunk.tolist())
            time.sleep(0.0005)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    allseen = [i for s in seen for i in s]
    assert sorted(allseen) == list(range(5000))
    assert queue.claim() is None
    # the largest items went out first (in the first chunk)
    first = order[: int(queue.bounds[1])]
    assert costs[first].min() >= np.sort(costs)[-first.shape[0]]


def test_drain_counts_items() -> None:
    q = ThreadWorkQueue(37, 3)
    got: list[int] = []
    assert q.drain(lambda c: got.extend(c.tolist())) == 37
    assert got == list(range(37))
