"""The supervisor's port plan for `--workers N`: every port concrete before a worker starts, held
against everyone but the workers (who join with SO_REUSEPORT), and each worker's own names."""

from __future__ import annotations

import errno
import socket
from pathlib import Path

import pytest

from addons.errors import AddonError
from addons.master import ProxyConfig
from addons.shared_ports import plan_ports, with_port
from addons.workers import config_from_json, config_to_json, worker_config


def _plain_bind_fails(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            return e.errno == errno.EADDRINUSE
        return False


def test_with_port_rewrites_only_the_port() -> None:
    """`@0` and `@HOST:0` get the chosen port; the host and the rest of the spec stay."""
    assert with_port("reverse:https://api.openai.com@0", 4321) == "reverse:https://api.openai.com@4321"
    assert with_port("reverse:http://x@127.0.0.1:0", 4321) == "reverse:http://x@127.0.0.1:4321"


def test_every_port_zero_is_chosen_once_and_held_for_the_workers() -> None:
    """A forward listener on port 0 and two reverse ones at `@0` get three distinct concrete ports;
    while the plan holds them a plain bind (anyone else, another flightlog included) is refused and a
    SO_REUSEPORT listener (a worker) is accepted; once closed, the ports are free again. proxy.json
    names each listener as given."""
    modes = ["regular", "reverse:http://a.example@0", "reverse:http://b.example@0"]
    plan = plan_ports(modes, "127.0.0.1", 0)
    try:
        assert plan.modes[0] == "regular" and plan.listen_port > 0
        ports = [plan.listen_port] + [int(spec.rsplit("@", 1)[1]) for spec in plan.modes[1:]]
        assert len(set(ports)) == 3 and all(p > 0 for p in ports)
        assert [plan.as_given(spec) for spec in plan.modes] == modes
        assert all(_plain_bind_fails(p) for p in ports)
        with socket.socket() as worker:
            worker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            worker.bind(("127.0.0.1", ports[1]))
            worker.listen()
    finally:
        plan.close()
    assert not any(_plain_bind_fails(p) for p in ports)


def test_a_port_in_use_or_an_unshareable_mode_is_one_line() -> None:
    """A taken port names itself; a mode workers cannot share (UDP only, or no port) says to use
    --workers 1; nothing stays held after either."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(AddonError, match=f"127.0.0.1:{port}"):
            plan_ports(["regular"], "127.0.0.1", port)
    for mode in ("wireguard", "local"):
        with pytest.raises(AddonError, match="--workers 1"):
            plan_ports(["regular", mode], "127.0.0.1", 0)


def test_each_worker_gets_the_plan_its_own_collector_and_counters(tmp_path: Path) -> None:
    """Worker 0 keeps a given collector id, worker 2 records as `ID#2`; each writes its own counters
    file; the configuration survives the trip to the worker unchanged."""
    config = ProxyConfig(
        home=tmp_path, ledger_url="sqlite:///x", blobs_url="file:///b", listen_port=0,
        modes=("regular", "reverse:http://a@0"), collector="edge", stats_file=str(tmp_path / "stats.json"),
        extra=("ssl_insecure=true",),
    )  # fmt: skip
    plan = plan_ports(config.modes, config.listen_host, config.listen_port)
    try:
        first, third = worker_config(config, plan, 0), worker_config(config, plan, 2)
    finally:
        plan.close()
    assert (first.collector, third.collector) == ("edge", "edge#2")
    assert Path(third.stats_file).name == "stats-2.json"
    assert third.modes == plan.modes and third.listen_port == plan.listen_port > 0
    assert config_from_json(config_to_json(third)) == third
    assert worker_config(ProxyConfig(tmp_path, "", ""), plan, 1).collector == ""


def test_a_workers_configuration_survives_its_socket_with_the_model_api_listeners() -> None:
    """The supervisor hands each worker its config as JSON: reading it back gives an equal config,
    the model API listeners as listeners (not dicts a worker cannot start from)."""
    from pathlib import Path

    from addons.ai_listeners import AiListener
    from addons.master import ProxyConfig
    from addons.workers import config_from_json, config_to_json

    config = ProxyConfig(
        home=Path("/tmp/home"),
        ledger_url="sqlite:///x.db",
        blobs_url="file:///tmp/blobs",
        modes=("regular", "reverse:http://127.0.0.1:9@7001"),
        ai_listeners=(AiListener("openai", "https://api.openai.com", 7002),),
        extra=("ssl_insecure=true",),
    )
    import json

    assert config_from_json(json.loads(json.dumps(config_to_json(config)))) == config
