"""Syncing a Directory folder into its space of the revision store: what changed since the last sync.

One scan stats every file of the folder (`catalog.folder.scan`); a bundle whose stat tag equals the
one stored at the last sync is not read at all. In a bundle that moved, a file whose size and mtime
equal its stored listing's (`catalog.file_listing`) keeps its hash unread; the others are read,
hashed and committed when their content differs. The new stat tags and listings are stored after.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from catalog import changes as changeset
from catalog import file_listing as listing
from catalog.folder import read_text, scan
from catalog.index_load import guarded
from storage.documents import Change, DocumentStore, DocumentStoreError, sha256_text


def sync_folder(store: DocumentStore, folder: Path, *, message: str, remember: bool = True) -> int:
    """Commit what changed in `folder` since it was last synced into `store`; returns the changes
    committed. `remember`: compare with (and store) the folder's stat tags and listings."""
    known = guarded(store.folder_tags) if remember else {}
    started = time.time_ns()
    scanned = scan(folder)
    dirty = sorted(
        b for b in set(scanned) | set(known) if b not in scanned or scanned[b].stat_tag != known.get(b)
    )
    keys = [listing.key(b) for b in dirty]
    kept = guarded(lambda: store.index_data(keys)) if remember and dirty else {}
    changes: list[Change] = []
    read: dict[str, listing.Listing] = {}
    for bundle in dirty:
        current = {p: h for (_, p), h in guarded(lambda b=bundle: store.tree(b)).items()}
        found = scanned.get(bundle)
        if found is None:  # the whole bundle folder is gone
            changes.extend(Change(bundle, p, None, check=False) for p in current)
            continue
        files = found.files
        listed = listing.unpack(kept[key][1]) if (key := listing.key(bundle)) in kept else {}
        now = read[bundle] = {}
        for path, full in files.items():
            stat = found.stats[path]
            sha = listing.unchanged(listed, path, stat, current.get(path))
            if sha is None:  # new, changed, or not known to be unchanged: read it
                text = read_text(full)
                if text is None:  # gone since the scan: removed (its tag moves at the next open)
                    continue
                sha = sha256_text(text)
                if current.get(path) != sha:
                    changes.append(Change(bundle, path, text, check=False))
            now[path] = listing.entry(stat, sha, started)
        changes.extend(Change(bundle, p, None, check=False) for p in current if p not in now)
    if changes:
        changeset.commit(store, changes, None, message)
    if remember and dirty:
        fresh = {b: f.stat_tag for b, f in scanned.items()}
        guarded(lambda: store.save_folder_tags(fresh))
        for bundle, now in read.items():
            with contextlib.suppress(DocumentStoreError):  # derived data: the next sync reads all
                store.save_index(listing.key(bundle), "files", listing.pack(now))
    return len(changes)
