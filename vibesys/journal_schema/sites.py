"""The site configurations invocations run with (m007): each canonical rendering kept once,
by its digest. The journal stores and returns text; what it means is the config layer's."""

from __future__ import annotations

import sqlite3
from typing import Protocol

from msgspec import Struct

from vibesys.journal_schema.clock import now_iso
from vibesys.journal_schema.journal_file import JournalFile

__all__ = ["Rendering", "SiteRendering", "SiteStore", "insert_site"]


class Rendering(Protocol):
    """What the journal keeps of a site configuration: the config layer's `RecordedSite`, or
    the `SiteRendering` read back, goes in as it is."""

    @property
    def digest(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def text(self) -> str: ...


class SiteRendering(Struct, frozen=True):
    digest: str
    #: "slurm.toml" or "clusters.toml"
    kind: str
    text: str


def insert_site(conn: sqlite3.Connection, site: Rendering, at: str) -> None:
    """Keep `site` unless its digest is there already (same digest, same text)."""
    conn.execute(
        "INSERT OR IGNORE INTO site_configs (digest, kind, rendering, recorded_at)"
        " VALUES (?,?,?,?)",
        (site.digest, site.kind, site.text, at),
    )


class SiteStore:
    """Site configuration of the journal."""

    def __init__(self, file: JournalFile) -> None:
        self.conn = file.conn
        self.write_txn = file.write_txn

    def site_rendering(self, digest: str) -> SiteRendering | None:
        row = self.conn.execute(
            "SELECT digest, kind, rendering FROM site_configs WHERE digest=?", (digest,)
        ).fetchone()
        return SiteRendering(*row) if row is not None else None

    def record_site(self, site: Rendering) -> None:
        """Keep a rendering before a transition names it (`SiteReplaced`): an unnamed one is
        harmless, a named one must exist."""
        with self.write_txn() as conn:
            insert_site(conn, site, now_iso())
