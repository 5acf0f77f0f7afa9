"""What `flightlog run` lends, decided before anything starts: which variables, the files, what is
dropped from the environment, and one clear line for what cannot be lent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from egress.policy_file import load_policy_file
from flightlog import lent_files
from flightlog.errors import CommandError
from flightlog.lending import lend_table, parse_lend, plan

SECRETS = (
    "OPENAI_API_KEY=sk-proj-REALopenai0123456789abcdef\n"
    "GITHUB_TOKEN=ghp_REALgithub0123456789abcdefgh\n"
    "GITHUB_TOKEN.hosts=git.example.com:8443\n"
    "DEPLOY=deploy-REAL-0123456789\n"
    "DEPLOY.hosts=deploy.example.com\n"
)


def test_defaults_named_loans_files_and_dropped_variables(tmp_path: Path) -> None:
    """The providers' usual variables for the keys held (GitHub's under both names), a named loan
    beside them, lent files naming the placeholders for plain hosts, and the operator's variable that
    held a real value not passed on."""
    secrets = tmp_path / "secrets.env"
    secrets.write_text(SECRETS)
    environ = {"PATH": "/bin", "MY_COPY": "deploy-REAL-0123456789", "GIT_CONFIG_COUNT": "2"}
    lending, _ = plan(secrets, None, {"DEPLOY_KEY": "DEPLOY"}, tmp_path, environ)
    try:
        env = lending.child_env(environ)
        assert set(env) >= {"OPENAI_API_KEY", "GITHUB_TOKEN", "GH_TOKEN", "DEPLOY_KEY", "NETRC"}
        assert "MY_COPY" not in env and env["PATH"] == "/bin"
        assert env["GIT_CONFIG_COUNT"] == "3" and env["GIT_CONFIG_KEY_2"] == "credential.helper"
        netrc = Path(env["NETRC"]).read_text()
        assert f"machine git.example.com login x-access-token password {env['GH_TOKEN']}" in netrc
        assert f"machine deploy.example.com login x-access-token password {env['DEPLOY_KEY']}" in netrc
        assert "REAL" not in netrc and all("REAL" not in v for k, v in env.items() if k != "PATH")
    finally:
        lent_files.remove(lending.files)


@pytest.mark.parametrize("given", ["1BAD", "A=B=C", "=X", "A-B"])
def test_a_malformed_lend_is_one_line(given: str) -> None:
    with pytest.raises(CommandError, match="--lend wants VARIABLE or VARIABLE=SECRET"):
        parse_lend([given])


def test_the_lend_table_and_the_policy_file_agree(tmp_path: Path) -> None:
    """`[lend]` is read by `run` and accepted (not refused as unknown) by the egress policy file."""
    policy = tmp_path / "egress.toml"
    policy.write_text('default = "allow"\n[lend]\nDEPLOY_KEY = "DEPLOY"\n')
    assert lend_table(policy) == {"DEPLOY_KEY": "DEPLOY"}
    load_policy_file(policy)
    policy.write_text("[lend]\nDEPLOY_KEY = 3\n")
    with pytest.raises(CommandError, match=r"\[lend\] maps VARIABLE"):
        lend_table(policy)


def test_lending_a_secret_not_held_refuses_to_run(tmp_path: Path) -> None:
    """`run --lend X` for a secret the file lacks: one line, exit 1, the command never runs."""
    marker = tmp_path / "ran"
    env = {"FLIGHTLOG_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "flightlog", "run", "--lend", "NOPE", "--", "touch", str(marker)],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1 and not marker.exists()
    assert done.stderr.strip().splitlines() == [
        "flightlog: cannot lend NOPE to NOPE: the secrets file holds no NOPE"
    ]
