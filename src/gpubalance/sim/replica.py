"""THE replica model: one GPU server (a GPU or a tensor-parallel group) doing continuous
batching with a KV cache. A pure state machine, shared by the simulator and the emulator.

Interface (for drivers: the simulator's fleet, and the emulator, which runs it in real time)
--------------------------------------------------------------------------------------------

``Replica(step_model, kv_capacity_tokens, max_num_seqs, max_batched_tokens,
chunked_prefill=True, block_size_tokens=16)``

- ``add(request_like, key=None) -> SeqState``: queue a request (anything with integer
  ``input_tokens`` and ``output_tokens``). ``key`` (default: the object itself) is what the
  driver gets back in :class:`SeqState.key`. Raises :class:`RequestTooLarge` if prompt plus
  output can never fit the KV cache (or, without chunked prefill, the prompt the budget).
  ``add_tokens(key, input_tokens, output_tokens)`` is the same without an object.
- ``has_work``: True while any sequence is waiting or running.
- ``step(now_s=0.0) -> StepResult``: form and "run" the next iteration. It returns the
  iteration's ``duration_s`` and which sequences emitted their first token
  (``first_token``), one more token (``tokens``), finished (``finished``) or were preempted
  (``preempted``) in it. All emissions happen at the END of the iteration, i.e. at
  ``now_s + duration_s``; ``now_s`` is only used to stamp times on the sequences. The
  emulator calls ``step()``, sleeps ``duration_s``, then streams the tokens. The replica
  keeps no reference to finished sequences after ``step()`` returns.
- ``advance(until_s)``: the simulator's fast path: run every iteration that starts before
  ``until_s`` from the replica's own clock ``clock_s``, collapsing runs of identical
  decode-only iterations into one computation. Finished sequences are appended to
  ``done`` (the driver empties it). Same results as calling ``step()`` repeatedly.
  ``quiet_until_s`` tells the driver until when nothing observable can change if no
  request is added (inside such a collapsed run), so it may skip calling ``advance``.
- ``fits(input_tokens, output_tokens)``: whether a request can ever complete here.
- Observables: ``num_waiting``, ``num_running``, ``free_blocks``, ``kv_usage`` (0..1),
  ``busy_s`` (seconds spent in iterations), ``iterations``, ``preemptions``.

Drive it with either ``step()`` (one iteration at a time, full detail) or ``advance()``
(simulation), not both on the same replica.

Scheduling policy (vLLM-v1-like), per iteration, with a token budget of
``max_batched_tokens``:

1. Running sequences in admission order (oldest first): a decoding sequence takes 1 token;
   a sequence still prefilling takes ``min(remaining prompt, budget)`` tokens (with chunked
   prefill; without it, prompts are admitted only whole). A decoding sequence that needs
   a new KV block when none is free preempts the newest running sequence (recompute: its
   KV blocks are freed and it goes back to the FRONT of the waiting queue; when readmitted
   it prefills its prompt plus the tokens generated so far); if it is itself the newest, it
   is preempted and the iteration goes on without it.
2. Then, unless a preemption happened in this iteration, waiting sequences in FCFS order are
   admitted while there is token budget, fewer than ``max_num_seqs`` running, and free
   KV blocks for the whole prompt (admission reserves ``ceil(prompt / block)`` blocks, so
   prefill never runs out of KV; only decoding grows it). The queue is strictly FCFS: if
   the head does not fit, nothing behind it is admitted.

Token accounting: a sequence whose prompt of P tokens is fully computed emits its first
token at the end of that iteration (TTFT), then one token per decode iteration; it finishes
when it has emitted ``output_tokens`` tokens (a request with ``output_tokens == 0`` finishes
when its prefill completes, emitting nothing). A decode iteration for a sequence with ``c``
tokens in KV reads ``c + 1`` context tokens and stores one more token, so KV holds
``input + generated - 1`` tokens while decoding. Times are seconds, sizes tokens.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from gpubalance.sim.step import StepTimeModel

__all__ = ["Replica", "RequestLike", "RequestTooLarge", "SeqState", "StepResult"]

_NO_TIME = -1.0


class RequestTooLarge(ValueError):
    """The request can never complete on this replica (prompt plus output exceed the KV
    capacity, or the prompt exceeds the token budget when chunked prefill is off)."""


class RequestLike(Protocol):
    """Anything with token counts: :class:`gpubalance.workload.Request` or the emulator's."""

    @property
    def input_tokens(self) -> int: ...

    @property
    def output_tokens(self) -> int: ...


class SeqState:
    """One sequence inside a replica. Times are seconds on the driver's clock, -1 if unset.

    Attributes:
        key: the driver's handle for the request.
        input_tokens / output_tokens: the request's token counts.
        prompt_tokens: tokens to prefill on the current admission (input, or input plus
            generated tokens after a preemption).
        computed: tokens currently in the KV cache.
        generated: tokens emitted so far.
        blocks: KV blocks held.
        first_scheduled_s: start of the first iteration that worked on it (queue wait ends).
        first_token_s: end of the iteration that emitted its first token.
        finish_s: end of the iteration that emitted its last token.
        preemptions: times it was preempted.
    """

    __slots__ = (
        "blocks",
        "computed",
        "finish_s",
        "first_scheduled_s",
        "first_token_s",
        "generated",
        "input_tokens",
        "key",
        "output_tokens",
        "preemptions",
        "prompt_tokens",
    )

    def __init__(self, key: Any, input_tokens: int, output_tokens: int) -> None:
        self.key = key
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.prompt_tokens = input_tokens if input_tokens > 0 else 1
        self.computed = 0
        self.generated = 0
        self.blocks = 0
        self.first_scheduled_s = _NO_TIME
        self.first_token_s = _NO_TIME
        self.finish_s = _NO_TIME
        self.preemptions = 0

    def __repr__(self) -> str:
        return (
            f"SeqState(key={self.key!r}, in={self.input_tokens}, out={self.output_tokens}, "
            f"computed={self.computed}, generated={self.generated})"
        )


@dataclass(slots=True)
class StepResult:
    """What one iteration did. Emissions happen at its end (start + ``duration_s``).

    Attributes:
        duration_s: iteration time from the step model (0 only if there was no work).
        prefill_tokens: prompt tokens computed.
        decode_seqs: sequences that decoded one token.
        first_token: sequences that emitted their first token.
        tokens: sequences that emitted one more (not first) token, decode or recompute.
        finished: sequences that completed (also listed in first_token/tokens if they emitted).
        preempted: sequences preempted (back in the waiting queue).
    """

    duration_s: float
    prefill_tokens: int = 0
    decode_seqs: int = 0
    first_token: list[SeqState] = field(default_factory=list)
    tokens: list[SeqState] = field(default_factory=list)
    finished: list[SeqState] = field(default_factory=list)
    preempted: list[SeqState] = field(default_factory=list)


def _prompt_done(
    s: SeqState,
    first: list[SeqState],
    tokens: list[SeqState] | None,
    finishers: list[SeqState],
) -> None:
    """The iteration that completes ``s``'s prompt emits its next token (none when it
    generates nothing): record it as a first token (or one more, after a preemption) and
    as finished when that was its last."""
    if s.output_tokens == 0:
        finishers.append(s)
        return
    g = s.generated + 1
    s.generated = g
    if g == 1:
        first.append(s)
    elif tokens is not None:
        tokens.append(s)
    if g >= s.output_tokens:
        finishers.append(s)


class Replica:
    """Continuous-batching replica with paged KV cache (see module docstring).

    Args:
        step_model: iteration time in seconds (:class:`StepTimeModel`).
        kv_capacity_tokens: KV-cache capacity in tokens (rounded down to whole blocks).
        max_num_seqs: most sequences running (admitted) at once.
        max_batched_tokens: token budget of one iteration (prefill tokens + decode seqs).
        chunked_prefill: split prompts across iterations to fit the budget.
        block_size_tokens: KV block (page) size in tokens.
    """

    def __init__(
        self,
        step_model: StepTimeModel,
        kv_capacity_tokens: int,
        max_num_seqs: int,
        max_batched_tokens: int,
        chunked_prefill: bool = True,
        block_size_tokens: int = 16,
    ) -> None:
        if block_size_tokens < 1:
            raise ValueError(f"block_size_tokens must be >= 1, got {block_size_tokens}")
        if max_num_seqs < 1 or max_batched_tokens < 1:
            raise ValueError("max_num_seqs and max_batched_tokens must be >= 1")
        total_blocks = int(kv_capacity_tokens) // block_size_tokens
        if total_blocks < 1:
            raise ValueError(
                f"kv_capacity_tokens={kv_capacity_tokens} holds no block of {block_size_tokens}"
            )
        self.step_model = step_model
        self._time = step_model.iteration_time_s
        self.max_num_seqs = int(max_num_seqs)
        self.max_batched_tokens = int(max_batched_tokens)
        self.chunked_prefill = bool(chunked_prefill)
        self.block_size_tokens = int(block_size_tokens)
        self.total_blocks = total_blocks
        self.free_blocks = total_blocks
        self.waiting: deque[SeqState] = deque()
        self.running: list[SeqState] = []
        self.done: list[SeqState] = []
        self.clock_s = 0.0
        self.busy_s = 0.0
        self.iterations = 0
        self.preemptions = 0
        self._n_prefilling = 0  # running sequences with computed < prompt_tokens
        #: no sequence finishes, is admitted or preempted before this time (seconds): the
        #: replica is inside a run of identical decode iterations cut short by ``advance``'s
        #: horizon. A driver may skip advancing it until then (-inf: unknown).
        self.quiet_until_s = -math.inf

    # ----------------------------------------------------------------- observables
    @property
    def has_work(self) -> bool:
        """True while any sequence is waiting or running."""
        return bool(self.running or self.waiting)

    @property
    def num_waiting(self) -> int:
        """Sequences queued (not admitted), including preempted ones."""
        return len(self.waiting)

    @property
    def num_running(self) -> int:
        """Sequences admitted (prefilling or decoding)."""
        return len(self.running)

    @property
    def kv_capacity_tokens(self) -> int:
        """Usable KV capacity in tokens (whole blocks)."""
        return self.total_blocks * self.block_size_tokens

    @property
    def kv_usage(self) -> float:
        """Fraction of KV blocks held, 0..1."""
        return 1.0 - self.free_blocks / self.total_blocks

    # ----------------------------------------------------------------- input
    def fits(self, input_tokens: int, output_tokens: int = 0) -> bool:
        """Whether a request can ever complete here: prompt plus output must fit the KV
        cache (like vLLM's ``max_model_len``), and without chunked prefill the prompt must
        fit the token budget."""
        p = input_tokens if input_tokens > 0 else 1
        if -(-(p + output_tokens) // self.block_size_tokens) > self.total_blocks:
            return False
        return self.chunked_prefill or p <= self.max_batched_tokens

    def add_tokens(self, key: Any, input_tokens: int, output_tokens: int) -> SeqState:
        """Queue a request by token counts; returns its :class:`SeqState`."""
        if not self.fits(input_tokens, output_tokens):
            raise RequestTooLarge(
                f"request of {input_tokens}+{output_tokens} tokens cannot run (KV capacity "
                f"{self.kv_capacity_tokens} tokens, budget {self.max_batched_tokens}, "
                f"chunked_prefill={self.chunked_prefill})"
            )
        seq = SeqState(key, int(input_tokens), int(output_tokens))
        self.waiting.append(seq)
        self.quiet_until_s = -math.inf
        return seq

    def add(self, request: RequestLike, key: Any = None) -> SeqState:
        """Queue ``request``; ``key`` (default the request itself) comes back in results."""
        return self.add_tokens(
            request if key is None else key, request.input_tokens, request.output_tokens
        )

    # ----------------------------------------------------------------- iteration
    def _preempt(self, victim: SeqState) -> None:
        self.free_blocks += victim.blocks
        victim.blocks = 0
        if victim.computed < victim.prompt_tokens:
            self._n_prefilling -= 1
        victim.computed = 0
        victim.prompt_tokens = victim.input_tokens + victim.generated
        if victim.prompt_tokens < 1:
            victim.prompt_tokens = 1
        victim.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(victim)

    def _iterate(self, now_s: float, result: StepResult | None) -> float:
        """Form and apply one iteration starting at ``now_s``; returns its duration.

        Sequence counters are updated while the batch is formed (preemption only ever
        takes sequences not yet visited, from the end of the running list); times are
        stamped once the duration is known.
        """
        bs = self.block_size_tokens
        budget = self.max_batched_tokens
        running = self.running
        self.quiet_until_s = -math.inf
        prefill_tokens = 0
        pairs = 0
        dseqs = 0
        dctx = 0
        preempted = False
        first: list[SeqState] = []
        finishers: list[SeqState] = []
        tokens = result.tokens if result is not None else None
        # iterating while popping from the end is safe: only unvisited sequences (or the
        # current one, after which we stop) are ever popped
        for s in running:
            if budget <= 0:
                break
            c = s.computed
            p = s.prompt_tokens
            if c < p:
                chunk = p - c
                if chunk > budget:
                    chunk = budget
                budget -= chunk
                prefill_tokens += chunk
                pairs += chunk * c + ((chunk * (chunk + 1)) >> 1)  # causal: prior + triangle
                c += chunk
                s.computed = c
                if c == p:
                    self._n_prefilling -= 1
                    _prompt_done(s, first, tokens, finishers)
                continue
            c += 1  # decode: reads c + 1 context tokens, stores one more
            if c > s.blocks * bs:
                if self.free_blocks == 0:
                    self_preempted = False
                    while self.free_blocks == 0:
                        victim = running.pop()  # the newest running sequence
                        self._preempt(victim)
                        preempted = True
                        if result is not None:
                            result.preempted.append(victim)
                        if victim is s:
                            self_preempted = True
                            break
                    if self_preempted:
                        break  # s was the last running sequence
                self.free_blocks -= 1
                s.blocks += 1
            budget -= 1
            dseqs += 1
            dctx += c
            s.computed = c
            g = s.generated + 1
            s.generated = g
            if tokens is not None:
                tokens.append(s)
            if g >= s.output_tokens:
                finishers.append(s)
        if not preempted:
            waiting = self.waiting
            free = self.free_blocks
            max_seqs = self.max_num_seqs
            chunked = self.chunked_prefill
            while waiting and budget > 0 and len(running) < max_seqs:
                s = waiting[0]
                p = s.prompt_tokens
                nb = -(-p // bs)
                if nb > free:
                    break
                if p > budget and not chunked:
                    break
                waiting.popleft()
                free -= nb
                s.blocks = nb
                running.append(s)
                if s.first_scheduled_s < 0.0:
                    s.first_scheduled_s = now_s
                chunk = p if p <= budget else budget
                budget -= chunk
                prefill_tokens += chunk
                pairs += (chunk * (chunk + 1)) >> 1  # causal attention: a triangle of pairs
                s.computed = chunk
                if chunk < p:
                    self._n_prefilling += 1
                    continue
                _prompt_done(s, first, tokens, finishers)
            self.free_blocks = free
        if not prefill_tokens and not dseqs:
            if self.running or self.waiting:
                raise RuntimeError("replica has work but could not schedule any (bug)")
            return 0.0
        dur = self._time(prefill_tokens, pairs, dseqs, dctx)
        end = now_s + dur
        self.busy_s += dur
        self.iterations += 1
        for s in first:
            s.first_token_s = end
        if finishers:
            done = self.done if result is None else result.finished
            for s in finishers:
                s.finish_s = end
                if s.first_token_s < 0.0:
                    s.first_token_s = end  # output_tokens == 0
                self.free_blocks += s.blocks
                s.blocks = 0
                done.append(s)
            if len(finishers) == 1:
                running.remove(finishers[0])
            else:
                self.running = [s for s in running if s.finish_s < 0.0]
        if result is not None:
            result.duration_s = dur
            result.prefill_tokens = prefill_tokens
            result.decode_seqs = dseqs
            result.first_token.extend(first)
        return dur

    def step(self, now_s: float = 0.0) -> StepResult:
        """Run the next iteration starting at ``now_s`` seconds (see module docstring).

        Finished sequences are reported in the result only (not appended to ``done``, so a
        long-running driver keeps no history). Returns ``StepResult(duration_s=0.0)`` when
        idle.
        """
        result = StepResult(0.0)
        self._iterate(now_s, result)
        return result

    # ----------------------------------------------------------------- fast path
    def _decode_run(self, now_s: float, until_s: float) -> float:
        """Run m >= 2 identical-shape decode iterations at once, if the state allows.

        Preconditions checked here: every running sequence decodes, nothing waiting can be
        admitted, the batch fits the token budget and KV blocks suffice. The run ends at
        the first finish, or at the first iteration boundary at or after ``until_s``.
        Returns the run's total duration, or -1.0 if the fast path does not apply.
        """
        running = self.running
        n = len(running)
        if n == 0 or self._n_prefilling or n > self.max_batched_tokens:
            return -1.0
        bs = self.block_size_tokens
        free = self.free_blocks
        waiting = self.waiting
        if waiting and n < self.max_num_seqs and -(-waiting[0].prompt_tokens // bs) <= free:
            return -1.0  # the head of the queue would be admitted
        k = 1 << 62
        ctx0 = n
        for s in running:
            r = s.output_tokens - s.generated
            if r < k:
                k = r
            ctx0 += s.computed
        if k < 2:
            return -1.0
        # KV: j steps need sum ceil(max(0, computed + j - blocks*bs) / bs) new blocks;
        # each sequence needs at most k // bs + 1, so the exact count is rarely needed
        if free < n * (k // bs + 1):

            def blocks_needed(j: int) -> int:
                tot = 0
                for s in running:
                    over = s.computed + j - s.blocks * bs
                    if over > 0:
                        tot += -(-over // bs)
                return tot

            if blocks_needed(k) > free:
                lo, hi = 0, k  # largest j with blocks_needed(j) <= free
                while lo < hi:
                    mid = (lo + hi + 1) // 2
                    if blocks_needed(mid) <= free:
                        lo = mid
                    else:
                        hi = mid - 1
                k = lo
                if k < 2:
                    return -1.0
        f = self._time
        d0 = f(0, 0, n, ctx0)
        delta = f(0, 0, n, ctx0 + n) - d0
        dl = f(0, 0, n, ctx0 + (k - 1) * n)
        self.quiet_until_s = -math.inf
        if math.isclose(dl, d0 + (k - 1) * delta, rel_tol=1e-9, abs_tol=1e-15):
            m = k
            total = k * d0 + delta * (k * (k - 1) // 2)
            if now_s + total >= until_s:
                self.quiet_until_s = now_s + total
                # smallest m with now + T(m) >= until; T increases with m
                lo, hi = 1, k
                while lo < hi:
                    mid = (lo + hi) // 2
                    if now_s + mid * d0 + delta * (mid * (mid - 1) // 2) >= until_s:
                        hi = mid
                    else:
                        lo = mid + 1
                m = lo
                total = m * d0 + delta * (m * (m - 1) // 2)
        else:  # not affine in context over this run: sum iteration by iteration
            total = 0.0
            m = 0
            ctx = ctx0
            while m < k and now_s + total < until_s:
                total += f(0, 0, n, ctx)
                ctx += n
                m += 1
        self.busy_s += total
        self.iterations += m
        used = 0
        finished = False
        for s in running:
            c = s.computed + m
            s.computed = c
            s.generated += m
            over = c - s.blocks * bs
            if over > 0:
                nb = -(-over // bs)
                s.blocks += nb
                used += nb
            if s.generated >= s.output_tokens:
                finished = True
        if finished:
            end = now_s + total
            keep = []
            done = self.done
            for s in running:
                if s.generated >= s.output_tokens:
                    s.finish_s = end
                    used -= s.blocks
                    s.blocks = 0
                    done.append(s)
                else:
                    keep.append(s)
            self.running = keep
        self.free_blocks = free - used
        return total

    def advance(self, until_s: float) -> float:
        """Run all iterations that start before ``until_s`` seconds, from ``clock_s``.

        Afterwards ``clock_s >= until_s`` unless the replica went idle earlier, in which
        case ``clock_s`` is the end of its last iteration (an idle replica's clock is moved
        forward by the driver when it adds work). Finished sequences go to ``done``.
        Returns the new ``clock_s``.
        """
        now = self.clock_s
        while now < until_s and (self.running or self.waiting):
            d = self._decode_run(now, until_s)
            if d < 0.0:
                d = self._iterate(now, None)
            now += d
        self.clock_s = now
        return now
