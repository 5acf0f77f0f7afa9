"""`flightlog replay`, `serve-replay` and `export`: use what the Ledger kept.

`serve-replay` and `export` select events the way every Ledger question does: a question in plain words
and/or the shared filter options (`--session`, `--host`, `--since`, `--status`, ...), read into one
`storage.queries.Filter`; `--action` narrows to given actions.
"""

from __future__ import annotations

import json
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any

import typer

from flightlog.commands.questions import (
    AgentOpt,
    DirectionOpt,
    HostOpt,
    KindOpt,
    MethodOpt,
    ModelOpt,
    SessionOpt,
    SinceOpt,
    StatusOpt,
    TaskOpt,
    ToolOpt,
    TurnOpt,
    UntilOpt,
    UrlOpt,
    WordsArg,
    filter_from_options,
)
from flightlog.errors import CommandError
from flightlog.settings import load_settings

if TYPE_CHECKING:
    from addons.readback.recorded import Selection

LedgerOpt = Annotated[str | None, typer.Option("--ledger", help="Ledger database URL (FLIGHTLOG_LEDGER).")]
BlobsOpt = Annotated[str | None, typer.Option("--blobs", help="Blob store URL (FLIGHTLOG_BLOBS).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]
SecretsOpt = Annotated[
    Path | None, typer.Option("--secrets", help="NAME=value file whose values fill the recorded [NAME]s.")
]
SecretEnvOpt = Annotated[
    list[str] | None,
    typer.Option("--secret-env", help="An environment variable holding a secret (repeatable)."),
]
ActionOpt = Annotated[list[str] | None, typer.Option("--action", help="Only this action (repeatable).")]


def _selection(words: list[str] | None, action: list[str] | None, **options: Any) -> Selection:
    """The shared filter from plain words and options (as `flightlog ledger query` reads them)."""
    from addons.readback.recorded import Selection

    flt, question = filter_from_options(words, **options)
    if question is not None:
        typer.echo(question.explain(), err=True)
    return Selection(flt, tuple(action or ()))


def _secrets(path: Path | None, env_names: list[str] | None) -> dict[str, str]:
    if path is None and not env_names:
        return {}
    from addons.recording.secrets import load_secrets

    return load_secrets(path, env_names or ())


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise CommandError(f"--listen takes HOST:PORT, not {value!r}")
    return host or "127.0.0.1", int(port)


def _running_proxy(home: Path) -> tuple[str, Path]:
    """The forward listener URL and CA of the flightlog proxy running for this FLIGHTLOG_HOME."""
    from addons.proxy_env import read_state

    state = read_state(home)
    if state is None or state.forward is None:
        raise CommandError(
            f"no flightlog proxy with a forward listener is running for {home}; start `flightlog proxy`"
        )
    host = "127.0.0.1" if state.forward.host in ("", "0.0.0.0") else state.forward.host
    return f"http://{host}:{state.forward.port}", state.ca


def register(app: typer.Typer) -> None:
    """Add the browse and replay commands to the root app."""

    @app.command()
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
        insecure: Annotated[
            bool, typer.Option("--insecure", help="Do not verify HTTPS certificates.")
        ] = False,
        allow_unfilled: Annotated[
            bool, typer.Option("--allow-unfilled", help="Send [NAME]s the secrets file does not fill as is.")
        ] = False,
        timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for the answer.")] = 30.0,
        ledger: LedgerOpt = None,
        blobs: BlobsOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Send a recorded request again, record the new exchange, and diff the answers."""
        from addons.readback.replay import replay as run_replay

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
                _secrets(secrets, secret_env),
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
        typer.echo(f"replayed {result.original} as {result.action_id}: {result.url}")
        typer.echo(result.diff.render())

    @app.command("serve-replay")
    def serve_replay(
        listen: Annotated[str, typer.Option("--listen", help="HOST:PORT to listen on.")] = "127.0.0.1:8081",
        mode: Annotated[
            list[str] | None,
            typer.Option("--mode", help="regular (default) or reverse:URL[@PORT]; repeatable."),
        ] = None,
        words: WordsArg = None,
        kind: KindOpt = None,
        direction: DirectionOpt = None,
        tool: ToolOpt = None,
        session: SessionOpt = None,
        task: TaskOpt = None,
        turn: TurnOpt = None,
        agent: AgentOpt = None,
        model: ModelOpt = None,
        status: StatusOpt = None,
        host: HostOpt = None,
        method: MethodOpt = None,
        since: SinceOpt = None,
        until: UntilOpt = None,
        url: UrlOpt = None,
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
        ledger: LedgerOpt = None,
        blobs: BlobsOpt = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print the closing report as JSON.")] = False,
    ) -> None:
        """A hermetic proxy that answers from the Ledger and refuses everything else."""
        import asyncio
        import signal

        from addons.readback.recorded import iter_exchanges, select_action_ids
        from addons.serve_replay import (
            Matcher,
            ServeReplay,
            build_master,
            check_listen,
            check_modes,
            concealer,
        )

        settings = load_settings()
        listen_host, listen_port = _listen(listen)
        modes = mode or ["regular"]
        check_modes(modes)
        check_listen(listen_host, listen_port)
        if not 400 <= refuse_status <= 599:
            raise CommandError(f"--refuse-status is an HTTP error status (400-599), not {refuse_status}")
        if not 0 <= chunk_delay <= 60:
            raise CommandError(f"--chunk-delay is between 0 and 60 seconds, not {chunk_delay}")
        opened = settings.open_ledger(ledger, blobs)
        selection = _selection(
            words,
            action,
            kind=kind,
            direction=direction,
            tool=tool,
            session=session,
            task=task,
            turn=turn,
            agent=agent,
            model=model,
            status=status,
            host=host,
            method=method,
            since=since,
            until=until,
            url=url,
        )
        exchanges = list(
            iter_exchanges(opened.engine, opened.events, select_action_ids(opened.engine, selection))
        )
        values = _secrets(secrets, secret_env)
        addon = ServeReplay(Matcher(exchanges), opened.payload, concealer(values) if values else None)

        async def serve() -> None:
            from mitmproxy.exceptions import OptionsError

            try:
                master = build_master(
                    addon, listen_host, listen_port, str(settings.confdir), mode or ["regular"]
                )
                master.options.update(
                    serve_replay_refuse_status=refuse_status, serve_replay_chunk_delay=chunk_delay
                )
            except OptionsError as e:
                raise CommandError(str(e).splitlines()[0]) from e
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, master.shutdown)
            running = asyncio.create_task(master.run())
            ready = asyncio.create_task(asyncio.to_thread(addon.ready.wait, 30))
            await asyncio.wait({running, ready}, return_when=asyncio.FIRST_COMPLETED)
            if running.done() or not addon.listening:
                master.shutdown()
                await running
                raise CommandError(f"serve-replay could not listen on {listen}")
            where = ", ".join(f"{h}:{p}" for h, p in addon.listening)
            print(
                f"serve-replay: listening on {where}, answering from {len(exchanges)} recorded exchanges"
                f" of {opened.url}; nothing is forwarded. HTTPS clients trust"
                f" {settings.confdir / 'mitmproxy-ca-cert.pem'}. Ctrl-C stops and reports.",
                file=sys.stderr,
                flush=True,
            )
            await running

        try:
            asyncio.run(serve())
        finally:
            opened.close()
        report = addon.report or addon.matcher.finish()
        if as_json:
            typer.echo(json.dumps(report.to_json(), indent=2))
        else:
            typer.echo(report.render())

    @app.command()
    def export(
        fmt: Annotated[str, typer.Option("--format", help="har, mitmproxy or jsonl.")],
        output: Annotated[
            Path | None, typer.Option("--output", "-o", help="File to write (default: standard output).")
        ] = None,
        words: WordsArg = None,
        kind: KindOpt = None,
        direction: DirectionOpt = None,
        tool: ToolOpt = None,
        session: SessionOpt = None,
        task: TaskOpt = None,
        turn: TurnOpt = None,
        agent: AgentOpt = None,
        model: ModelOpt = None,
        status: StatusOpt = None,
        host: HostOpt = None,
        method: MethodOpt = None,
        since: SinceOpt = None,
        until: UntilOpt = None,
        url: UrlOpt = None,
        action: ActionOpt = None,
        progress: Annotated[bool, typer.Option(help="Draw a progress bar on standard error.")] = True,
        ledger: LedgerOpt = None,
        blobs: BlobsOpt = None,
    ) -> None:
        """Export events as HAR, a mitmproxy flow file or JSON lines."""
        from rich.console import Console
        from rich.progress import Progress

        from addons.readback.export import export as run_export
        from addons.readback.export import plan

        opened = load_settings().open_ledger(ledger, blobs)
        with ExitStack() as stack:
            stack.callback(opened.close)
            selection = _selection(
                words,
                action,
                kind=kind,
                direction=direction,
                tool=tool,
                session=session,
                task=task,
                turn=turn,
                agent=agent,
                model=model,
                status=status,
                host=host,
                method=method,
                since=since,
                until=until,
                url=url,
            )
            ids = plan(opened, selection, fmt)
            out: IO[bytes]
            if output is None:
                if fmt == "mitmproxy" and sys.stdout.isatty():
                    raise CommandError("--format mitmproxy writes a binary flow file; give -o FILE")
                out = sys.stdout.buffer
            else:
                try:
                    out = stack.enter_context(output.open("wb"))
                except OSError as e:
                    raise CommandError(f"cannot write {output}: {e.strerror}") from e
            bar = stack.enter_context(Progress(console=Console(stderr=True), disable=not progress))
            what = "events" if fmt == "jsonl" else "exchanges"
            job = bar.add_task(f"export {fmt}", total=len(ids))
            count = run_export(opened, fmt, ids, out, lambda: bar.advance(job))
            out.flush()
        typer.echo(f"exported {count} {what} as {fmt}" + (f" to {output}" if output else ""), err=True)
