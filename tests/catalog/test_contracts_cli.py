"""`flightlog contracts` and `flightlog directory import ...` on the command line."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from typer.testing import CliRunner

from catalog.contracts import FORM_NAMES
from flightlog.cli import app
from flightlog.failures import known_errors

FIXTURES = Path(__file__).parent / "fixtures"


@dataclass
class Ran:
    returncode: int
    stdout: str
    error: BaseException | None


def flightlog(*args: str, home: Path) -> Ran:
    """The CLI in-process (the `home` fixture has set FLIGHTLOG_HOME): exit code, output, known error."""
    result = CliRunner().invoke(app, list(args))
    error = result.exception if not isinstance(result.exception, SystemExit) else None
    if error is not None and not isinstance(error, known_errors()):
        raise error
    return Ran(1 if error else result.exit_code, result.stdout, error)


def test_import_openapi_then_show_every_form(home: Path, tmp_path: Path) -> None:
    """An imported OpenAPI document's rows are in the folder and `contracts` prints all their forms."""
    folder = tmp_path / "directory"
    folder.mkdir()
    done = flightlog(
        "directory",
        "import",
        "openapi",
        str(FIXTURES / "petstore.yaml"),
        "--directory",
        str(folder),
        home=home,
    )
    assert done.returncode == 0, done.error
    assert "wrote tool/createPet.md" in done.stdout and "6 written, 0 unchanged (revision" in done.stdout
    assert (folder / "tool" / "showPetById.md").read_text().startswith("---\nname: showPetById\n")

    petstore = str(FIXTURES / "petstore.yaml")
    again = flightlog(
        "directory", "import", "openapi", petstore, "--directory", str(folder), "--json", home=home
    )
    assert json.loads(again.stdout)["unchanged"][0] == "tool/listPets.md"

    out = flightlog(
        "contracts", "createPet", "--directory", str(folder), "--args", '{"name":"Rex"}', "--json", home=home
    )
    assert out.returncode == 0, out.error
    rendered = json.loads(out.stdout)
    assert tuple(rendered) == tuple(n for n in FORM_NAMES if not n.startswith("link"))
    assert rendered["upstream"]["body"] == '{"name":"Rex"}'

    curl = flightlog("contracts", "createPet", "--directory", str(folder), "--form", "curl", home=home)
    assert shlex.split(curl.stdout)[-1] == '{"tool":"createPet","args":{"name":"<name>"}}'

    text = flightlog("contracts", "showPetById", "--directory", str(folder), home=home)
    assert text.stdout.startswith(
        '27 forms of the canonical call {"tool":"showPetById","args":{"petId":0}}\n'
    )
    assert "\ndispatch: POST the canonical call" in text.stdout and "\nupstream: " in text.stdout


def test_import_mcp_takes_the_server_command_after_a_double_dash(home: Path, tmp_path: Path) -> None:
    """`directory import mcp -- python server.py` writes one row per tool the server lists."""
    folder = tmp_path / "directory"
    folder.mkdir()
    done = flightlog(
        "directory", "import", "mcp", "--directory", str(folder), "--prefix", "weather_", "--",
        sys.executable, str(FIXTURES / "mcp_server.py"),
        home=home,
    )  # fmt: skip
    assert done.returncode == 0, done.error
    assert sorted(p.name for p in (folder / "tool").iterdir()) == [
        "weather_forecast.md",
        "weather_record_reading.md",
    ]
    form = flightlog(
        "contracts", "weather_forecast", "--directory", str(folder), "--form", "upstream",
        "--args", '{"city":"Oslo"}', home=home,
    )  # fmt: skip
    assert json.loads(form.stdout)["arguments"] == {"city": "Oslo"}


def test_failures_are_one_line_and_exit_non_zero(home: Path, tmp_path: Path) -> None:
    """Unknown tool, unknown form, bad args, refused host, existing rows: one `flightlog:` line, exit 1."""
    folder = tmp_path / "directory"
    folder.mkdir()
    flightlog(
        "directory",
        "import",
        "openapi",
        str(FIXTURES / "petstore.yaml"),
        "--directory",
        str(folder),
        home=home,
    )
    other = tmp_path / "other.yaml"
    other.write_text((FIXTURES / "petstore.yaml").read_text().replace("List pets, newest first.", "Changed."))
    home.mkdir(parents=True, exist_ok=True)
    cases = [
        (("contracts", "nope", "--directory", str(folder)), 'no tool is called "nope"'),
        (("contracts", "createPet", "--directory", str(folder), "--form", "fax"), 'has no form "fax"'),
        (
            ("contracts", "createPet", "--directory", str(folder), "--args", "{bad"),
            "--args is not valid JSON",
        ),
        (("contracts", "createPet", "--directory", str(folder), "--args", '{"name":1}'), 'argument "name"'),
        (("contracts", "createPet", "--directory", str(tmp_path / "absent")), "does not exist"),
        (("directory", "import", "openapi", str(other), "--directory", str(folder)), "already exists"),
        (("directory", "import", "sheet", str(other), "--directory", str(folder)), ".tsv or .csv"),
    ]
    for args, message in cases:
        done = flightlog(*args, home=home)
        assert done.returncode == 1, (args, done.stdout)
        assert message in str(done.error) and "\n" not in str(done.error), (args, done.error)
    (home / "refused_hosts.txt").write_text("petstore.example\n")
    env = {k: v for k, v in os.environ.items() if k != "FLIGHTLOG_DIRECTORY"}
    refused = subprocess.run(
        [sys.executable, "-m", "flightlog", "contracts", "createPet", "--directory", str(folder)],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert refused.returncode == 1
    assert refused.stderr == 'flightlog: refused host "petstore.example" in createPet.upstream.url\n'
    replaced = flightlog(
        "directory", "import", "openapi", str(other), "--directory", str(folder), "--replace", home=home
    )
    assert (
        "wrote tool/listPets.md" in replaced.stdout
        and "Changed." in (folder / "tool" / "listPets.md").read_text()
    )


def test_a_fresh_install_shows_the_starter_rows_and_imports_into_the_native_directory(home: Path) -> None:
    """Without a folder, `contracts` reads the native Directory (starter rows) and imports commit there."""
    door = flightlog(
        "contracts", "DISPATCH", "--form", "upstream", "--args", '{"tool":"x","args":{"a":1}}', home=home
    )
    assert door.returncode == 0, door.error
    assert json.loads(door.stdout)["body"] == '{"tool":"x","args":{"a":1}}'
    done = flightlog("directory", "import", "openapi", str(FIXTURES / "petstore.yaml"), "--json", home=home)
    assert done.returncode == 0, done.error
    assert len(json.loads(done.stdout)["written"]) == 6
    pets = flightlog("contracts", "listPets", "--form", "cli", "--args", '{"limit":2}', home=home)
    assert pets.stdout == "flightlog call listPets --args '{\"limit\":2}'\n"
