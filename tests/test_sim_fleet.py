"""Fleet simulation: queueing theory (M/M/1), hand-checked timelines through simulate(),
routing bookkeeping, admission caps, early exit, determinism, policy sanity."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpubalance.cost import BatchedCost
from gpubalance.route import BackendState, make_policy
from gpubalance.sim import (
    SLA,
    EarlyStop,
    LinearStepTime,
    ReplicaSpec,
    generate_arrays,
    simulate,
)
from gpubalance.workload import Request, RequestArrays, default_profile, generate_workload

M = LinearStepTime(base_s=1.0, per_prefill_token_s=0.1, per_decode_seq_s=0.5)
BIG = ReplicaSpec(M, kv_capacity_tokens=10_000, max_num_seqs=8, max_batched_tokens=1000)


def _mm1_arrays(rho: float, n: int, seed: int) -> tuple[RequestArrays, ReplicaSpec, float]:
    """Workload, replica and mean service time (s) of an M/M/1 queue at utilisation ``rho``.

    Service is one prefill iteration of ``ceil(X)`` tokens at 1e-6 s/token with X
    exponential of mean 1e6 tokens: a geometric service time, exponential up to a relative
    error of order 1e-6 (mean ceil(X) = 1/(1 - exp(-1e-6)) = 1e6 + 0.5 tokens). One output
    token, so a request finishes when its prefill does; max_num_seqs=1 makes the replica
    a single FIFO server.
    """
    rng = np.random.default_rng(seed)
    m_tokens = 1_000_000
    per_token_s = 1e-6
    mean_service_s = per_token_s / -math.expm1(-1.0 / m_tokens)
    t = np.cumsum(rng.exponential(mean_service_s / rho, n))
    inp = np.ceil(rng.exponential(m_tokens, n)).astype(np.int64)
    spec = ReplicaSpec(
        LinearStepTime(per_prefill_token_s=per_token_s),
        kv_capacity_tokens=10**10,
        max_num_seqs=1,
        max_batched_tokens=10**9,
    )
    return RequestArrays(t, inp, np.ones(n, dtype=np.int64)), spec, mean_service_s


@pytest.mark.parametrize(("rho", "n"), [(0.5, 400_000), (0.8, 1_000_000)])
def test_mm1_mean_wait_within_3_percent_of_theory(rho: float, n: int) -> None:
    arr, spec, es = _mm1_arrays(rho, n, seed=0)
    res = simulate(arr, spec, max_samples=0)
    wq_theory = rho * es / (1.0 - rho)  # M/M/1: Wq = rho / (mu - lambda)
    assert abs(float(res.queue_s.mean()) / wq_theory - 1.0) < 0.03
    assert res.busy_fraction[0] == pytest.approx(rho, rel=0.02)


def test_single_server_waits_equal_lindley_recursion() -> None:
    arr, spec, _ = _mm1_arrays(0.9, 20_000, seed=1)
    res = simulate(arr, spec, max_samples=0)
    service = arr.input_tokens * 1e-6
    t = arr.arrival_s
    w = np.zeros(len(t))
    for k in range(1, len(t)):  # W_k = max(0, W_{k-1} + S_{k-1} - (A_k - A_{k-1}))
        w[k] = max(0.0, w[k - 1] + service[k - 1] - (t[k] - t[k - 1]))
    np.testing.assert_allclose(res.queue_s, w, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(res.e2e_s, w + service, rtol=1e-9, atol=1e-9)


def test_simulate_two_requests_by_hand() -> None:
    reqs = [Request("a", 0.0, 10, 3), Request("b", 1.0, 20, 2)]
    r = simulate(reqs, BIG)
    # see test_sim_replica.test_arrival_mid_iteration_joins_next_boundary
    assert r.ttft_s == pytest.approx([2.0, 4.5])
    assert r.e2e_s == pytest.approx([7.5, 6.5])
    assert r.queue_s == pytest.approx([0.0, 1.0])
    assert r.tpot_s == pytest.approx([(7.5 - 2.0) / 2, 2.0])
    assert r.span_s == pytest.approx(7.5)
    assert r.busy_fraction == pytest.approx([1.0])
    assert r.throughput_rps == pytest.approx(2 / 7.5)
    assert r.output_tokens_per_s == pytest.approx(5 / 7.5)
    assert r.total_tokens_per_s == pytest.approx(35 / 7.5)
    assert r.completed == 2 and r.rejected == 0


def test_round_robin_spreads_and_idle_replica_starts_at_arrival() -> None:
    reqs = [Request("a", 0.0, 10, 1), Request("b", 0.5, 10, 1), Request("c", 0.7, 10, 1)]
    r = simulate(reqs, BIG, n_replicas=2, policy="round_robin")
    assert r.replica.tolist() == [0, 1, 0]
    # a: [0,2) on 0; b: [0.5,2.5) on 1; c waits for replica 0 until 2 -> done 4
    assert r.e2e_s == pytest.approx([2.0, 2.0, 3.3])
    assert r.queue_s == pytest.approx([0.0, 0.0, 1.3])
    assert r.gpus == 2


def test_least_requests_sees_finishes_only_when_due() -> None:
    # a finishes on replica 0 at 2.0. b arrives at 1.9 (a still in flight -> replica 1),
    # c at 2.5 (a's finish is due by then: replica 0 is empty, replica 1 has b).
    reqs = [Request("a", 0.0, 10, 1), Request("b", 1.9, 10, 1), Request("c", 2.5, 10, 1)]
    r = simulate(reqs, BIG, n_replicas=2, policy="least_requests")
    assert r.replica.tolist()[:2] == [0, 1]
    assert r.replica[2] == 0  # replica 1 busy with b until 3.9, replica 0 idle since 2.0
    assert r.queue_s == pytest.approx([0.0, 0.0, 0.0])


def test_admission_cap_rejects_and_counts() -> None:
    spec = ReplicaSpec(M, kv_capacity_tokens=10_000, max_num_seqs=1, max_batched_tokens=1000)
    reqs = [Request(str(k), 0.0, 10, 1) for k in range(5)]
    r = simulate(reqs, spec, max_queued_per_replica=2)
    # all arrive at t=0 before the first iteration forms: the queue takes 2, 3 are refused
    assert r.rejected == 3
    assert r.completed == 2
    assert np.isnan(r.e2e_s[2:]).all()
    assert r.replica.tolist() == [0, 0, -1, -1, -1]


def test_too_large_requests_are_counted_not_run() -> None:
    spec = ReplicaSpec(M, kv_capacity_tokens=64, max_num_seqs=4, max_batched_tokens=1000)
    r = simulate([Request("a", 0.0, 60, 10), Request("b", 0.1, 10, 2)], spec)
    assert r.rejected_too_large == 1
    assert r.completed == 1 and np.isnan(r.e2e_s[0])


def test_kv_capacity_from_step_model_attribute() -> None:
    class Model:
        kv_capacity_tokens = 32
        gpus = 2

        def iteration_time_s(self, p: int, pairs: float, d: int, c: int) -> float:
            return 1.0 + 0.1 * p + 0.5 * d

    spec = ReplicaSpec(Model(), max_num_seqs=8, max_batched_tokens=1000)
    r = simulate([Request("a", 0.0, 20, 2), Request("b", 0.0, 5, 1)], spec)
    # same as test_kv_capacity_queues_admission_by_hand: b waits for a's KV blocks
    assert r.e2e_s == pytest.approx([4.5, 6.0])
    assert r.gpus == 2


def test_same_seed_same_result_and_seed_matters_for_random_policy() -> None:
    arr = generate_arrays(3000, seed=3, rate_rps=40.0, arrivals="poisson")
    spec = ReplicaSpec(
        LinearStepTime(base_s=0.005, per_prefill_token_s=2e-5, per_decode_seq_s=2e-4),
        kv_capacity_tokens=200_000,
        max_num_seqs=32,
        max_batched_tokens=4096,
    )
    a = simulate(arr, spec, n_replicas=4, policy="power_of_two", seed=1)
    b = simulate(arr, spec, n_replicas=4, policy="power_of_two", seed=1)
    c = simulate(arr, spec, n_replicas=4, policy="power_of_two", seed=2)
    np.testing.assert_array_equal(a.e2e_s, b.e2e_s)
    np.testing.assert_array_equal(a.replica, b.replica)
    assert not np.array_equal(a.replica, c.replica)


def test_generate_arrays_matches_generate_workload() -> None:
    prof = default_profile()
    reqs = generate_workload(prof, 500, seed=11, rate_rps=7.0, growth=2.0)
    arr = generate_arrays(500, seed=11, profile=prof, rate_rps=7.0, growth=2.0)
    assert arr.arrival_s.tolist() == [r.arrival_s for r in reqs]
    assert arr.input_tokens.tolist() == [r.input_tokens for r in reqs]
    assert arr.output_tokens.tolist() == [r.output_tokens for r in reqs]


def test_rate_scale_compresses_time() -> None:
    reqs = [Request("a", 0.0, 10, 1), Request("b", 4.0, 10, 1)]
    r = simulate(reqs, BIG, rate_scale=2.0)  # b arrives at 2.0, just as a finishes
    assert r.arrival_s.tolist() == [0.0, 2.0]
    assert r.queue_s == pytest.approx([0.0, 0.0])


def test_unsorted_input_is_sorted_by_arrival() -> None:
    reqs = [Request("late", 5.0, 10, 1), Request("early", 0.0, 20, 1)]
    r = simulate(reqs, BIG)
    assert r.arrival_s.tolist() == [0.0, 5.0]
    assert r.input_tokens.tolist() == [20, 10]


def test_least_cost_beats_round_robin_p99_heavy_tail_80pct() -> None:
    rng = np.random.default_rng(7)
    n = 20_000
    inp = np.maximum(1, rng.lognormal(6.0, 1.0, n)).astype(np.int64)
    out = np.minimum(np.maximum(1, rng.lognormal(3.5, 1.2, n)), 4000).astype(np.int64)
    m = LinearStepTime(base_s=0.005, per_prefill_token_s=5e-5, per_decode_seq_s=2e-3)
    # one sequence at a time: a request's service time is exactly m.cost_s, so the
    # utilisation is lambda * E[cost] / 4 = 0.8 by construction
    spec = ReplicaSpec(m, kv_capacity_tokens=10**7, max_num_seqs=1, max_batched_tokens=10**6)
    rate = 0.8 * 4 / float(m.costs_s(inp, out).mean())
    arr = RequestArrays(np.cumsum(rng.exponential(1.0 / rate, n)), inp, out)
    rr = simulate(arr, spec, n_replicas=4, policy="round_robin")
    lc = simulate(arr, spec, n_replicas=4, policy="least_cost")
    assert rr.busy_fraction.mean() == pytest.approx(0.8, abs=0.03)
    assert lc.e2e.p99_s < 0.8 * rr.e2e.p99_s
    assert lc.queue.mean_s < 0.5 * rr.queue.mean_s


def test_policy_object_is_used_as_given() -> None:
    pol = make_policy("round_robin")
    reqs = [Request(str(k), 0.1 * k, 10, 1) for k in range(6)]
    r = simulate(reqs, BIG, n_replicas=3, policy=pol)
    assert r.replica.tolist() == [0, 1, 2, 0, 1, 2]
    # the same object keeps its cursor across simulations, as in the gateway
    r2 = simulate(reqs[:1], BIG, n_replicas=3, policy=pol)
    assert r2.replica.tolist() == [0]


def test_early_stop_on_sla_and_on_queue_bound() -> None:
    arr = generate_arrays(20_000, seed=5, rate_rps=200.0, arrivals="poisson")
    spec = ReplicaSpec(
        LinearStepTime(base_s=0.01, per_prefill_token_s=5e-5, per_decode_seq_s=1e-3),
        kv_capacity_tokens=100_000,
        max_num_seqs=16,
        max_batched_tokens=2048,
    )
    sla = SLA(ttft_s=1.0, e2e_s=5.0, quantile=0.99)
    full = simulate(arr, spec, sla=sla)
    assert not full.meets()
    stopped = simulate(arr, spec, sla=sla, early_stop=EarlyStop(sla=sla))
    assert stopped.stopped_early and "SLA" in stopped.stop_reason
    assert stopped.completed < full.completed
    assert not stopped.meets()
    q = simulate(arr, spec, early_stop=EarlyStop(max_waiting_per_replica=50))
    assert q.stopped_early and "waiting" in q.stop_reason
    # a light load passes, and early stop changes nothing then
    light = generate_arrays(2000, seed=5, rate_rps=2.0, arrivals="poisson")
    ok = simulate(light, spec, sla=sla, early_stop=EarlyStop(sla=sla))
    assert not ok.stopped_early and ok.meets()
    assert ok.goodput is not None and ok.goodput.fraction > 0.99


def test_queue_samples_count_waiting_and_running() -> None:
    spec = ReplicaSpec(M, kv_capacity_tokens=10_000, max_num_seqs=1, max_batched_tokens=1000)
    reqs = [Request(str(k), 0.0, 10, 1) for k in range(3)] + [Request("z", 10.0, 10, 1)]
    r = simulate(reqs, spec, sample_interval_s=1.0)
    # each request takes 2 s alone: [0,2), [2,4), [4,6); z at 10. At a boundary (t=2, 4, 6)
    # the finishing request is gone and the next one is not admitted yet.
    assert r.sample_s.tolist() == [float(k) for k in range(11)]
    assert r.waiting[:, 0].tolist() == [3, 2, 2, 1, 1, 0, 0, 0, 0, 0, 1]
    assert r.running[:, 0].tolist() == [0, 1, 0, 1, 0, 1, 0, 0, 0, 0, 0]


def _per_iteration_sim(
    arr: RequestArrays, spec: ReplicaSpec, n_rep: int, policy: str
) -> tuple[np.ndarray, np.ndarray]:
    """Independent reference: one heap event per replica iteration (vidur's shape), driving
    Replica.step(); routing bookkeeping at each iteration end. Returns (replica, e2e_s)."""
    import heapq

    reps = [spec.build() for _ in range(n_rep)]
    backends = [BackendState(f"r{j}") for j in range(n_rep)]
    choose = make_policy(policy, seed=0).choose
    # the fleet's default routing price
    cost = BatchedCost(spec.step_model).costs_s(arr.input_tokens, arr.output_tokens).tolist()
    n = len(arr)
    seqs = [None] * n
    where = [-1] * n
    heap: list[tuple[float, int, int, int]] = []  # (time, order, kind 0=arrival 1=step, x)
    for i, t in enumerate(arr.arrival_s.tolist()):
        heap.append((t, i, 0, i))
    heapq.heapify(heap)
    order = n
    stepping = [False] * n_rep
    finishing: list[list] = [[] for _ in range(n_rep)]
    while heap:
        t, _, kind, x = heapq.heappop(heap)
        if kind == 0:
            j = choose(backends, cost[x])
            seqs[x] = reps[j].add_tokens(x, int(arr.input_tokens[x]), int(arr.output_tokens[x]))
            where[x] = j
            backends[j].start(cost[x])
            if not stepping[j]:
                stepping[j] = True
                heapq.heappush(heap, (t, order, 1, j))
                order += 1
            continue
        for s in finishing[x]:
            backends[x].finish(cost[s.key])
        finishing[x] = []
        if not reps[x].has_work:
            stepping[x] = False
            continue
        res = reps[x].step(t)
        finishing[x] = res.finished
        heapq.heappush(heap, (t + res.duration_s, order, 1, x))
        order += 1
    fin = np.array([s.finish_s for s in seqs])  # type: ignore[union-attr]
    return np.array(where), fin - arr.arrival_s


@pytest.mark.parametrize("policy", ["round_robin", "least_requests", "least_cost", "power_of_two"])
def test_fleet_equals_per_iteration_event_simulation(policy: str) -> None:
    """simulate() (lazy replicas, collapsed decode runs, skipped quiet replicas) gives the
    same routing and latencies as a plain one-event-per-iteration simulation, including
    under KV pressure with preemptions."""
    arr = generate_arrays(1500, seed=4, rate_rps=60.0)
    arr = RequestArrays(
        arr.arrival_s, np.minimum(arr.input_tokens, 1500), np.minimum(arr.output_tokens, 300)
    )
    spec = ReplicaSpec(
        LinearStepTime(
            base_s=0.004, per_prefill_token_s=2e-5, per_decode_seq_s=1e-4, per_context_token_s=1e-7
        ),
        kv_capacity_tokens=4096,
        max_num_seqs=24,
        max_batched_tokens=1024,
    )
    res = simulate(arr, spec, n_replicas=3, policy=policy, seed=0)
    where, e2e = _per_iteration_sim(arr, spec, 3, policy)
    assert res.total_preemptions > 0
    assert res.replica.tolist() == where.tolist()
    np.testing.assert_allclose(res.e2e_s, e2e, rtol=1e-9, atol=1e-9)


def test_heterogeneous_replicas_weights_reach_the_router() -> None:
    fast = ReplicaSpec(
        LinearStepTime(base_s=0.5, per_prefill_token_s=0.05, per_decode_seq_s=0.25),
        kv_capacity_tokens=10_000,
        weight=2.0,
        name="fast",
        gpus=2,
    )
    reqs = [Request(str(k), 4.0 * k, 10, 2) for k in range(9)]  # each one runs alone
    r = simulate(reqs, [fast, BIG], policy="weighted")
    # smooth weighted round robin with weights 2:1 -> fast, slow, fast, repeated
    assert r.replica.tolist() == [0, 1, 0] * 3
    assert r.gpus == 3
    # fast: prefill 0.5 + 10 * 0.05, one decode 0.5 + 0.25 -> 1.75; slow: 2 + 1.5 -> 3.5
    assert r.e2e_s.tolist() == pytest.approx([1.75, 3.5, 1.75] * 3)
    s = r.summary()
    assert s["completed"] == 9 and s["gpus"] == 3
    assert s["e2e_max_s"] == pytest.approx(float(np.nanmax(r.e2e_s)))


def test_md1_mean_wait_matches_pollaczek_khinchine() -> None:
    """Deterministic 1 s service (one prefill iteration of 1000 tokens at 1 ms/token),
    Poisson arrivals at rho 0.8: Wq = rho / (2 mu (1 - rho)) = 2.0 s."""
    rng = np.random.default_rng(2)
    n = 200_000
    t = np.cumsum(rng.exponential(1.0 / 0.8, n))
    spec = ReplicaSpec(
        LinearStepTime(per_prefill_token_s=1e-3),
        kv_capacity_tokens=10**6,
        max_num_seqs=1,
        max_batched_tokens=10**4,
    )
    arr = RequestArrays(t, np.full(n, 1000, dtype=np.int64), np.ones(n, dtype=np.int64))
    res = simulate(arr, spec, max_samples=0)
    assert float(res.queue_s.mean()) == pytest.approx(2.0, rel=0.03)


def test_continuous_batching_waits_for_the_next_iteration_boundary() -> None:
    """Constant iteration time d regardless of batch (per-token costs zero), no caps, and
    arrivals dense enough that the replica never idles: a Poisson arrival waits a uniform
    residual of the running iteration (mean d/2, by PASTA), then its prefill iteration emits
    the first token and o - 1 decode iterations follow: TTFT = R + d, e2e = R + o d."""
    d = 0.1
    rng = np.random.default_rng(3)
    n = 20_000
    t = np.cumsum(rng.exponential(1.0 / 200.0, n))  # 20 arrivals per iteration
    out = rng.integers(1, 20, n)
    spec = ReplicaSpec(
        LinearStepTime(base_s=d),
        kv_capacity_tokens=10**9,
        max_num_seqs=10**6,
        max_batched_tokens=10**9,
    )
    res = simulate(RequestArrays(t, rng.integers(1, 500, n), out), spec, max_samples=0)
    wait = res.queue_s
    assert float(wait.min()) >= 0.0 and float(wait[1:].max()) < d
    assert float(wait[1000:].mean()) == pytest.approx(d / 2, rel=0.02)
    np.testing.assert_allclose(res.ttft_s, wait + d, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(res.e2e_s, wait + out * d, rtol=1e-9, atol=1e-6)
