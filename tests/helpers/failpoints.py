"""The failpoints grouped by what reaches them, for the crash tests to choose from. The names
are the engine's (`vibesys.engine.failpoints.FAILPOINTS`, the one list): a group naming one
that is not there fails at import, and tests/crash/test_every_failpoint.py checks that the
groups cover every failpoint once."""

from __future__ import annotations

from vibesys.engine.failpoints import FAILPOINTS


def _known(*names: str) -> tuple[str, ...]:
    unknown = [name for name in names if name not in FAILPOINTS]
    if unknown:
        raise ValueError(f"not failpoints: {unknown}")
    return names


#: Passed, in order, by every run that ends well (after_submit_dispatch aside: a crash there
#: fences the attempt, which its own tests check).
RUN_FAILPOINTS = _known(
    "after_prepare_commit",
    "after_submit_intent",
    "after_submit_effect",
    "after_submitted_commit",
    "after_terminal_observed",
    "after_finished_commit",
    "after_collect_effect",
    "after_done_commit",
)
DISPATCH_FAILPOINTS = _known("after_submit_dispatch")
#: Passed by a run whose attempt must be fenced (its submission's fate unknown).
FENCE_FAILPOINTS = _known("after_fence_intent", "after_fence_effect")
#: Passed by `vibesys cancel`.
CANCEL_FAILPOINTS = _known("after_cancel_intent", "after_cancel_effect")
#: Passed by a run whose attempt failed for the infrastructure (retried) or whose end could not
#: be told (UNRESOLVED).
RETRY_FAILPOINTS = _known("after_infra_failed_commit")
UNKNOWN_FAILPOINTS = _known("after_unknown_commit")
#: Passed too by a run whose logs come home over the spool (a backend with remote files).
SPOOL_FAILPOINTS = _known("after_spool_append")
#: Passed by a run that declares artifacts.
ARTIFACT_FAILPOINTS = _known("after_artifact_download")
#: Around a cluster lease's launch and release: only an adapter that holds its own allocation
#: (SkyPilot) reaches them.
LEASE_FAILPOINTS = _known(
    "after_launch_intent",
    "after_launch_effect",
    "after_release_intent",
    "after_release_effect",
)
#: Only `vibesys.Client` reaches it (between an idempotency key's row and its invocation).
CLIENT_FAILPOINTS = _known("after_key_commit")

GROUPS = (
    RUN_FAILPOINTS,
    DISPATCH_FAILPOINTS,
    FENCE_FAILPOINTS,
    CANCEL_FAILPOINTS,
    RETRY_FAILPOINTS,
    UNKNOWN_FAILPOINTS,
    SPOOL_FAILPOINTS,
    ARTIFACT_FAILPOINTS,
    LEASE_FAILPOINTS,
    CLIENT_FAILPOINTS,
)
