"""The engine's adapters: one instance per adapter and backend key, each invocation's typed
request (with the site configuration recorded with it) and its attempt's `JobRef`."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from vibesys.adapters.base import Backend, JobRef, Progress
from vibesys.adapters.registry import entry
from vibesys.errors import ConfigError
from vibesys.journal_schema import Invocation, Journal
from vibesys.osutil.layout import attempt_dir

if TYPE_CHECKING:
    from vibesys.adapters.requests import AdapterRequest, RecordedSite


#: Builds the adapter an invocation names from its adapter name and typed request.
BackendFactory = Callable[[str, "AdapterRequest"], Backend]


def registry_backend(adapter: str, request: AdapterRequest) -> Backend:
    return entry(adapter).load().build(request)


class Adapters:
    """The engine's side of its adapters: built once per adapter and backend key, and each
    recorded request parsed once."""

    def __init__(
        self,
        journal: Journal,
        backends: BackendFactory,
        progress: Progress | None = None,
    ) -> None:
        self.journal = journal
        self.backends = backends
        #: hears of transfers (staging, artifact downloads): a terminal's progress bar
        self.progress = progress
        self._backends: dict[tuple[str, str], Backend] = {}
        self._requests: dict[tuple[str, str, str], AdapterRequest] = {}

    def request_of(self, inv: Invocation) -> AdapterRequest:
        """The invocation's typed request, with the site configuration it was recorded with
        (validated once per distinct request, site and adapter)."""
        return self.parse_request(inv.adapter, inv.request, inv.site_digest)

    def parse_request(
        self, adapter: str, data: Mapping[str, Any], site_digest: str | None
    ) -> AdapterRequest:
        """A recorded request, handed back with its recorded site (`site_digest`; None for
        what was recorded before sites were): adapters never read the site's file again."""
        key = (adapter, json.dumps(data, sort_keys=True), site_digest or "")
        if key not in self._requests:
            parsed = entry(adapter).parse_request(data)
            self._requests[key] = parsed.with_site(self.recorded_site(site_digest))
        return self._requests[key]

    def recorded_site(self, digest: str | None) -> RecordedSite | None:
        """The site configuration recorded under `digest`."""
        if digest is None:
            return None
        found = self.journal.sites.site_rendering(digest)
        if found is None:
            raise ConfigError(f"the journal has no site configuration sha256:{digest}")
        # Here, not at the top: a local run's start never loads the typed requests' models.
        from vibesys.adapters.requests import RecordedSite

        return RecordedSite.model_validate(
            {"kind": found.kind, "text": found.text, "digest": found.digest}
        )

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
        # Only a request that recorded limits is parsed for them: a local run's request has
        # none, and its start never loads the typed requests' models.
        recorded = inv.request.get("artifact_limits") is not None
        limits = self.request_of(inv).artifact_limits if recorded else None
        return JobRef(
            inv.attempt_job_name(inv.attempt),
            inv.job_id,
            attempt_dir(inv.invocation_dir, inv.attempt),
            inv.intended_at,
            inv.id,
            inv.attempt,
            limits.limits() if limits is not None else None,
        )
