"""PostgreSQL as a test drives it from outside flightlog: ending a server backend, as a restart would."""

from __future__ import annotations

import time

import psycopg


def end_backend(url: str, pid: int) -> None:
    """Terminate the server backend `pid` (from an admin connection to `url`, a libpq or SQLAlchemy
    psycopg URL) and wait until the server no longer lists it."""
    conninfo = url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(conninfo, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        for _ in range(100):
            if not admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
                return
            time.sleep(0.02)
