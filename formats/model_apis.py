"""Which model API a recorded call speaks, and whose it is, read from its URL alone.

OpenAI's chat completions, (legacy) completions, responses and embeddings, and Anthropic's messages,
on their own hosts or on any OpenAI- or Anthropic-compatible server (Ollama, vLLM, a gateway):
same paths, same body shapes. The path's ending names the API; the host names the provider.
"""

from __future__ import annotations

from typing import Final, Literal
from urllib.parse import urlsplit

Api = Literal[
    "openai.chat", "openai.completions", "openai.responses", "openai.embeddings", "anthropic.messages"
]

ENDPOINTS: Final[tuple[tuple[str, Api], ...]] = (
    ("/chat/completions", "openai.chat"),
    ("/completions", "openai.completions"),
    ("/responses", "openai.responses"),
    ("/embeddings", "openai.embeddings"),
    ("/messages", "anthropic.messages"),
)
"""Path endings and the API each one speaks (the first that matches wins)."""

OFFICIAL: Final = {"api.openai.com": "openai", "api.anthropic.com": "anthropic"}


def api_of(url: str | None) -> Api | None:
    """The API a URL speaks, by the end of its path; None for anything else."""
    try:
        path = urlsplit(url or "").path.rstrip("/")
    except ValueError:
        return None
    return next((api for suffix, api in ENDPOINTS if path.endswith(suffix)), None)


def provider_of(url: str, api: Api) -> str:
    """`openai` or `anthropic` on their own hosts; `openai-compatible` (or `anthropic-compatible`)
    on any other host speaking the same API."""
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        host = ""
    return OFFICIAL.get(host) or f"{api.split('.')[0]}-compatible"
