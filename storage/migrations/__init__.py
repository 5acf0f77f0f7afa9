"""Alembic migrations of the Ledger's schema; `storage.migrate.migrate(engine)` applies them."""
