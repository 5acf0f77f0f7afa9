"""Optional parts of flightlog: installed with an extra, imported on first use, named when missing.

`make run` installs only what running the proxy needs. A few features pull in large libraries that the
proxy never loads: the browser as a web page (textual-serve and aiohttp), S3 as the blob or witness
store (boto3), OTLP export (opentelemetry-proto and protobuf). Each is an extra of the package
(`pip install -e '.[web]'`), part of the dev extra that `make test` installs; used without it, the
feature stops with one line that says which extra to install and how, instead of a traceback.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Final

from formats.errors import FlightlogError


@dataclass(frozen=True)
class Extra:
    name: str
    feature: str
    """What it is for, as the user asked for it."""
    packages: str
    """The distributions it installs, for the message."""


EXTRAS: Final = {
    "web": Extra("web", "the browser as a web page (`flightlog browse --web`)", "textual-serve"),
    "s3": Extra("s3", "S3 as the blob or witness store", "boto3"),
    "otlp": Extra("otlp", "OTLP export (`--otlp`, `ledger export --format otlp`)", "opentelemetry-proto"),
}


class MissingExtra(FlightlogError):
    """A feature whose extra is not installed."""


def install_hint(extra: str) -> str:
    """How to install `extra`: in a checkout's .venv (what `make run` built) or from the package."""
    return f".venv/bin/pip install -e '.[{extra}]' in the checkout, or pip install 'flightlog[{extra}]'"


def missing_message(extra: str, module: str) -> str:
    """The one line said when `module`, part of `extra`, cannot be imported."""
    known = EXTRAS[extra]
    return (
        f"{known.feature} needs the `{extra}` extra ({known.packages}; `{module}` is not installed): "
        f"{install_hint(extra)}"
    )


def require(module: str, extra: str) -> ModuleType:
    """`module`, imported; `MissingExtra` naming `extra` when it is not installed (only a missing
    module of the extra itself: a broken install's other import errors keep their traceback)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        top = (e.name or "").split(".")[0]
        if top and module.split(".")[0] != top and top not in _PARTS.get(extra, ()):
            raise
        raise MissingExtra(missing_message(extra, module)) from None


_PARTS: Final = {
    "web": ("textual_serve", "aiohttp", "aiohttp_jinja2", "yarl", "multidict"),
    "s3": ("boto3", "botocore", "s3transfer", "jmespath"),
    "otlp": ("opentelemetry", "google"),
}
"""Top-level modules an extra brings: a missing one of these means the extra is missing."""
