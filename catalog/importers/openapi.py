"""OpenAPI 3.x importer: each operation becomes a tool row with its upstream contract.

- Name: the `operationId`, else the method and path (`get /pets/{petId}` → `get_pets_petId`).
- Arguments (one JSON Schema object): path, query, header and cookie parameters by name, then the
  request body: a JSON or form body whose schema is an object with named properties is spread into
  one argument per (writable) property; any other body is one `body` argument. A name that two
  places share is kept for the first and prefixed with its place for the next (`query_id`).
- Contract: `{method, url, headers, body}` on the first server URL (or `base_url`), with `{arg}`
  placeholders; optional query parameters and headers drop out when their argument is absent.
- Security: the operation's first security requirement (or the document's) becomes `[SECRET]` names
  named after the scheme: an API key in its header, query parameter or cookie; `Authorization:
  Bearer [NAME]` for http bearer, OAuth 2 and OpenID Connect; `Authorization: Basic [NAME]` for http
  basic (the secret holds the base64 of `user:password`).
- `$ref`s inside the document are resolved (a recursive schema is cut to `{}` where it recurs);
  OpenAPI 3.0's `nullable` and boolean `exclusiveMinimum`/`exclusiveMaximum` become JSON Schema.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import yaml

from catalog.errors import ImporterError, ToolError
from catalog.importers import Document, arg_name, documents, row_name, secret_name
from catalog.tool import Tool

METHODS: Final = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
JSON_TYPES: Final = ("application/json",)
FORM: Final = "application/x-www-form-urlencoded"


def load(path: Path) -> dict[str, Any]:
    """An OpenAPI document from a JSON or YAML file."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ImporterError(f"cannot read {path}: {e.strerror}") from e
    except yaml.YAMLError as e:
        raise ImporterError(f"{path} is not JSON or YAML: {str(e).splitlines()[0]}") from e
    if not isinstance(data, dict) or not str(data.get("openapi", "")).startswith("3."):
        raise ImporterError(f"{path} is not an OpenAPI 3.x document (no `openapi: 3.x` field)")
    return data


def import_openapi(path: Path, *, base_url: str | None = None, bundle: str = "tool") -> list[Document]:
    """Documents for every operation of the OpenAPI document at `path`."""
    return documents(tools_from_openapi(load(path), base_url=base_url, bundle=bundle))


def tools_from_openapi(
    document: Mapping[str, Any], *, base_url: str | None = None, bundle: str = "tool"
) -> list[Tool]:
    """One tool per operation, in the document's order."""
    spec = _Spec(document)
    tools: list[Tool] = []
    for path, item in (document.get("paths") or {}).items():
        item = spec.deref(item)
        for method in METHODS:
            if method in item:
                operation = spec.deref(item[method])
                server = _server_url(spec, operation, item, base_url)
                tools.append(_operation(spec, server, path, method, item, operation, bundle))
    return tools


class _Spec:
    """The document, with `$ref` resolution."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.document = document

    def pointer(self, ref: str) -> Any:
        if not ref.startswith("#/"):
            raise ImporterError(f'"{ref}" points outside the document: only local $refs are read')
        node: Any = self.document
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, Mapping) or part not in node:
                raise ImporterError(f'"{ref}" points at nothing in the document')
            node = node[part]
        return node

    def deref(self, node: Any) -> Any:
        seen: set[str] = set()
        while isinstance(node, Mapping) and "$ref" in node:
            if node["$ref"] in seen:
                raise ImporterError(f'"{node["$ref"]}" refers to itself')
            seen.add(node["$ref"])
            node = self.pointer(node["$ref"])
        return node

    def schema(self, node: Any, stack: tuple[str, ...] = ()) -> Any:
        """A schema with every $ref inlined and OpenAPI 3.0 keywords made JSON Schema."""
        if isinstance(node, list):
            return [self.schema(item, stack) for item in node]
        if not isinstance(node, Mapping):
            return node
        if "$ref" in node:
            ref = node["$ref"]
            return {} if ref in stack else self.schema(self.pointer(ref), (*stack, ref))
        out = {key: self.schema(value, stack) for key, value in node.items()}
        if out.pop("nullable", False) is True and isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        for bound, limit in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            if isinstance(out.get(bound), bool) and out.pop(bound) and limit in out:
                out[bound] = out.pop(limit)
        return out


def _server_url(spec: _Spec, operation: Mapping[str, Any], item: Mapping[str, Any], base: str | None) -> str:
    if base:
        return base.rstrip("/")
    servers = operation.get("servers") or item.get("servers") or spec.document.get("servers") or []
    if not servers:
        raise ImporterError("the document names no server: pass a base URL (--base-url)")
    server = servers[0]
    url = str(server.get("url", ""))
    for name, variable in (server.get("variables") or {}).items():
        url = url.replace("{" + name + "}", str(variable.get("default", "")))
    if not re.match(r"^https?://", url, re.I):
        raise ImporterError(f'the server URL "{url}" is not absolute: pass a base URL (--base-url)')
    return url.rstrip("/")


def _operation(
    spec: _Spec,
    server: str,
    path: str,
    method: str,
    item: Mapping[str, Any],
    operation: Mapping[str, Any],
    bundle: str,
) -> Tool:
    where = f"{method.upper()} {path}"
    segments = [s.strip("{}") for s in path.split("/") if s]
    name = row_name(operation.get("operationId") or "_".join([method, *segments]))
    properties: dict[str, Any] = {}
    required: list[str] = []
    headers: dict[str, str] = {}
    query: list[str] = []
    cookies: list[str] = []
    url_path = path

    def add(raw: str, place: str, schema: Any, needed: bool) -> str:
        arg = arg_name(raw)
        if arg in properties:
            arg = arg_name(f"{place}_{raw}")
        if arg in properties:
            raise ImporterError(f'{where}: two arguments would both be called "{arg}"')
        properties[arg] = schema
        if needed:
            required.append(arg)
        return arg

    for param in _parameters(spec, item, operation):
        place, raw = param.get("in"), str(param.get("name", ""))
        if place == "header" and raw.lower() in ("accept", "content-type", "authorization"):
            continue
        schema = dict(spec.schema(param.get("schema") or _content_schema(spec, param) or {}))
        if param.get("description") and "description" not in schema:
            schema["description"] = param["description"]
        arg = add(raw, str(place), schema, bool(param.get("required")) or place == "path")
        if place == "path":
            url_path = url_path.replace("{" + raw + "}", "{" + arg + "}")
        elif place == "query":
            query.append(f"{quote(raw, safe='')}={{{arg}}}")
        elif place == "header":
            headers[raw] = "{" + arg + "}"
        elif place == "cookie":
            cookies.append(f"{raw}={{{arg}}}")
    body = _request_body(spec, operation, where, headers, add)
    _security(spec, operation, headers, query, cookies)
    if cookies:
        headers["cookie"] = "; ".join(cookies)
    url = server + url_path + ("?" + "&".join(query) if query else "")
    upstream: dict[str, Any] = {"method": method.upper(), "url": url}
    if headers:
        upstream["headers"] = headers
    if body is not None:
        upstream["body"] = body
    args: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        args["required"] = required
    summary = str(operation.get("summary") or "").strip()
    description = str(operation.get("description") or "").strip()
    title = spec.document.get("info", {}).get("title", "an OpenAPI document")
    text = f"# {name}\n\n" + "".join(f"{part}\n\n" for part in dict.fromkeys((summary, description)) if part)
    text += f"## Upstream\n\nImported from {title}: `{where}`.\n"
    try:
        return Tool.from_frontmatter(
            {
                "name": name,
                "description": summary or description.split("\n\n")[0] or where,
                "args": args,
                "upstream": upstream,
            },
            text,
            bundle=bundle,
        )
    except ToolError as e:
        raise ImporterError(f"{where}: {e}") from e


def _parameters(spec: _Spec, item: Mapping[str, Any], operation: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Path-level parameters overridden by the operation's own, by (name, in)."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for param in [*(item.get("parameters") or []), *(operation.get("parameters") or [])]:
        param = spec.deref(param)
        merged[(str(param.get("name")), str(param.get("in")))] = dict(param)
    return list(merged.values())


def _content_schema(spec: _Spec, param: Mapping[str, Any]) -> Any:
    content = param.get("content") or {}
    return next((media.get("schema") for media in content.values()), None)


def _request_body(
    spec: _Spec,
    operation: Mapping[str, Any],
    where: str,
    headers: dict[str, str],
    add: Callable[[str, str, Any, bool], str],
) -> Any:
    body = spec.deref(operation.get("requestBody"))
    if not body:
        return None
    content: Mapping[str, Any] = body.get("content") or {}
    needed = bool(body.get("required"))
    kind = next((k for k in content if k.split(";")[0] in JSON_TYPES or k.endswith("+json")), None)
    kind = kind or (FORM if FORM in content else next(iter(content), None))
    if kind is None:
        return None
    headers["content-type"] = kind
    schema = spec.schema(content[kind].get("schema") or {})
    fields = schema.get("properties") if isinstance(schema, dict) else None
    if (kind in JSON_TYPES or kind.endswith("+json") or kind == FORM) and isinstance(fields, dict) and fields:
        writable = {k: v for k, v in fields.items() if not (isinstance(v, dict) and v.get("readOnly"))}
        inner_required = set(schema.get("required") or [])
        template: dict[str, Any] = {}
        for key, field_schema in writable.items():
            arg = add(key, "body", field_schema, needed and key in inner_required)
            template[key] = "{" + arg + "}"
        return template
    arg = add("body", "request", schema, needed)
    return "{" + arg + "}"


def _security(
    spec: _Spec, operation: Mapping[str, Any], headers: dict[str, str], query: list[str], cookies: list[str]
) -> None:
    requirements = operation.get("security", spec.document.get("security")) or []
    if not requirements:
        return
    schemes = (spec.document.get("components") or {}).get("securitySchemes") or {}
    for key in requirements[0]:
        scheme = spec.deref(schemes.get(key))
        if not isinstance(scheme, Mapping):
            raise ImporterError(f'security scheme "{key}" is not defined in components.securitySchemes')
        secret = f"[{secret_name(key)}]"
        kind = scheme.get("type")
        if kind == "apiKey":
            place, name = scheme.get("in"), str(scheme.get("name"))
            if place == "header":
                headers[name] = secret
            elif place == "query":
                query.append(f"{quote(name, safe='')}={secret}")
            else:
                cookies.append(f"{name}={secret}")
        elif kind == "http" and str(scheme.get("scheme", "")).lower() == "basic":
            headers["authorization"] = f"Basic {secret}"
        elif kind in ("http", "oauth2", "openIdConnect"):
            headers["authorization"] = f"Bearer {secret}"
        else:
            raise ImporterError(f'security scheme "{key}" has a type this importer does not know: {kind}')
