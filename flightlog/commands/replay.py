"""`flightlog replay` and `flightlog serve-replay`: send what the Ledger kept again, or answer from it.

`replay` sends one recorded request again (filling its [NAME]s from the secrets given), records
the new exchange and diffs the answers. `serve-replay` selects exchanges the way every Ledger
question does (plain words and/or the shared filter options, `--action` narrowing to given
actions) and answers from them as a hermetic proxy.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from addons.proxy_env import read_state
from flightlog.commands.options import (
    NONE_GIVEN,
    ActionOpt,
    BlobsOpt,
    Given,
    JsonOpt,
    LedgerOpt,
    SecretEnvOpt,
    WordsArg,
    parse_listen,
    secrets_from,
    selection_from,
    with_filters,
)
from flightlog.errors import CommandError
from flightlog.settings import load_settings
from formats.terminal_text import shown_lines

if TYPE_CHECKING:
    from mitmproxy.master import Master

    # deferred: mitmproxy/httpx load slowly; other commands start without them
    from addons.serve_replay import ServeReplay

SecretsOpt = Annotated[
    Path | None, typer.Option("--secrets", help="NAME=value file whose values fill the recorded [NAME]s.")
]


def replay(
    action_id: str,
    to: Annotated[
        str | None, typer.Option("--to", help="Send to this scheme://host:port instead (path kept).")
    ] = None,
    secrets: SecretsOpt = None,
    secret_env: SecretEnvOpt = None,
    proxy: Annotated[str | None, typer.Option("--proxy", help="Send through this HTTP proxy.")] = None,
    via_proxy: Annotated[
        bool,
        typer.Option("--via-proxy", help="Send through the running flightlog proxy (it records it too)."),
    ] = False,
    ca: Annotated[
        Path | None, typer.Option("--ca", help="Trust this CA bundle for HTTPS (e.g. the proxy's CA).")
    ] = None,
    insecure: Annotated[bool, typer.Option("--insecure", help="Do not verify HTTPS certificates.")] = False,
    allow_unfilled: Annotated[
        bool, typer.Option("--allow-unfilled", help="Send [NAME]s the secrets file does not fill as is.")
    ] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for the answer.")] = 30.0,
    ledger: LedgerOpt = None,
    blobs: BlobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Send a recorded request again, record the new exchange, and diff the answers."""
    # deferred: mitmproxy/httpx load slowly; other commands start without them
    from readback.replay import replay as run_replay

    settings = load_settings()
    if via_proxy:
        proxy, trust = _running_proxy(settings.home)
        ca = ca or trust
    verify: bool | str = False if insecure else str(ca) if ca else True
    opened = settings.open_ledger(ledger, blobs)
    try:
        result = run_replay(
            opened,
            action_id,
            secrets_from(secrets, secret_env),
            to=to,
            proxy=proxy,
            verify=verify,
            allow_unfilled=allow_unfilled,
            timeout=timeout,
        )
    finally:
        opened.close()
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
        return
    typer.echo(shown_lines(result.render()))


@with_filters
def serve_replay(
    listen: Annotated[str, typer.Option("--listen", help="HOST:PORT to listen on.")] = "127.0.0.1:8081",
    mode: Annotated[
        list[str] | None,
        typer.Option("--mode", help="regular (default) or reverse:URL[@PORT]; repeatable."),
    ] = None,
    words: WordsArg = None,
    filters: Given = NONE_GIVEN,
    action: ActionOpt = None,
    secrets: Annotated[
        Path | None,
        typer.Option("--secrets", help="NAME=value file: live secret values match the recorded [NAME]s."),
    ] = None,
    secret_env: SecretEnvOpt = None,
    chunk_delay: Annotated[
        float, typer.Option("--chunk-delay", help="Seconds between the chunks of a streamed answer.")
    ] = 0.0,
    refuse_status: Annotated[
        int, typer.Option("--refuse-status", help="Status for requests with no recorded answer.")
    ] = 404,
    match: Annotated[
        str | None,
        typer.Option(
            "--match",
            help="Match by these strategies (exact, normalized, url; sequence), reported per request"
            " (default: exact bytes, then method and URL).",
        ),
    ] = None,
    ledger: LedgerOpt = None,
    blobs: BlobsOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the closing report as JSON.")] = False,
) -> None:
    """A hermetic proxy that answers from the Ledger and refuses everything else."""
    import asyncio

    from addons.serve_replay import (
        Matcher,
        ServeReplay,
        build_master,
        check_listen,
        check_modes,
        concealer,
    )

    # deferred: mitmproxy/httpx load slowly; other commands start without them
    from readback.match_book import Book
    from readback.matching import parse_strategies
    from readback.recorded import iter_exchanges, select_action_ids

    settings = load_settings()
    listen_host, listen_port = parse_listen(listen)
    modes = mode or ["regular"]
    check_modes(modes)
    check_listen(listen_host, listen_port)
    if not 400 <= refuse_status <= 599:
        raise CommandError(f"--refuse-status is an HTTP error status (400-599), not {refuse_status}")
    if not 0 <= chunk_delay <= 60:
        raise CommandError(f"--chunk-delay is between 0 and 60 seconds, not {chunk_delay}")
    opened = settings.open_ledger(ledger, blobs)
    selection = selection_from(words, action, filters, opened)
    exchanges = list(
        iter_exchanges(opened.engine, opened.events, select_action_ids(opened.engine, selection))
    )
    values = secrets_from(secrets, secret_env)
    matcher: Matcher | Book = Matcher(exchanges)
    if match is not None:
        matcher = Book(exchanges, opened.payload, parse_strategies(match))
    addon = ServeReplay(matcher, opened.payload, concealer(values) if values else None)

    def announce(where: str) -> None:
        print(
            f"serve-replay: listening on {where}, answering from {len(exchanges)} recorded exchanges"
            f" of {opened.url}; nothing is forwarded. HTTPS clients trust"
            f" {settings.confdir / 'mitmproxy-ca-cert.pem'}. Ctrl-C stops and reports.",
            file=sys.stderr,
            flush=True,
        )

    def master() -> Master:
        built = build_master(addon, listen_host, listen_port, str(settings.confdir), modes)
        built.options.update(serve_replay_refuse_status=refuse_status, serve_replay_chunk_delay=chunk_delay)
        return built

    try:
        asyncio.run(_serve(master, addon, listen, announce))
    finally:
        opened.close()
    report = addon.report or addon.matcher.finish()
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2))
    else:
        typer.echo(shown_lines(report.render()))


async def _serve(
    master: Callable[[], Master], addon: ServeReplay, listen: str, announce: Callable[[str], None]
) -> None:
    """Run the replay proxy until SIGINT/SIGTERM; a listener that cannot open is one error line."""
    import asyncio
    import signal

    from mitmproxy.exceptions import OptionsError

    try:
        running_master = master()
    except OptionsError as e:
        raise CommandError(str(e).splitlines()[0]) from e
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, running_master.shutdown)
    running = asyncio.create_task(running_master.run())
    ready = asyncio.create_task(asyncio.to_thread(addon.ready.wait, 30))
    await asyncio.wait({running, ready}, return_when=asyncio.FIRST_COMPLETED)
    if running.done() or not addon.listening:
        running_master.shutdown()
        await running
        raise CommandError(f"serve-replay could not listen on {listen}")
    announce(", ".join(f"{h}:{p}" for h, p in addon.listening))
    await running


def _running_proxy(home: Path) -> tuple[str, Path]:
    """The forward listener URL and CA of the flightlog proxy running for this FLIGHTLOG_HOME."""
    state = read_state(home)
    if state is None or state.forward is None:
        raise CommandError(
            f"no flightlog proxy with a forward listener is running for {home}; start `flightlog proxy`"
        )
    host = "127.0.0.1" if state.forward.host in ("", "0.0.0.0") else state.forward.host
    return f"http://{host}:{state.forward.port}", state.ca
