"""A local SSH server for the `ssh` form's tests, run without privileges (no system sshd here).

asyncssh's server on a free loopback port, with a fresh host key, accepting one fresh client key. A
session's command runs as `sh -c COMMAND` (what sshd does with the user's shell), stdin, stdout and
stderr relayed, in the environment given as the machine's own (PATH with `flightlog` on it,
FLIGHTLOG_HOME, ...): the "remote" machine is this one, set up as flightlog's machine would be.

The real OpenSSH client reaches it: `ssh_config` names the port, the key and a known_hosts file
holding the host key, and `client_path` is a folder whose `ssh` runs the system client with that
configuration, so a form's `ssh HOST ...` line runs unchanged with that folder first on PATH.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncssh


@dataclass(frozen=True)
class SshServer:
    """Where the server listens and how a client is set up to reach it."""

    port: int
    config: Path
    client_path: Path
    commands: list[str]
    """Every command a session ran, in order."""


def _runner(env: Mapping[str, str], commands: list[str]) -> object:
    async def run(process: asyncssh.SSHServerProcess[bytes]) -> None:
        command = process.command or ""
        commands.append(command)
        child = await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env),
        )
        given = await process.stdin.read()  # all of it: the client sends EOF when its input ends
        out, err = await child.communicate(given)
        process.stdout.write(out)
        process.stderr.write(err)
        process.exit(child.returncode or 0)

    return run


@contextmanager
def ssh_server(folder: Path, env: Mapping[str, str]) -> Iterator[SshServer]:
    """The server, running in its own thread and event loop until the block ends."""
    ssh = shutil.which("ssh")
    assert ssh, "the OpenSSH client (ssh) is needed for the SSH form"
    folder.mkdir(parents=True, exist_ok=True)
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    identity = folder / "id_ed25519"
    client_key.write_private_key(str(identity))
    identity.chmod(0o600)
    commands: list[str] = []
    loop = asyncio.new_event_loop()
    started: list[asyncssh.SSHAcceptor] = []

    async def start() -> asyncssh.SSHAcceptor:
        return await asyncssh.create_server(
            asyncssh.SSHServer,
            "127.0.0.1",
            0,
            server_host_keys=[host_key],
            authorized_client_keys=asyncssh.import_authorized_keys(client_key.export_public_key().decode()),
            process_factory=_runner(env, commands),
            encoding=None,
        )

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    started.append(asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=30))
    port = started[0].sockets[0].getsockname()[1]
    known = folder / "known_hosts"
    known.write_text(f"[127.0.0.1]:{port} {host_key.export_public_key().decode().strip()}\n")
    config = folder / "ssh_config"
    config.write_text(
        "Host *\n"
        "  HostName 127.0.0.1\n"
        f"  Port {port}\n"
        f"  User {os.environ.get('USER') or 'flightlog'}\n"
        f"  IdentityFile {identity}\n"
        "  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {known}\n"
        "  StrictHostKeyChecking yes\n"
        "  BatchMode yes\n"
        "  LogLevel ERROR\n"
    )
    client_path = folder / "bin"
    client_path.mkdir(exist_ok=True)
    wrapper = client_path / "ssh"
    wrapper.write_text(f'#!/bin/sh\nexec {ssh} -F {config} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    try:
        yield SshServer(port, config, client_path, commands)
    finally:
        started[0].close()
        asyncio.run_coroutine_threadsafe(started[0].wait_closed(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
