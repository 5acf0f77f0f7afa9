"""The `[sandbox]` table of the egress policy file: the sealed command's filesystem, by the operator.

```toml
[sandbox]
write = ["~/.cache/pip", "/srv/data"]     # writable, beside the working directory and /tmp
read = ["~/.config/gh"]                   # a credential place the command may read after all
read_deny = ["~/work/secrets"]            # more places absent
sockets = ["/run/postgresql/.s.PGSQL.5432"]   # host UNIX sockets bound in (all are absent otherwise)
```

Read on its own here (the egress rules are `egress.policy_file`'s, which only knows the table is
there): every key checked, a wrong one is one line naming the file. Relative paths are relative to the
file's folder, `~` is the operator's home.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Final

from flightlog.errors import CommandError
from flightlog.sandbox.filesystem import FsPolicy

KEYS: Final = ("write", "read", "read_deny", "sockets")


def read_table(path: Path) -> FsPolicy:
    """The `[sandbox]` table of the policy file at `path` (nothing when it has none, or no file)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return FsPolicy()
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise CommandError(f"{path}: cannot read the [sandbox] table: {e}") from e
    return parse_table(data.get("sandbox", {}), path)


def parse_table(table: Any, path: Path) -> FsPolicy:
    """An `FsPolicy` from a `[sandbox]` table read from `path`."""
    if not isinstance(table, dict):
        raise CommandError(f"{path}: sandbox is a table ([sandbox])")
    if extra := sorted(set(table) - set(KEYS)):
        raise CommandError(f"{path}: [sandbox]: unknown key {extra[0]!r} (known: {', '.join(KEYS)})")
    lists = {key: _paths(table.get(key, []), f"{path}: [sandbox] {key}", path.parent) for key in KEYS}
    return FsPolicy(**lists)


def _paths(value: Any, where: str, base: Path) -> tuple[Path, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise CommandError(f"{where}: a list of paths, not {value!r}")
    return tuple(base / Path(v).expanduser() for v in value)
