"""Contracts benchmark: rendering every form, the dispatch door's render + bind, refused-host checks,
and importing a generated 500-operation OpenAPI document. `python -m bench.contracts` (~10 s).

Prints p50/p99 per operation; the refused-host check is measured on an ordinary request and on a
256 KiB JSON-RPC body (the check reads every string, decoded every way it can be).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from catalog.contracts import bind_secrets, forms, render_upstream
from catalog.importers.openapi import import_openapi, tools_from_openapi
from catalog.retired_hosts import RefusedHosts
from catalog.tool import Tool

FIXTURE = Path(__file__).parent.parent / "tests" / "catalog" / "fixtures" / "petstore.yaml"
REFUSED = RefusedHosts(("old.example", "legacy.example", "10.0.0.5"))


def timed(label: str, run: Callable[[], Any], n: int) -> None:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        run()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    p50 = statistics.median(samples)
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    print(f"{label:<52} p50 {p50:8.3f} ms   p99 {p99:8.3f} ms   (n={n})")


def generated_openapi(operations: int) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for i in range(operations // 2):
        paths[f"/things{i}/{{id}}"] = {
            "parameters": [
                {"name": "id", "in": "path", "required": True, "schema": {"type": "integer", "maximum": i}}
            ],
            "get": {
                "operationId": f"getThing{i}",
                "parameters": [{"name": "q", "in": "query", "schema": {}}],
            },
            "put": {
                "operationId": f"putThing{i}",
                "requestBody": {
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}
                },
            },
        }
    return {
        "openapi": "3.1.0",
        "servers": [{"url": "https://api.example/v1"}],
        "paths": paths,
        "components": {
            "schemas": {"Thing": {"type": "object", "properties": {"name": {"type": "string"}, "n": {}}}}
        },
    }


def main(argv: list[str]) -> None:
    rows = {t.name: t for t in tools_from_openapi(json.loads(json.dumps(_load())))}
    create = rows["createPet"]
    args = {"name": "Rex", "tag": "dog", "owner": {"name": "Ana", "pets": []}}
    timed(
        f"forms(): all {len(forms(create, args))} forms of one call",
        lambda: forms(create, args, refused=REFUSED),
        2000,
    )
    timed("render_upstream() + bind_secrets()", lambda: _render_and_bind(create, args), 2000)
    request = render_upstream(create, args)
    timed("refused check, one rendered request", lambda: REFUSED.check(request), 2000)
    big = {
        "method": "POST",
        "url": "https://rpc.example/",
        "body": json.dumps(
            {
                "jsonrpc": "2.0",
                "params": {"items": [{"url": f"https://ok{i}.example/x?a=b%20c"} for i in range(5900)]},
            }
        ),
    }
    print(f"  (the large body is {len(big['body']) // 1024} KiB)")
    timed("refused check, a 256 KiB JSON-RPC body", lambda: REFUSED.check(big), 20)
    document = generated_openapi(500)
    timed("import a 500-operation OpenAPI document (cold)", lambda: _cold(tools_from_openapi, document), 5)
    text = create.to_document()
    timed("read one tool row (Tool.from_document), cold", lambda: _cold(Tool.from_document, text), 200)
    timed("read one tool row again (schema verdict kept)", lambda: Tool.from_document(text), 2000)
    timed("import the petstore fixture (file to documents)", lambda: import_openapi(FIXTURE), 50)
    sys.stdout.flush()


def _cold(run: Callable[[Any], Any], value: Any) -> Any:
    from catalog.tool import _schema_problem

    _schema_problem.cache_clear()
    return run(value)


def _render_and_bind(tool: Tool, args: dict[str, Any]) -> None:
    bind_secrets(render_upstream(tool, args, refused=REFUSED), {"API_KEY": "k", "PETSTORE_AUTH": "t"})


def _load() -> dict[str, Any]:
    import yaml

    return dict(yaml.safe_load(FIXTURE.read_text()))


if __name__ == "__main__":
    main(sys.argv[1:])
