"""`flightlog find`, `get`, `manifest` and `directory export` on the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from flightlog.cli import app
from tests.catalog.conftest import make_folder

runner = CliRunner()


def test_find_prints_score_layer_and_words(folder: Path, home: Path) -> None:
    """Each hit is one line: score, layer, id, matched words, summary; --json is stable."""
    out = runner.invoke(app, ["find", "--directory", str(folder), "how", "do", "I", "get", "the", "weather"])
    assert out.exit_code == 0, out.output
    assert out.output.splitlines()[0].split("\t")[:4] == ["800", "words", "get_weather", "get weather"]
    out = runner.invoke(app, ["find", "--directory", str(folder), "--json", "--k", "1", "waether"])
    assert json.loads(out.output) == {
        "query": "waether",
        "hits": [
            {
                "id": "get_weather",
                "bundle": "tool",
                "name": "GET_WEATHER",
                "score": 300,
                "layer": "typo",
                "matched": ["waether~weather"],
                "read_as": ["waether"],
                "summary": "Current conditions and forecast for a city.",
            }
        ],
    }


def test_find_without_a_match_says_so_and_fails(folder: Path, home: Path) -> None:
    """No match prints the plain sentence and exits 1."""
    out = runner.invoke(app, ["find", "--directory", str(folder), "zzqx"])
    assert out.exit_code == 1
    assert out.output.strip() == (
        'Nothing in the Directory is called, or means, "zzqx". Every row is listed at GET /api/directory'
    )


def test_get_and_manifest(folder: Path, home: Path) -> None:
    """get prints framed slices (exit 1 when an id is missing); manifest prints the TSV or sizes."""
    out = runner.invoke(app, ["get", "--directory", str(folder), "weather_notes", "--section", "limits"])
    assert out.exit_code == 0 and out.output.startswith("@@ weather_notes#limits\n## Limits")
    out = runner.invoke(app, ["get", "--directory", str(folder), "nope"])
    assert out.exit_code == 1 and out.output == "@@ missing\nnope\n"
    out = runner.invoke(app, ["manifest", "--directory", str(folder), "--names"])
    assert out.output.splitlines()[3:5] == ["id", "article/ledger_row"]
    out = runner.invoke(app, ["manifest", "--directory", str(folder), "--sizes"])
    assert out.output.splitlines()[0].startswith("full\t") and "tokens" in out.output


def test_native_directory_and_export(tmp_path: Path, home: Path) -> None:
    """Without --directory the starter rows answer; export writes the folder form."""
    out = runner.invoke(app, ["find", "dispatch"])
    assert out.output.startswith("1000\tname\tdispatch\t")
    out = runner.invoke(app, ["directory", "export", str(tmp_path / "out")])
    assert out.exit_code == 0 and (tmp_path / "out" / "tool" / "dispatch.md").is_file()
    assert (tmp_path / "out" / "aliases.toml").is_file()


def test_a_bad_alias_is_one_warning_and_directory_check_lists_them(tmp_path: Path, home: Path) -> None:
    """A bad alias no longer takes the Directory down: manifest answers (exit 0) with one warning line
    on stderr; `flightlog directory check` lists every problem and exits 1, never a traceback."""
    folder = make_folder(tmp_path / "d", aliases='sms = ["SMS_*"]\nfax = ["FAX_"]\nlog = ["LEDGER_ROW"]\n')

    def flightlog(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "flightlog", *args, "--directory", str(folder)],
            capture_output=True,
            text=True,
            timeout=60,
        )

    out = flightlog("manifest")
    assert out.returncode == 0 and "get_weather" in out.stdout
    assert out.stderr == (
        'flightlog: warning: aliases.toml: alias "fax" pattern "FAX_" names no row in the Directory '
        "(and 1 more); `flightlog directory check` lists them\n"
    )
    out = flightlog("directory", "check")
    assert out.returncode == 1 and out.stdout.splitlines() == [
        'aliases.toml: alias "fax" pattern "FAX_" names no row in the Directory',
        'aliases.toml: alias "sms" pattern "SMS_*" names no row in the Directory',
    ]
    (folder / "aliases.toml").write_text('log = ["LEDGER_ROW"]\n', encoding="utf-8")
    out = flightlog("directory", "check")
    assert out.returncode == 0 and out.stdout.startswith("ok: ")
