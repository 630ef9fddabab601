"""Exact mid-epoch resume shared by the cost-balanced samplers (internal).

A sampler that mixes this in keeps ``epoch``, ``seed``, ``num_replicas``, ``rank``, the
count ``_yielded`` of items (or micro-batches) handed out in the current epoch, and
``_resume_at``, where its next ``__iter__`` starts.
"""

from __future__ import annotations

from typing import Any

from gpubalance.errors import UserInputError

__all__ = ["ResumableSampler"]


class ResumableSampler:
    """``state_dict`` / ``load_state_dict`` for samplers with a deterministic epoch order."""

    epoch: int
    seed: int
    num_replicas: int
    rank: int
    _yielded: int
    _resume_at: int

    def state_dict(self) -> dict[str, Any]:
        """Where the current epoch stands: resume with :meth:`load_state_dict`.

        ``yielded`` counts what this iterator has handed out; with DataLoader workers
        prefetching, pass the number actually consumed instead when you resume.
        """
        return {
            "epoch": self.epoch,
            "seed": self.seed,
            "num_replicas": self.num_replicas,
            "rank": self.rank,
            "yielded": self._yielded,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the saved epoch right after the last element yielded before saving; a
        state saved with another seed or world size is refused (UserInputError)."""
        for key in ("seed", "num_replicas"):
            if int(state[key]) != getattr(self, key):
                raise UserInputError(
                    f"state was saved with {key}={state[key]}, sampler has {getattr(self, key)}",
                    field=key,
                )
        self.epoch = int(state["epoch"])
        self._resume_at = int(state["yielded"])
        self._yielded = self._resume_at
