"""The one list of model APIs: which API a call speaks, whose it is, and where each provider lives.

OpenAI's chat completions, (legacy) completions, responses and embeddings, and Anthropic's messages,
on their own hosts or on any OpenAI- or Anthropic-compatible server (Ollama, vLLM, a gateway):
same paths, same body shapes. The path's ending names the API; the host names the provider.

Everything that treats model calls apart reads this module, so an API added here is handled by all
of them at once: the Ledger's usage and cost (`formats.usage`, `recording.reprice`), the egress
budgets that count model calls (`egress.rules.Call.model_call`), the OpenTelemetry export, and the
reverse listener the proxy opens per provider (`addons.ai_listeners`, from `PROVIDERS`).
"""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True)
class Provider:
    """A model API's own service: where it lives, and the variable (plus path) its SDKs take as
    base URL (what a listener standing for it feeds)."""

    name: str
    url: str
    variable: str
    path: str

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""


PROVIDERS: Final = (
    Provider("openai", "https://api.openai.com", "OPENAI_BASE_URL", "/v1"),
    Provider("anthropic", "https://api.anthropic.com", "ANTHROPIC_BASE_URL", ""),
)
"""The providers known by name (in the order their listeners take ports)."""

OFFICIAL: Final = {provider.host: provider.name for provider in PROVIDERS}


def api_of_path(path: str) -> Api | None:
    """The API a request path (query and all) speaks, by its ending; None for anything else."""
    path = path.partition("?")[0].partition("#")[0].rstrip("/")
    return next((api for suffix, api in ENDPOINTS if path.endswith(suffix)), None)


def api_of(url: str | None) -> Api | None:
    """The API a URL speaks, by the end of its path; None for anything else."""
    try:
        path = urlsplit(url or "").path
    except ValueError:
        return None
    return api_of_path(path)


def provider_of(url: str, api: Api) -> str:
    """`openai` or `anthropic` on their own hosts; `openai-compatible` (or `anthropic-compatible`)
    on any other host speaking the same API."""
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        host = ""
    return OFFICIAL.get(host) or f"{api.split('.')[0]}-compatible"


def provider_named(name: str) -> Provider | None:
    return next((p for p in PROVIDERS if p.name == name), None)


def provider_for_host(host: str) -> Provider | None:
    return next((p for p in PROVIDERS if p.host == host), None)
