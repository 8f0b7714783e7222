"""The engine's adapters: one instance per adapter and backend key, each invocation's typed
request (decoded once, as the journal reads its row, with the site configuration recorded
with it) and its attempt's `JobRef`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from vibesys.adapters.base import Backend, JobRef, Progress, SharedPolling, Waitable
from vibesys.adapters.registry import entry
from vibesys.adapters.requests import AdapterRequest, RecordedSite
from vibesys.journal_schema import Invocation, Journal
from vibesys.journal_schema.sites import SiteRendering
from vibesys.osutil.layout import attempt_dir
from vibesys.strict_decode import decode

#: Builds the adapter an invocation names from its adapter name and typed request.
BackendFactory = Callable[[str, AdapterRequest], Backend]
#: Decodes a recorded request: the adapter's name, the request's JSON and its recorded site.
RequestDecoder = Callable[[str, Mapping[str, Any], SiteRendering | None], AdapterRequest]


def registry_backend(adapter: str, request: AdapterRequest) -> Backend:
    return entry(adapter).load().build(request)


def recorded_site(found: SiteRendering | None) -> RecordedSite | None:
    """The site configuration as the journal keeps it, as the adapters read it."""
    if found is None:
        return None
    return decode({"kind": found.kind, "text": found.text, "digest": found.digest}, RecordedSite)


def decode_request(
    adapter: str, data: Mapping[str, Any], site: SiteRendering | None
) -> AdapterRequest:
    """A recorded request as its adapter's typed request, handed back with its recorded site
    (None for what was recorded before sites were): adapters never read the site's file
    again. ConfigError names what does not fit."""
    parsed = entry(adapter).parse_request(data)
    return parsed.with_site(recorded_site(site))


class Adapters:
    """The engine's side of its adapters: built once per adapter and backend key. The
    engine's journal decodes each invocation's request as it reads the row."""

    def __init__(
        self,
        journal: Journal,
        backends: BackendFactory,
        progress: Progress | None = None,
    ) -> None:
        #: the one decoder of recorded requests: the journal decodes each row it reads with
        #: it, and so does the engine for a request recorded elsewhere (a cluster lease's)
        self.decode: RequestDecoder = decode_request
        journal.decode_requests(self.decode)
        self.journal = journal
        self.backends = backends
        #: hears of transfers (staging, artifact downloads): a terminal's progress bar
        self.progress = progress
        self._backends: dict[tuple[str, str], Backend] = {}

    def request_of(self, inv: Invocation) -> AdapterRequest:
        """The invocation's typed request, with the site configuration it was recorded with.
        Decoded here only for a row read before the engine had the journal, or one whose
        request did not decode (this raises its ConfigError)."""
        if isinstance(inv.request, AdapterRequest):
            return inv.request
        return self.parse_request(inv.adapter, inv.recorded_request, inv.site_digest)

    def parse_request(
        self, adapter: str, data: Mapping[str, Any], site_digest: str | None
    ) -> AdapterRequest:
        """A request recorded elsewhere than an invocation's row (a cluster lease's), with
        its recorded site (`site_digest`)."""
        return self.decode(adapter, data, self.journal.rows.site(site_digest))

    def recorded_site(self, digest: str | None) -> RecordedSite | None:
        """The site configuration recorded under `digest`."""
        return recorded_site(self.journal.rows.site(digest))

    def backend(self, inv: Invocation) -> Backend:
        return self.backend_for(inv.adapter, self.request_of(inv))

    def backend_for(self, adapter: str, request: AdapterRequest) -> Backend:
        """One adapter instance per adapter and backend key (a site, a campaign's cluster)."""
        key = (adapter, request.backend_key())
        if key not in self._backends:
            built = self.backends(adapter, request)
            shows = built.shows_progress()
            if self.progress is not None and shows is not None:
                shows.progress = self.progress
            self._backends[key] = built
        return self._backends[key]

    def job_ref(self, inv: Invocation) -> JobRef:
        limits = self.request_of(inv).artifact_limits
        return JobRef(
            inv.attempt_job_name(inv.attempt),
            inv.job_id,
            attempt_dir(inv.invocation_dir, inv.attempt),
            inv.intended_at,
            inv.id,
            inv.attempt,
            limits.limits() if limits is not None else None,
        )

    def shared_polling(self, inv: Invocation) -> SharedPolling | None:
        """`inv`'s adapter when its status rounds are shared per site (a scheduler's)."""
        return self.backend(inv).shared_polling()

    def end_signal(self, inv: Invocation) -> Waitable | None:
        """Set when the process this one started for `inv`'s attempt ends (its srun)."""
        own = self.backend(inv).sees_its_own_end()
        return own.end_signal(self.job_ref(inv)) if own is not None else None

    def log_paths(self, inv: Invocation) -> tuple[Path, Path]:
        """Where `inv`'s current attempt's stdout and stderr are (home, once spooled)."""
        return self.backend(inv).log_paths(self.job_ref(inv))
