"""The engine: ties the pure states, the journal and the adapters together."""

from vibesys.engine.core import Engine, job_name, new_invocation_id
from vibesys.engine.drive import DriveOptions, drive, wait_for
from vibesys.engine.failpoints import FAILPOINTS, failpoint
from vibesys.engine.logs import LogTail
from vibesys.engine.reconcile import ReconcileRow, reconcile
from vibesys.engine.retry import RetryPolicy

__all__ = [
    "FAILPOINTS",
    "DriveOptions",
    "Engine",
    "LogTail",
    "ReconcileRow",
    "RetryPolicy",
    "drive",
    "failpoint",
    "job_name",
    "new_invocation_id",
    "reconcile",
    "wait_for",
]
