"""Importers: a real OpenAPI document, a real MCP server run as a subprocess, and sheets by header label."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from catalog.contracts import bind_secrets, forms, render_upstream
from catalog.errors import ImporterError
from catalog.importers.mcp import import_mcp
from catalog.importers.openapi import import_openapi, tools_from_openapi
from catalog.importers.sheet import import_sheet, read_sheet
from catalog.tool import Tool

FIXTURES = Path(__file__).parent / "fixtures"
PETSTORE = FIXTURES / "petstore.yaml"
MCP_SERVER = FIXTURES / "mcp_server.py"


def rows(docs: list[tuple[str, str, str]]) -> dict[str, Tool]:
    return {
        Tool.from_document(text).name: Tool.from_document(text, bundle=bundle) for bundle, _, text in docs
    }


@pytest.fixture(scope="module")
def petstore() -> dict[str, Tool]:
    return rows(import_openapi(PETSTORE))


def test_each_operation_becomes_a_tool_document(petstore: dict[str, Tool]) -> None:
    """Every operation is one document under tool/, named by operationId or by method and path."""
    docs = import_openapi(PETSTORE)
    assert [(bundle, path) for bundle, path, _ in docs] == [
        ("tool", "listPets.md"),
        ("tool", "createPet.md"),
        ("tool", "showPetById.md"),
        ("tool", "delete_pets_petId.md"),
        ("tool", "uploadPhoto.md"),
        ("tool", "getInventory.md"),
    ]
    assert petstore["listPets"].description == "List pets, newest first."
    assert "The name must be unique" in petstore["createPet"].body


def test_parameters_become_arguments_and_placeholders(petstore: dict[str, Tool]) -> None:
    """Path, query and header parameters (path-level and $ref'd ones too) are arguments with placeholders."""
    pets = petstore["listPets"]
    assert list(pets.args_schema["properties"]) == ["limit", "tags", "X_Request_ID"]
    assert pets.args_schema["properties"]["limit"]["maximum"] == 100
    assert pets.upstream == {
        "method": "GET",
        "url": "https://eu.petstore.example/v1/pets?limit={limit}&tags={tags}",
        "headers": {"X-Request-ID": "{X_Request_ID}", "X-API-Key": "[API_KEY]"},
    }
    one = petstore["showPetById"]
    assert one.args_schema["required"] == ["petId"]
    assert render_upstream(one, {"petId": 42}) == {
        "method": "GET",
        "url": "https://eu.petstore.example/v1/pets/42",
        "headers": {"X-API-Key": "[API_KEY]"},
        "body": None,
    }
    request = render_upstream(pets, {"limit": 5, "tags": ["cat", "small dog"]})
    assert isinstance(request, dict)
    assert request["url"] == "https://eu.petstore.example/v1/pets?limit=5&tags=cat&tags=small%20dog"


def test_a_json_body_is_spread_into_arguments(petstore: dict[str, Tool]) -> None:
    """A JSON body's writable properties are arguments; readOnly ones are not; nullable becomes null-able."""
    create = petstore["createPet"]
    props = create.args_schema["properties"]
    assert list(props) == ["name", "tag", "owner"]
    assert props["tag"]["type"] == ["string", "null"]
    assert props["owner"]["properties"]["pets"]["items"] == {}, "a recursive $ref is cut where it recurs"
    assert create.args_schema["required"] == ["name"]
    request = render_upstream(create, {"name": "Rex", "tag": None, "owner": {"name": "Ana"}})
    assert isinstance(request, dict)
    assert request["headers"] == {
        "content-type": "application/json",
        "authorization": "Bearer [PETSTORE_AUTH]",
    }
    assert json.loads(request["body"]) == {"name": "Rex", "tag": None, "owner": {"name": "Ana"}}


def test_security_schemes_become_secret_names(petstore: dict[str, Tool]) -> None:
    """An API key in a header, OAuth 2 as a bearer, `security: []` as none; values are never in the row."""
    assert petstore["showPetById"].upstream["headers"] == {"X-API-Key": "[API_KEY]"}  # type: ignore[call-overload]
    assert petstore["delete_pets_petId"].upstream["headers"] == {"authorization": "Bearer [PETSTORE_AUTH]"}  # type: ignore[call-overload]
    assert "headers" not in petstore["getInventory"].upstream  # type: ignore[operator]
    sent = bind_secrets(render_upstream(petstore["showPetById"], {"petId": 1}), {"API_KEY": "k"})
    assert sent["headers"] == {"X-API-Key": "k"}  # type: ignore[call-overload]


def test_a_non_json_body_is_one_argument(petstore: dict[str, Tool]) -> None:
    """A body that is not a JSON or form object is one `body` argument sent as written."""
    photo = petstore["uploadPhoto"]
    assert photo.upstream["body"] == "{body}"  # type: ignore[call-overload]
    request = render_upstream(photo, {"petId": 1, "body": "PNG..."})
    assert request["body"] == "PNG..." and request["headers"]["content-type"] == "image/png"  # type: ignore[call-overload]


def test_every_imported_row_renders_every_form(petstore: dict[str, Tool]) -> None:
    """Imported rows are complete: each renders all forms from sample arguments."""
    from catalog.contracts import example_args

    for tool in petstore.values():
        assert "upstream" in forms(tool, example_args(tool)), tool.name


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"openapi": "3.1.0", "paths": {"/x": {"get": {}}}}, "names no server"),
        ({"openapi": "3.1.0", "servers": [{"url": "/v1"}], "paths": {"/x": {"get": {}}}}, "not absolute"),
        (
            {"openapi": "3.1.0", "servers": [{"url": "https://a"}], "paths": {"/x": {"$ref": "#/nope"}}},
            "points at nothing",
        ),
        (
            {
                "openapi": "3.1.0",
                "servers": [{"url": "https://a"}],
                "paths": {"/x": {"get": {"security": [{"missing": []}]}}},
            },
            'security scheme "missing" is not defined',
        ),
    ],
)
def test_what_cannot_be_read_faithfully_is_an_error(document: dict[str, Any], message: str) -> None:
    """The importer refuses, naming the problem, instead of guessing a server, a ref or a credential."""
    with pytest.raises(ImporterError, match=message):
        tools_from_openapi(document)


def test_a_base_url_replaces_the_documents_servers(tmp_path: Path) -> None:
    """--base-url gives a relative or missing server URL; a file that is not OpenAPI 3 is refused."""
    document = {"openapi": "3.1.0", "servers": [{"url": "/v1"}], "paths": {"/ping": {"get": {}}}}
    (tool,) = tools_from_openapi(document, base_url="http://127.0.0.1:9000/v1/")
    assert tool.name == "get_ping" and tool.upstream == {
        "method": "GET",
        "url": "http://127.0.0.1:9000/v1/ping",
    }
    swagger = tmp_path / "swagger.json"
    swagger.write_text(json.dumps({"swagger": "2.0"}))
    with pytest.raises(ImporterError, match=r"not an OpenAPI 3\.x document"):
        import_openapi(swagger)


def test_an_mcp_servers_tools_become_rows_with_mcp_contracts() -> None:
    """The server, started as a subprocess and asked with the official client, gives one row per tool;
    the server's contract keeps the name it announced (`serverInfo`), which joins recorded calls to it."""
    command = [sys.executable, str(MCP_SERVER)]
    docs = import_mcp(command)
    assert [(bundle, path) for bundle, path, _ in docs] == [
        ("tool", "forecast.md"),
        ("tool", "record_reading.md"),
    ]
    found = rows(docs)
    forecast = found["forecast"]
    assert forecast.description == "The weather forecast for a city, one line per day."
    assert forecast.args_schema["required"] == ["city"]
    assert forecast.upstream == {
        "method": "MCP",
        "server": {"command": sys.executable, "args": [str(MCP_SERVER)], "name": "weather-fixture"},
        "tool": "forecast",
        "arguments": {"city": "{city}", "days": "{days}"},
    }
    assert render_upstream(forecast, {"city": "Oslo"}) == {
        "method": "MCP",
        "server": {"command": sys.executable, "args": [str(MCP_SERVER)], "name": "weather-fixture"},
        "headers": {},
        "tool": "forecast",
        "arguments": {"city": "Oslo"},
    }
    reading = found["record_reading"]
    assert reading.args_schema["required"] == ["station_id", "celsius"]
    assert render_upstream(reading, {"station_id": "s1", "celsius": 21.5})["arguments"] == {  # type: ignore[call-overload]
        "station_id": "s1",
        "celsius": 21.5,
    }


def test_an_mcp_server_that_cannot_start_is_one_clear_error(tmp_path: Path) -> None:
    """A missing executable or a crashing server is an ImporterError naming the command."""
    with pytest.raises(ImporterError, match='"no-such-server" is not an executable'):
        import_mcp(["no-such-server"])
    crash = tmp_path / "crash.py"
    crash.write_text("import sys\nsys.exit('the server has no config')\n")
    with pytest.raises(ImporterError, match="failed: the server has no config"):
        import_mcp([sys.executable, str(crash)], timeout=20)


SHEET_ROWS = [
    {
        "name": "send_sms",
        "description": "Send a text.",
        "method": "POST",
        "upstream url": "https://sms.example/send?to={to}",
        "headers": '{"authorization": "Bearer [SMS_TOKEN]"}',
        "body": '{"text": "{text}"}',
    },
    {"name": "disk_usage", "description": "Free disk space.", "method": "CLI", "command": "df -h {path}"},
]


def sheet(columns: list[str]) -> str:
    lines = ["\t".join(columns)] + ["\t".join(row.get(c, "") for c in columns) for row in SHEET_ROWS]
    return "\n".join(lines) + "\n"


def test_a_sheet_is_read_by_header_label_never_by_position() -> None:
    """The same rows with the columns in another order give the same documents."""
    columns = ["name", "description", "method", "upstream url", "headers", "body", "command"]
    docs = read_sheet(sheet(columns), delimiter="\t")
    assert read_sheet(sheet(list(reversed(columns))), delimiter="\t") == docs
    found = rows(docs)
    assert found["send_sms"].args_schema["required"] == ["to", "text"]
    assert render_upstream(found["send_sms"], {"to": "+4712345678", "text": "hi"}) == {
        "method": "POST",
        "url": "https://sms.example/send?to=%2B4712345678",
        "headers": {"authorization": "Bearer [SMS_TOKEN]", "content-type": "application/json"},
        "body": '{"text":"hi"}',
    }
    assert render_upstream(found["disk_usage"], {"path": "/my files"}) == {
        "method": "CLI",
        "command": "df -h '/my files'",
    }


def test_sheet_rows_become_tools_with_arguments_from_their_placeholders(tmp_path: Path) -> None:
    """Without an args column, each placeholder of the contract is a required text argument."""
    path = tmp_path / "tools.csv"
    path.write_text(
        "Name,Description,Method,Command,CLI opt-in\n"
        'grep_log,Search the log.,CLI,"[""grep"", ""{pattern}"", ""/var/log/app.log""]",yes\n'
        "ARTICLE_RULES,How we write.,,,\n"
    )
    found = rows(import_sheet(path))
    grep = found["grep_log"]
    assert grep.cli_opt_in is True
    assert grep.args_schema == {
        "type": "object",
        "properties": {"pattern": {"type": "string"}},
        "required": ["pattern"],
    }
    assert render_upstream(grep, {"pattern": "ERROR"}) == {
        "method": "CLI",
        "command": ["grep", "ERROR", "/var/log/app.log"],
    }
    assert found["ARTICLE_RULES"].upstream is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name\tdescrption\nx\ty\n", 'unknown column "descrption"'),
        ("name\tName\nx\ty\n", 'the column "name" appears twice'),
        ("description\ny\n", "no `name` column"),
        ("name\tupstream_url\nx\thttps://a.example\n", "line 2: a contract needs a method"),
        ("name\tmethod\theaders\nx\tGET\t{not json\n", "line 2: the headers cell is not valid JSON"),
        (
            "name\tbundle\tupstream url\nx\tarticle\thttps://a\n",
            'type "article" calls nothing: it cannot have a "upstream url" column',
        ),
        ("", "is empty"),
    ],
)
def test_a_sheet_that_cannot_be_read_faithfully_is_an_error(text: str, message: str) -> None:
    """An unknown or repeated header, a missing name, a bad cell: an error naming it, never a guess."""
    with pytest.raises(ImporterError, match=message):
        read_sheet(text, delimiter="\t")
