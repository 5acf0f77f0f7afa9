"""One runner per contract form: each runs a form as written, with the consumer that form is for
(curl, wget, the shell, Python, Node, the official MCP client, the openai and anthropic SDKs, the
OpenSSH client, a Shortcuts interpreter), and answers the door's reply.

`RUNNERS` has an entry for every name of `catalog.contracts.FORM_NAMES`: a form without a runner
fails the test that checks the table, so a new form cannot ship unexecuted.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from catalog.contracts import bind_secrets, canonical_json
from catalog.forms.agents import canonical_from_tool_call
from catalog.forms.shortcut import ASK_ACTION, ATTACHMENT, TEXT_ACTION, URL_ACTION
from tests.dispatch.conftest import SECRET
from tests.support.ssh_server import SshServer

BIN = Path(sys.executable).parent
ARGS = {"city": "Bern"}
TOOL = "weather"


@dataclass
class World:
    """What every runner needs: the proxy, the machine's environment, the Node folder (undici), the
    SSH server, the model API stand-in, and the token the consumer holds."""

    proxy: str
    env: dict[str, str]
    """FLIGHTLOG_* of this machine; FLIGHTLOG_TOKEN only when the consumer holds the token there."""
    node: Path
    ssh: SshServer
    models: Any
    token: str
    seen: dict[str, Any] = field(default_factory=dict)

    def machine(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """This environment without proxy or FLIGHTLOG_ variables, then the machine's, flightlog and the
        test's ssh first on PATH, then `extra`."""
        kept = {
            k: v for k, v in os.environ.items() if "proxy" not in k.lower() and not k.startswith("FLIGHTLOG_")
        }
        path = f"{self.ssh.client_path}{os.pathsep}{BIN}{os.pathsep}{kept.get('PATH', '')}"
        return {**kept, **self.env, "PATH": path, **(extra or {})}


def _reply(text: str, what: str) -> dict[str, Any]:
    """The JSON object a consumer printed (the whole output, else its last line)."""
    for candidate in (text, text.strip().splitlines()[-1] if text.strip() else ""):
        try:
            value = json.loads(candidate)
            break
        except ValueError:
            continue
    else:
        raise AssertionError(f"{what} printed no JSON reply: {text[-2000:]!r}")
    assert isinstance(value, dict), (what, value)
    return value


def _filled(headers: dict[str, str], world: World) -> dict[str, str]:
    """Header values as a consumer fills them: `${FLIGHTLOG_TOKEN}` from its environment."""
    token = world.env.get("FLIGHTLOG_TOKEN", "")
    return {k: v.replace("${FLIGHTLOG_TOKEN}", token) for k, v in headers.items()}


def send(world: World, form: dict[str, Any]) -> httpx.Response:
    """A `{method, url, headers, body}` form sent as written (a non-string body as canonical JSON)."""
    body = form.get("body")
    content = body if isinstance(body, str) else canonical_json(body) if body is not None else None
    headers = _filled(form.get("headers") or {}, world)
    return httpx.request(
        form["method"], form["url"], headers=headers, content=content, proxy=world.proxy, timeout=60
    )


def web(world: World, form: dict[str, Any]) -> dict[str, Any]:
    return _reply(send(world, form).text, form["url"])


def sse(world: World, form: dict[str, Any]) -> dict[str, Any]:
    """The reply is the data of the `reply` event of a text/event-stream answer."""
    answer = send(world, form)
    assert answer.headers["content-type"].startswith("text/event-stream"), answer.headers
    events = [block.splitlines() for block in answer.text.split("\n\n") if block.strip()]
    [data] = [
        line[len("data: ") :]
        for lines in events
        if "event: reply" in lines
        for line in lines
        if line.startswith("data: ")
    ]
    return _reply(data, "the reply event")


def graphql(world: World, form: dict[str, Any]) -> dict[str, Any]:
    answer = send(world, form).json()
    return dict(answer["data"]["call"])


def jsonrpc(world: World, form: dict[str, Any]) -> dict[str, Any]:
    answer = send(world, form).json()
    return _reply(answer["result"]["content"][0]["text"], "the JSON-RPC result")


def shell(world: World, form: dict[str, Any]) -> dict[str, Any]:
    """A CLI form's command line, run by the shell on this machine."""
    command = form["command"]
    done = subprocess.run(
        command, shell=True, capture_output=True, text=True, timeout=120, env=world.machine()
    )
    return _reply(done.stdout, f"{command[:60]}... ({done.stderr[-1500:]})")


def python(world: World, form: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", form["code"]], capture_output=True, text=True, timeout=120, env=world.machine()
    )
    return _reply(done.stdout, f"the python form ({done.stderr[-1500:]})")


def node(world: World, form: dict[str, Any]) -> dict[str, Any]:
    """A JavaScript form as a module in the folder where undici is installed."""
    script = world.node / f"form_{abs(hash(form['code']))}.mjs"
    script.write_text(form["code"])
    done = subprocess.run(
        ["node", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=world.node,
        env=world.machine(),
    )
    return _reply(done.stdout, f"the node form ({done.stderr[-1500:]})")


def markdown(world: World, form: dict[str, Any]) -> dict[str, Any]:
    target = re.fullmatch(r"\[Run [^\]]+\]\((.+)\)", form["code"])
    assert target is not None, form["code"]
    return _reply(httpx.get(target.group(1), proxy=world.proxy, timeout=60).text, "the Markdown link")


def _resolved(value: dict[str, Any], outputs: dict[str, str]) -> str:
    """A Shortcuts text token string with each attachment replaced by the output it names."""
    string: str = value["Value"]["string"]
    for where, source in sorted(value["Value"].get("attachmentsByRange", {}).items(), reverse=True):
        at = int(where.strip("{}").split(",")[0])
        assert string[at] == ATTACHMENT
        string = string[:at] + outputs[source["OutputUUID"]] + string[at + 1 :]
    return string


def shortcut(world: World, form: dict[str, Any]) -> dict[str, Any]:
    """Run the shortcut's actions as Shortcuts does: Text gives its text, Ask for Input gives what the
    person types (the token the consumer holds), Get Contents of URL sends its request (here through
    the proxy, as a device set to it does). The request must be the dispatch form's."""
    outputs: dict[str, str] = {}
    request: dict[str, Any] = {}
    for action in json.loads(form["code"])["WFWorkflowActions"]:
        kind, params = action["WFWorkflowActionIdentifier"], action["WFWorkflowActionParameters"]
        if kind == TEXT_ACTION:
            outputs[params["UUID"]] = params["WFTextActionText"]
        elif kind == ASK_ACTION:
            outputs[params["UUID"]] = world.env.get("FLIGHTLOG_TOKEN", "")
        elif kind == URL_ACTION:
            assert params["WFHTTPBodyType"] == "File"
            items = params["WFHTTPHeaders"]["Value"]["WFDictionaryFieldValueItems"]
            headers = {_resolved(i["WFKey"], outputs): _resolved(i["WFValue"], outputs) for i in items}
            body = outputs[params["WFRequestVariable"]["Value"]["OutputUUID"]]
            request = {
                "method": params["WFHTTPMethod"],
                "url": params["WFURL"],
                "headers": headers,
                "body": body,
            }
    world.seen["apple_shortcut"] = request
    return web(world, request)


def mcp_server(
    world: World, command: str, args: list[str], env: dict[str, str], call: dict[str, Any]
) -> dict[str, Any]:
    """Start the MCP server a form names, as its client would (in the machine's environment, then the
    form's own), and call its `call` tool with `call`."""
    params = StdioServerParameters(
        command=str(BIN / command) if command == "flightlog" else command, args=args, env=world.machine(env)
    )

    async def main() -> str:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("call", call)
            return str(result.content[0].text)  # type: ignore[union-attr]

    return _reply(anyio.run(main), f"the MCP server {command} {args}")


def mcp_stdio(world: World, form: dict[str, Any]) -> dict[str, Any]:
    server = form["server"]
    return mcp_server(world, server["command"], server["args"], server.get("env") or {}, form["arguments"])


def mcp_http(world: World, form: dict[str, Any]) -> dict[str, Any]:
    """The official MCP client over streamable HTTP at the form's URL, through its proxy."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    server = form["server"]

    async def main() -> str:
        async with (
            httpx2.AsyncClient(
                proxy=server["proxy"], headers=_filled(form["headers"], world), timeout=60
            ) as client,
            streamable_http_client(server["url"], http_client=client) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool(form["tool"], form["arguments"])
            return str(result.content[0].text)  # type: ignore[union-attr]

    return _reply(anyio.run(main), "the mcp_http form")


def claude_code(world: World, form: dict[str, Any]) -> dict[str, Any]:
    """`claude mcp add ... -e K=V ... -- COMMAND ARGS`: the server Claude Code would start."""
    line = shlex.split(form["command"])
    assert line[:3] == ["claude", "mcp", "add"]
    split = line.index("--")
    pairs = dict(line[i + 1].split("=", 1) for i, w in enumerate(line[:split]) if w == "-e")
    world.seen["claude_code_env"] = pairs
    command, *args = line[split + 1 :]
    return mcp_server(world, command, args, pairs, {"tool": TOOL, "args": ARGS})


def config_file(world: World, form: dict[str, Any]) -> dict[str, Any]:
    """An MCP configuration file (mcpServers, or VS Code's servers): its one server, started."""
    content = json.loads(form["code"])
    [server] = (content.get("mcpServers") or content["servers"]).values()
    return mcp_server(
        world, server["command"], server["args"], server.get("env") or {}, {"tool": TOOL, "args": ARGS}
    )


def _definition(form: dict[str, Any]) -> dict[str, Any]:
    return dict(json.loads(form["code"]))


def openai_chat(world: World, form: dict[str, Any]) -> dict[str, Any]:
    import openai

    tool = _definition(form)
    client = openai.OpenAI(base_url=world.models.url + "/v1", api_key="sk-test")
    chat = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "weather?"}], tools=[tool]
    )  # type: ignore[list-item]
    call = chat.choices[0].message.tool_calls[0].function  # type: ignore[index, union-attr]
    return _dispatched(world, canonical_from_tool_call(call.name, call.arguments, TOOL))


def openai_responses(world: World, form: dict[str, Any]) -> dict[str, Any]:
    import openai

    client = openai.OpenAI(base_url=world.models.url + "/v1", api_key="sk-test")
    item = client.responses.create(model="m", input="weather?", tools=[_definition(form)]).output[0]  # type: ignore[list-item]
    return _dispatched(world, canonical_from_tool_call(item.name, item.arguments, TOOL))  # type: ignore[union-attr]


def anthropic_tool(world: World, form: dict[str, Any]) -> dict[str, Any]:
    from anthropic import Anthropic

    message = Anthropic(base_url=world.models.url, api_key="sk-test").messages.create(
        model="m",
        max_tokens=64,
        messages=[{"role": "user", "content": "weather?"}],
        tools=[_definition(form)],  # type: ignore[list-item]
    )
    use = message.content[0]
    return _dispatched(world, canonical_from_tool_call(use.name, use.input, TOOL))  # type: ignore[union-attr, arg-type]


def _dispatched(world: World, call: dict[str, Any]) -> dict[str, Any]:
    """A model's tool call, as the canonical call, through the dispatch form the agent holds."""
    form = world.seen["dispatch_form"] | {"body": call}
    return web(world, form)


def upstream(world: World, form: dict[str, Any]) -> dict[str, Any]:
    """The service's own call, secrets bound, sent straight to the service."""
    request = bind_secrets(form, {"WEATHER_KEY": SECRET})
    assert isinstance(request, dict)
    answer = httpx.request(
        request["method"], request["url"], headers=request["headers"], content=request["body"], timeout=60
    )
    return {"ok": answer.status_code == 200, "status": answer.status_code}


RUNNERS: dict[str, Callable[[World, dict[str, Any]], dict[str, Any]]] = {
    "dispatch": web,
    "dispatch_dry_run": web,
    "url": web,
    "curl": shell,
    "wget": shell,
    "cli": shell,
    "python": python,
    "python_mcp": python,
    "javascript": node,
    "webhook": web,
    "apple_shortcut": shortcut,
    "sdk": python,
    "function": python,
    "mcp_stdio": mcp_stdio,
    "mcp_http": mcp_http,
    "mcp_jsonrpc": jsonrpc,
    "websocket": node,
    "sse": sse,
    "graphql": graphql,
    "ssh": shell,
    "mcp_config_claude_code": claude_code,
    "mcp_config_json": config_file,
    "mcp_config_vscode": config_file,
    "openai_tool": openai_chat,
    "openai_responses_tool": openai_responses,
    "anthropic_tool": anthropic_tool,
    "link": web,
    "link_curl": shell,
    "link_markdown": markdown,
    "upstream": upstream,
}
