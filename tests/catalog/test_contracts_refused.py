"""Refused hosts: a contract that can reach one is refused by construction, wherever the host hides."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from catalog.contracts import forms, render_upstream
from catalog.errors import CatalogError, RefusedHost
from catalog.retired_hosts import RefusedHosts, check, load_refused_hosts
from catalog.tool import Tool

REFUSED = RefusedHosts(("old.example", "10.0.0.5"))
RELAY_TARGET = "https://old.example/api/v1/items"


def contract(**fields: Any) -> dict[str, Any]:
    return {"method": "POST", "url": "https://new.example/rpc", **fields}


HIDING_PLACES = [
    ("url", contract(url="https://old.example/v1"), "upstream.url"),
    ("url, any case, a subdomain", contract(url="HTTPS://API.Old.EXAMPLE/v1"), "upstream.url"),
    ("url with user info and port", contract(url="http://u:p@old.example:8443/"), "upstream.url"),
    ("an IP address", contract(url="http://10.0.0.5:9000/"), "upstream.url"),
    (
        "header",
        contract(headers={"x-forwarded-host": "old.example"}),
        "upstream.headers.x-forwarded-host",
    ),
    (
        "JSON-RPC body as text",
        contract(
            body='{"jsonrpc":"2.0","id":1,"method":"tools/call",'
            '"params":{"name":"fetch","arguments":{"url":"http:\\/\\/old.example\\/x"}}}'
        ),
        "upstream.body → JSON.params.arguments.url",
    ),
    (
        "JSON-RPC body as a structure",
        contract(
            body={"jsonrpc": "2.0", "params": {"arguments": {"targets": ["ok.example", "old.example"]}}}
        ),
        "upstream.body.params.arguments.targets[1]",
    ),
    (
        "shell command line",
        {"method": "CLI", "command": 'sh -c "curl -s https://old.example/x | jq ."'},
        "upstream.command → shell word 2 → shell word 2",
    ),
    (
        "shell command list",
        {"method": "CLI", "command": ["bash", "-c", "wget -qO- old.example/dump"]},
        "upstream.command[2] → shell word 2",
    ),
    (
        "relay URL",
        contract(url=f"https://relay.example/fetch?u={RELAY_TARGET}"),
        'upstream.url → relay URL query parameter "u"',
    ),
    (
        "percent-encoded relay URL",
        contract(url=f"https://relay.example/fetch?u={quote(RELAY_TARGET, safe='')}"),
        'upstream.url → relay URL query parameter "u" (percent-encoded)',
    ),
    (
        "relay URL percent-encoded twice, dots too",
        contract(url="https://relay.example/fetch?u=https%253A%252F%252Fold%252Eexample%252Fx"),
        'upstream.url → relay URL query parameter "u" (percent-encoded twice)',
    ),
    (
        "MCP server URL",
        {"method": "MCP", "server": {"url": "https://old.example/mcp"}, "tool": "t"},
        "upstream.server.url",
    ),
    (
        "array of contracts",
        [contract(), {"method": "CLI", "command": ["curl", "old.example"]}],
        "upstream[1].command[1]",
    ),
]


@pytest.mark.parametrize(("place", "value", "where"), HIDING_PLACES, ids=[p[0] for p in HIDING_PLACES])
def test_a_refused_host_is_found_wherever_it_hides(place: str, value: Any, where: str) -> None:
    """The check finds the host in every hiding place and says exactly where it was."""
    with pytest.raises(RefusedHost) as caught:
        REFUSED.check(value, "upstream")
    assert caught.value.where == where, place
    assert caught.value.host in ("old.example", "10.0.0.5")
    assert str(caught.value) == f'refused host "{caught.value.host}" in {where}'


@pytest.mark.parametrize(
    "text",
    [
        "https://notold.example/",
        "https://old.example.org/",
        "https://old-example.com/",
        "http://110.0.0.5/",
        "http://10.0.0.55/",
        "mailto:someone@new.example",
    ],
)
def test_similar_hosts_are_not_refused(text: str) -> None:
    """Only the host itself and its subdomains are refused, never a look-alike."""
    REFUSED.check(contract(url="https://new.example/", body=text))


def test_rendering_a_form_for_a_refused_tool_raises_naming_host_and_place() -> None:
    """forms() and render_upstream() refuse a tool whose contract reaches a refused host."""
    relay = Tool.from_frontmatter(
        {
            "name": "fetch_old",
            "upstream": {"method": "GET", "url": f"https://relay.example/?to={quote(RELAY_TARGET, safe='')}"},
        }
    )
    message = 'refused host "old.example" in fetch_old.upstream.url → relay URL query parameter "to"'
    with pytest.raises(RefusedHost, match=message):
        forms(relay, {}, refused=["old.example"])
    with pytest.raises(RefusedHost, match=message):
        render_upstream(relay, {}, refused=REFUSED)
    assert forms(relay, {})["upstream"]["url"].startswith("https://relay.example/")


def test_an_argument_cannot_carry_a_refused_host_into_the_request() -> None:
    """A clean contract whose argument brings a refused host in is refused on the rendered request."""
    proxy = Tool.from_frontmatter(
        {
            "name": "fetch",
            "args": {"type": "object", "properties": {"url": {"type": "string"}}},
            "upstream": {"method": "GET", "url": "https://relay.example/?to={url}"},
        }
    )
    with pytest.raises(RefusedHost, match=r"the fetch upstream request\.url"):
        render_upstream(proxy, {"url": "https://API.old.example/"}, refused=REFUSED)
    render_upstream(proxy, {"url": "https://new.example/"}, refused=REFUSED)


def test_a_tool_is_checked_through_its_upstream() -> None:
    """check() takes a Tool and names the place as TOOL.upstream...."""
    row = Tool.from_frontmatter({"name": "t", "upstream": {"method": "GET", "url": "https://old.example"}})
    with pytest.raises(RefusedHost, match=r"in t\.upstream\.url"):
        check(row, ["old.example"])


def test_the_list_is_read_from_flightlog_home(tmp_path: Path) -> None:
    """refused_hosts.txt holds one host per line with # comments; hosts are normalized; none without it."""
    assert not load_refused_hosts(tmp_path)
    (tmp_path / "refused_hosts.txt").write_text(
        "# the retired build\nOld.Example.  # trailing dot and case\nhttps://legacy.example:8443/path\n\n"
    )
    assert load_refused_hosts(tmp_path).hosts == ("legacy.example", "old.example")
    (tmp_path / "refused_hosts.txt").write_text("not a host!\n")
    with pytest.raises(CatalogError, match="not a host name"):
        load_refused_hosts(tmp_path)


@pytest.mark.parametrize(
    "command",
    [
        "curl https://ol''d.example/x",
        "sh -c \"curl https://ol''d.example/x\"",
        ["bash", "-c", 'wget "o"ld.exa"mple"/dump'],
        "curl https://old\\.example/",
    ],
)
def test_shell_quoting_cannot_split_a_host(command: Any) -> None:
    """Quotes or backslashes a shell would remove do not hide the host."""
    with pytest.raises(RefusedHost, match=r'"old\.example" in upstream\.command.*shell word'):
        REFUSED.check({"method": "CLI", "command": command}, "upstream")
