"""The tables of the Directory's revision store, as its queries see them.

Migration 0002 creates them (a test checks that the two agree); what each table means is told in
`storage.documents`.
"""

from __future__ import annotations

import sqlalchemy as sa

_tz = sa.DateTime(timezone=True)

metadata = sa.MetaData()
"""The tables as queries see them; migration 0002 creates them (a test checks the two agree)."""

documents_table = sa.Table(
    "directory_documents",
    metadata,
    sa.Column("sha256", sa.Text, primary_key=True),
    sa.Column("size", sa.Integer, nullable=False),
    sa.Column("content", sa.Text, nullable=False),
)
refs_table = sa.Table(
    "directory_refs",
    metadata,
    sa.Column("space", sa.Text, primary_key=True),
    sa.Column("revision", sa.Integer, nullable=False),
)
revisions_table = sa.Table(
    "directory_revisions",
    metadata,
    sa.Column("space", sa.Text, primary_key=True),
    sa.Column("revision", sa.Integer, primary_key=True),
    sa.Column("parent", sa.Integer, nullable=True),
    sa.Column("at", _tz, nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("changes", sa.Integer, nullable=False),
    sa.Column("documents", sa.Integer, nullable=False),
    sa.Column("snapshot", sa.Text, nullable=False),
)
changes_table = sa.Table(
    "directory_changes",
    metadata,
    sa.Column("space", sa.Text, primary_key=True),
    sa.Column("revision", sa.Integer, primary_key=True),
    sa.Column("bundle", sa.Text, primary_key=True),
    sa.Column("path", sa.Text, primary_key=True),
    sa.Column("sha256", sa.Text, nullable=True),
)
sa.Index(
    "ix_directory_changes_path",
    changes_table.c.space,
    changes_table.c.bundle,
    changes_table.c.path,
    changes_table.c.revision,
)
tree_table = sa.Table(
    "directory_tree",
    metadata,
    sa.Column("space", sa.Text, primary_key=True),
    sa.Column("bundle", sa.Text, primary_key=True),
    sa.Column("path", sa.Text, primary_key=True),
    sa.Column("sha256", sa.Text, nullable=False),
)
sections_table = sa.Table(
    "directory_sections",
    metadata,
    sa.Column("space", sa.Text, primary_key=True),
    sa.Column("bundle", sa.Text, primary_key=True),
    sa.Column("tag", sa.Text, nullable=False),
    sa.Column("documents", sa.Integer, nullable=False),
)
index_table = sa.Table(
    "directory_index",
    metadata,
    sa.Column("space", sa.Text, primary_key=True),
    sa.Column("bundle", sa.Text, primary_key=True),
    sa.Column("tag", sa.Text, nullable=False),
    sa.Column("data", sa.LargeBinary, nullable=False),
)
folders_table = sa.Table(
    "directory_folders",
    metadata,
    sa.Column("space", sa.Text, primary_key=True),
    sa.Column("bundle", sa.Text, primary_key=True),
    sa.Column("stat_tag", sa.Text, nullable=False),
)

__all__ = [
    "changes_table",
    "documents_table",
    "folders_table",
    "index_table",
    "metadata",
    "refs_table",
    "revisions_table",
    "sections_table",
    "tree_table",
]
