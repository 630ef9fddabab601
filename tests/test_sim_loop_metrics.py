"""Event loop ordering and metrics helpers (percentiles, goodput, SLA arithmetic)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpubalance.sim import SLA, EventLoop, latency_stats
from gpubalance.sim.metrics import goodput


def test_loop_runs_in_time_order_merging_source_and_handler_events() -> None:
    seen: list[tuple[float, str, object]] = []

    def on_src(t: float, i: object) -> list[tuple[float, int, object]]:
        seen.append((t, "src", i))
        return [(t + 0.5, 1, f"echo{i}")]

    def on_echo(t: float, p: object) -> None:
        seen.append((t, "echo", p))

    loop = EventLoop([on_src, on_echo])
    loop.schedule(1.0, 1, "pre")
    end = loop.run([0.0, 1.0, 1.2], 0)
    assert seen == [
        (0.0, "src", 0),
        (0.5, "echo", "echo0"),
        (1.0, "src", 1),  # a source event runs before a heap event at the same time
        (1.0, "echo", "pre"),
        (1.2, "src", 2),
        (1.5, "echo", "echo1"),
        (1.7, "echo", "echo2"),
    ]
    assert end == 1.7 and loop.events_run == 7


def test_loop_until_stop_and_past_events() -> None:
    seen: list[float] = []

    def h(t: float, p: object) -> None:
        seen.append(t)
        if t >= 3.0:
            loop.stop("enough")

    loop = EventLoop([h])
    for t in (5.0, 1.0, 3.0, 2.0, 4.0):
        loop.schedule(t, 0)
    loop.run(until_s=2.5)
    assert seen == [1.0, 2.0]
    loop.run()
    assert seen == [1.0, 2.0, 3.0] and loop.stopped and loop.stop_reason == "enough"
    assert loop.peek_s() == 4.0
    with pytest.raises(ValueError):
        loop.schedule(0.5, 0)


def test_equal_times_keep_schedule_order() -> None:
    seen: list[object] = []
    loop = EventLoop([lambda t, p: seen.append(p)])
    for p in "abc":
        loop.schedule(1.0, 0, p)
    loop.run()
    assert seen == ["a", "b", "c"]


def test_latency_stats_by_hand() -> None:
    s = latency_stats(np.array([1.0, 2.0, 3.0, 4.0, math.nan]))
    assert s.count == 4 and s.mean_s == 2.5 and s.max_s == 4.0
    assert s.p50_s == 2.5  # linear interpolation between 2 and 3
    assert s.p90_s == pytest.approx(3.7)  # 1 + 0.9 * 3
    assert s.quantile_s(0.99) == pytest.approx(3.97)
    empty = latency_stats(np.array([math.nan]))
    assert empty.count == 0 and math.isnan(empty.p99_s)


def test_goodput_and_allowed_violations_by_hand() -> None:
    ttft = np.array([0.1, 0.5, 0.2, math.nan])
    e2e = np.array([1.0, 1.0, 3.0, math.nan])
    tpot = np.array([0.01, math.nan, 0.05, math.nan])
    g = goodput(SLA(ttft_s=0.3, e2e_s=2.0, tpot_s=0.02), ttft, e2e, tpot, span_s=10.0)
    assert (g.count, g.fraction, g.rate_rps) == (1, 0.25, 0.1)
    g2 = goodput(SLA(ttft_s=0.6), ttft, e2e, tpot, span_s=10.0)
    assert g2.count == 3
    assert SLA(quantile=0.99).allowed_violations(1000) == 10
    assert SLA(quantile=0.95).allowed_violations(99) == 4
    with pytest.raises(ValueError):
        SLA(ttft_s=0.0)
