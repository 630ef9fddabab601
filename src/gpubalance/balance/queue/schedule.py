"""Guided self-scheduling: chunk sizes that shrink as the queue drains.

The t-th chunk claimed has ``max(min_chunk, ceil(remaining / (factor x workers)))`` items
(capped at what remains), where ``remaining`` counts items not yet handed out. Early
chunks are large (little queue traffic), late ones small (no worker is left holding a
big chunk at the end). Polychronopoulos & Kuck, "Guided self-scheduling" (1987).

Because claims are serialised by an atomic ticket counter, the sequence of chunks is a
pure function of ``(total, workers, factor, min_chunk)``; every process computes the same
table and a ticket number alone says which chunk it owns.
"""

from __future__ import annotations

import math

import numpy as np

from gpubalance.errors import UserInputError

__all__ = ["guided_bounds"]


def guided_bounds(
    total: int, workers: int, *, factor: float = 1.0, min_chunk: int = 1
) -> np.ndarray:
    """Chunk boundaries (int64, first 0, last ``total``) of guided self-scheduling."""
    if total < 0:
        raise UserInputError(f"total must be >= 0, got {total}", field="total")
    if workers < 1:
        raise UserInputError(f"workers must be >= 1, got {workers}", field="workers")
    if not factor > 0:
        raise UserInputError(f"factor must be > 0, got {factor}", field="factor")
    if min_chunk < 1:
        raise UserInputError(f"min_chunk must be >= 1, got {min_chunk}", field="min_chunk")
    bounds = [0]
    done = 0
    while done < total:
        remaining = total - done
        size = min(remaining, max(min_chunk, math.ceil(remaining / (factor * workers))))
        done += size
        bounds.append(done)
    return np.asarray(bounds, dtype=np.int64)
