"""flightlog's Datasette plugin: `datasette ~/.flightlog/ledger.db` shows heads and bodies as text.

Registered through the `datasette` entry point (installed with `pip install 'flightlog[datasette]'`).
Each connection gets `storage.sql_functions` (decompressing and verifying payloads, read from the blob
folder beside the database or the one FLIGHTLOG_BLOBS names); the `events` table shows its `head`
column as text; a canned query `readable_events` lists every event with its head and body (bodies capped for
display, `storage.sql_functions.readable_events_shown`).
"""

from __future__ import annotations

import html
import sqlite3
from pathlib import Path
from typing import Any

from datasette import hookimpl
from markupsafe import Markup

from storage.blobstore import BlobStore, open_blob_store
from storage.configuration import environment
from storage.sql_functions import SHOWN_MAX, readable_events_shown, register


def _is_ledger(datasette: Any, database: str) -> bool:
    db = datasette.databases.get(database)
    return db is not None and db.path is not None and _has_events(Path(db.path))


def _has_events(path: Path) -> bool:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            return conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'events'").fetchone() is not None
    except sqlite3.Error:
        return False


def blob_store_for(database_path: Path) -> BlobStore:
    """FLIGHTLOG_BLOBS when it names a folder, else the `blobs` folder beside the database (the
    embedded default: FLIGHTLOG_HOME/ledger.db and FLIGHTLOG_HOME/blobs)."""
    url = environment("blobs")
    return open_blob_store(url if url.startswith("file:") else (database_path.parent / "blobs").as_uri())


@hookimpl
def prepare_connection(conn: sqlite3.Connection, database: str, datasette: Any) -> None:
    db = datasette.databases.get(database)
    path = Path(db.path) if db is not None and db.path else None
    register(conn, blob_store_for(path) if path else None)


@hookimpl
def canned_queries(datasette: Any, database: str) -> dict[str, Any] | None:
    if not _is_ledger(datasette, database):
        return None
    return {
        "readable_events": {
            "sql": readable_events_shown().strip(),
            "title": "Events with their heads and bodies as text",
            "description": "Payloads decompressed and checked against their SHA-256; binary bodies empty; "
            f"bodies over {SHOWN_MAX // 1024 // 1024} MiB not read here (the row says where to read them).",
        }
    }


@hookimpl
def render_cell(value: Any, column: str, table: str | None, database: str, datasette: Any) -> Markup | None:
    if table == "events" and column == "head" and isinstance(value, bytes):
        return Markup(f"<pre>{html.escape(value.decode('latin-1'))}</pre>")
    return None
