"""`flightlog browse --web`: the browser as a web page, for this machine's own pages only.

The server is the real command in a child process; the attacks are the requests a hostile page makes
(a cross-site websocket or POST, a DNS-rebinding page naming its own host), sent as raw HTTP; the page
is opened in headless Chromium (Debian's, through playwright), which must show a recorded exchange.
"""

from __future__ import annotations

import base64
import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from flightlog.commands.browse import web_command
from tests.browse.web_support import (
    CHROMIUM,
    XTERM_HOOK,
    XTERM_TEXT,
    free_port,
    png_pixels,
    sample_home,
    web_server,
)
from tui.errors import TuiError
from tui.web import Listen, key_refusal, parse_listen, refusal

HERE = Listen("127.0.0.1", 8765)
KEY = "k3y-0f-th1s-s3rv3r"
OPEN = Listen("0.0.0.0", 8765)

# (listen, Host, Origin, path, refused?) — every row a request some page or client could send
REQUESTS = [
    (HERE, "127.0.0.1:8765", None, "/", False),  # the user typing the URL
    (HERE, "localhost:8765", None, "/", False),
    (HERE, "[::1]:8765", None, "/static/js/textual.js", False),
    (HERE, "127.0.0.1:8765", "http://127.0.0.1:8765", "/ws", False),  # the page's own websocket
    (HERE, "127.0.0.1:8765", "http://localhost:8765", "/ws", False),  # page opened as localhost
    (HERE, "evil.example:8765", None, "/", True),  # DNS rebinding: the page's own name in Host
    (HERE, "evil.example:8765", "http://evil.example:8765", "/ws", True),  # rebinding, websocket
    (HERE, "127.0.0.1:8765", "http://evil.example", "/ws", True),  # cross-site websocket
    (HERE, "127.0.0.1:8765", "http://evil.example", "/", True),  # cross-site POST or fetch
    (HERE, "127.0.0.1:8765", "null", "/ws", True),  # a sandboxed frame or a file:// page
    (HERE, "127.0.0.1:8765", "http://127.0.0.1:9999", "/ws", True),  # another local server's page
    (HERE, "127.0.0.1:8765", None, "/ws", True),  # a websocket no web browser sent
    (HERE, "127.0.0.1:8766", None, "/", True),  # another port
    (HERE, None, None, "/", True),
    (OPEN, "box.lan:8765", "http://box.lan:8765", "/ws", False),  # opened to the network: same origin
    (OPEN, "box.lan:8765", "http://evil.example", "/ws", True),  # ... but never cross-site
]


@pytest.mark.parametrize(("listen", "host", "origin", "path", "refused"), REQUESTS)
def test_refusal_reads_host_and_origin(
    listen: Listen, host: str | None, origin: str | None, path: str, refused: bool
) -> None:
    """Only requests naming this server, and from its own pages when a page sent them, are answered;
    the websocket that starts the browser must carry its page's Origin."""
    why = refusal(listen, host, origin, path)
    assert (why is not None) is refused, why


@pytest.mark.parametrize(
    ("text", "open_to_network", "expected"),
    [
        ("127.0.0.1:8000", False, Listen("127.0.0.1", 8000)),
        ("localhost:8000", False, Listen("localhost", 8000)),
        ("[::1]:8000", False, Listen("::1", 8000)),
        ("8000", False, Listen("127.0.0.1", 8000)),
        ("0.0.0.0:8000", False, "reachable from other machines"),
        ("192.168.1.5:8000", False, "reachable from other machines"),
        ("[::]:8000", False, "reachable from other machines"),
        ("0.0.0.0:8000", True, Listen("0.0.0.0", 8000)),
        ("127.0.0.1:http", False, "port from 1 to 65535"),
        ("127.0.0.1:70000", False, "port from 1 to 65535"),
    ],
)
def test_listen_is_loopback_unless_asked(text: str, open_to_network: bool, expected: Listen | str) -> None:
    """--listen takes HOST:PORT and refuses an address other machines reach unless asked."""
    if isinstance(expected, Listen):
        assert parse_listen(text, open_to_network=open_to_network) == expected
    else:
        with pytest.raises(TuiError, match=expected):
            parse_listen(text, open_to_network=open_to_network)


def test_a_network_listen_is_refused_in_one_line(tmp_path: Path) -> None:
    """`browse --web --listen 0.0.0.0:PORT` stops before serving, saying why in one line."""
    env = sample_home(tmp_path)
    argv = [sys.executable, "-m", "flightlog", "browse", "--web", "--listen", f"0.0.0.0:{free_port()}"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0
    assert "reachable from other machines" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def upgrade(port: int, host: str, origin: str | None, cookie: str | None = None) -> bytes:
    """Ask for the browser's websocket as a web browser would, with `host`, `origin` and `cookie`;
    the answer's status line and head."""
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [
        "GET /ws?width=80&height=24 HTTP/1.1",
        f"Host: {host}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}",
        "Sec-WebSocket-Version: 13",
        *([f"Origin: {origin}"] if origin else []),
        *([f"Cookie: {cookie}"] if cookie else []),
    ]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
    return answer


@pytest.mark.parametrize(
    ("path", "presented", "refused"),
    [
        ("/", KEY, False),
        ("/ws", KEY, False),
        ("/download/abc", KEY, False),
        ("/", None, True),
        ("/ws", None, True),
        ("/ws", "guess", True),
        ("/download/abc", "", True),
        ("/static/js/textual.js", None, False),  # textual-serve's own script, the same for everyone
    ],
)
def test_key_is_needed_but_for_static_files(path: str, presented: str | None, refused: bool) -> None:
    """Loopback is every local user's: the page, its websocket and downloads need the printed key."""
    assert (key_refusal(path, presented, KEY) is not None) is refused


def test_hostile_pages_cannot_drive_the_browser(tmp_path: Path) -> None:
    """The attack: a page on another site opens the browser's websocket (cross-site, even holding
    the key's cookie), a DNS-rebinding page opens it under its own host name, another local user
    opens it without the key; each gets 403 and no browser starts. The server's own page, opened
    with the printed URL, gets its websocket (101), so the guard refuses only what it must."""
    port = free_port()
    with web_server(sample_home(tmp_path), port) as url:
        own = f"127.0.0.1:{port}"
        page = httpx.get(url, timeout=30)
        cookie = "; ".join(f"{k}={v}" for k, v in page.cookies.items())
        assert page.status_code == 200 and cookie
        cross_site = upgrade(port, own, "http://evil.example", cookie)
        rebinding = upgrade(port, f"evil.example:{port}", f"http://evil.example:{port}")
        no_origin = upgrade(port, own, None, cookie)
        no_key = upgrade(port, own, f"http://{own}")
        keyless_page = httpx.get(url.split("?")[0], timeout=30)
        opened = upgrade(port, own, f"http://{own}", cookie)
    for answer in (cross_site, rebinding, no_origin, no_key):
        assert answer.startswith(b"HTTP/1.1 403"), answer
        assert b"refused" in answer
    assert keyless_page.status_code == 403 and "no key" in keyless_page.text
    assert opened.startswith(b"HTTP/1.1 101"), opened


@pytest.mark.skipif(not CHROMIUM.exists(), reason="chromium is not installed (CI installs it: .ci/run)")
def test_chromium_shows_the_browser(tmp_path: Path) -> None:
    """Opened in headless Chromium, the page draws the browser: a recorded exchange's host is on its
    screen, and the screenshot is a screen of text (many pixels away from the page's background,
    unlike a blank page's)."""
    from playwright.sync_api import sync_playwright

    port = free_port()
    with web_server(sample_home(tmp_path), port) as url, sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking"],
        )
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 700})
            page.set_content("<body style='background:#0c181f'></body>")
            blank = page.screenshot()
            page.add_init_script(XTERM_HOOK)
            page.goto(url)
            page.wait_for_function(f"() => ({XTERM_TEXT})().includes('api.anthropic.com')", timeout=45_000)
            text = page.evaluate(XTERM_TEXT)
            page.wait_for_timeout(500)  # the canvas draws on the next animation frame
            shot = page.screenshot()
        finally:
            browser.close()
    assert "api.anthropic.com/v1/messages" in text
    assert "5 exchanges shown" in text
    assert lit(shot) > 10 * max(lit(blank), 100)


def lit(png: bytes) -> int:
    """How many pixels are bright (text and highlights), whatever the page's background."""
    _, _, pixels = png_pixels(png)
    return sum(1 for r, g, b in pixels if r + g + b > 300)


@pytest.mark.parametrize(
    "words",
    [[], ["errors", "today"], ["$(touch pwned)", "; rm -rf /", "`id`", "it's", "--web"]],
)
def test_page_command_passes_words_as_words(words: list[str]) -> None:
    """The shell command each page runs gives the question's words to `browse` as words, whatever
    they hold (a shell never reads them as commands or options), and never starts another server."""
    argv = shlex.split(web_command(words, 2.0))
    assert argv[:4] == [sys.executable, "-m", "flightlog", "browse"]
    assert "--web" not in argv[: argv.index("--")]
    assert argv[argv.index("--") + 1 :] == words


def test_a_taken_port_is_one_line(tmp_path: Path) -> None:
    """A port another program holds: one line naming it, no traceback; --listen without --web too."""
    env = sample_home(tmp_path)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        argv = [sys.executable, "-m", "flightlog", "browse", "--web", "--listen", f"127.0.0.1:{port}"]
        taken = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert taken.returncode != 0
    assert f"cannot listen on 127.0.0.1:{port}" in taken.stderr and "Traceback" not in taken.stderr
    argv = [sys.executable, "-m", "flightlog", "browse", "--listen", "127.0.0.1:1"]
    alone = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert alone.returncode != 0 and "go with --web" in alone.stderr


def test_a_page_opened_from_the_network_points_at_this_machine() -> None:
    """Listening on an address meaning any, the page's websocket goes to this machine's name (a
    browser elsewhere cannot reach 0.0.0.0); on a named address, to that address."""
    assert OPEN.public_netloc == f"{socket.gethostname()}:8765"
    assert Listen("::", 8765).public_netloc == f"{socket.gethostname()}:8765"
    assert HERE.public_netloc == "127.0.0.1:8765"
    assert Listen("::1", 8765).public_netloc == "[::1]:8765"
