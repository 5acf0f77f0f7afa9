"""The canonical call from Python through flightlog's own library: an SDK method and a function call.

- `sdk`: `flightlog.client.Flightlog`, a small client of the door (`POST /api/dispatch` through the
  proxy): `client.tools.NAME(**args)`, or `client.call(NAME, args)` when the name or an argument is
  not a Python identifier. It sends the canonical JSON, as the other HTTP forms do.
- `function`: `flightlog.call(NAME, args)`, the door run in this process, as `flightlog call` runs
  it (recorded in the Ledger, door `cli`): for code running on the machine flightlog runs on.

Both read FLIGHTLOG_TOKEN when no token is lent; a lent one is passed as `token=`.
"""

from __future__ import annotations

import keyword
from collections.abc import Mapping
from typing import Any


def _identifier(word: str) -> bool:
    return word.isidentifier() and not keyword.iskeyword(word)


def sdk_snippet(name: str, args: Mapping[str, Any], proxy: str, base: str, token: str | None) -> str:
    """The client from `flightlog.client`, through `proxy`, calling the row as a method."""
    options = [f"proxy={proxy!r}"]
    if base.rstrip("/") != "http://flightlog.local":
        options.append(f"base={base!r}")
    if token:
        options.append(f"token={token!r}")
    if _identifier(name) and all(isinstance(k, str) and _identifier(k) for k in args):
        call = f"client.tools.{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})"
    else:
        call = f"client.call({name!r}, {dict(args)!r})"
    return (
        "import json\n"
        "\n"
        "from flightlog.client import Flightlog\n"
        "\n"
        f"client = Flightlog({', '.join(options)})\n"
        f"reply = {call}\n"
        "print(json.dumps(reply))\n"
    )


def function_snippet(name: str, args: Mapping[str, Any], token: str | None) -> str:
    """`flightlog.call`, the door in this process (FLIGHTLOG_HOME says which Directory and Ledger)."""
    given = f", token={token!r}" if token else ""
    return (
        "import json\n"
        "\n"
        "import flightlog\n"
        "\n"
        f"reply = flightlog.call({name!r}, {dict(args)!r}{given})\n"
        "print(json.dumps(reply))\n"
    )
