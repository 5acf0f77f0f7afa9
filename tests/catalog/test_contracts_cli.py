"""`flightlog contracts` and `flightlog directory import ...` on the command line."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from catalog.contracts import FORM_NAMES

FIXTURES = Path(__file__).parent / "fixtures"


def flightlog(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLIGHTLOG_")}
    env["FLIGHTLOG_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "flightlog", *args], capture_output=True, text=True, timeout=60, env=env
    )


def test_import_openapi_then_show_every_form(home: Path, tmp_path: Path) -> None:
    """An imported OpenAPI document's rows are in the folder and `contracts` prints all their forms."""
    folder = tmp_path / "directory"
    done = flightlog(
        "directory",
        "import",
        "openapi",
        str(FIXTURES / "petstore.yaml"),
        "--directory",
        str(folder),
        home=home,
    )
    assert done.returncode == 0, done.stderr
    assert "wrote tool/createPet.md" in done.stdout and "6 written, 0 unchanged" in done.stdout
    assert (folder / "tool" / "showPetById.md").read_text().startswith("---\nname: showPetById\n")

    petstore = str(FIXTURES / "petstore.yaml")
    again = flightlog(
        "directory", "import", "openapi", petstore, "--directory", str(folder), "--json", home=home
    )
    assert json.loads(again.stdout)["unchanged"][0] == "tool/listPets.md"

    out = flightlog(
        "contracts", "createPet", "--directory", str(folder), "--args", '{"name":"Rex"}', "--json", home=home
    )
    assert out.returncode == 0, out.stderr
    rendered = json.loads(out.stdout)
    assert tuple(rendered) == FORM_NAMES
    assert rendered["upstream"]["body"] == '{"name":"Rex"}'

    curl = flightlog("contracts", "createPet", "--directory", str(folder), "--form", "curl", home=home)
    assert shlex.split(curl.stdout)[-1] == '{"tool":"createPet","args":{"name":"<name>"}}'

    text = flightlog("contracts", "showPetById", "--directory", str(folder), home=home)
    assert text.stdout.startswith("dispatch\n  {") and "\nupstream\n" in text.stdout


def test_import_mcp_takes_the_server_command_after_a_double_dash(home: Path, tmp_path: Path) -> None:
    """`directory import mcp -- python server.py` writes one row per tool the server lists."""
    folder = tmp_path / "directory"
    done = flightlog(
        "directory", "import", "mcp", "--directory", str(folder), "--prefix", "weather_", "--",
        sys.executable, str(FIXTURES / "mcp_server.py"),
        home=home,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
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
        (("contracts", "nope", "--directory", str(folder)), 'no tool row "nope"'),
        (("contracts", "createPet", "--directory", str(folder), "--form", "fax"), 'has no form "fax"'),
        (
            ("contracts", "createPet", "--directory", str(folder), "--args", "{bad"),
            "--args is not valid JSON",
        ),
        (("contracts", "createPet", "--directory", str(folder), "--args", '{"name":1}'), 'argument "name"'),
        (("contracts", "createPet"), "no Directory folder"),
        (("directory", "import", "openapi", str(other), "--directory", str(folder)), "already exists"),
        (("directory", "import", "sheet", str(other), "--directory", str(folder)), ".tsv or .csv"),
    ]
    for args, message in cases:
        done = flightlog(*args, home=home)
        assert done.returncode == 1, (args, done.stdout)
        assert done.stderr.startswith("flightlog: ") and message in done.stderr, (args, done.stderr)
        assert done.stderr.count("\n") == 1, done.stderr
    (home / "refused_hosts.txt").write_text("petstore.example\n")
    refused = flightlog("contracts", "createPet", "--directory", str(folder), home=home)
    assert refused.returncode == 1
    assert refused.stderr == 'flightlog: refused host "petstore.example" in createPet.upstream.url\n'
    replaced = flightlog(
        "directory", "import", "openapi", str(other), "--directory", str(folder), "--replace", home=home
    )
    assert (
        "wrote tool/listPets.md" in replaced.stdout
        and "Changed." in (folder / "tool" / "listPets.md").read_text()
    )
