"""`flightlog proxy`, `run` and `env`: the recording proxy and the variables that route through it.

`run` and `env` find the proxy running for FLIGHTLOG_HOME from the state file it writes
(`addons.proxy_env`); `run` starts one for its command's lifetime when none is running.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from addons.ai_listeners import AiListener, parse_upstreams, plan, wanted
from addons.listening import HeldPorts
from addons.proxy_env import proxy_env
from flightlog import ports, proxy_lock, proxy_process, upstream_trust
from flightlog.commands.options import NONE_GIVEN, SHELL_TOKEN_ENV, BlobsOpt, Given, LedgerOpt, parse_listen
from flightlog.commands.otlp_options import OtlpContentOpt, OtlpEndpointOpt
from flightlog.commands.replay_options import ReplayOpt, run_with_replay, with_replay_options
from flightlog.commands.sealing import (
    PolicyOpt,
    ReadDenyOpt,
    ReadOpt,
    SealedOpt,
    SocketOpt,
    StateFileOpt,
    WriteOpt,
    policy_path,
    run_sealed,
    sandbox_paths,
)
from flightlog.commands.shell import DEFAULT_LISTEN, lent_token
from flightlog.cores import usable_cores
from flightlog.errors import CommandError
from flightlog.lending import lend_table, parse_lend, registered
from flightlog.lending import plan as plan_lending
from flightlog.settings import load_settings
from formats.extras import require
from recording.identity import Identity
from storage.configuration import default, environment

MODES = ("regular", "reverse:", "upstream:", "transparent", "socks5", "wireguard", "tun")


def proxy_modes(modes: list[str] | None) -> tuple[str, ...]:
    """The forward listener plus any reverse ones (`--mode` adds; `regular...` replaces the default)."""
    given = [m for m in modes or [] if m]
    for mode in given:
        if not mode.startswith(MODES):
            raise CommandError(f"--mode {mode!r}: use regular or reverse:URL[@PORT]")
    if any(m.startswith("regular") for m in given):
        return tuple(given)
    return ("regular", *given)


def parse_sets(values: list[str] | None) -> tuple[str, ...]:
    """`--set NAME=VALUE` pairs for mitmproxy options (e.g. ssl_verify_upstream_trusted_ca)."""
    for item in values or []:
        name, sep, _ = item.partition("=")
        if not sep or not name:
            raise CommandError(f"--set wants NAME=VALUE, not {item!r}")
    return tuple(values or ())


SecretsOpt = Annotated[
    str | None,
    typer.Option(
        help="File of NAME=value secrets to redact and to bind in calls "
        "(default: FLIGHTLOG_HOME/secrets.env, as for `flightlog call`)."
    ),
]
SecretEnvOpt = Annotated[
    list[str] | None, typer.Option(help="Environment variable whose value is a secret; repeatable.")
]
ModeOpt = Annotated[
    list[str] | None,
    typer.Option(
        help="reverse:URL[@PORT] adds a reverse listener (@0: a free port); one for api.openai.com or "
        "api.anthropic.com replaces that default model API listener. Repeatable."
    ),
]
SetOpt = Annotated[
    list[str] | None, typer.Option("--set", help="NAME=VALUE of a mitmproxy option; repeatable.")
]
NoAiOpt = Annotated[
    bool,
    typer.Option(
        "--no-ai-listeners",
        help="Open no reverse listeners for the model APIs (by default: OpenAI on the --listen port + 1, "
        "Anthropic on + 2, fed to OPENAI_BASE_URL / ANTHROPIC_BASE_URL by run and env).",
    ),
]
AiUpstreamOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--ai-upstream",
        help="NAME=URL: the model API listener NAME (openai, anthropic) forwards to URL instead of the "
        "public API (a gateway, a local server); its traffic stays outbound. Repeatable.",
    ),
]
LendOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--lend",
        help="VARIABLE[=SECRET]: COMMAND gets a placeholder for the secret in VARIABLE, swapped for the "
        "real value by the proxy on requests to the secret's hosts only. Repeatable; the providers' "
        "usual variables (OPENAI_API_KEY, GH_TOKEN, ...) are lent by default for the keys held.",
    ),
]
UpstreamCaOpt = Annotated[
    Path | None,
    typer.Option(
        "--upstream-ca",
        help="PEM file of the CA that signs a private upstream's certificate (also trusted: the "
        "machine's trust store, then the bundled list).",
    ),
]


def upstream_ca_file(upstream_ca: Path | None) -> Path | None:
    """`--upstream-ca FILE`, resolved; a missing file is one clear error."""
    if upstream_ca is None:
        return None
    path = upstream_ca.expanduser()
    if not path.is_file():
        raise CommandError(f"--upstream-ca {upstream_ca}: no such file")
    return path.resolve()


def plan_listeners(
    listen: str, mode: list[str] | None, no_ai: bool, ai_upstream: list[str] | None
) -> tuple[str, int, tuple[str, ...], tuple[AiListener, ...], HeldPorts]:
    """Host, forward port, the given modes and the model APIs' listeners, every port concrete and
    held until the proxy listens on it (`flightlog.ports`); a bad value or a taken port is one clear
    error before mitmproxy starts."""
    host, port = parse_listen(listen)
    modes = proxy_modes(mode)
    try:
        upstreams = parse_upstreams(ai_upstream or ())
    except ValueError as e:
        raise CommandError(str(e)) from e
    apis = () if no_ai else wanted(modes)
    zeros = sum(1 for m in modes if m.endswith("@0"))
    planned = ports.plan_ports(host, port, [a.name for a in apis], zeros)
    return (
        host,
        planned.forward,
        ports.concrete_modes(modes, planned.extra),
        plan(apis, planned.named, upstreams),
        planned.held,
    )


def proxy(
    listen: Annotated[
        str,
        typer.Option(
            help="HOST:PORT of the forward proxy. The model APIs' reverse listeners take the next ports "
            "(OpenAI PORT+1, Anthropic PORT+2; a taken one is an error); port 0: free ports for all."
        ),
    ] = DEFAULT_LISTEN,
    mode: ModeOpt = None,
    no_ai_listeners: NoAiOpt = False,
    ai_upstream: AiUpstreamOpt = None,
    ledger: LedgerOpt = None,
    blobs: BlobsOpt = None,
    secrets: SecretsOpt = None,
    secret_env: SecretEnvOpt = None,
    sync_path: Annotated[
        list[str] | None,
        typer.Option(help="Path glob of inbound requests committed before forwarding; repeatable."),
    ] = None,
    stream_grace: Annotated[
        int, typer.Option(help="Seconds to keep reading a stream after its client left.")
    ] = default("stream_grace"),
    max_request_body: Annotated[
        str, typer.Option(help="Larger request bodies are streamed through unread (recorded missing).")
    ] = default("max_request_body"),
    no_redact_auth_headers: Annotated[
        bool, typer.Option("--no-redact-auth-headers", help="Keep Authorization/Cookie/... values.")
    ] = False,
    collector: Annotated[str, typer.Option(help="This proxy's collector id in the Ledger.")] = "",
    set_: SetOpt = None,
    upstream_ca: UpstreamCaOpt = None,
    open_mode: Annotated[
        bool,
        typer.Option(
            "--open",
            help="Local development only: calls through flightlog.local/api/dispatch need no token "
            "(the start line says so). Ledger reads and Directory writes still need one.",
        ),
    ] = False,
    allow_local_commands: Annotated[
        bool,
        typer.Option(
            "--allow-local-commands",
            help="Let the door run rows whose contract runs a command here "
            "(only with a token naming the tool).",
        ),
    ] = False,
    policy: PolicyOpt = None,
    state_file: StateFileOpt = "proxy.json",
    workers: Annotated[
        int | None,
        typer.Option(
            help="Proxy processes sharing the listeners, each on its own core (default: the "
            "cores this process may use on Linux, its CPU affinity bounded by its cgroup's CPU "
            "quota, else 1; 1: one process). When they and their writers "
            "outnumber the cores, each writer commits every 100 ms, not 50 (--set "
            "flightlog_commit_ms=N chooses).",
            show_default=False,
        ),
    ] = None,
    otlp_endpoint: OtlpEndpointOpt = None,
    otlp_content: OtlpContentOpt = False,
) -> None:
    """Run the recording proxy (mitmproxy with flightlog's addons) until Ctrl-C / SIGTERM.

    Listens on --listen (the forward proxy) and, unless --no-ai-listeners, on the next two ports as
    reverse listeners for OpenAI and Anthropic; every port is fixed before mitmproxy starts and
    published in FLIGHTLOG_HOME/proxy.json, which `run` and `env` read. One proxy per
    FLIGHTLOG_HOME: a second one is refused, naming the first (FLIGHTLOG_HOME/proxy.lock)."""
    # deferred: mitmproxy/httpx load slowly; other commands start without them
    from addons.capture_options import commit_ms
    from addons.master import ProxyConfig, run_proxy
    from addons.workers import supervise
    from readback.otlp_live import streaming

    if otlp_content and otlp_endpoint is None:
        raise CommandError("--otlp-content goes with --otlp-endpoint URL")
    if otlp_endpoint is not None:  # the stream's child would fail on its first span: say it now
        require("opentelemetry.proto.collector.trace.v1.trace_service_pb2", "otlp")
    cores = usable_cores()
    count = worker_count(workers, cores)
    settings = load_settings()
    proxy_lock.take(settings.home, listen, state_file)  # one proxy per home, held until this one exits
    host, port, modes, ai, held = plan_listeners(listen, mode, no_ai_listeners, ai_upstream)
    try:
        sets = parse_sets(set_)
        config = ProxyConfig(
            home=settings.home,
            ledger_url=ledger or settings.ledger_url,
            blobs_url=blobs or settings.blobs_url,
            listen_host=host,
            listen_port=port,
            modes=modes,
            ai_listeners=ai,
            secrets=str(Path(secrets).expanduser()) if secrets else "",
            secret_env=tuple(secret_env or ()),
            sync_paths=tuple(sync_path or ()),
            stream_grace=stream_grace,
            max_request_body=max_request_body,
            redact_auth_headers=not no_redact_auth_headers,
            collector=collector,
            stats_file=environment("stats_file"),
            commit_ms=commit_ms(count, cores),
            directory=str(settings.directory) if settings.directory else "",
            open_mode=open_mode,
            local_commands=allow_local_commands,
            extra=sets
            + upstream_trust.trust_sets(settings.home / "mitmproxy", sets, upstream_ca_file(upstream_ca)),
            policy=policy_path(policy),
            state_file=state_file,
        )
        with streaming(config.ledger_url, config.blobs_url, otlp_endpoint, otlp_content):
            run_proxy(config, held=held) if count == 1 else supervise(config, count, held=held)
    finally:
        held.close()  # whatever no listener took: a proxy that stops leaves nothing bound


def worker_count(given: int | None, cores: int) -> int:
    """`--workers N`, or when not given the `cores` this process may use (`flightlog.cores`) on
    Linux, whose SO_REUSEPORT spreads connections over the workers (macOS hands them all to one
    socket, so one process there)."""
    if given is None:
        return cores if sys.platform.startswith("linux") else 1
    if given < 1:
        raise CommandError(f"--workers wants 1 or more, not {given}")
    return given


@with_replay_options
def run(
    ctx: typer.Context,
    agent: Annotated[str | None, typer.Option(help="Agent name filed on every event.")] = None,
    session: Annotated[str | None, typer.Option(help="Session id.")] = None,
    task: Annotated[str | None, typer.Option(help="Task id.")] = None,
    turn: Annotated[str | None, typer.Option(help="Turn id.")] = None,
    replay: ReplayOpt = None,
    mode: ModeOpt = None,
    no_ai_listeners: NoAiOpt = False,
    ai_upstream: AiUpstreamOpt = None,
    secrets: SecretsOpt = None,
    secret_env: SecretEnvOpt = None,
    set_: SetOpt = None,
    upstream_ca: UpstreamCaOpt = None,
    policy: PolicyOpt = None,
    sealed: SealedOpt = False,
    write: WriteOpt = None,
    read: ReadOpt = None,
    read_deny: ReadDenyOpt = None,
    socket: SocketOpt = None,
    lend: LendOpt = None,
    replaying: Given = NONE_GIVEN,
) -> None:
    """Run COMMAND through the recording proxy: flightlog run [options] [--] COMMAND ... (run's
    options come before COMMAND; every word from COMMAND on is the command's).

    Uses the proxy already running for FLIGHTLOG_HOME (waiting for one still starting), or starts one
    for the command's lifetime on free ports with the proxy options given (--mode, --no-ai-listeners,
    --ai-upstream, --secrets, --secret-env, --set, --upstream-ca; a running proxy keeps its own, so
    giving them then is an error). The child gets HTTP(S)_PROXY, the CA variables, NODE_USE_ENV_PROXY=1
    and the base URLs (OPENAI_BASE_URL, ANTHROPIC_BASE_URL) of the proxy's model API listeners.
    The child gets a scoped token in FLIGHTLOG_TOKEN, minted from the policy in FLIGHTLOG_HOME
    (by default: call the rows that run nothing here). The exit code is COMMAND's. With --replay
    SELECTION, COMMAND runs against a hermetic serve-back of that recording instead, with the same
    variables (nothing goes live; a miss makes the exit code 3 if COMMAND's was 0).
    With --sealed, COMMAND runs in a sandbox whose only way out is a proxy started for it
    (`flightlog.sealed`); --write, --read, --read-deny and --socket name paths for its filesystem.
    COMMAND holds placeholders, never the secrets (`flightlog.lending`): for each --lend, the policy
    file's [lend] table and the providers' usual variables; the proxy swaps in the real value for the
    secret's hosts only.
    """
    command = list(ctx.args)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise CommandError("run needs a command: flightlog run -- COMMAND ...")
    found_or_exit(command[0])
    os.environ.pop(SHELL_TOKEN_ENV, None)  # the child is an agent: the token it is lent holds for it
    settings = load_settings()
    who = Identity(agent=agent, session=session, task=task, turn=turn)
    if replay is not None:
        raise typer.Exit(run_with_replay(command, replay, replaying, who, lent_token(task)))
    options = proxy_options(mode, secrets, secret_env, set_, upstream_ca, no_ai_listeners, ai_upstream)
    options += ["--policy", policy_path(policy)] if policy is not None else []
    named = lend_table(policy or settings.home / "egress.toml") | parse_lend(lend)
    secrets_file = Path(secrets).expanduser() if secrets else None
    lending, _ = plan_lending(secrets_file, secret_env, named, settings.home)
    if sealed:
        fs = sandbox_paths(settings.home, policy, write, read, read_deny, socket)
        raise typer.Exit(run_sealed(command, options, who, settings.home, lent_token(task), fs, lending))
    if write or read or read_deny or socket:
        raise CommandError("--write, --read, --read-deny and --socket shape --sealed's sandbox: add --sealed")
    state = proxy_process.running_or_starting(settings.home)
    started: subprocess.Popen[bytes] | None = None
    if state is not None and options:
        raise CommandError(
            f"a proxy is already running for {settings.home} (pid {state.pid}) with its own options: "
            f"stop it, or run without {options[0]}"
        )
    if state is None:
        # the command's own proxy, with a state file (and lock) of its own: it is not the home's
        # proxy, so runs started side by side each keep theirs, and a `flightlog proxy` started
        # meanwhile is the home's
        own = f"run-{os.getpid()}.json"
        started = proxy_process.spawn(proxy_process.child_env(), options=[*options, "--state-file", own])
        state = proxy_process.wait_for_state(settings.home, started, name=own)
    forward = state.forward
    if forward is None:
        raise CommandError("the running proxy has no forward (regular) listener")
    env = {**os.environ, **proxy_env((forward.host, forward.port), state.ca, who, state.reverse)}
    env.update(lent_token(task))
    try:
        with registered(lending, settings.home):
            code = subprocess.call(command, env=lending.child_env(env))
    except FileNotFoundError as e:  # gone between the check and the start
        raise CommandError(f"command not found: {command[0]}") from e
    finally:
        if started is not None:
            proxy_process.stop(started)
    raise typer.Exit(code)


def found_or_exit(name: str) -> None:
    """The command `run` is to start must resolve (on PATH, or a path to an executable) before
    anything starts for it: else one line and exit 127, as a shell says it."""
    if shutil.which(name) is None:
        typer.echo(f"flightlog: command not found: {name}", err=True)
        raise typer.Exit(127)


def proxy_options(
    mode: list[str] | None,
    secrets: str | None,
    secret_env: list[str] | None,
    set_: list[str] | None,
    upstream_ca: Path | None,
    no_ai: bool = False,
    ai_upstream: list[str] | None = None,
) -> list[str]:
    """The proxy options `run` was given, as `flightlog proxy` arguments (checked here, so a bad one is
    refused before any proxy starts)."""
    out: list[str] = ["--no-ai-listeners"] if no_ai else []
    try:
        for name, url in parse_upstreams(ai_upstream or ()).items():
            out += ["--ai-upstream", f"{name}={url}"]
    except ValueError as e:
        raise CommandError(str(e)) from e
    for given in (m for m in mode or [] if m):
        proxy_modes([given])
        out += ["--mode", given]
    if secrets:
        path = Path(secrets).expanduser()
        if not path.is_file():
            raise CommandError(f"--secrets {secrets}: no such file")
        out += ["--secrets", str(path.resolve())]
    for name in secret_env or []:
        out += ["--secret-env", name]
    for item in parse_sets(set_):
        out += ["--set", item]
    if (ca := upstream_ca_file(upstream_ca)) is not None:
        out += ["--upstream-ca", str(ca)]
    return out
