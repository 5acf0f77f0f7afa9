"""Loading the secrets to redact: dotenv-style files and named environment variables."""

from __future__ import annotations

from pathlib import Path

import pytest

from recording.errors import RecordingError, SecretsError
from recording.redaction.secrets import load_secrets


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "secrets.env"
    path.write_text(text, encoding="utf-8")
    return path


def test_reads_names_values_comments_export_and_quotes(tmp_path: Path) -> None:
    """Blank lines and comments are skipped; export prefixes and both quote styles are understood."""
    path = _write(
        tmp_path,
        "# keys for the agent\n"
        "\n"
        "OPENAI_API_KEY=sk-proj-abc123\n"
        "export ANTHROPIC_API_KEY = sk-ant-xyz789\n"
        "SINGLE='not # a comment'\n"
        'DOUBLE="pa ss\\"word"  # trailing comment\n'
        "PLAIN=value123 # a comment\n"
        "HASHY=abc#def\n",
    )
    assert load_secrets(path) == {
        "OPENAI_API_KEY": "sk-proj-abc123",
        "ANTHROPIC_API_KEY": "sk-ant-xyz789",
        "SINGLE": "not # a comment",
        "DOUBLE": 'pa ss"word',
        "PLAIN": "value123",
        "HASHY": "abc#def",
    }


def test_malformed_line_names_its_number(tmp_path: Path) -> None:
    """A line that is not NAME=value is refused with its line number, not skipped silently."""
    path = _write(tmp_path, "GOOD=abcdef\n\nthis is not a pair\n")
    with pytest.raises(SecretsError, match=r"line 3 is not NAME=value"):
        load_secrets(path)
    path = _write(tmp_path, 'OPEN="never closed\n')
    with pytest.raises(SecretsError, match=r"line 1"):
        load_secrets(path)


def test_short_values_are_refused(tmp_path: Path) -> None:
    """A value under 4 characters would shred unrelated bytes, so it is an error naming the secret."""
    path = _write(tmp_path, "PIN=123\n")
    with pytest.raises(SecretsError, match=r"PIN is shorter than 4"):
        load_secrets(path)
    with pytest.raises(SecretsError, match=r"EMPTY"):
        load_secrets(None, ["EMPTY"], environ={"EMPTY": ""})


def test_environment_variables_by_name(tmp_path: Path) -> None:
    """Named variables are read from the environment given; they add to (and override) the file."""
    path = _write(tmp_path, "A_KEY=from-file\nB_KEY=keep-me\n")
    environ = {"A_KEY": "from-env-1", "OTHER": "not-asked-for"}
    assert load_secrets(path, ["A_KEY"], environ=environ) == {"A_KEY": "from-env-1", "B_KEY": "keep-me"}


def test_missing_file_and_unset_variable_are_errors(tmp_path: Path) -> None:
    """A secret that silently isn't loaded would silently not be redacted: both are errors."""
    with pytest.raises(SecretsError, match="cannot read secrets file"):
        load_secrets(tmp_path / "nope.env")
    with pytest.raises(SecretsError, match="NOT_SET is not set"):
        load_secrets(None, ["NOT_SET"], environ={})
    assert issubclass(SecretsError, RecordingError)


def test_no_sources_means_no_secrets() -> None:
    """Without a file or names there is nothing to redact (auth headers are still handled elsewhere)."""
    assert load_secrets(None) == {}


def test_hosts_lines_bind_secrets_and_old_files_read_as_before(tmp_path: Path) -> None:
    """`NAME.hosts=...` lines name where a secret may go and are not secrets themselves; a file
    without them reads exactly as before (its secrets then go to their defaults: the known
    providers' hosts, else nowhere until named); a malformed hosts line is one clear error."""
    from catalog.secret_hosts import SecretHosts
    from recording.redaction.secrets import load_secret_hosts, parse_secret_hosts, parse_secrets

    old = "OPENAI_API_KEY=sk-proj-abc123\nMY_KEY=my-value-1\n"
    path = _write(tmp_path, old + "MY_KEY.hosts = api.my.example:8443, *.my.example\n")
    assert (
        load_secrets(path)
        == parse_secrets(old)
        == {"OPENAI_API_KEY": "sk-proj-abc123", "MY_KEY": "my-value-1"}
    )
    hosts = SecretHosts(load_secret_hosts(path))
    assert hosts.of("MY_KEY") == ("api.my.example:8443", "*.my.example")
    assert hosts.of("OPENAI_API_KEY") == ("api.openai.com",)
    assert SecretHosts(parse_secret_hosts(old)).of("MY_KEY") == ()
    assert hosts.of("FLIGHTLOG_LEDGER_TOKEN") == ("flightlog.local",)
    assert SecretHosts({"FLIGHTLOG_LEDGER_TOKEN": ("*",)}).of("FLIGHTLOG_LEDGER_TOKEN") == (
        "flightlog.local",
    )
    with pytest.raises(SecretsError, match=r"line 2: MY_KEY\.hosts"):
        parse_secret_hosts("MY_KEY=x1234\nMY_KEY.hosts=http://evil/ path\n")
