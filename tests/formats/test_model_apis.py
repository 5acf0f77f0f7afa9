"""One list of model APIs (`formats.model_apis`): every endpoint it names is read for usage and
counted by every budget, and every provider gets its listener, its outbound direction and its name,
so a model API added there is handled everywhere at once."""

from __future__ import annotations

import pytest

from addons.ai_listeners import AI_APIS, wanted
from egress.policy_file import parse_policy
from egress.rules import Call
from formats.model_apis import ENDPOINTS, PROVIDERS, api_of, provider_of
from formats.usage import extract_usage
from readback.genai_spans import provider as span_provider
from storage.configuration import DEFAULT_OUTBOUND

ANSWER = b'{"model":"m","usage":{"prompt_tokens":3,"completion_tokens":2,"input_tokens":3,"output_tokens":2}}'
HOSTS = [*(p.host for p in PROVIDERS), "llm.internal.example", "127.0.0.1"]
PREFIXES = ["", "/v1", "/openai/deployments/d", "/api/v1/x"]
ENDINGS = ["", "/", "?api-version=2024-10-21", "?stream=true&x=/messages/y"]
OTHERS = ["/v1/models", "/v1/files", "/v1/messages/count_tokens", "/v1/chat", "/v1/completions/x", "/health"]


def model_paths() -> list[str]:
    return [
        f"{prefix}{suffix}{ending}" for suffix, _ in ENDPOINTS for prefix in PREFIXES for ending in ENDINGS
    ]


@pytest.mark.parametrize("host", HOSTS)
def test_every_endpoint_is_read_for_usage_and_counted_by_every_budget(host: str) -> None:
    """For each endpoint of the list, on an official or a compatible host, with any prefix and
    query: the Ledger reads its usage, and a budget of any scope that names the host counts it (the
    call is a model call); every other path is neither, so the two never disagree."""
    policy = parse_policy(
        {"budget": [{"name": "all", "tokens": 10}, {"name": "h", "tokens": 10, "hosts": host}]}, "t"
    )
    for path in model_paths():
        url = f"https://{host}{path}"
        usage = extract_usage(url, b'{"model":"m"}', ANSWER, "application/json", None)
        assert usage is not None and usage.tokens_in == 3 and usage.tokens_out == 2, url
        call = Call("http", host, 443, "POST", path)
        assert [b.name for b in policy.budgets_for(call)] == ["all", "h"], url
    for path in OTHERS:
        url = f"https://{host}{path}"
        assert extract_usage(url, b"{}", ANSWER, "application/json", None) is None, url
        assert not Call("http", host, 443, "POST", path).model_call, url


def test_every_provider_has_its_listener_its_direction_and_its_name() -> None:
    """Each provider of the list gets a default reverse listener, its traffic is outbound, and the
    Ledger, the OpenTelemetry export and the listeners call it by the same name."""
    assert AI_APIS == PROVIDERS and [a.name for a in wanted([])] == [p.name for p in PROVIDERS]
    for provider in PROVIDERS:
        assert provider.host in DEFAULT_OUTBOUND
        for suffix, api in ENDPOINTS:
            url = f"{provider.url}{provider.path}{suffix}"
            assert api_of(url) == api
            assert provider_of(url, api) == provider.name == span_provider(provider.host, url)
