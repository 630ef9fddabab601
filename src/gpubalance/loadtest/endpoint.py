"""Where and how to send: an OpenAI-compatible endpoint and its request bodies."""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field

from gpubalance.errors import UserInputError
from gpubalance.loadtest.prompts import synth_prompt

__all__ = ["Endpoint", "EndpointKind", "endpoint_url"]

EndpointKind = Literal["chat", "completions", "embeddings"]

_PATHS: dict[str, str] = {
    "chat": "/v1/chat/completions",
    "completions": "/v1/completions",
    "embeddings": "/v1/embeddings",
}


def endpoint_url(url: str, kind: EndpointKind) -> str:
    """The full URL for ``kind``: a base URL (``http://h:p`` or ``.../v1``) gets the
    OpenAI path appended; a URL that already ends in an OpenAI path is kept as is."""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        raise UserInputError(f"not an http(s) URL: {url!r}", field="url")
    path = parts.path.rstrip("/")
    if any(path.endswith(p) for p in _PATHS.values()):
        return url
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit((parts.scheme, parts.netloc, path + _PATHS[kind], parts.query, ""))


class Endpoint(BaseModel):
    """An OpenAI-compatible endpoint and the request options sent to it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(description="Full request URL (see endpoint_url).")
    kind: EndpointKind = Field(default="chat", description="chat, completions or embeddings.")
    model: str = Field(default="default", description="Model name sent in the body.")
    stream: bool = Field(default=True, description="Ask for an SSE stream (not embeddings).")
    ignore_eos: bool = Field(
        default=True,
        description="Send vLLM's ignore_eos and min_tokens so the answer has max_tokens tokens.",
    )
    timeout_s: float = Field(default=60.0, gt=0, description="Per-request timeout, seconds.")
    api_key: str | None = Field(default=None, description="Bearer token, if any.")

    def body(self, index: int, input_tokens: int, output_tokens: int) -> dict[str, Any]:
        """The JSON body for one request with a synthesised prompt of ``input_tokens``."""
        prompt = synth_prompt(input_tokens, index)
        if self.kind == "embeddings":
            return {"model": self.model, "input": prompt}
        body: dict[str, Any] = {"model": self.model, "max_tokens": max(1, output_tokens)}
        if self.kind == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        body["temperature"] = 0.0
        if self.ignore_eos:
            body["ignore_eos"] = True
            body["min_tokens"] = max(1, output_tokens)
        if self.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    @property
    def streaming(self) -> bool:
        """Whether answers are SSE streams (never for embeddings)."""
        return self.stream and self.kind != "embeddings"
