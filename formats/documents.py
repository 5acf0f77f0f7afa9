"""JSON documents inside recorded bodies, parsed without raising: what is not JSON is None.

Recorded bytes come from anyone; a reader of their meaning asks "is this the document I know?", and
junk answers no rather than failing the reader.
"""

from __future__ import annotations

import json
from typing import Any


def parse(data: bytes | str | None) -> Any:
    """The JSON value of `data`, or None when it is empty or not JSON."""
    if not data:
        return None
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None


def parse_object(data: bytes | str | None) -> dict[str, Any]:
    """The JSON object of `data`; an empty dict for anything else (an array, a number, junk)."""
    value = parse(data)
    return value if isinstance(value, dict) else {}
