"""Example model backends that run real models without a GPU (optional extras).

- :mod:`gpubalance.backends.minilm`: OpenAI-compatible ``/v1/embeddings`` server running
  all-MiniLM-L6-v2 on CPU with dynamic batching (extra ``minilm``).
"""

__all__: list[str] = []
