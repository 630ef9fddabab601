"""Fit an iteration (batch) time model by replaying measured runs through the simulator.

A server that batches requests (an LLM engine's iterations, an embeddings server's
forward passes) cannot be calibrated request by request: a request's latency includes
waiting for the batch in flight and sharing its own batch. So the fit replays each measured
run -- the recorded send times and token counts -- through the simulator's replica model
(:class:`gpubalance.sim.Replica`: continuous batching with the server's batch limits) with
a candidate :class:`~gpubalance.sim.LinearStepTime`, adds a constant per-request
``overhead_s`` (time the client sees that the model does not spend: HTTP, parsing,
tokenisation, network), and compares the predicted latency distribution with the measured
one. Parameters (all >= 0, seconds): ``base_s`` and ``per_prefill_token_s`` of an
iteration, ``per_decode_seq_s`` and ``per_context_token_s`` when requests have output
tokens, and ``overhead_s``.

Objective: squared log-ratios of predicted to measured e2e percentiles (p10, p25, p50,
p75, p90, p95) per run, plus a small weight on per-request squared log-ratios, each run's
loss passed through a soft-L1 function (runs disturbed from outside weigh less); minimised by
Nelder-Mead in log-parameter space from a start given by a linear fit of the requests
that ran alone (their latency is overhead + one batch of their own tokens). Runs must
carry send times (load-test results do; access logs do when they have ``ts``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from gpubalance.calibrate.measurements import Measurements, isolated_mask
from gpubalance.calibrate.result import Calibration, fit_quality
from gpubalance.cost.token import fit_token_cost_model
from gpubalance.errors import UserInputError
from gpubalance.sim import LinearStepTime, ReplicaSpec, simulate
from gpubalance.workload import RequestArrays

__all__ = ["BatchLimits", "JitteredStepTime", "fit_step", "predict_e2e_s"]

_QUANTILES = (10.0, 25.0, 50.0, 75.0, 90.0, 95.0)


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """The server's batching limits, as the replica model sees them.

    ``max_num_seqs``: most requests in one batch; ``max_batched_tokens``: token budget of
    one iteration; ``chunked_prefill``: whether prompts may be split across iterations
    (False for embeddings servers, which run each text whole);
    ``kv_capacity_tokens``: KV capacity (large for servers without a KV cache).
    """

    max_num_seqs: int = 32
    max_batched_tokens: int = 8192
    chunked_prefill: bool = False
    kv_capacity_tokens: int = 1 << 30


class JitteredStepTime:
    """A step-time model whose every iteration is slowed by a random factor drawn (seeded,
    with replacement) from measured ``slowdowns``: service-time variability such as a
    shared CPU, clock changes or noisy neighbours, which a deterministic model misses in
    the latency tail. Factors are dimensionless (1 = the base model's time)."""

    def __init__(self, base: LinearStepTime, slowdowns: np.ndarray, seed: int) -> None:
        self.base = base
        self._factors = np.asarray(slowdowns, dtype=np.float64)
        self._rng = np.random.default_rng(seed)
        self._buf = np.empty(0)
        self._i = 0

    def iteration_time_s(
        self,
        prefill_tokens: int,
        prefill_attention_pairs: float,
        decode_seqs: int,
        decode_context_tokens: int,
    ) -> float:
        """The base model's time x the next random slowdown factor, seconds."""
        if self._i >= self._buf.size:
            self._buf = self._rng.choice(self._factors, size=4096)
            self._i = 0
        f = float(self._buf[self._i])
        self._i += 1
        t = self.base.iteration_time_s(
            prefill_tokens, prefill_attention_pairs, decode_seqs, decode_context_tokens
        )
        return t * f


def predict_e2e_s(
    step: LinearStepTime,
    overhead_s: float,
    arrival_s: np.ndarray,
    input_tokens: np.ndarray,
    output_tokens: np.ndarray,
    limits: BatchLimits,
    *,
    slowdowns: np.ndarray | None = None,
    seed: int = 0,
) -> np.ndarray:
    """Predicted end-to-end latency (seconds) of each request, in the given order.

    ``arrival_s`` need not be sorted; requests are simulated on one replica. With
    ``slowdowns``, iterations are timed by :class:`JitteredStepTime` (seeded by ``seed``).
    """
    order = np.argsort(arrival_s, kind="stable")
    t = np.asarray(arrival_s, dtype=np.float64)[order]
    arr = RequestArrays(
        arrival_s=t - t[0],
        input_tokens=np.maximum(np.asarray(input_tokens, dtype=np.int64)[order], 1),
        output_tokens=np.asarray(output_tokens, dtype=np.int64)[order],
    )
    model: LinearStepTime | JitteredStepTime = (
        step if slowdowns is None else JitteredStepTime(step, slowdowns, seed)
    )
    spec = ReplicaSpec(
        model,
        kv_capacity_tokens=limits.kv_capacity_tokens,
        max_num_seqs=limits.max_num_seqs,
        max_batched_tokens=limits.max_batched_tokens,
        chunked_prefill=limits.chunked_prefill,
    )
    res = simulate(arr, spec, policy="round_robin", max_samples=0, cost_model=step)
    out = np.empty_like(res.e2e_s)
    out[order] = res.e2e_s + overhead_s
    return out


def _params_to_model(p: np.ndarray, decode: bool) -> tuple[LinearStepTime, float]:
    step = LinearStepTime(
        base_s=float(p[0]),
        per_prefill_token_s=float(p[1]),
        per_decode_seq_s=float(p[3]) if decode else 0.0,
        per_context_token_s=float(p[4]) if decode else 0.0,
    )
    return step, float(p[2])


def fit_step(
    m: Measurements,
    limits: BatchLimits,
    *,
    max_iter: int = 400,
    per_request_weight: float = 0.1,
    robust_scale: float | None = 0.05,
    jitter: bool = True,
    min_isolated_for_jitter: int = 10,
) -> Calibration:
    """Fit :class:`LinearStepTime` + per-request overhead (see module doc).

    Args:
        robust_scale: when set, each run's loss ``L`` enters the total as
            ``2 c (sqrt(1 + L / c) - 1)`` with ``c = robust_scale`` (soft-L1), so a run
            disturbed by something outside the model (another process stealing the CPU, a
            GC pause) weighs less than a run the model should explain; None: plain sum.
        jitter: also fit service-time variability: the slowdown of each request that ran
            alone (measured e2e - overhead, over the model's time for it), normalised to
            median 1, becomes the factor distribution of :class:`JitteredStepTime`, and
            the parameters are refitted with it (two rounds). Needs
            ``min_isolated_for_jitter`` such requests.
    """
    has_time = np.isfinite(m.sent_s)
    if not has_time.any():
        raise UserInputError(
            "a batch (step) fit needs send times: use load-test results (--out) or access "
            "logs with 'ts'"
        )
    m = m.select(has_time)
    decode = bool((m.output_tokens > 0).any())
    runs = [np.flatnonzero(m.run == label) for label in m.runs()]
    runs = [r for r in runs if r.size >= 5]
    if not runs:
        raise UserInputError("need at least one run with 5 or more successful requests")
    notes = []
    # start: requests alone cost overhead + one iteration of their own tokens
    iso = isolated_mask(m)
    src = m.select(iso) if int(iso.sum()) >= 5 else m
    if int(iso.sum()) < 5:
        notes.append("fewer than 5 requests ran alone; start point fitted on all requests")
    lin, _ = fit_token_cost_model(
        src.input_tokens, src.output_tokens, src.e2e_s, quadratic=False, relative=True
    )
    c0 = max(lin.overhead_s, 1e-4)
    x0 = np.array(
        [
            0.5 * c0,
            max(lin.prefill_s_per_token, 1e-7),
            0.5 * c0,
            max(lin.decode_s_per_token, 1e-6),
            1e-8,
        ]
    )
    n_par = 5 if decode else 3
    meas_q = [np.percentile(m.e2e_s[r], _QUANTILES) for r in runs]
    log_meas = [np.log(np.maximum(m.e2e_s[r], 1e-9)) for r in runs]

    slow: np.ndarray | None = None  # service-time factors once fitted (jitter)

    def predict_runs(p: np.ndarray) -> list[np.ndarray]:
        step, over = _params_to_model(p, decode)
        return [
            predict_e2e_s(
                step,
                over,
                m.sent_s[r],
                m.input_tokens[r],
                m.output_tokens[r],
                limits,
                slowdowns=slow,
                seed=k,
            )
            for k, r in enumerate(runs)
        ]

    def loss(z: np.ndarray) -> float:
        p = np.exp(z)
        full = np.concatenate([p, x0[n_par:]])
        total = 0.0
        for pred, q, lm in zip(predict_runs(full), meas_q, log_meas, strict=True):
            if not np.all(np.isfinite(pred)):
                return 1e6
            pq = np.percentile(pred, _QUANTILES)
            run_loss = float(np.sum(np.log(pq / q) ** 2))
            run_loss += per_request_weight * float(np.mean((np.log(pred) - lm) ** 2))
            if robust_scale is not None:
                c = robust_scale
                run_loss = 2.0 * c * (math.sqrt(1.0 + run_loss / c) - 1.0)
            total += run_loss
        return total

    def slowdowns_for(p: np.ndarray) -> np.ndarray | None:
        step, over = _params_to_model(p, decode)
        alone = m.select(iso)
        model_s = step.costs_s(alone.input_tokens, alone.output_tokens)
        f = (alone.e2e_s - over) / np.maximum(model_s, 1e-12)
        f = f[np.isfinite(f) & (f > 0)]
        if f.size < min_isolated_for_jitter:
            return None
        return np.clip(f / float(np.median(f)), 0.1, 50.0)

    z = np.log(x0[:n_par])
    nfev = 0
    rounds = 2 if jitter else 1
    for rnd in range(rounds):
        best = minimize(
            loss, z, method="Nelder-Mead",
            options={"maxiter": max_iter, "xatol": 1e-3, "fatol": 1e-6},
        )  # fmt: skip
        nfev += int(best.nfev)
        z = best.x
        if jitter and rnd + 1 < rounds:
            slow = slowdowns_for(np.concatenate([np.exp(z), x0[n_par:]]))
            if slow is None:
                notes.append(
                    f"fewer than {min_isolated_for_jitter} requests ran alone: no service-time "
                    "variability fitted (the model is deterministic)"
                )
                break
    p = np.concatenate([np.exp(z), x0[n_par:]])
    if slow is not None:
        slow = slowdowns_for(p)
    step, over = _params_to_model(p, decode)
    preds = predict_runs(p)
    pred_all = np.concatenate(preds)
    meas_all = np.concatenate([m.e2e_s[r] for r in runs])
    checks = []
    for r, pred in zip(runs, preds, strict=True):
        label = str(m.run[r[0]])
        rate = float(m.offered_rps[r[0]])
        row: dict[str, float | str] = {"run": label, "offered_rps": rate, "n": int(r.size)}
        for q in (50, 95):
            row[f"measured_p{q}_s"] = float(np.percentile(m.e2e_s[r], q))
            row[f"predicted_p{q}_s"] = float(np.percentile(pred, q))
        checks.append(row)
    notes.append(
        f"replayed {len(runs)} run(s) through the replica model (max_num_seqs="
        f"{limits.max_num_seqs}, max_batched_tokens={limits.max_batched_tokens}); "
        f"{nfev} simulations"
    )
    if not best.success:
        notes.append(f"optimiser stopped early: {best.message}")
    cal = Calibration(
        kind="step",
        profile=step,
        fit=fit_quality(pred_all, meas_all),
        used=int(meas_all.size),
        total=len(m),
        target="e2e_s (distribution per run)",
        notes=notes,
        extra={"overhead_s": over, "loss": float(best.fun)},
        checks=checks,
        slowdowns=slow,
    )
    if slow is not None:
        for q in (90, 99):
            cal.extra[f"slowdown_p{q}"] = float(np.percentile(slow, q))
    if not math.isfinite(cal.fit.r2):
        cal.notes.append("R² undefined: all measured latencies are equal")
    return cal
