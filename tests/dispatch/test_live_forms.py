"""Every contract form of a tool with an upstream and a scoped token, executed (or parsed) by its real
consumer against a live flightlog proxy, all reaching the upstream with the same request (issue 13).

The forms come from `flightlog contracts` in the proxy's FLIGHTLOG_HOME, so they carry the running
proxy's address from `proxy.json` (an ephemeral port, not 127.0.0.1:8080) and that FLIGHTLOG_HOME.
Curl, wget, the CLI, Python, the official MCP client, the openai and anthropic SDKs (against a local
stand-in for their APIs that answers with a tool call) run each form as written.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from jsonschema import Draft202012Validator
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from pydantic import TypeAdapter

from catalog import tokens
from catalog.contracts import bind_secrets, canonical_json
from catalog.forms.agents import canonical_from_tool_call
from tests.dispatch.conftest import SECRET, flightlog
from tests.dispatch.test_live_proxy import mcp_stdio, root, world
from tests.dispatch.upstreams import Received
from tests.support.proxy import LiveProxy

pytestmark = pytest.mark.slow  # run first on the xdist workers (tests/conftest.py)

__all__ = ["world"]
BIN = Path(sys.executable).parent
ARGS = {"city": "Bern"}


def clean_env(env: dict[str, str], extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without proxy or FLIGHTLOG_ variables, then the test's, then `extra`."""
    kept = {
        k: v for k, v in os.environ.items() if "proxy" not in k.lower() and not k.startswith("FLIGHTLOG_")
    }
    return {**kept, "PATH": f"{BIN}{os.pathsep}{kept.get('PATH', '')}", **env, **(extra or {})}


def send(form: dict[str, Any], proxy: str) -> httpx.Response:
    """A `{method, url, headers, body}` form sent as written (a non-string body as canonical JSON)."""
    body = form.get("body")
    content = body if isinstance(body, str) else canonical_json(body) if body is not None else None
    return httpx.request(
        form["method"], form["url"], headers=form.get("headers"), content=content, proxy=proxy, timeout=30
    )


def shell(command: str, env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=60, env=clean_env(env))
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout))


def run_mcp_server(
    command: str, args: list[str], env: dict[str, str], call: dict[str, Any]
) -> dict[str, Any]:
    """Start the MCP server a client configuration names, as that client would, and call `call`."""
    params = StdioServerParameters(
        command=str(BIN / command) if command == "flightlog" else command, args=args, env=env
    )

    async def main() -> str:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("call", call)
            return str(result.content[0].text)  # type: ignore[union-attr]

    return dict(json.loads(anyio.run(main)))


class StandIn:
    """A local stand-in for the OpenAI and Anthropic APIs: keeps each request, answers a tool call."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                stand_in.seen.append((self.path, body))
                tool = body["tools"][0]
                name = tool.get("name") or tool["function"]["name"]
                answer = stand_in.answer(self.path, name)
                raw = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, path: str, name: str) -> dict[str, Any]:
        args = json.dumps(ARGS)
        if path.endswith("/chat/completions"):
            call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": args}}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            return {
                "id": "c1",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
            }
        if path.endswith("/responses"):
            item = {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": name,
                "arguments": args,
                "status": "completed",
            }
            return {
                "id": "r1",
                "object": "response",
                "created_at": 0,
                "model": "m",
                "status": "completed",
                "output": [item],
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
            }
        use = {"type": "tool_use", "id": "tu_1", "name": name, "input": ARGS}
        return {
            "id": "m1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [use],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    s = StandIn()
    yield s
    s.server.shutdown()
    s.server.server_close()


def test_every_form_runs_and_reaches_the_upstream_alike(
    world: tuple[LiveProxy, Received, dict[str, str]], stand_in: StandIn
) -> None:
    """At least 20 forms for a tool with an upstream and a token; each one run by its consumer reaches
    the upstream, and every request the door sent is the same request."""
    import openai
    from anthropic import Anthropic
    from anthropic.types import ToolParam
    from openai.types.chat import ChatCompletionFunctionToolParam
    from openai.types.responses import FunctionToolParam

    proxy, received, env = world
    token = tokens.mint(root(env), ["task = T13"]).encode()
    out = flightlog(env, "contracts", "weather", "--json", "--args", json.dumps(ARGS), "--token", token)
    assert out.returncode == 0, out.stderr
    shown: dict[str, Any] = json.loads(out.stdout)
    assert len(shown) >= 20
    assert f"--proxy {proxy.url}" in shown["curl"]["command"] and "127.0.0.1:8080" not in out.stdout
    before = len(received.requests)
    ok: dict[str, Any] = {}

    for name in ("dispatch", "webhook", "url", "link"):
        ok[name] = send(shown[name], proxy.url).json()
    rpc = send(shown["mcp_jsonrpc"], proxy.url).json()
    ok["mcp_jsonrpc"] = json.loads(rpc["result"]["content"][0]["text"])
    target = re.fullmatch(r"\[Run weather\]\((.+)\)", shown["link_markdown"]["code"])
    assert target is not None
    ok["link_markdown"] = httpx.get(target.group(1), proxy=proxy.url, timeout=30).json()
    for name in ("curl", "wget", "link_curl"):
        ok[name] = shell(shown[name]["command"], env)
    argv = shlex.split(shown["cli"]["command"])
    cli = flightlog(env, *argv[1:])
    assert cli.returncode == 0, cli.stderr
    ok["cli"] = json.loads(cli.stdout)
    for name in ("python", "python_mcp"):
        done = subprocess.run(
            [sys.executable, "-c", shown[name]["code"]],
            capture_output=True,
            text=True,
            timeout=60,
            env=clean_env(env),
        )
        assert done.returncode == 0, done.stderr
        ok[name] = {"ok": "'ok': True" in done.stdout or json.loads(done.stdout.strip()).get("ok")}
    ok["mcp_stdio"] = mcp_stdio(shown["mcp_stdio"], env)

    line = shlex.split(shown["mcp_config_claude_code"]["command"])
    assert line[:6] == ["claude", "mcp", "add", "--scope", "project", "flightlog"]
    pairs = dict(line[i + 1].split("=", 1) for i, w in enumerate(line[: line.index("--")]) if w == "-e")
    assert pairs == {
        "FLIGHTLOG_HOME": env["FLIGHTLOG_HOME"],
        "HTTP_PROXY": proxy.url,
        "HTTPS_PROXY": proxy.url,
        "FLIGHTLOG_TOKEN": token,
    }
    command, *cargs = line[line.index("--") + 1 :]
    ok["mcp_config_claude_code"] = run_mcp_server(
        command, cargs, clean_env(env, pairs), shown["mcp_stdio"]["arguments"]
    )
    files = {
        n: json.loads(shown[n]["code"])
        for n in ("mcp_config_claude_code_json", "mcp_config_cursor", "mcp_config_json")
    }
    assert (shown["mcp_config_claude_code_json"]["path"], shown["mcp_config_cursor"]["path"]) == (
        ".mcp.json",
        ".cursor/mcp.json",
    )
    server = files["mcp_config_cursor"]["mcpServers"]["flightlog"]
    assert all(f == {"mcpServers": {"flightlog": server}} for f in files.values()) and server["env"] == pairs
    ok["mcp_config_json"] = run_mcp_server(
        server["command"], server["args"], clean_env(env, server["env"]), shown["mcp_stdio"]["arguments"]
    )
    vscode = json.loads(shown["mcp_config_vscode"]["code"])["servers"]["flightlog"]
    assert vscode["type"] == "stdio" and shown["mcp_config_vscode"]["path"] == ".vscode/mcp.json"
    ok["mcp_config_vscode"] = run_mcp_server(
        vscode["command"], vscode["args"], clean_env(env, vscode["env"]), shown["mcp_stdio"]["arguments"]
    )

    chat_tool = json.loads(shown["openai_tool"]["code"])
    TypeAdapter(ChatCompletionFunctionToolParam).validate_python(chat_tool)
    Draft202012Validator.check_schema(chat_tool["function"]["parameters"])
    Draft202012Validator(chat_tool["function"]["parameters"]).validate(ARGS)
    client = openai.OpenAI(base_url=stand_in.url + "/v1", api_key="sk-test")
    chat = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "weather?"}], tools=[chat_tool]
    )
    call = chat.choices[0].message.tool_calls[0].function  # type: ignore[index, union-attr]
    ok["openai_tool"] = send(
        shown["dispatch"] | {"body": canonical_from_tool_call(call.name, call.arguments, "weather")},
        proxy.url,
    ).json()
    responses_tool = json.loads(shown["openai_responses_tool"]["code"])
    TypeAdapter(FunctionToolParam).validate_python(responses_tool)
    reply = client.responses.create(model="m", input="weather?", tools=[responses_tool])
    item = reply.output[0]
    ok["openai_responses_tool"] = send(
        shown["dispatch"] | {"body": canonical_from_tool_call(item.name, item.arguments, "weather")},
        proxy.url,  # type: ignore[union-attr]
    ).json()
    claude_tool = json.loads(shown["anthropic_tool"]["code"])
    TypeAdapter(ToolParam).validate_python(claude_tool)
    message = Anthropic(base_url=stand_in.url, api_key="sk-test").messages.create(
        model="m", max_tokens=64, messages=[{"role": "user", "content": "weather?"}], tools=[claude_tool]
    )
    use = message.content[0]
    ok["anthropic_tool"] = send(
        shown["dispatch"] | {"body": canonical_from_tool_call(use.name, use.input, "weather")}, proxy.url
    ).json()  # type: ignore[union-attr]
    assert [body["tools"] for _, body in stand_in.seen] == [[chat_tool], [responses_tool], [claude_tool]]

    door_made = len(received.requests) - before
    upstream = bind_secrets(shown["upstream"], {"WEATHER_KEY": SECRET})
    direct = httpx.request(
        upstream["method"], upstream["url"], headers=upstream["headers"], content=upstream["body"], timeout=30
    )
    assert direct.status_code == 200
    dry = send(shown["dispatch_dry_run"], proxy.url).json()
    assert dry["ok"] and len(received.requests) == before + door_made + 1

    assert {n: bool(v.get("ok")) for n, v in ok.items()} == dict.fromkeys(ok, True)
    assert door_made == len(ok) and len(ok) + 2 >= 20  # + the upstream form itself and the dry run
    heads = {
        h.replace(SECRET.encode(), b"[WEATHER_KEY]")
        for h, _ in received.requests[before : before + door_made]
    }
    bodies = {b.replace(SECRET.encode(), b"[WEATHER_KEY]") for _, b in received.requests[before:]}
    assert len(heads) == 1, "every form reaches the upstream with the same request"
    lines = {
        h.split(b"\r\n")[0].replace(SECRET.encode(), b"[WEATHER_KEY]") for h, _ in received.requests[before:]
    }
    assert len(bodies) == 1 and len(lines) == 1, "and the upstream form is that request, made directly"
