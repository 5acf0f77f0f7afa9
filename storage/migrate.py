"""Create or migrate a Ledger's schema: opening a ledger always leaves it at the newest revision.

Opening an up-to-date database is the common case and must be cheap: `schema_is_current` reads
`alembic_version` and compares it with the newest migration file's name, so alembic (whose import
alone costs more than the rest of opening a ledger) is only loaded when there is work to do.
SQLAlchemy too is imported inside the functions: `newest_revision` serves the stdlib SQLite reads
of `storage.documents.reads`, which must not load it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.engine import Engine

MIGRATIONS = Path(__file__).parent / "migrations"
PG_LOCK = 0x666C6F67  # "flog": one migrator at a time per PostgreSQL database


def _config() -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def newest_revision() -> str:
    """The newest migration's revision id, from the versions folder (`NNNN_name.py` files)."""
    return max(p.name.split("_", 1)[0] for p in (MIGRATIONS / "versions").glob("[0-9]*_*.py"))


def head_revision() -> str:
    """The newest schema revision as alembic sees it (equal to `newest_revision()`)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    """The schema revision of the database, or None for a blank one."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def schema_is_current(engine: Engine) -> bool:
    """Whether the database is already at the newest migration (False when unsure)."""
    import sqlalchemy as sa
    from sqlalchemy.exc import SQLAlchemyError

    try:
        with engine.connect() as conn:
            found = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
    except SQLAlchemyError:
        return False
    return found == newest_revision()


def migrate(engine: Engine, target: str = "head") -> None:
    """Upgrade the database to `target` (the newest revision by default), under a lock."""
    if target == "head" and schema_is_current(engine):
        return
    from alembic import command

    from storage.engine import WRITE

    cfg = _config()
    with engine.connect().execution_options(**WRITE) as conn, conn.begin():
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({PG_LOCK})")
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, target)
