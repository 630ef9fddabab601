"""Input-token estimates for routing and admission, without any network call.

The default estimate is ``ceil(characters / 4)`` per text (close to BPE tokenizers on
English text and code, and about 0.3 µs per request). With a local ``tokenizer.json``
(Hugging Face ``tokenizers``) the count is exact for that tokenizer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpubalance.errors import UserInputError

__all__ = ["CHAT_MESSAGE_OVERHEAD_TOKENS", "TokenEstimator"]

CHAT_MESSAGE_OVERHEAD_TOKENS = 4
"""Template tokens counted per chat message (role markers, separators)."""


class TokenEstimator:
    """Counts input tokens of OpenAI-style request bodies (chat, completions, embeddings)."""

    def __init__(self, tokenizer: Any | None = None) -> None:
        self._tok = tokenizer

    @classmethod
    def from_file(cls, path: str | Path) -> TokenEstimator:
        """Estimator using the exact tokenizer in a local ``tokenizer.json`` file."""
        from tokenizers import Tokenizer

        try:
            return cls(Tokenizer.from_file(str(path)))
        except Exception as exc:  # tokenizers raises its own Exception subclass
            raise UserInputError(f"cannot load tokenizer: {exc}", file=path) from None

    def count_text(self, text: str) -> int:
        """Tokens in one text."""
        if self._tok is None:
            return (len(text) + 3) // 4
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def _count_any(self, value: Any) -> int:
        if isinstance(value, str):
            return self.count_text(value)
        if isinstance(value, list):
            if value and isinstance(value[0], int):  # token ids
                return len(value)
            return sum(self._count_any(v) for v in value)
        if isinstance(value, dict):  # chat content part {"type": "text", "text": ...}
            text = value.get("text")
            return self.count_text(text) if isinstance(text, str) else 0
        return 0

    def input_tokens(self, endpoint: str, body: dict[str, Any]) -> int:
        """Estimated input tokens of a request body for ``endpoint`` ("chat", "completions",
        "embeddings")."""
        if endpoint == "chat":
            messages = body.get("messages")
            if not isinstance(messages, list):
                return 0
            n = 0
            for m in messages:
                if isinstance(m, dict):
                    n += CHAT_MESSAGE_OVERHEAD_TOKENS + self._count_any(m.get("content"))
            return n
        if endpoint == "completions":
            return self._count_any(body.get("prompt"))
        return self._count_any(body.get("input"))
