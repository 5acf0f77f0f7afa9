"""Rendering an upstream contract: arguments into placeholders, then (only for sending) secrets into names.

Two steps, kept apart on purpose. `render` fills `{arg}` placeholders and gives the exact request with
secrets still written as `[NAME]`: that is what a dry run shows and what the Ledger may keep. `bind`
substitutes secret values into that request and is called only on the copy that is sent. Both are pure
and deterministic, so a dry run equals the real call byte for byte, with names instead of values.

Rules, per place a placeholder can stand:

- A placeholder is `{name}` where `name` is a declared argument (or a given one); any other braces are
  left alone, so JSON, code and shell text can hold braces freely. A secret is `[NAME]` (capitals,
  digits, `_`).
- URL: a value is percent-encoded (everything but RFC 3986 unreserved characters). A query pair whose
  value is exactly `{arg}` is left out when the argument is absent and repeated once per item when it
  is a list (OpenAPI's default `form`, `explode` style).
- Header value: the value as text; a header whose value is exactly `{arg}` is left out when absent;
  a value with CR or LF is refused.
- Body: a structure (object or array) has each string that is exactly `{arg}` replaced by the
  argument's JSON value (left out when absent) and other strings filled as text; it is then
  serialized as canonical JSON (`json.dumps(value, separators=(",", ":"), ensure_ascii=False)`, keys in
  the contract's order) or, when the contract's content-type is `application/x-www-form-urlencoded`,
  as a form. A structured body without a content-type gets `content-type: application/json`. A text
  body is filled as text (`"{arg}"` alone takes a string argument as is, anything else as JSON).
- MCP: `arguments` is filled like a structured body and kept as a structure; no `arguments` means the
  call's arguments unchanged. CLI: a list command fills each word (a word that is exactly `{arg}`
  expands to one word per item of a list, none when absent); a string command takes each value
  shell-quoted. CODE: each value as a JSON literal.
- Text values: a string as it is; true/false/null as `true`, `false`, `` (empty); anything else as
  canonical JSON.

An argument can never bring a secret in: `bind` only ever sees names the contract wrote. Where an
argument's text has the shape of a name (`[NAME]`), a URL or form percent-encodes its `[`, a JSON
body writes it as the escape `\\u005b` (the same string to any JSON reader), and any other place
(headers, text bodies, commands, MCP arguments, code) refuses the argument, naming it.

Secrets are bound with the encoding of the place they stand: percent-encoded in a URL, JSON-escaped
in a JSON body, form-encoded in a form body, shell-quoted in a string command, as they are elsewhere.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final
from urllib.parse import quote, quote_plus

from catalog.errors import ArgumentError, UnboundSecret

PLACEHOLDER: Final = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
SECRET: Final = re.compile(r"\[([A-Z][A-Z0-9_]*)\]")
FORM: Final = "application/x-www-form-urlencoded"
_ABSENT: Final = object()

Request = dict[str, Any] | list[dict[str, Any]]


def canonical_json(value: Any) -> str:
    """The one serialization every form and body uses: compact, key order kept, UTF-8 unescaped."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def as_text(value: Any) -> str:
    """An argument value where text is expected (see the module's rules)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return canonical_json(value)


class _Fill:
    """Placeholder filling for one call: the arguments and the names that count as placeholders.

    `context` says how an argument's text is kept from ever reading as a secret name, so that
    `bind` cannot be steered into putting a secret's value where an argument stood: "url" and
    "form" values are percent-encoded later (`[` becomes `%5B`); in "json" the `[` of a name-shaped
    text is marked and serialized as the JSON escape `\\u005b` (the same string to any JSON reader);
    in "plain" text such an argument is refused.
    """

    def __init__(self, tool: str, args: Mapping[str, Any], declared: tuple[str, ...]) -> None:
        self.tool = tool
        self.args = args
        self.names = frozenset(declared) | frozenset(args)

    def exact(self, text: str) -> Any:
        """The argument a string stands for when it is exactly one placeholder, else `None`."""
        match = PLACEHOLDER.fullmatch(text)
        if match and match.group(1) in self.names:
            return match.group(1)
        return None

    def value(self, name: str, context: str) -> Any:
        """An argument's value, made safe from secret binding for `context`."""
        value = self.args[name]
        if context == "json":
            return _mark(value, lambda: self._refuse(name, "holds U+E000, a character flightlog reserves"))
        if context == "plain":
            found = next((m.group(0) for t in _strings(value) for m in SECRET.finditer(t)), None)
            if found is None and not isinstance(value, str):
                found = next((m.group(0) for m in SECRET.finditer(as_text(value))), None)
            if found is not None:
                self._refuse(
                    name, f'holds "{found}", the shape of a secret name; secrets never come from arguments'
                )
        return value

    def _refuse(self, name: str, message: str) -> None:
        raise ArgumentError(self.tool, name, message)

    def text(self, template: str, encode: Callable[[Any], str] = as_text, context: str = "plain") -> str:
        """Fill every placeholder inside a text; an absent argument gives the empty string."""

        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in self.names:
                return match.group(0)
            return encode(self.value(name, context)) if name in self.args else ""

        return PLACEHOLDER.sub(one, template)

    def structure(self, template: Any, context: str = "plain") -> Any:
        """Fill a JSON structure; `_ABSENT` marks what an absent argument leaves out."""
        if isinstance(template, dict):
            out = {}
            for key, value in template.items():
                filled = self.structure(value, context)
                if filled is not _ABSENT:
                    out[self.text(key, as_text, context)] = filled
            return out
        if isinstance(template, list):
            return [f for f in (self.structure(v, context) for v in template) if f is not _ABSENT]
        if isinstance(template, str):
            name = self.exact(template)
            if name is not None:
                return self.value(name, context) if name in self.args else _ABSENT
            return self.text(template, as_text, context)
        return template

    def url(self, template: str) -> str:
        """Fill a URL: percent-encoded values, optional query pairs left out, lists repeated."""
        head, sep, query = template.partition("?")
        fragment = ""
        if "#" in query:
            query, fragment = query.split("#", 1)
            fragment = "#" + fragment
        filled = self.text(head, _percent, "url")
        if not sep:
            return filled
        pairs: list[str] = []
        for pair in query.split("&") if query else []:
            key, eq, value = pair.partition("=")
            name = self.exact(value) if eq else None
            if name is not None and name not in self.args:
                continue
            if name is not None and isinstance(self.args[name], list):
                key = self.text(key, _percent, "url")
                pairs += [f"{key}={_percent(item)}" for item in self.args[name]]
                continue
            pairs.append(self.text(key, _percent, "url") + eq + self.text(value, _percent, "url"))
        return f"{filled}?{'&'.join(pairs)}{self.text(fragment, _percent, 'url')}"

    def headers(self, template: Mapping[str, str]) -> dict[str, str]:
        """Fill header values; a header that is exactly an absent argument is left out."""
        out: dict[str, str] = {}
        for key, value in template.items():
            name = self.exact(value)
            if name is not None and name not in self.args:
                continue
            filled = self.text(value)
            if "\r" in filled or "\n" in filled:
                raise ArgumentError(self.tool, name or "", f"header {key} cannot hold a line break")
            out[key] = filled
        return out


def _percent(value: Any) -> str:
    return quote(as_text(value), safe="")


def _content_type(headers: Mapping[str, str]) -> str:
    for key, value in headers.items():
        if key.lower() == "content-type":
            return value.split(";", 1)[0].strip().lower()
    return ""


def _form(body: Mapping[str, Any]) -> str:
    pairs: list[str] = []
    for key, value in body.items():
        for item in value if isinstance(value, list) else [value]:
            pairs.append(f"{quote_plus(key)}={quote_plus(as_text(item))}")
    return "&".join(pairs)


def render(tool: str, contract: Any, args: Mapping[str, Any], declared: tuple[str, ...] = ()) -> Request:
    """The exact request a contract makes for these arguments, secrets still as `[NAME]`."""
    fill = _Fill(tool, args, declared)
    if isinstance(contract, list):
        return [_render_one(fill, part) for part in contract]
    return _render_one(fill, contract)


def _render_one(fill: _Fill, contract: Mapping[str, Any]) -> dict[str, Any]:
    method = contract["method"]
    if method == "CLI":
        command = contract["command"]
        if isinstance(command, str):
            return {"method": "CLI", "command": fill.text(command, lambda v: shlex.quote(as_text(v)))}
        words: list[str] = []
        for word in command:
            name = fill.exact(word)
            if name is None:
                words.append(fill.text(word))
            elif name in fill.args:
                value = fill.value(name, "plain")
                words += [as_text(v) for v in value] if isinstance(value, list) else [as_text(value)]
        return {"method": "CLI", "command": words}
    if method == "CODE":
        code = fill.text(contract["code"], lambda v: json.dumps(v, ensure_ascii=False))
        return {"method": "CODE", "language": contract["language"], "code": code}
    if method == "MCP":
        arguments = contract.get("arguments")
        return {
            "method": "MCP",
            "server": fill.structure(contract["server"]),
            "headers": fill.headers(contract.get("headers", {})),
            "tool": contract["tool"],
            "arguments": (
                {name: fill.value(name, "plain") for name in fill.args}
                if arguments is None
                else fill.structure(arguments)
            ),
        }
    headers = fill.headers(contract.get("headers", {}))
    return {
        "method": method,
        "url": fill.url(contract["url"]),
        "headers": headers,
        "body": _render_body(fill, contract.get("body"), headers),
    }


def _render_body(fill: _Fill, template: Any, headers: dict[str, str]) -> str | None:
    if template is None:
        return None
    kind = _content_type(headers)
    json_kind = kind == "application/json" or kind.endswith("+json")
    if isinstance(template, str):
        name = fill.exact(template)
        if name is None:
            return fill.text(template)
        if name not in fill.args:
            return None
        if json_kind and not isinstance(fill.args[name], str):
            return _json_text(fill.value(name, "json"))
        return as_text(fill.value(name, "plain"))
    if kind == FORM and isinstance(template, dict):
        return _form(fill.structure(template, "form"))
    if not kind:
        headers["content-type"] = "application/json"
    return _json_text(fill.structure(template, "json"))


_MARK: Final = "\ue000"


def _mark(value: Any, refuse: Callable[[], None]) -> Any:
    """A copy whose name-shaped texts (`[NAME]`) start with `_MARK` instead of `[`."""
    if isinstance(value, str):
        if _MARK in value:
            refuse()
        return SECRET.sub(lambda m: _MARK + m.group(0)[1:], value)
    if isinstance(value, dict):
        return {_mark(k, refuse): _mark(v, refuse) for k, v in value.items()}
    if isinstance(value, list):
        return [_mark(v, refuse) for v in value]
    return value


def _json_text(value: Any) -> str:
    """Canonical JSON, each mark written as the JSON escape of `[`."""
    return canonical_json(value).replace(_MARK, "\\u005b")


def secret_names(request: Any) -> list[str]:
    """Every secret name a request or contract holds, in order of first appearance."""
    seen: dict[str, None] = {}
    for text in _strings(request):
        for match in SECRET.finditer(text):
            seen.setdefault(match.group(1), None)
    return list(seen)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def bind(request: Request, secrets: Mapping[str, str]) -> Request:
    """The request with every `[NAME]` replaced by its value, encoded for where it stands.

    Refuses (`UnboundSecret`) before substituting anything when any name has no value.
    """
    for name in secret_names(request):
        if name not in secrets:
            raise UnboundSecret(name)
    if isinstance(request, list):
        return [_bind_one(part, secrets) for part in request]
    return _bind_one(request, secrets)


def _sub(text: str, secrets: Mapping[str, str], encode: Callable[[str], str] = str) -> str:
    return SECRET.sub(lambda m: encode(secrets[m.group(1)]), text)


def _deep(value: Any, secrets: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _sub(value, secrets)
    if isinstance(value, dict):
        return {_sub(k, secrets): _deep(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep(v, secrets) for v in value]
    return value


def _bind_headers(headers: Mapping[str, str], secrets: Mapping[str, str]) -> dict[str, str]:
    out = {key: _sub(value, secrets) for key, value in headers.items()}
    for key, value in out.items():
        if "\r" in value or "\n" in value:
            raise ArgumentError("", "", f"a secret bound into header {key} holds a line break")
    return out


def _bind_one(request: Mapping[str, Any], secrets: Mapping[str, str]) -> dict[str, Any]:
    method = request["method"]
    if method == "CLI":
        command = request["command"]
        if isinstance(command, str):
            return {"method": "CLI", "command": _sub(command, secrets, shlex.quote)}
        return {"method": "CLI", "command": [_sub(w, secrets) for w in command]}
    if method == "CODE":
        return {**request, "code": _sub(request["code"], secrets)}
    if method == "MCP":
        server = _deep(request["server"], secrets)
        if isinstance(request["server"].get("url"), str):
            server["url"] = _sub(request["server"]["url"], secrets, lambda v: quote(v, safe=""))
        return {
            **request,
            "server": server,
            "headers": _bind_headers(request.get("headers", {}), secrets),
            "arguments": _deep(request["arguments"], secrets),
        }
    body = request.get("body")
    if isinstance(body, str):
        kind = _content_type(request.get("headers", {}))
        if kind == FORM:
            body = _sub(body, secrets, quote_plus)
        elif kind == "application/json" or kind.endswith("+json"):
            body = _sub(body, secrets, lambda v: json.dumps(v, ensure_ascii=False)[1:-1])
        else:
            body = _sub(body, secrets)
    return {
        **request,
        "url": _sub(request["url"], secrets, lambda v: quote(v, safe="")),
        "headers": _bind_headers(request.get("headers", {}), secrets),
        "body": body,
    }
