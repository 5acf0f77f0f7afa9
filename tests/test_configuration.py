"""Each setting declared once (`storage.configuration`), and what is derived from it says the same.

A real mitmproxy master loads the real addons: the options they declare carry the table's default and
help; `flightlog proxy`'s flags and `ProxyConfig` default to the table's values; the environment is
read through the table's variable and nothing else.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from mitmproxy.test import taddons

from addons.capture import Capture
from addons.local_routes import LocalRoutes
from addons.proxy_config import ProxyConfig
from flightlog.commands.proxy import proxy
from storage.configuration import SETTINGS, default, environment, setting

DECLARED = [s for s in SETTINGS if s.option]
"""The settings the capture addon declares as mitmproxy options."""


@pytest.mark.parametrize("name", [s.name for s in DECLARED])
def test_mitmproxy_holds_each_option_with_the_tables_default_and_help(name: str) -> None:
    """Loaded into a real master, capture declares `flightlog_NAME` with the table's default and help."""
    addon = Capture()
    with taddons.context(addon) as tctx:
        option = tctx.options._options[setting(name).option_name]
        assert option.default == setting(name).default
        assert option.help == setting(name).help


def test_the_local_routes_directory_option_is_the_tables() -> None:
    """`flightlog_directory`, declared by the local routes' addon, has the table's default and help."""
    addon = LocalRoutes()
    with taddons.context(addon) as tctx:
        option = tctx.options._options["flightlog_directory"]
        assert (option.default, option.help) == (default("directory"), setting("directory").help)


FLAGS = ["stream_grace", "max_request_body"]
"""`flightlog proxy`'s flags that default to a setting."""


@pytest.mark.parametrize("name", FLAGS)
def test_flightlog_proxy_flags_default_to_the_table(name: str) -> None:
    """The CLI flag's default is the setting's default (written nowhere else)."""
    assert inspect.signature(proxy).parameters[name].default == default(name)


@pytest.mark.parametrize("name", ["stream_grace", "max_request_body", "redact_auth_headers"])
def test_proxy_config_defaults_to_the_table(name: str, tmp_path: Path) -> None:
    """What `flightlog proxy` passes to mitmproxy defaults to the setting's default."""
    config = ProxyConfig(home=tmp_path, ledger_url="sqlite://", blobs_url=tmp_path.as_uri())
    assert getattr(config, name) == default(name)


@pytest.mark.parametrize("name", [s.name for s in SETTINGS if s.env])
def test_the_environment_is_read_through_the_settings_variable(name: str) -> None:
    """A setting's variable is what `environment` reads; unset, it says nothing; another variable is
    not read for it."""
    variable = setting(name).env
    assert environment(name, {variable: "given"}) == "given"
    assert environment(name, {}) == ""
    assert environment(name, {"FLIGHTLOG_OTHER": "x"}) == ""


def test_a_list_default_is_a_copy() -> None:
    """A caller changing a list default it was given leaves the table's alone."""
    hosts = default("outbound_hosts")
    hosts.append("example.invalid")
    assert "example.invalid" not in default("outbound_hosts")
