"""The Directory's revision store: documents by hash, revisions, changes, head tree, section tags,
derived indexes and folder stat tags (see storage/documents.py for what each table means).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "directory_documents",
        sa.Column("sha256", sa.Text, nullable=False),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("sha256", name="pk_directory_documents"),
    )
    op.create_table(
        "directory_refs",
        sa.Column("space", sa.Text, nullable=False),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("space", name="pk_directory_refs"),
    )
    op.create_table(
        "directory_revisions",
        sa.Column("space", sa.Text, nullable=False),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("parent", sa.Integer, nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("changes", sa.Integer, nullable=False),
        sa.Column("documents", sa.Integer, nullable=False),
        sa.Column("snapshot", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("space", "revision", name="pk_directory_revisions"),
    )
    op.create_table(
        "directory_changes",
        sa.Column("space", sa.Text, nullable=False),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("bundle", sa.Text, nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("sha256", sa.Text, nullable=True),
        sa.PrimaryKeyConstraint("space", "revision", "bundle", "path", name="pk_directory_changes"),
    )
    op.create_index("ix_directory_changes_path", "directory_changes", ["space", "bundle", "path", "revision"])
    op.create_table(
        "directory_tree",
        sa.Column("space", sa.Text, nullable=False),
        sa.Column("bundle", sa.Text, nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("sha256", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("space", "bundle", "path", name="pk_directory_tree"),
    )
    op.create_table(
        "directory_sections",
        sa.Column("space", sa.Text, nullable=False),
        sa.Column("bundle", sa.Text, nullable=False),
        sa.Column("tag", sa.Text, nullable=False),
        sa.Column("documents", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("space", "bundle", name="pk_directory_sections"),
    )
    op.create_table(
        "directory_index",
        sa.Column("space", sa.Text, nullable=False),
        sa.Column("bundle", sa.Text, nullable=False),
        sa.Column("tag", sa.Text, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sa.PrimaryKeyConstraint("space", "bundle", name="pk_directory_index"),
    )
    op.create_table(
        "directory_folders",
        sa.Column("space", sa.Text, nullable=False),
        sa.Column("bundle", sa.Text, nullable=False),
        sa.Column("stat_tag", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("space", "bundle", name="pk_directory_folders"),
    )


def downgrade() -> None:
    for table in (
        "directory_folders",
        "directory_index",
        "directory_sections",
        "directory_tree",
        "directory_changes",
        "directory_revisions",
        "directory_refs",
        "directory_documents",
    ):
        op.drop_table(table)
