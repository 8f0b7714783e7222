"""Recording a new invocation: its id, request, context and the settings every later process
carries it on with."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from vibesys.adapters.registry import entry
from vibesys.engine.context import record_environment
from vibesys.engine.failpoints import failpoint
from vibesys.engine.retry import RetryPolicy
from vibesys.journal_schema import Invocation, Journal, Settings

if TYPE_CHECKING:
    from collections.abc import Mapping

    from vibesys.adapters.requests import AdapterRequest


def new_invocation_id() -> str:
    """16 hex digits: the creation time in milliseconds (11), then 20 random bits (5).

    Ids sort by creation, as Slurm's job ids do. That is also what the journal's b-trees want:
    the rows of the invocations being driven sit at the end of each table, in pages that
    stay warm, where random ids sent every commit to a cold page of its own and split pages
    all over the tables (more pages, and more bytes of WAL, per transition)."""
    random_bits = int.from_bytes(os.urandom(3), "big") >> 4  # 20 bits (no `secrets` import)
    return f"{time.time_ns() // 1_000_000:011x}{random_bits:05x}"


class Preparing:
    """`Engine.prepare` (the engine's fields are declared in `Engine`)."""

    journal: Journal
    retry: RetryPolicy
    lease_ttl: timedelta
    owner: str
    unreachable_timeout: timedelta

    def prepare(
        self,
        *,
        adapter: str,
        command: Sequence[str],
        request: AdapterRequest | None = None,
        label: str | None = None,
        max_retries: int | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        run_root: Path | None = None,
        invocation_id: str | None = None,
        cancel_when_orphaned: bool = False,
        campaign: str | None = None,
    ) -> Invocation:
        """Record a new invocation (PREPARED) with its request, its context and the settings
        every process carries it on with (this engine's retry policy and unreachable timeout),
        leased to us; at the end of its campaign's queue (`campaign`, else the request's own)."""
        request = request or entry(adapter).parse_request({})
        # The site configuration is read once, here at the latest (`vibesys run` read it while
        # checking the request): what is recorded is what every later process uses.
        site = request.site_record or request.read_site()
        invocation_id = invocation_id or new_invocation_id()
        root = run_root or self.journal.path.parent / "runs"
        invocation_dir = (root / invocation_id).resolve()
        env_file = record_environment(invocation_dir, dict(os.environ) if env is None else env)
        invocation = self.journal.create_invocation(
            invocation_id=invocation_id,
            adapter=adapter,
            command=list(command),
            request=request.model_dump(mode="json"),
            request_version=request.schema_version,
            label=label,
            max_retries=self.retry.max_retries if max_retries is None else max_retries,
            invocation_dir=str(invocation_dir),
            cwd=cwd or os.getcwd(),
            env_file=str(env_file),
            lease_owner=self.owner,
            lease_ttl=self.lease_ttl,
            site=site,
            settings=Settings(
                retry_delay_seconds=self.retry.initial_delay_seconds,
                retry_backoff=self.retry.backoff,
                retry_max_delay_seconds=self.retry.max_delay_seconds,
                unreachable_timeout_seconds=self.unreachable_timeout.total_seconds(),
                cancel_when_orphaned=cancel_when_orphaned,
            ),
            campaign=campaign or request.campaign(),
        )
        failpoint("after_prepare_commit")
        return invocation
