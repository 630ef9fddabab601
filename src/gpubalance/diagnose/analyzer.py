"""Analyse a :class:`~gpubalance.diagnose.model.TraceSet`: who is slow, where, and why.

Definitions (seconds, per rank ``r`` and step ``s``):

- busy ``B[r,s]`` = data + compute + other: the step's time outside collectives;
- job time lost at step ``s`` to the slowest rank = ``max_r B - median_r B``;
- sync wait ``W[r,s]`` = ``sync[r,s] - min_r sync[:,s]``: time at collectives spent waiting
  for the slowest rank (the fastest arrival waits the most, the last one the least);
- a rank *straggles* at step ``s`` when its ``B`` exceeds the median over ranks by
  more than ``threshold`` (``max(rel_threshold * median step time, 4 robust sigmas of
  the step-to-step jitter)``);
  *persistent* when it does so in at least ``persistent_share`` of the steps, *occasional*
  when in at least ``min_occasional_steps`` steps and ``occasional_share`` of them;
- its excess is split by phase (data / compute / other) against the per-step median of the
  other ranks; compute excess is regressed on the per-step work cost (when recorded) to say
  how much of it count-based partitioning explains.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpubalance.diagnose.findings import FIXES, Finding
from gpubalance.diagnose.format import CAT_COMPUTE, CAT_DATA, CAT_OTHER, CAT_SYNC, CATEGORIES
from gpubalance.diagnose.model import TraceSet

__all__ = [
    "AnalysisOptions",
    "Diagnosis",
    "RankSummary",
    "StragglerMask",
    "analyze",
    "detect_stragglers",
]


@dataclass(frozen=True)
class AnalysisOptions:
    """Thresholds of the analysis (shares are fractions of steps)."""

    rel_threshold: float = 0.05
    robust_sigmas: float = 4.0
    persistent_share: float = 0.5
    occasional_share: float = 0.02
    min_occasional_steps: int = 3
    outlier_sigmas: float = 8.0
    max_outlier_steps: int = 10
    explained_threshold: float = 0.5


@dataclass
class StragglerMask:
    """``slow[r, s]``: rank row ``r`` straggles at step ``s``; ``excess_s[r, s]`` = B - median."""

    slow: np.ndarray
    excess_s: np.ndarray
    threshold_s: float


@dataclass
class RankSummary:
    """Per-rank means (seconds per step) and straggling counts."""

    rank: int
    host: str
    step_s: float
    data_s: float
    compute_s: float
    sync_s: float
    other_s: float
    sync_wait_s: float
    slow_steps: int
    work: float


@dataclass
class Diagnosis:
    """Everything the analysis found; rendering lives in gpubalance.report.diagnose."""

    run_id: str
    n_ranks: int
    n_steps: int
    world_size: int
    total_step_s: float
    lost_s: float
    sync_wait_s: float
    findings: list[Finding]
    ranks: list[RankSummary]
    problems: list[str]
    heatmap: np.ndarray  # (R, bins): busy time relative to the per-step median
    heatmap_steps: np.ndarray  # (bins,) first step index of each bin
    phase_means_s: np.ndarray  # (R, 4)
    rank_ids: np.ndarray
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "n_ranks": self.n_ranks,
            "n_steps": self.n_steps,
            "world_size": self.world_size,
            "total_step_s": self.total_step_s,
            "lost_s": self.lost_s,
            "sync_wait_s": self.sync_wait_s,
            "findings": [f.to_dict() for f in self.findings],
            "ranks": [r.__dict__ for r in self.ranks],
            "problems": self.problems,
            "gpu_telemetry": {str(k): v for k, v in self.extra.get("nvml", {}).items()},
        }


StragglerFn = Callable[[np.ndarray, AnalysisOptions], StragglerMask]


def detect_stragglers(busy_s: np.ndarray, opts: AnalysisOptions) -> StragglerMask:
    """Default straggler rule (see module docstring); ``busy_s`` is (R, S)."""
    med = np.median(busy_s, axis=0)
    excess = busy_s - med
    # jitter: step-to-step variation of each rank's excess around its own typical excess
    jitter = excess - np.median(excess, axis=1, keepdims=True)
    mad = np.median(np.abs(jitter))
    threshold = max(opts.rel_threshold * float(np.median(med)), opts.robust_sigmas * 1.4826 * mad)
    slow = excess > threshold
    if busy_s.shape[0] < 2:
        slow[:] = False
    return StragglerMask(slow=slow, excess_s=excess, threshold_s=threshold)


def analyze(
    ts: TraceSet,
    opts: AnalysisOptions | None = None,
    straggler_fn: StragglerFn = detect_stragglers,
) -> Diagnosis:
    """Run the analysis; returns data only."""
    opts = opts or AnalysisOptions()
    cat = ts.cat_s
    busy = cat[:, :, CAT_DATA] + cat[:, :, CAT_COMPUTE] + cat[:, :, CAT_OTHER]
    sync = cat[:, :, CAT_SYNC]
    R, S = busy.shape
    med_busy = np.median(busy, axis=0)
    lost_step = busy.max(axis=0) - med_busy
    wait = sync - sync.min(axis=0)
    mask = straggler_fn(busy, opts)
    slow = mask.slow
    n_slow = slow.sum(axis=1)
    med_cat = np.median(cat, axis=0)  # (S, 4)
    findings: list[Finding] = []

    # linear fit of compute time on work cost, pooled over ranks and steps
    fit = _work_fit(ts.work, cat[:, :, CAT_COMPUTE])
    med_work = np.nanmedian(ts.work, axis=0) if fit is not None else None

    straggler_rows: list[int] = []
    for i in range(R):
        k = int(n_slow[i])
        share = k / S
        if share >= opts.persistent_share:
            persistence = "persistent"
        elif k >= opts.min_occasional_steps and share >= opts.occasional_share:
            persistence = "occasional"
        else:
            continue
        straggler_rows.append(i)
        steps_i = slow[i]
        lost = float(mask.excess_s[i, steps_i].sum())
        exc = (cat[i, steps_i, :] - med_cat[steps_i, :]).sum(axis=0)
        phases = {c: float(exc[c]) for c in (CAT_DATA, CAT_COMPUTE, CAT_OTHER)}
        dom = max(phases, key=lambda c: phases[c])
        ev: dict[str, Any] = {
            "slow_steps": k,
            "slow_share": round(share, 4),
            "steps_analysed": S,
            "mean_excess_s": lost / k,
            "median_step_s": float(np.median(med_busy + np.median(sync, axis=0))),
            "excess_by_phase_s": {CATEGORIES[c]: v for c, v in phases.items()},
            "threshold_s": mask.threshold_s,
        }
        rank = int(ts.ranks[i])
        host = ts.hosts[i]
        tag = f"rank {rank} ({host})"
        if dom == CAT_DATA:
            kind, title = "input_wait", f"{persistence} straggler {tag}: input wait"
        elif dom == CAT_OTHER:
            kind = "untraced_stall"
            title = f"{persistence} straggler {tag}: time outside traced phases"
        else:
            kind, title = "slow_compute", f"{persistence} straggler {tag}: compute skew"
            if fit is not None and med_work is not None:
                d_work = float(np.nansum(ts.work[i, steps_i] - med_work[steps_i]))
                explained = fit["slope_s"] * d_work / phases[CAT_COMPUTE] if phases[dom] else 0.0
                explained = float(np.clip(explained, 0.0, 1.0))
                ev["work_excess"] = d_work
                ev["work_fit"] = fit
                ev["explained_by_work"] = round(explained, 4)
                if explained >= opts.explained_threshold and fit["r"] >= 0.5:
                    kind = "count_partitioning"
                    title = (
                        f"{persistence} straggler {tag}: compute skew from uneven work "
                        f"({explained:.0%} explained by work cost)"
                    )
        if dom == CAT_COMPUTE and rank in ts.nvml:
            tel = ts.nvml[rank]
            peer_clocks = [v["sm_clock_mhz"] for r, v in ts.nvml.items() if r != rank]
            ev["gpu_telemetry"] = tel
            if peer_clocks:
                med_clock = float(np.median(peer_clocks))
                ev["median_sm_clock_mhz_other_ranks"] = med_clock
                if kind == "slow_compute" and tel["sm_clock_mhz"] < 0.9 * med_clock:
                    title += (
                        f"; SM clock {tel['sm_clock_mhz']:.0f} MHz vs {med_clock:.0f} MHz "
                        "on the other ranks (throttled?)"
                    )
        findings.append(
            Finding(
                kind=kind,
                title=title,
                rank=rank,
                host=host,
                phase=CATEGORIES[dom],
                lost_s=lost,
                evidence=ev,
                fix=FIXES[kind],
                persistence=persistence,
            )
        )

    # hosts slower than the others: per step, the host's mean busy time against the median
    # of the other hosts' means (only meaningful with several hosts)
    hosts = sorted(set(ts.hosts))
    if len(hosts) > 1:
        host_rows = {h: [i for i in range(R) if ts.hosts[i] == h] for h in hosts}
        host_mean = np.stack([busy[host_rows[h]].mean(axis=0) for h in hosts])  # (H, S)
        for k, h in enumerate(hosts):
            rest = np.delete(host_mean, k, axis=0)
            h_excess = host_mean[k] - np.median(rest, axis=0)
            bad = h_excess > mask.threshold_s
            if len(host_rows[h]) >= 2 and bad.mean() >= opts.persistent_share:
                rows = host_rows[h]
                findings.append(
                    Finding(
                        kind="slow_host",
                        title=f"host {h}: all its ranks are slow",
                        rank=None,
                        host=h,
                        phase="step",
                        lost_s=float(h_excess[bad].sum()),
                        evidence={
                            "ranks": [int(ts.ranks[i]) for i in rows],
                            "slow_steps": int(bad.sum()),
                            "mean_excess_s": float(h_excess[bad].mean()),
                        },
                        fix=FIXES["slow_host"],
                        persistence="persistent",
                        ranks=[int(ts.ranks[i]) for i in rows],
                    )
                )

    # sync wait: the symptom at collectives, attributed to the most frequent straggler
    total_wait = float(wait.sum())
    mean_step = float(np.mean(busy + sync))
    if R > 1 and total_wait / (R * S) > opts.rel_threshold * mean_step:
        culprit_row = int(np.argmax(n_slow)) if n_slow.max() > 0 else int(np.argmin(wait.sum(1)))
        per_rank = {str(int(ts.ranks[i])): float(wait[i].sum()) for i in range(R)}
        findings.append(
            Finding(
                kind="sync_wait",
                title=(
                    f"ranks wait at collectives for rank {int(ts.ranks[culprit_row])}: "
                    f"{total_wait / (R * S) * 1e3:.2f} ms per rank per step"
                ),
                rank=int(ts.ranks[culprit_row]),
                host=ts.hosts[culprit_row],
                phase="sync",
                lost_s=total_wait / R * 0.5,  # a symptom: ranked below its cause
                evidence={
                    "sync_wait_s_by_rank": per_rank,
                    "mean_wait_per_step_s": total_wait / (R * S),
                    "waited_for_rank": int(ts.ranks[culprit_row]),
                },
                fix=FIXES["sync_wait"],
                ranks=[int(r) for r, v in per_rank.items() if v > 0],
            )
        )

    # slow link: a rank whose own collective time is high although it is not late
    if R > 2:
        sync_excess = sync - np.median(sync, axis=0)
        for i in range(R):
            if i in straggler_rows:
                continue
            # early arrivals wait longest at a collective: only a rank that arrives on
            # time (busy time not below the median) and still spends longer there counts
            on_time = mask.excess_s[i] >= -0.5 * mask.threshold_s
            bad = (sync_excess[i] > mask.threshold_s) & on_time
            if bad.mean() >= opts.persistent_share:
                rank = int(ts.ranks[i])
                findings.append(
                    Finding(
                        kind="slow_link",
                        title=f"rank {rank} ({ts.hosts[i]}): slow collectives while on time",
                        rank=rank,
                        host=ts.hosts[i],
                        phase="sync",
                        lost_s=float(sync_excess[i, bad].sum()),
                        evidence={
                            "slow_collective_steps": int(bad.sum()),
                            "mean_sync_excess_s": float(sync_excess[i, bad].mean()),
                        },
                        fix=FIXES["slow_link"],
                        persistence="persistent",
                    )
                )

    # outlier steps: the slowest rank's time far above the usual
    step_max = busy.max(axis=0)
    base = float(np.median(step_max))
    spread = 1.4826 * float(np.median(np.abs(step_max - base)))
    limit = base + max(opts.outlier_sigmas * spread, 0.5 * base)
    out_idx = np.flatnonzero(step_max > limit)
    if out_idx.size and out_idx.size <= max(opts.max_outlier_steps, int(0.05 * S)):
        worst = out_idx[np.argsort(-step_max[out_idx])][: opts.max_outlier_steps]
        rows = np.argmax(busy[:, worst], axis=0)
        listed = []
        for s, i in zip(worst.tolist(), rows.tolist(), strict=True):
            exc = cat[i, s, :] - med_cat[s, :]
            dom = max((CAT_DATA, CAT_COMPUTE, CAT_OTHER), key=lambda c: exc[c])
            listed.append(
                {
                    "step": int(ts.steps[s]),
                    "rank": int(ts.ranks[i]),
                    "busy_s": float(busy[i, s]),
                    "phase": CATEGORIES[dom],
                }
            )
        ranks_out = [int(ts.ranks[i]) for i in rows.tolist()]
        top_rank = max(set(ranks_out), key=ranks_out.count)
        one_rank = ranks_out.count(top_rank) * 2 >= len(ranks_out)
        findings.append(
            Finding(
                kind="outlier_steps",
                title=f"{out_idx.size} outlier step(s) above {limit * 1e3:.1f} ms",
                rank=top_rank if one_rank else None,
                host=None,
                phase=str(listed[0]["phase"]),
                lost_s=float((step_max[out_idx] - base).sum()),
                evidence={"median_step_busy_s": base, "limit_s": limit, "steps": listed},
                fix=FIXES["outlier_steps"],
                ranks=sorted(set(ranks_out)),
            )
        )

    findings.sort(key=lambda f: -f.lost_s)
    means = cat.mean(axis=1)
    summaries = [
        RankSummary(
            rank=int(ts.ranks[i]),
            host=ts.hosts[i],
            step_s=float(ts.wall_s[i].mean()),
            data_s=float(means[i, CAT_DATA]),
            compute_s=float(means[i, CAT_COMPUTE]),
            sync_s=float(means[i, CAT_SYNC]),
            other_s=float(means[i, CAT_OTHER]),
            sync_wait_s=float(wait[i].mean()),
            slow_steps=int(n_slow[i]),
            work=float(np.nanmean(ts.work[i])) if np.isfinite(ts.work[i]).any() else float("nan"),
        )
        for i in range(R)
    ]
    heat, heat_steps = _heatmap(busy / np.maximum(med_busy, 1e-12), ts.steps)
    return Diagnosis(
        run_id=ts.run_id,
        n_ranks=R,
        n_steps=S,
        world_size=ts.world_size,
        total_step_s=float(ts.wall_s.max(axis=0).sum()),
        lost_s=float(lost_step.sum()),
        sync_wait_s=total_wait,
        findings=findings,
        ranks=summaries,
        problems=list(ts.problems),
        heatmap=heat,
        heatmap_steps=heat_steps,
        phase_means_s=means,
        rank_ids=ts.ranks.copy(),
        extra={"nvml": ts.nvml},
    )


def _work_fit(work: np.ndarray, compute_s: np.ndarray) -> dict[str, float] | None:
    """Least-squares line compute_s = a + b * work over all finite points; None if unusable."""
    ok = np.isfinite(work) & np.isfinite(compute_s)
    if ok.sum() < 3:
        return None
    x, y = work[ok], compute_s[ok]
    if float(np.std(x)) == 0.0 or float(np.std(y)) == 0.0:
        return None
    b, a = np.polyfit(x, y, 1)
    r = float(np.corrcoef(x, y)[0, 1])
    return {"intercept_s": float(a), "slope_s": float(b), "r": r, "r2": r * r, "n": int(ok.sum())}


def _heatmap(
    rel: np.ndarray, steps: np.ndarray, max_bins: int = 400
) -> tuple[np.ndarray, np.ndarray]:
    """Average ``rel`` (R, S) into at most ``max_bins`` step bins."""
    _R, S = rel.shape
    bins = min(S, max_bins)
    edges = np.linspace(0, S, bins + 1).astype(int)
    sums = np.add.reduceat(rel, edges[:-1], axis=1)
    counts = np.diff(edges)
    return sums / counts, steps[edges[:-1]]
