"""Builds the replica an emulator runs: step-time model plus KV capacity for a GPU/model.

``--gpu H100 --model llama-3.1-8b`` uses the roofline model
(:meth:`gpubalance.cost.roofline.RooflineModel.from_names`) for iteration times and its
memory estimate for the KV capacity; a fitted :class:`~gpubalance.sim.step.LinearStepTime`
file and an explicit KV capacity can replace either.
"""

from __future__ import annotations

from pathlib import Path

from gpubalance.config import load_model
from gpubalance.errors import UserInputError
from gpubalance.sim.replica import Replica
from gpubalance.sim.step import LinearStepTime, StepTimeModel

__all__ = ["build_replica"]


def build_replica(
    *,
    gpu: str | None,
    model: str | None,
    precision: str = "bf16",
    tp: int = 1,
    max_num_seqs: int = 256,
    max_batched_tokens: int = 8192,
    kv_capacity_tokens: int | None = None,
    step_model_path: str | Path | None = None,
    gpu_memory_utilization: float = 0.9,
) -> Replica:
    """A :class:`Replica` for ``model`` on ``tp`` x ``gpu`` (see module docstring)."""
    step: StepTimeModel
    if gpu and model:
        from gpubalance.cost.roofline import RooflineModel

        roof = RooflineModel.from_names(
            gpu, model, precision, tp, gpu_memory_utilization=gpu_memory_utilization
        )
        step = roof
        if kv_capacity_tokens is None:
            kv_capacity_tokens = roof.kv_capacity_tokens
    elif step_model_path is None:
        raise UserInputError("give --gpu and --model, or --step-model FILE", field="gpu")
    if step_model_path is not None:
        step = load_model(LinearStepTime, step_model_path)
    if kv_capacity_tokens is None:
        raise UserInputError(
            "give --kv-capacity-tokens when there is no --gpu/--model", field="kv_capacity_tokens"
        )
    return Replica(
        step,
        kv_capacity_tokens=kv_capacity_tokens,
        max_num_seqs=max_num_seqs,
        max_batched_tokens=max_batched_tokens,
    )
