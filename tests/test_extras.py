"""What `make run` installs is all the proxy needs; the features behind an extra say so in one line.

The extras' modules are made unimportable in the child processes (a `sitecustomize` on PYTHONPATH puts
None in `sys.modules` for them, as if they were not installed): the proxy still starts and records, and
`browse --web`, the OTLP stream and an S3 blob store each stop with one line naming their extra.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from formats.extras import EXTRAS, MissingExtra, missing_message, require
from tests.capture.ledger_view import ledger_of, wait_for
from tests.support.proxy import live_proxy
from tests.support.upstream import upstream

ABSENT = ("textual_serve", "aiohttp", "boto3", "botocore", "opentelemetry", "datasette")
"""The extras' top-level modules (`web`, `s3`, `otlp`, `datasette`)."""


@pytest.fixture
def without_extras(tmp_path: Path) -> dict[str, str]:
    """An environment whose Python processes cannot import any extra's modules."""
    folder = tmp_path / "block"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(
        f"import sys\nfor name in {ABSENT!r}:\n    sys.modules[name] = None\n"
    )
    path = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "FLIGHTLOG_HOME": str(tmp_path / "home")}


def _flightlog(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flightlog", *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_the_proxy_runs_and_records_without_any_extra(without_extras: dict[str, str], tmp_path: Path) -> None:
    """`make run`'s install is enough: the proxy starts, answers and records with no extra importable."""
    home = tmp_path / "proxy-home"
    env = {"PYTHONPATH": without_extras["PYTHONPATH"]}
    with upstream() as up, live_proxy(home, f"sqlite:///{tmp_path / 'l.db'}", env=env) as proxy:
        answer = httpx.get(
            f"{up.base}/fixed", proxy=proxy.url, timeout=30, headers={"X-Flightlog-Session": "x"}
        )
        assert answer.status_code == 200
        ledger = ledger_of(proxy.ledger_url, proxy.blobs_url)
        recorded = wait_for(ledger, "session = 'x'", {}, 2)
        ledger.close()
    assert [e.kind for e in recorded] == ["http.request", "http.response"], recorded


@pytest.mark.parametrize(
    ("extra", "args"),
    [
        ("web", ("browse", "--web", "--listen", "127.0.0.1:0")),
        ("otlp", ("proxy", "--listen", "127.0.0.1:0", "--otlp-endpoint", "http://127.0.0.1:9/v1/traces")),
        ("s3", ("ledger", "migrate")),
    ],
)
def test_a_feature_without_its_extra_says_which_to_install_in_one_line(
    without_extras: dict[str, str], tmp_path: Path, extra: str, args: tuple[str, ...]
) -> None:
    """Each feature behind an extra, asked for without it: exit 1, one line naming the extra and the
    install command, no traceback."""
    env = {
        **without_extras,
        "FLIGHTLOG_LEDGER": f"sqlite:///{tmp_path / 'l.db'}",
        "FLIGHTLOG_BLOBS": "s3://b/x",
    }
    done = _flightlog(env if extra == "s3" else without_extras, *args)
    said = done.stderr.strip()
    assert done.returncode == 1, (done.returncode, done.stdout[-500:], said[-1500:])
    assert "Traceback" not in said and len(said.splitlines()) == 1, said
    assert f"the `{extra}` extra" in said and f".[{extra}]" in said, said


def test_require_names_the_extra_and_lets_other_import_errors_through() -> None:
    """A module of the extra that is missing is `MissingExtra` with the extra's line; an extra's known
    module imports as usual."""
    with pytest.raises(MissingExtra) as info:
        require("flightlog_no_such_module", "web")
    assert str(info.value) == missing_message("web", "flightlog_no_such_module")
    assert str(info.value).startswith(EXTRAS["web"].feature)
    assert require("json", "otlp").dumps([]) == "[]"
