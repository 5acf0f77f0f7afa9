"""Real clients still work sealed, and are recorded: a Node 20 script, the openai Python SDK against a
local fake, curl, `git clone` over HTTPS from a local git server and `pip install` from a local
package index, all in one `run --sealed` as root (the command as nobody), each request filed under the
run's agent. The servers are on a test host (a network namespace, 198.51.100.0/26), over TLS the proxy
opens with the test's certificate."""

from __future__ import annotations

import base64
import hashlib
import os
import ssl
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from contextlib import ExitStack
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread

import pytest
from sqlalchemy import text

from flightlog.sealed import why_not
from storage.ledger import open_ledger
from tests.egress.netns_hosts import Host, network_host
from tests.egress.sealed_support import nobody_folder, python_reads
from tests.support.upstream import upstream

NODE_SCRIPT = """
const https = require('https');
fetch(process.argv[2] + '/fixed?c=node-fetch').then(r => {
  console.log('node-fetch', r.status);
  https.get(process.argv[2] + '/fixed?c=node-https', res => {
    console.log('node-https', res.statusCode);
    res.resume();
  });
});
"""
PYTHON_SDK = """
import openai
answer = openai.OpenAI(api_key="sk-test").chat.completions.create(
    model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
print("openai", answer.choices[0].message.content, answer.usage.total_tokens)
"""


def wheel(folder: Path) -> Path:
    """A one-module wheel, `tinypkg` 1.0 (`tinypkg.VALUE == 42`)."""
    files = {
        "tinypkg/__init__.py": b"VALUE = 42\n",
        "tinypkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
        "tinypkg-1.0.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }  # fmt: skip
    record = "".join(
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
        for name, data in files.items()
    )
    path = folder / "tinypkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr("tinypkg-1.0.dist-info/RECORD", record + "tinypkg-1.0.dist-info/RECORD,,\n")
    return path


def static_site(folder: Path) -> None:
    """A bare git repository served the dumb way (`repo.git`) and a simple package index (`simple/`)."""
    source = folder / "source"
    source.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"]
    (source / "README").write_text("sealed clone\n")
    for step in (["init", "-q"], ["add", "README"], ["commit", "-qm", "first"]):
        subprocess.run([*git, *step], cwd=source, check=True, capture_output=True)
    subprocess.run([*git, "clone", "-q", "--bare", str(source), str(folder / "repo.git")], check=True)
    subprocess.run(["git", "update-server-info"], cwd=folder / "repo.git", check=True)
    files = folder / "files"
    files.mkdir()
    built = wheel(files)
    digest = hashlib.sha256(built.read_bytes()).hexdigest()
    index = folder / "simple" / "tinypkg"
    index.mkdir(parents=True)
    (index / "index.html").write_text(
        f'<a href="../../files/{built.name}#sha256={digest}">{built.name}</a>\n'
    )


@pytest.fixture
def sites(tmp_path: Path) -> Iterator[tuple[Host, str, str, Path]]:
    """On a test host: the fake model API (HTTPS) and the static git and package site (HTTPS); their
    base URLs and the one certificate both serve (the proxy's upstream CA)."""
    site = tmp_path / "site"
    site.mkdir()
    static_site(site)
    tls = tmp_path / "tls"
    tls.mkdir()
    with network_host() as host, ExitStack() as stack:
        with host.inside():
            api = stack.enter_context(upstream(tls, host=host.address))  # writes the one certificate
            server = ThreadingHTTPServer(
                (host.address, 0), partial(SimpleHTTPRequestHandler, directory=str(site))
            )
        cert, key = tls / "upstream-cert.pem", tls / "upstream-key.pem"  # the site shares it
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        stack.callback(server.server_close)
        stack.callback(server.shutdown)
        Thread(target=server.serve_forever, daemon=True).start()
        yield (
            host,
            f"https://{host.address}:{api.port}",
            f"https://{host.address}:{server.server_address[1]}",
            cert,
        )


@pytest.fixture
def world() -> Iterator[Path]:
    """The working directory and home of the sandbox's user (nobody), where it may walk and write."""
    with nobody_folder("h48-agents-") as folder:
        yield folder


@pytest.mark.skipif(why_not() is not None, reason="as root (the other sealed tests cover the rest)")
def test_real_clients_work_sealed_and_are_recorded(
    sites: tuple[Host, str, str, Path], world: Path, tmp_path: Path
) -> None:
    """Each client gets its answer inside the seal (its output says so), and each of their requests
    is in the Ledger under the run's agent: Node's fetch and https, the openai SDK's chat call (with
    its model and tokens), curl, git's fetches of the repository and pip's of the index and wheel."""
    _, api, site, ca = sites
    (world / "app.js").write_text(NODE_SCRIPT)
    (world / "sdk.py").write_text(PYTHON_SDK)
    script = (
        f"node app.js {api} && "
        f"python sdk.py && "
        f"echo curl $(curl -s -o /dev/null -w '%{{http_code}}' {site}/repo.git/HEAD) && "
        f'GIT_SSL_CAINFO="$SSL_CERT_FILE" git clone -q {site}/repo.git clone && '
        f"echo git $(cat clone/README) && "
        f'PIP_CONFIG_FILE=/dev/null python -m pip install -q --no-cache-dir --disable-pip-version-check '
        f'--cert "$SSL_CERT_FILE" --index-url {site}/simple/ --target site-packages tinypkg && '
        f'echo pip $(PYTHONPATH=site-packages python -c "import tinypkg; print(tinypkg.VALUE)")'
    )  # fmt: skip
    home, ledger_url = tmp_path / "home", f"sqlite:///{tmp_path / 'ledger.db'}"
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    bin_dir = str(Path(sys.executable).parent)
    env |= {"FLIGHTLOG_HOME": str(home), "FLIGHTLOG_LEDGER": ledger_url, "HOME": str(world),
            "PATH": f"{bin_dir}:{env['PATH']}"}  # fmt: skip
    command = [
        sys.executable, "-m", "flightlog", "run", "--sealed", *python_reads(),
        "--agent", "agents", "--upstream-ca", str(ca), "--ai-upstream", f"openai={api}",
        "--", "sh", "-c", script,
    ]  # fmt: skip
    done = subprocess.run(command, env=env, cwd=world, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout, done.stderr[-3000:])
    said = dict(line.split(" ", 1) for line in done.stdout.strip().splitlines())
    assert said == {
        "node-fetch": "200", "node-https": "200", "openai": "hi 18", "curl": "200", "git": "sealed clone",
        "pip": "42",
    }  # fmt: skip

    ledger = open_ledger(ledger_url, (home / "blobs").as_uri())
    try:
        with ledger.engine.connect() as c:
            rows = c.execute(
                text(
                    "SELECT url, agent, model, tokens_in, tokens_out FROM events WHERE kind = 'http.response'"
                )
            ).all()
    finally:
        ledger.close()
    assert {r.agent for r in rows} == {"agents"}
    paths = [r.url.split("/", 3)[3] for r in rows]
    for wanted in ("fixed?c=node-fetch", "fixed?c=node-https", "repo.git/info/refs", "simple/tinypkg/"):
        assert any(p.startswith(wanted) for p in paths), (wanted, paths)
    assert any(p.startswith("files/tinypkg-1.0-py3-none-any.whl") for p in paths), paths
    (chat,) = [r for r in rows if r.url.endswith("/chat/completions")]
    assert (chat.model, chat.tokens_in, chat.tokens_out) == ("gpt-4o-mini", 11, 7)
