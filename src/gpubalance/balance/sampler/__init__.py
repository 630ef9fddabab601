"""PyTorch samplers that balance cost per step across data-parallel ranks.

torch is imported only when a sampler needs torch.distributed for its world defaults.
"""

from gpubalance.balance.sampler.batch_sampler import CostBalancedBatchSampler
from gpubalance.balance.sampler.distributed_sampler import CostBalancedDistributedSampler

__all__ = ["CostBalancedBatchSampler", "CostBalancedDistributedSampler"]
