"""Create or migrate a Ledger's schema: opening a ledger always leaves it at the newest revision."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

from storage.engine import WRITE

MIGRATIONS = Path(__file__).parent / "migrations"
PG_LOCK = 0x666C6F67  # "flog": one migrator at a time per PostgreSQL database


def _config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def head_revision() -> str:
    """The newest schema revision this code knows."""
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    """The schema revision of the database, or None for a blank one."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def migrate(engine: Engine, target: str = "head") -> None:
    """Upgrade the database to `target` (the newest revision by default), under a lock."""
    if target == "head" and current_revision(engine) == head_revision():
        return
    cfg = _config()
    with engine.connect().execution_options(**WRITE) as conn, conn.begin():
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({PG_LOCK})")
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, target)
