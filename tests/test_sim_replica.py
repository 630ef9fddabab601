"""Replica model: hand-checked continuous-batching timelines, KV queueing, preemption,
strict caps, and the fast path (advance) against brute-force stepping."""

from __future__ import annotations

import random

import pytest

from gpubalance.sim import LinearStepTime, Replica, RequestTooLarge, SeqState
from gpubalance.workload import Request

# base 1 s per iteration, 0.1 s per prefill token, 0.5 s per decoding sequence
M = LinearStepTime(base_s=1.0, per_prefill_token_s=0.1, per_decode_seq_s=0.5)


def run_steps(rep: Replica, now: float = 0.0) -> float:
    while rep.has_work:
        now += rep.step(now).duration_s
    return now


def test_two_requests_batched_timeline_by_hand() -> None:
    rep = Replica(M, kv_capacity_tokens=10_000, max_num_seqs=8, max_batched_tokens=1000)
    a = rep.add(Request("a", 0.0, 10, 3))
    b = rep.add(Request("b", 0.0, 20, 2))
    # it1: prefill 30 tokens: 1 + 3 = 4 s -> both first tokens at 4
    r1 = rep.step(0.0)
    assert r1.duration_s == pytest.approx(4.0)
    assert [s.key.id for s in r1.first_token] == ["a", "b"]
    assert r1.prefill_tokens == 30 and r1.decode_seqs == 0
    # it2: decode a, b: 1 + 2*0.5 = 2 s -> b done at 6
    r2 = rep.step(4.0)
    assert r2.duration_s == pytest.approx(2.0)
    assert [s.key.id for s in r2.tokens] == ["a", "b"]
    assert [s.key.id for s in r2.finished] == ["b"]
    # it3: decode a: 1.5 s -> a done at 7.5
    r3 = rep.step(6.0)
    assert r3.duration_s == pytest.approx(1.5)
    assert [s.key.id for s in r3.finished] == ["a"]
    assert not rep.has_work
    assert (a.first_token_s, a.finish_s) == pytest.approx((4.0, 7.5))
    assert (b.first_token_s, b.finish_s) == pytest.approx((4.0, 6.0))
    assert rep.busy_s == pytest.approx(7.5)
    assert rep.free_blocks == rep.total_blocks


def test_arrival_mid_iteration_joins_next_boundary() -> None:
    rep = Replica(M, kv_capacity_tokens=10_000, max_num_seqs=8, max_batched_tokens=1000)
    a = rep.add_tokens("a", 10, 3)
    rep.advance(1.0)  # it1 [0, 2) started before 1.0
    assert rep.clock_s == pytest.approx(2.0)
    b = rep.add_tokens("b", 20, 2)  # arrived at 1.0, scheduled at 2.0
    rep.advance(float("inf"))
    # it2 [2, 5.5): decode a + prefill b = 1 + 2 + 0.5; it3 [5.5, 7.5): decode both
    assert a.first_token_s == pytest.approx(2.0)
    assert b.first_scheduled_s == pytest.approx(2.0)
    assert b.first_token_s == pytest.approx(5.5)
    assert a.finish_s == pytest.approx(7.5)
    assert b.finish_s == pytest.approx(7.5)
    assert [s.key for s in rep.done] == ["a", "b"]


def test_chunked_prefill_and_attention_pairs_by_hand() -> None:
    m = LinearStepTime(
        base_s=1.0, per_prefill_token_s=0.1, per_prefill_pair_s=0.001, per_decode_seq_s=0.5
    )
    rep = Replica(m, kv_capacity_tokens=1000, max_num_seqs=4, max_batched_tokens=8)
    s = rep.add_tokens("a", 10, 2)
    d1 = rep.step(0.0).duration_s  # chunk 8: 1 + 0.8 + 0.001 * (8*9/2 causal pairs)
    d2 = rep.step(d1).duration_s  # chunk 2 after 8: 1 + 0.2 + 0.001 * (2*8 + 2*3/2)
    d3 = rep.step(d1 + d2).duration_s  # decode: 1.5
    assert (d1, d2, d3) == pytest.approx((1.836, 1.219, 1.5))
    assert s.first_token_s == pytest.approx(1.836 + 1.219)
    assert s.finish_s == pytest.approx(1.836 + 1.219 + 1.5)


def test_without_chunked_prefill_prompt_over_budget_is_rejected() -> None:
    rep = Replica(M, 1000, 4, max_batched_tokens=8, chunked_prefill=False)
    with pytest.raises(RequestTooLarge):
        rep.add_tokens("a", 10, 2)
    rep.add_tokens("b", 8, 2)  # fits whole


def test_request_larger_than_kv_is_rejected() -> None:
    rep = Replica(M, kv_capacity_tokens=32, max_num_seqs=4, max_batched_tokens=100)
    with pytest.raises(RequestTooLarge):
        rep.add_tokens("a", 30, 3)  # 33 tokens > 32
    rep.add_tokens("b", 30, 2)


def test_kv_capacity_queues_admission_by_hand() -> None:
    # 2 blocks of 16 tokens; a holds both (prompt 20) so b waits for a to finish
    rep = Replica(M, kv_capacity_tokens=32, max_num_seqs=8, max_batched_tokens=1000)
    a = rep.add_tokens("a", 20, 2)
    b = rep.add_tokens("b", 5, 1)
    end = run_steps(rep)
    # it1 prefill a: 3 -> 3; it2 decode a: 1.5 -> 4.5 (done); it3 prefill b: 1.5 -> 6
    assert a.first_token_s == pytest.approx(3.0)
    assert a.finish_s == pytest.approx(4.5)
    assert b.first_scheduled_s == pytest.approx(4.5)
    assert b.finish_s == pytest.approx(6.0)
    assert end == pytest.approx(6.0)
    assert rep.preemptions == 0


def test_preemption_of_newest_by_hand() -> None:
    # 2 blocks of 4 tokens. a (4 in, 4 out) and b (3 in, 2 out) both admitted; a's first
    # decode needs a second block -> b (newest) is preempted, recomputed after a finishes.
    rep = Replica(
        M, kv_capacity_tokens=8, max_num_seqs=8, max_batched_tokens=1000, block_size_tokens=4
    )
    a = rep.add_tokens("a", 4, 4)
    b = rep.add_tokens("b", 3, 2)
    r1 = rep.step(0.0)  # prefill 7: 1.7
    assert r1.duration_s == pytest.approx(1.7)
    r2 = rep.step(1.7)  # decode a only: 1.5, b preempted
    assert [s.key for s in r2.preempted] == ["b"]
    assert [s.key for s in r2.tokens] == ["a"]
    assert rep.num_waiting == 1 and rep.num_running == 1
    end = run_steps(rep, 1.7 + 1.5)
    # a decodes at 3.2 -> 4.7 -> 6.2 (done); b re-prefills 3+1 tokens: 1.4 -> 7.6 (done)
    assert a.finish_s == pytest.approx(6.2)
    assert b.first_token_s == pytest.approx(1.7)  # TTFT kept from before the preemption
    assert b.finish_s == pytest.approx(7.6)
    assert end == pytest.approx(7.6)
    assert b.preemptions == 1 and a.preemptions == 0 and rep.preemptions == 1
    assert rep.free_blocks == 2


def test_self_preemption_when_needing_sequence_is_newest() -> None:
    # 3 blocks of 4. a: prompt 5 (2 blocks), b: prompt 4 (1 block). b's first decode needs a
    # block, none free, b is the newest -> b preempts itself; a goes on.
    rep = Replica(
        M, kv_capacity_tokens=12, max_num_seqs=8, max_batched_tokens=1000, block_size_tokens=4
    )
    a = rep.add_tokens("a", 5, 2)
    b = rep.add_tokens("b", 4, 3)
    rep.step(0.0)  # prefill 9: 1.9
    r2 = rep.step(1.9)
    assert [s.key for s in r2.preempted] == ["b"]
    assert r2.decode_seqs == 1 and r2.duration_s == pytest.approx(1.5)
    run_steps(rep, 3.4)
    # a done at 3.4; b re-prefills 5 tokens (1.5 -> 4.9), decodes once more (1.5 -> 6.4)
    assert a.finish_s == pytest.approx(3.4)
    assert b.finish_s == pytest.approx(6.4)
    assert b.first_token_s == pytest.approx(1.9)


def test_output_zero_finishes_at_prefill() -> None:
    rep = Replica(M, 1000, 4, 100)
    s = rep.add_tokens("emb", 10, 0)
    r = rep.step(0.0)
    assert r.finished == [s] and r.first_token == []
    assert s.finish_s == pytest.approx(2.0)


def _random_replica(rng: random.Random) -> tuple[Replica, Replica]:
    m = LinearStepTime(
        base_s=rng.uniform(0.001, 0.01),
        per_prefill_token_s=rng.uniform(0, 1e-4),
        per_prefill_pair_s=rng.uniform(0, 1e-8),
        per_decode_seq_s=rng.uniform(0, 1e-3),
        per_context_token_s=rng.uniform(0, 1e-6),
    )
    kw = dict(
        kv_capacity_tokens=rng.choice([192, 256, 512, 100_000]),
        max_num_seqs=rng.choice([1, 4, 16, 64]),
        max_batched_tokens=rng.choice([16, 64, 512]),
        chunked_prefill=True,
        block_size_tokens=rng.choice([1, 4, 16]),
    )
    return Replica(m, **kw), Replica(m, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(16))
def test_fast_path_equals_brute_force_stepping_and_caps_hold(seed: int) -> None:
    """advance() (collapsed decode runs, lazy arrivals) == one step() per iteration with
    arrivals injected at the boundary after their time; caps checked at every step."""
    rng = random.Random(seed)
    slow, fast = _random_replica(rng)
    cap = slow.kv_capacity_tokens
    reqs = []
    t = 0.0
    for _ in range(60):
        t += rng.expovariate(50.0)
        i = rng.randint(0, 120)
        o = rng.randint(0, 60)
        if -(-(max(i, 1) + o) // slow.block_size_tokens) * slow.block_size_tokens > cap:
            continue
        reqs.append((t, i, o))
    # brute force
    now = 0.0
    k = 0
    slow_seqs: list[SeqState] = []
    n_finished = 0
    while k < len(reqs) or slow.has_work:
        while k < len(reqs) and reqs[k][0] <= now:
            slow_seqs.append(slow.add_tokens(k, reqs[k][1], reqs[k][2]))
            k += 1
        if not slow.has_work:
            now = reqs[k][0]
            continue
        r = slow.step(now)
        assert len(slow.running) <= slow.max_num_seqs
        assert r.prefill_tokens + r.decode_seqs <= slow.max_batched_tokens
        held = sum(s.blocks for s in slow.running)
        assert held + slow.free_blocks == slow.total_blocks
        for s in slow.running:
            assert s.blocks * slow.block_size_tokens >= s.computed
        n_finished += len(r.finished)
        now += r.duration_s
    # fast path, driven like the fleet does
    fast_seqs: list[SeqState] = []
    for k, (ta, i, o) in enumerate(reqs):
        fast.advance(ta)
        if fast.clock_s < ta:
            fast.clock_s = ta
        fast_seqs.append(fast.add_tokens(k, i, o))
    fast.advance(float("inf"))
    assert len(fast.done) == n_finished == len(reqs)
    assert slow.done == []  # step() keeps no history
    for s1, s2 in zip(slow_seqs, fast_seqs, strict=True):
        assert s2.first_scheduled_s == pytest.approx(s1.first_scheduled_s, rel=1e-9, abs=1e-9)
        assert s2.first_token_s == pytest.approx(s1.first_token_s, rel=1e-9, abs=1e-9)
        assert s2.finish_s == pytest.approx(s1.finish_s, rel=1e-9, abs=1e-9)
        assert s2.preemptions == s1.preemptions
    assert fast.iterations == slow.iterations
    assert fast.busy_s == pytest.approx(slow.busy_s, rel=1e-9)
    assert fast.free_blocks == fast.total_blocks


class _CurvedStepTime:
    """Iteration time NOT affine in decode context (exercises the per-iteration fallback of
    collapsed decode runs)."""

    def iteration_time_s(self, p: int, pairs: float, d: int, ctx: int) -> float:
        return 0.002 + 2e-5 * p + 1e-4 * d + 1e-6 * ctx**1.5


@pytest.mark.parametrize("horizon_step", [0.05, 0.7])
def test_fast_path_with_non_affine_step_time_equals_stepping(horizon_step: float) -> None:
    rng = random.Random(9)
    kw = dict(kv_capacity_tokens=4096, max_num_seqs=8, max_batched_tokens=256)
    slow = Replica(_CurvedStepTime(), **kw)  # type: ignore[arg-type]
    fast = Replica(_CurvedStepTime(), **kw)  # type: ignore[arg-type]
    reqs = [(k * horizon_step, rng.randint(1, 200), rng.randint(1, 80)) for k in range(40)]
    slow_seqs: list[SeqState] = []
    now = 0.0
    k = 0
    while k < len(reqs) or slow.has_work:
        while k < len(reqs) and reqs[k][0] <= now:
            slow_seqs.append(slow.add_tokens(k, reqs[k][1], reqs[k][2]))
            k += 1
        if not slow.has_work:
            now = reqs[k][0]
            continue
        now += slow.step(now).duration_s
    fast_seqs = []
    for key, (ta, i, o) in enumerate(reqs):
        fast.advance(ta)
        fast.clock_s = max(fast.clock_s, ta)
        fast_seqs.append(fast.add_tokens(key, i, o))
    fast.advance(float("inf"))
    for s1, s2 in zip(slow_seqs, fast_seqs, strict=True):
        assert s2.first_token_s == pytest.approx(s1.first_token_s, rel=1e-9)
        assert s2.finish_s == pytest.approx(s1.finish_s, rel=1e-9)
    assert fast.iterations == slow.iterations
